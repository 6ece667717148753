"""Which way imports may point (see ``docs/architecture.md``), checked on the source so that
it stays that way: every ``import`` counts, including the lazy ones inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "openprogram"

#: The one circle the design forces: the first registry lookup initialises the runtime, which
#: registers the built-in providers and installs its transform into the registry.
ALLOWED_CIRCLES = [
    {
        "openprogram.providers.api_registry",
        "openprogram.providers.initialization",
        "openprogram.providers.register",
    }
]

#: The public faces of record/replay at the provider layer's import paths, and the lifecycle
#: that builds the recorder or replayer from the activation plan.
RECORDING_SEAM = {
    "openprogram.providers.recording",
    "openprogram.providers.replay",
    "openprogram.providers.scoped",
    "openprogram.providers.initialization",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every openprogram module ``path`` imports, resolved to module names."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {module for module in found if module.split(".")[0] == "openprogram"}


def _runtime_nodes(tree: ast.AST):
    """Every node but those under ``if TYPE_CHECKING:`` (never imported at run time)."""
    pending = [tree]
    while pending:
        node = pending.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and getattr(child.test, "id", None) == "TYPE_CHECKING":
                pending.extend(child.orelse)
                continue
            pending.append(child)


def _graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(path) for path in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        # ``from .x import name`` names a module only when that module exists.
        graph[_module_name(path)] = {m for m in _imports(path) if m in modules} - {_module_name(path)}
    return graph


GRAPH = _graph()


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _violations(source: str, target: str, allowed: set[str] = frozenset()) -> list[str]:
    return sorted(
        f"{module} -> {imported}"
        for module, imports in GRAPH.items()
        if _in(module, source) and module not in allowed
        for imported in imports
        if _in(imported, target)
    )


def test_the_graph_sees_the_package():
    assert len(GRAPH) > 40
    assert "openprogram.recordings.record.recorder" in GRAPH["openprogram.providers.recording"]


def test_nothing_outside_the_cli_imports_the_cli():
    offenders = [
        f"{module} -> {imported}"
        for module, imports in GRAPH.items()
        if not _in(module, "openprogram.cli") and module != "openprogram.__main__"
        for imported in imports
        if _in(imported, "openprogram.cli")
    ]
    assert offenders == []


@pytest.mark.parametrize(
    ("source", "target"),
    [
        ("openprogram.providers", "openprogram.agent"),
        ("openprogram.providers", "openprogram.tools"),
        ("openprogram.providers", "openprogram.config"),
        ("openprogram.providers", "openprogram.testing"),
        ("openprogram.providers.vendors", "openprogram.recordings"),
        ("openprogram.recordings", "openprogram.providers.vendors"),
        ("openprogram.recordings", "openprogram.agent"),
        ("openprogram.recordings", "openprogram.testing"),
        ("openprogram.agent", "openprogram.recordings"),
    ],
)
def test_imports_point_one_way(source, target):
    assert _violations(source, target) == []


def test_the_proxy_reaches_record_replay_only_through_the_public_faces():
    """``openprogram proxy`` is a client of the provider layer like any application: it never
    reaches into the engine, and only the command line and the ``llm_proxy`` fixture start it."""
    assert _violations("openprogram.proxy", "openprogram.recordings") == []
    importers = sorted(
        module for module, imports in GRAPH.items() if any(_in(m, "openprogram.proxy") for m in imports) and not _in(module, "openprogram.proxy")
    )
    assert importers == ["openprogram.cli.proxy_cmd", "openprogram.testing_proxy"]


def test_the_provider_layer_reaches_record_replay_only_through_its_seam():
    assert _violations("openprogram.providers", "openprogram.recordings", RECORDING_SEAM) == []


def test_the_runtime_reads_record_replay_settings_only_through_the_activation_plan():
    imports = GRAPH["openprogram.providers.initialization"]
    assert "openprogram.recordings.store.activation" in imports
    assert not {m for m in imports if _in(m, "openprogram.config") or _in(m, "openprogram.state")}
    assert not {m for m in imports if _in(m, "openprogram.recordings.store.store")}


def _circles() -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for neighbour in GRAPH.get(node, ()):
            if neighbour not in index:
                visit(neighbour)
                low[node] = min(low[node], low[neighbour])
            elif neighbour in on_stack:
                low[node] = min(low[node], index[neighbour])
        if low[node] == index[node]:
            component: set[str] = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle_but_the_one_the_registry_forces():
    assert _circles() == ALLOWED_CIRCLES


def test_the_state_folder_basics_import_nothing_of_openprogram_and_the_store_only_them():
    assert GRAPH["openprogram.state"] == set()
    assert GRAPH["openprogram.recordings.store.store"] == {"openprogram.state"}


def test_only_the_cli_changes_the_configuration():
    importers = sorted(module for module, imports in GRAPH.items() if "openprogram.config" in imports)
    assert importers and all(_in(module, "openprogram.cli") for module in importers), importers


# ============================================================================ the record pipeline

RECORDINGS = "openprogram.recordings"
#: The stages of the record pipeline in the order data flows (docs/architecture.md): each may
#: import the ones after it, never one before it.
PIPELINE = [f"{RECORDINGS}.record.stream_redaction", f"{RECORDINGS}.record.encoder", f"{RECORDINGS}.file.sink"]


@pytest.mark.parametrize("position", range(len(PIPELINE)))
def test_the_record_pipeline_imports_one_way(position):
    graph = _graph()
    stage = PIPELINE[position]
    earlier = set(PIPELINE[:position]) | {f"{RECORDINGS}.record.recorder"}
    assert not (graph[stage] & earlier), f"{stage} imports a stage before it: {graph[stage] & earlier}"


#: The jobs of ``recordings/`` (docs/architecture.md) and which others each may use: the file
#: format under everything, recording and replaying side by side and never into each other,
#: what the calls say about a run (insight) and the views reading, and the store (managing
#: recordings, the modes) on top.
JOBS: dict[str, set[str]] = {
    "file": set(),
    "record": {"file"},
    "replay": {"file"},
    "insight": {"file", "replay"},
    "views": {"file", "replay", "insight"},
    "store": {"file", "record", "replay"},
}


@pytest.mark.parametrize("job", sorted(JOBS))
def test_each_job_of_recordings_uses_only_the_jobs_below_it(job):
    forbidden = set(JOBS) - JOBS[job] - {job}
    offenders = [
        violation for other in sorted(forbidden) for violation in _violations(f"{RECORDINGS}.{job}", f"{RECORDINGS}.{other}")
    ]
    assert offenders == []


def test_recordings_is_grouped_by_job():
    """Every module of ``recordings/`` is in a job's sub-package, but the shared rules and helper."""
    top = sorted(path.stem for path in (PACKAGE / "recordings").glob("*.py"))
    assert top == ["__init__", "redaction", "text_diff"]
    assert {path.name for path in (PACKAGE / "recordings").iterdir() if path.is_dir() and path.name != "__pycache__"} == set(JOBS)


