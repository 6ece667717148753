"""Which way imports may point (see ``docs/architecture.md``), checked on the source so that
it stays that way: every ``import`` counts, including the lazy ones inside functions."""

from __future__ import annotations

import ast
import inspect
import textwrap
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
        graph[_module_name(path)] = {m for m in _imports(path) if m in modules} - {
            _module_name(path)
        }
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
        module
        for module, imports in GRAPH.items()
        if any(_in(m, "openprogram.proxy") for m in imports)
        and not _in(module, "openprogram.proxy")
    )
    assert importers == ["openprogram.cli.proxy_cmd", "openprogram.testing.proxy_fixture"]


def test_the_provider_layer_reaches_record_replay_only_through_its_seam():
    assert _violations("openprogram.providers", "openprogram.recordings", RECORDING_SEAM) == []


def test_the_runtime_reads_record_replay_settings_only_through_the_activation_plan():
    imports = GRAPH["openprogram.providers.initialization"]
    assert "openprogram.recordings.modes.activation" in imports
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
    assert GRAPH[VOCABULARY] == set()
    assert GRAPH["openprogram.recordings.store.store"] == {"openprogram.state", VOCABULARY}


def test_only_the_cli_changes_the_configuration():
    importers = sorted(
        module for module, imports in GRAPH.items() if "openprogram.config" in imports
    )
    assert importers and all(_in(module, "openprogram.cli") for module in importers), importers


# ============================================================================ the record pipeline

RECORDINGS = "openprogram.recordings"
#: The stages of the record pipeline in the order data flows (docs/architecture.md): each may
#: import the ones after it, never one before it.
PIPELINE = [
    f"{RECORDINGS}.record.stream_redaction",
    f"{RECORDINGS}.record.encoder",
    f"{RECORDINGS}.file.sink",
]


@pytest.mark.parametrize("position", range(len(PIPELINE)))
def test_the_record_pipeline_imports_one_way(position):
    graph = _graph()
    stage = PIPELINE[position]
    earlier = set(PIPELINE[:position]) | {f"{RECORDINGS}.record.recorder"}
    assert not (graph[stage] & earlier), (
        f"{stage} imports a stage before it: {graph[stage] & earlier}"
    )


#: The jobs of ``recordings/`` (docs/architecture.md) and which others each may use: the file
#: format under everything, recording and replaying side by side and never into each other,
#: what the calls say about a run (insight) and the views reading, the store (the managed
#: folder) and the modes (what turns a mode into providers) on top.
JOBS: dict[str, set[str]] = {
    "file": set(),
    "record": {"file"},
    "replay": {"file"},
    "insight": {"file", "replay"},
    "views": {"file", "replay", "insight"},
    "store": {"file", "record", "replay"},
    "modes": {"file", "record", "replay", "store"},
}
#: The one vocabulary of modes: every job may name a mode (it imports nothing).
VOCABULARY = f"{RECORDINGS}.modes.vocabulary"
#: The old import paths of the modules that moved to ``modes/`` (tests and users import them).
COMPATIBILITY_PATHS = {
    f"{RECORDINGS}.store.{name}" for name in ("activation", "scoped", "updating")
}


@pytest.mark.parametrize("job", sorted(JOBS))
def test_each_job_of_recordings_uses_only_the_jobs_below_it(job):
    forbidden = set(JOBS) - JOBS[job] - {job}
    offenders = [
        violation
        for other in sorted(forbidden)
        for violation in _violations(
            f"{RECORDINGS}.{job}", f"{RECORDINGS}.{other}", COMPATIBILITY_PATHS
        )
        if not violation.endswith(f" -> {VOCABULARY}")
    ]
    assert offenders == []


def test_nothing_in_the_package_imports_the_old_paths_of_the_modes():
    importers = sorted(
        f"{module} -> {imported}"
        for module, imports in GRAPH.items()
        if module not in COMPATIBILITY_PATHS
        for imported in imports & COMPATIBILITY_PATHS
    )
    assert importers == []


def test_recordings_is_grouped_by_job():
    """Every module of ``recordings/`` is in a job's sub-package, but the shared rules and helper."""
    top = sorted(path.stem for path in (PACKAGE / "recordings").glob("*.py"))
    assert top == ["__init__", "redaction", "text_diff"]
    assert {
        path.name
        for path in (PACKAGE / "recordings").iterdir()
        if path.is_dir() and path.name != "__pycache__"
    } == set(JOBS)


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
RULE_MARKERS = (
    "AKIA",
    "ghp_",
    "xox",
    "AIza",
    "-----BEGIN",
    "k_live_",
    "client_secret",
    "x-goog-api-key",
)


