"""Which openprogram module imports which, counting imports inside functions too: the state
folder basics import nothing of openprogram, the configuration modules form no circle, and
only the CLI changes configuration (the library reads it through ``state``)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "openprogram"


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports_of(path: Path) -> set[str]:
    """Every openprogram module ``path`` imports, at any depth of its code."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {module for module in found if module.split(".")[0] == "openprogram"}


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {name: _imports_of(path) & set(modules) for name, path in modules.items()}


CONFIG_MODULES = {
    "openprogram.state",
    "openprogram.config",
    "openprogram.recordings.store",
    "openprogram.recordings.activation",
}


def test_the_import_graph_sees_lazy_imports():
    graph = _graph()
    assert "openprogram.recordings.activation" in graph["openprogram.config"]  # inside a function
    assert "openprogram.recordings.activation" in graph["openprogram.providers.initialization"]


def test_state_imports_nothing_of_openprogram_and_the_store_only_state():
    graph = _graph()
    assert graph["openprogram.state"] == set()
    assert graph["openprogram.recordings.store"] == {"openprogram.state"}


def test_no_circle_among_the_configuration_modules():
    graph = {name: graph_edges & CONFIG_MODULES for name, graph_edges in _graph().items() if name in CONFIG_MODULES}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for child in graph[start]:
            if child == goal or (child not in seen and reaches(child, goal, seen | {child})):
                return True
        return False

    assert [name for name in CONFIG_MODULES if reaches(name, name, set())] == []


def test_only_the_cli_imports_config_and_the_runtime_reads_settings_through_the_plan():
    graph = _graph()
    importers = sorted(name for name, edges in graph.items() if "openprogram.config" in edges)
    assert all(name.startswith("openprogram.cli.") for name in importers), importers
    runtime = graph["openprogram.providers.initialization"]
    assert "openprogram.recordings.store" not in runtime and "openprogram.state" not in runtime