def test_the_encoder_only_writes_lines():
    """The encoder takes records already in their stored form: it imports no redaction."""
    assert f"{RECORDINGS}.redaction" not in _graph()[f"{RECORDINGS}.record.encoder"]


def _string_constants(path: Path) -> list[str]:
    return [
        node.value
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Constant) and type(node.value) is str
    ]


#: What only a redaction rule needs to spell out: the credential prefixes of the value shapes
#: and the secret field names.
RULE_MARKERS = ("AKIA", "ghp_", "xox", "AIza", "-----BEGIN", "k_live_", "client_secret", "x-goog-api-key")


def test_only_the_redactor_defines_redaction_rules():
    """Every rule lives in ``recordings/redaction.py``; the stream stage and the views apply
    them through the redactor (the guard's scrub of error messages applies known values only)."""
    owner = PACKAGE / "recordings" / "redaction.py"
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == owner:
            continue
        spelled = [marker for text in _string_constants(path) for marker in RULE_MARKERS if marker in text]
        assert not spelled, f"{path.relative_to(PACKAGE)} spells out redaction rules: {sorted(set(spelled))}"


# ============================================================================ the file format's one owner

LINE_TYPE_NAMES = {"header", "request", "event", "call_end"}
#: The modules that make and read line shapes; every other one goes through them.
FORMAT_OWNERS = {PACKAGE / "recordings" / "file" / "format.py", PACKAGE / "recordings" / "file" / "reader.py"}


def _line_shapes_spelled_out(path: Path) -> list[str]:
    """Where ``path`` builds a line dict (``{"type": "request", ...}``), tells a line's type by
    its string (``row.get("type") == "header"``) or spells a line's bytes (``b'"request"'``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant) and key.value == "type"
                    and isinstance(value, ast.Constant) and value.value in LINE_TYPE_NAMES
                ):
                    found.append(f"line {node.lineno}: builds a {value.value} line")
        elif isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Constant) and side.value in LINE_TYPE_NAMES:
                    found.append(f"line {node.lineno}: compares with {side.value!r}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, bytes):
            if any(f'"{name}"'.encode() in node.value for name in LINE_TYPE_NAMES):
                found.append(f"line {node.lineno}: spells a line's bytes")
    return found


def test_only_the_format_builds_or_reads_line_shapes():
    offenders = {
        str(path.relative_to(PACKAGE)): spelled
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in FORMAT_OWNERS and (spelled := _line_shapes_spelled_out(path))
    }
    assert offenders == {}


def test_the_shape_check_sees_a_line_built_by_hand(tmp_path):
    hand_made = tmp_path / "hand_made.py"
    hand_made.write_text(
        'row = {"type": "call_end", "call_index": 0}\n'
        'if row.get("type") == "request":\n    pass\n'
        'ok = b\'"event"\' in b""\n'
    )
    assert len(_line_shapes_spelled_out(hand_made)) == 3