def test_only_the_redactor_defines_redaction_rules():
    """Every rule lives in ``recordings/redaction.py``; the stream stage and the views apply
    them through the redactor (the guard's scrub of error messages applies known values only)."""
    owner = PACKAGE / "recordings" / "redaction.py"
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == owner:
            continue
        spelled = [
            marker for text in _string_constants(path) for marker in RULE_MARKERS if marker in text
        ]
        assert not spelled, (
            f"{path.relative_to(PACKAGE)} spells out redaction rules: {sorted(set(spelled))}"
        )


# ============================================================================ the file format's one owner

LINE_TYPE_NAMES = {"header", "request", "event", "call_end"}
#: The modules that make and read line shapes; every other one goes through them.
FORMAT_OWNERS = {
    PACKAGE / "recordings" / "file" / "format.py",
    PACKAGE / "recordings" / "file" / "reader.py",
}


def _line_shapes_spelled_out(path: Path) -> list[str]:
    """Where ``path`` builds a line dict (``{"type": "request", ...}``), tells a line's type by
    its string (``row.get("type") == "header"``) or spells a line's bytes (``b'"request"'``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and key.value == "type"
                    and isinstance(value, ast.Constant)
                    and value.value in LINE_TYPE_NAMES
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


# ============================================================================ the command line's rooms

CLI_RECORDINGS = "openprogram.cli.recordings"
#: The rooms of ``cli/recordings/`` (docs/architecture.md, "The command line"): the wiring on
#: top, the verb groups under it, what they share at the bottom. A room imports only rooms
#: below it, so a group never reaches into another group: what two groups need is shared.
CLI_ROOMS: dict[str, set[str]] = {
    "command": {"lifecycle", "inspecting", "compare", "page", "maintain", "verb"},
    "lifecycle": {"verb", "console", "selecting", "render"},
    "inspecting": {"verb", "console", "selecting", "render"},
    "compare": {"verb", "console", "selecting", "render"},
    "page": {"verb", "console", "selecting", "render"},
    "maintain": {"verb", "console", "selecting", "render"},
    "verb": set(),
    "console": set(),
    "selecting": set(),
    "render": set(),
}
#: Past this a module of ``cli/recordings/`` holds more than one job (the 843-line module it
#: replaced held eleven verbs); split it by what its parts are about. Lines as `ruff format`
#: writes them (render.py, the largest, is 467: its status rendering is the next to go).
CLI_MODULE_LINES = 500


def _cli_room_offenders(graph: dict[str, set[str]]) -> list[str]:
    offenders = []
    for module, imports in graph.items():
        if not _in(module, CLI_RECORDINGS) or module == CLI_RECORDINGS:
            continue
        room = module.removeprefix(CLI_RECORDINGS + ".")
        if room not in CLI_ROOMS:
            offenders.append(f"{module}: in no room of CLI_ROOMS")
            continue
        for imported in sorted(imports):
            if _in(imported, CLI_RECORDINGS) and imported != CLI_RECORDINGS:
                target = imported.removeprefix(CLI_RECORDINGS + ".").split(".")[0]
                if target not in CLI_ROOMS[room]:
                    offenders.append(f"{module} -> {imported}")
    return offenders


def test_the_recordings_verbs_meet_only_in_the_command_module():
    assert _cli_room_offenders(GRAPH) == []
    # the wiring reaches every room it may; only the old module path reaches in from outside
    wired = {
        m.removeprefix(CLI_RECORDINGS + ".")
        for m in GRAPH[f"{CLI_RECORDINGS}.command"]
        if m.startswith(CLI_RECORDINGS + ".")
    }
    assert wired == CLI_ROOMS["command"]
    outside = sorted(
        module
        for module, imports in GRAPH.items()
        if not _in(module, CLI_RECORDINGS) and any(_in(m, CLI_RECORDINGS) for m in imports)
    )
    assert outside == ["openprogram.cli.recordings_cmd"]


def test_the_room_check_sees_a_sideways_import_and_a_module_in_no_room():
    graph = {
        f"{CLI_RECORDINGS}.compare": {f"{CLI_RECORDINGS}.inspecting", f"{CLI_RECORDINGS}.render"},
        f"{CLI_RECORDINGS}.render": {f"{CLI_RECORDINGS}.command"},
        f"{CLI_RECORDINGS}.extras": set(),
    }
    assert _cli_room_offenders(graph) == [
        f"{CLI_RECORDINGS}.compare -> {CLI_RECORDINGS}.inspecting",
        f"{CLI_RECORDINGS}.render -> {CLI_RECORDINGS}.command",
        f"{CLI_RECORDINGS}.extras: in no room of CLI_ROOMS",
    ]


def test_every_verb_group_is_wired_once():
    """``command.VERBS`` is the groups' verbs, each once, in the groups' order."""
    import importlib

    from openprogram.cli.recordings.command import VERBS

    declared = [
        entry.name
        for group in ("lifecycle", "inspecting", "compare", "page", "maintain")
        for entry in importlib.import_module(f"{CLI_RECORDINGS}.{group}").VERBS.entries
    ]
    assert declared == list(VERBS)


def test_no_module_of_the_recordings_command_outgrows_one_job():
    long = {
        path.name: lines
        for path in sorted((PACKAGE / "cli" / "recordings").glob("*.py"))
        if (lines := len(path.read_text().splitlines())) > CLI_MODULE_LINES
    }
    assert long == {}


# ============================================================================ the modes

MODE_WORDS = {"off", "record", "replay", "update", "rewrite", "blocked"}
VOCABULARY_PATH = PACKAGE / "recordings" / "modes" / "vocabulary.py"


def _mode_lists(path: Path) -> list[str]:
    """Where ``path`` spells a list of modes of its own: a ``Literal[...]``, a tuple, list or set
    holding two or more mode names (``("record", "update")``, ``Literal["off", "replay"]``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        # ``Literal["off", "replay"]`` holds its values in a tuple, seen as any other.
        if not isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            continue
        words = {
            item.value
            for item in node.elts
            if isinstance(item, ast.Constant) and isinstance(item.value, str)
        }
        if len(words & MODE_WORDS) >= 2:
            found.append(f"line {node.lineno}: {sorted(words & MODE_WORDS)}")
    return found


def test_one_vocabulary_of_modes():
    """Every list of modes (the configuration's, ``use_recording``'s, the plugin's, the proxy's,
    activation's) is taken from ``recordings/modes/vocabulary.py``."""
    offenders = {
        str(path.relative_to(PACKAGE)): spelled
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != VOCABULARY_PATH and (spelled := _mode_lists(path))
    }
    assert offenders == {}


def test_the_mode_check_sees_a_list_of_modes(tmp_path):
    hand_made = tmp_path / "hand_made.py"
    hand_made.write_text(
        "from typing import Literal\n"
        'Mode = Literal["record", "replay"]\n'
        'MODES = ("off", "record", "update")\n'
        'if mode in ["record", "update"]:\n    pass\n'
        'FORMATS = ("json", "jsonl")\n'
    )
    assert len(_mode_lists(hand_made)) == 3


#: What turns a mode into providers; only ``recordings/modes/routes.py`` builds them (the
#: update session builds the replay and the recorders it is made of).
ROUTE_PARTS = {
    "ReplayProvider",
    "RecordingProvider",
    "UpdateSession",
    "Route",
    "ChoosingReplayProvider",
}
ROUTE_BUILDERS = {
    PACKAGE / "recordings" / "modes" / "routes.py": ROUTE_PARTS,
    PACKAGE / "recordings" / "modes" / "updating.py": {"ReplayProvider", "RecordingProvider"},
}


def _route_parts_built(path: Path) -> list[str]:
    """Where ``path`` calls one of :data:`ROUTE_PARTS` that it imported from openprogram."""
    tree = ast.parse(path.read_text(), str(path))
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.level or (node.module or "").startswith("openprogram"))
        for alias in node.names
        if alias.name in ROUTE_PARTS
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in imported and name not in ROUTE_BUILDERS.get(path, set()):
                found.append(f"line {node.lineno}: builds a {name}")
    return found


def test_one_builder_of_routes():
    """The runtime, ``use_recording``, the plugin and the proxy all ask ``route_for``."""
    offenders = {
        str(path.relative_to(PACKAGE)): built
        for path in sorted(PACKAGE.rglob("*.py"))
        if (built := _route_parts_built(path))
    }
    assert offenders == {}


def test_the_route_check_sees_a_replayer_built_by_hand(tmp_path):
    hand_made = tmp_path / "hand_made.py"
    hand_made.write_text(
        "from openprogram.providers.replay import ReplayProvider\n"
        "from starlette.routing import Route\n"
        "replay = ReplayProvider('x.jsonl')\n"
        "route = Route('/', None)\n"
    )
    assert _route_parts_built(hand_made) == ["line 3: builds a ReplayProvider"]


def _touches_the_route(path: Path) -> list[str]:
    return [
        f"line {node.lineno}"
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if (getattr(node, "id", None) or getattr(node, "attr", None) or getattr(node, "name", None))
        == "_scoped_route"
    ]


def test_no_module_but_the_registry_touches_its_route():
    """Everyone else enters a route with ``api_registry.routed`` (and reads it with
    ``current_route``)."""
    registry = PACKAGE / "providers" / "api_registry.py"
    offenders = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != registry and (lines := _touches_the_route(path))
    }
    assert offenders == {}
    assert _touches_the_route(registry)  # the check sees the name where it is


def test_the_route_name_check_sees_an_import(tmp_path):
    hand_made = tmp_path / "hand_made.py"
    hand_made.write_text(
        "from openprogram.providers.api_registry import _scoped_route\n_scoped_route.set(None)\n"
    )
    assert len(_touches_the_route(hand_made)) == 2


# ============================================================================ the vendors

from openprogram.providers.vendors import builtin, roles  # noqa: E402 - the section's subject

VENDORS_DIR = PACKAGE / "providers" / "vendors"
VENDOR_LIST = VENDORS_DIR / "builtin.py"
#: The model catalogue: each model names the api it speaks, which is no list of vendors.
MODEL_CATALOGUE = PACKAGE / "providers" / "models.py"


def _vendor_apis_named(path: Path) -> set[str]:
    return {text for text in _string_constants(path) if text in builtin.VENDOR_APIS}


def test_only_the_vendor_list_lists_the_vendors():
    """Registration, the proxy, the failures table and the plugin read ``builtin.VENDORS``: a
    vendor module names its own api, and no other module names one."""
    own = {VENDORS_DIR / f"{vendor.module}.py": {vendor.api} for vendor in builtin.VENDORS}
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(named)
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in (VENDOR_LIST, MODEL_CATALOGUE)
        and (named := _vendor_apis_named(path) - own.get(path, set()))
    }
    assert offenders == {}


def test_the_vendor_check_sees_a_list_by_hand(tmp_path):
    hand_made = tmp_path / "hand_made.py"
    hand_made.write_text('APIS = ("openai-completions", "anthropic-messages")\n')
    assert _vendor_apis_named(hand_made) == {"openai-completions", "anthropic-messages"}


def test_every_vendor_module_is_in_the_list_with_its_four_roles():
    modules = {
        path.stem
        for path in VENDORS_DIR.glob("*.py")
        if path.stem != "roles"  # the shared shapes
        and any(
            isinstance(node, ast.ClassDef) and node.name == "StreamTranslator"
            for node in ast.parse(path.read_text()).body
        )
    }
    assert modules == {vendor.module for vendor in builtin.VENDORS}
    for vendor in builtin.VENDORS:
        assert all(callable(vendor.role(name)) for name in builtin.ROLES), vendor.api


@pytest.mark.parametrize("vendor", builtin.VENDORS, ids=lambda vendor: vendor.api)
def test_every_translator_has_the_one_shape(vendor):
    """``handle(raw) -> list`` and ``finish() -> list``, on the shared base (as httpx's
    decoders share ``decode`` and ``flush``)."""
    translator = vendor.stream_translator
    assert issubclass(translator, roles.StreamTranslator)
    assert issubclass(vendor.load().AnswerReader, roles.AnswerReader)
    for name, parameters in (("handle", ["self", "raw"]), ("finish", ["self"])):
        signature = inspect.signature(getattr(translator, name))
        assert len(signature.parameters) == len(parameters), f"{vendor.api}: {name}{signature}"
        assert str(signature.return_annotation).startswith("list["), (
            f"{vendor.api}: {name}{signature}"
        )


def _type_comparisons(cls: type) -> dict[str, int]:
    """How often each method of ``cls`` compares something's ``.type`` with a string."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    found: dict[str, int] = {}
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef):
            continue
        for node in ast.walk(function):
            if (
                isinstance(node, ast.Compare)
                and isinstance(node.left, ast.Attribute)
                and node.left.attr == "type"
                and any(isinstance(side, (ast.Constant, ast.Tuple)) for side in node.comparators)
            ):
                found[function.name] = found.get(function.name, 0) + 1
    return found


#: The hooks around every event, which may single out a type (Anthropic holds everything at
#: ``start``; no server blocks follow an ``error``).
ENCODER_HOOKS = {"before", "after", "unhandled"}


@pytest.mark.parametrize("vendor", builtin.VENDORS, ids=lambda vendor: vendor.api)
def test_every_encoder_dispatches_by_on_methods(vendor):
    """The shared ``encode`` calls the event's ``_on_<type>``; no encoder tells types apart by
    an ``if`` chain (pydantic-ai's ``handle_text_delta`` ..., docs/architecture.md)."""
    encoder = vendor.stream_encoder
    assert issubclass(encoder, roles.StreamEncoder)
    assert "encode" not in vars(encoder), f"{vendor.api} overrides encode"
    assert any(name.startswith("_on_") for name in vars(encoder)), vendor.api
    chains = {
        name: count
        for name, count in _type_comparisons(encoder).items()
        if name not in ENCODER_HOOKS
    }
    assert chains == {}, f"{vendor.api} compares event types in {chains}"


def test_the_encoder_check_sees_an_if_chain():
    class Chained(roles.StreamEncoder):
        def _on_text_delta(self, event, message):
            if event.type == "text_delta":
                return b"a"
            if event.type in ("done", "error"):
                return b"b"
            return b""

    assert _type_comparisons(Chained) == {"_on_text_delta": 2}
