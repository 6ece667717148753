"""pytest plugin for deterministic agent tests (active once openprogram is installed, through
the ``pytest11`` entry point).

Mark a test with ``@pytest.mark.llm_recording`` (or request the ``llm_recording`` fixture) and
every provider call made inside it, by an agent loop or a direct facade call, sync or async,
goes to ``<test folder>/recordings/<test module>/<test name>.jsonl``:

- ``--llm-record-mode=replay`` (default): served offline from the recording; a missing
  recording fails the test with the command that records it; recorded calls left unused by a
  passing test fail it.
- ``record``: record recordings that are missing, replay the ones that exist.
- ``rewrite``: record every recording anew.
- ``update``: replay each test's calls while they match its recording; from the first call that
  drifts, call the model live and record; when the test passes, rewrite the recording with both,
  as one session. A test whose requests did not drift, or that failed, keeps its file byte for
  byte; the outcome of each updated test is said at the end of the run.
- ``off``: live calls, nothing recorded.

A test that uses ``tmp_path`` gets it as the run value ``tmp_path``: the recording stores
``{{tmp_path}}`` wherever the folder appears, and a later run replays with its own folder.

A test that fails while recording keeps no new recording unless ``--llm-keep-failed``.

Reports stay out of the committed recordings: a replayed test that drifts writes its drift page
under ``--llm-report-dir`` (default ``llm-reports/`` in the rootdir, which ignores itself for git
and is what CI uploads as an artifact), and the page is removed when the test passes again.

The routing is entered inside the test function itself (the plugin wraps it), through
``use_recording``'s context variable: it is scoped to the test, safe with pytest-xdist and with
tests that share an event loop, and it never touches the process-wide provider transform.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import inspect
import os
import re
import shlex
import stat
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from openprogram.providers.vendors.builtin import VENDOR_APIS
from openprogram.testing_watch import CallWatch, watching

if TYPE_CHECKING:  # the recordings modules are imported when a test first needs them
    from pluggy import Result

    from openprogram.project import ProjectConfig
    from openprogram.providers.replay import ReplayOptions
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.replay.differences import ReplayMismatch
    from openprogram.recordings.store.scoped import RecordingScope

#: The ``llm_proxy`` fixture, and the usage report, budgets, prompt-cache check and doctor
#: (modules of their own: they need this one's names).
pytest_plugins = ["openprogram.testing_proxy", "openprogram.testing_insight"]

MODES = ("replay", "record", "rewrite", "update", "off")
#: The folder of drift pages, in the rootdir unless ``--llm-report-dir`` says otherwise.
DEFAULT_REPORT_DIR = "llm-reports"
#: The title of the report section that says how an ``update`` settled a test's recording.
UPDATE_SECTION = "openprogram update"
#: The title of the report section that names the errors a test's live calls ended in.
CALLS_SECTION = "openprogram model calls"
#: The title of the report section that says a failed test's new recording was not kept.
RECORDING_SECTION = "openprogram recording"
#: The ``user_properties`` key of a test that had no recording to replay.
MISSING_PROPERTY = "openprogram_missing_recording"
MARKER = "llm_recording"
#: A test meant to call models live: replay mode does not block it.
LIVE_MARKER = "llm_live"
#: The apis that reach a vendor over the network: in replay mode a test without a recording
#: must not call them (scripted and user-registered providers are not blocked).
NETWORK_APIS = frozenset(VENDOR_APIS)
NORMALIZE_SEPARATOR = " => "
#: The title of the report section that names the replay options a failed test ran under.
REPLAY_OPTIONS_SECTION = "openprogram replay options"
#: The run's replay options (``--llm-fault``, ``--llm-rechunk``, ``--llm-pace``).
_RUN_OPTIONS = pytest.StashKey["ReplayOptions | None"]()
#: The pytest-xdist worker input that carries the run's re-chunking seed.
_SEED_INPUT = "openprogram_rechunk_seed"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("openprogram", "openprogram LLM recordings")
    group.addoption(
        "--llm-record-mode",
        choices=MODES,
        default=None,
        help="replay (default: offline, never contacts a provider), record (record missing "
        "recordings), rewrite (record all anew), update (replay up to the first drift, record "
        "from there) or off (live, no recording)",
    )
    group.addoption(
        "--llm-keep-failed",
        action="store_true",
        default=False,
        help="keep the new recording of a test that failed while recording",
    )
    group.addoption(
        "--llm-report-dir",
        default=None,
        metavar="DIR",
        help=f"where drift pages go (default: {DEFAULT_REPORT_DIR}/ in the rootdir; never beside the recordings)",
    )
    group.addoption(
        "--llm-fault",
        action="append",
        default=[],
        metavar="SPEC",
        help="serve this fault instead of a recorded answer in every replayed test, written "
        "kind[@call][:event][xtimes] (rate_limit@1, cut@0:15, server_error@1x3); repeatable",
    )
    group.addoption(
        "--llm-rechunk",
        default=None,
        metavar="SEED|random",
        help="re-split every replayed text, thinking and tool-argument stream at pseudo-random "
        "boundaries from SEED (random: a seed picked and printed); a failing test names its seed",
    )
    group.addoption(
        "--llm-pace",
        default=None,
        metavar="recorded|FACTOR",
        help="wait the recorded time before and between replayed events (recorded), or that time "
        "scaled by FACTOR (0.5: twice as fast)",
    )
    parser.addini("llm_record_mode", "default for --llm-record-mode", default="replay")
    parser.addini("llm_report_dir", "default for --llm-report-dir", default=DEFAULT_REPORT_DIR)
    parser.addini(
        "llm_recording_ignore",
        "request field patterns replay does not compare, one a line (context.system_prompt, "
        "context.messages[*].content, options.metadata.*)",
        type="linelist",
        default=[],
    )
    parser.addini(
        "llm_recording_normalize",
        f"'REGEX{NORMALIZE_SEPARATOR}REPLACEMENT' rules applied to both requests before replay "
        "compares them, one a line",
        type="linelist",
        default=[],
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(name=None, ignore=(), normalize=(), secrets=(), faults=(), rechunk=None, pace=None, "
        "budget=None, cache_stable=False, upstream=None): "
        "route this test's provider calls to a recording (<test folder>/recordings/<module>/<name or "
        "test name>.jsonl); ignore and normalize make replay overlook volatile values in requests; "
        "secrets are values never written to the recording; faults, rechunk and pace replay what "
        "goes wrong (failures, re-split streams, the recorded timing); budget limits calls, tokens "
        "and cost; cache_stable fails a call that breaks the prompt-cache prefix; upstream is where "
        "llm_proxy's live calls go",
    )
    config.addinivalue_line(
        "markers",
        f"{LIVE_MARKER}: this test calls models live on purpose; replay mode (the default) does not "
        "block its calls",
    )
    _project_of(config)  # an invalid project table: said once, as a usage error, before any test
    config.stash[_RUN_OPTIONS] = _run_replay_options(config)


def _run_replay_options(config: pytest.Config) -> ReplayOptions | None:
    """The run's ``--llm-fault``, ``--llm-rechunk`` and ``--llm-pace``, checked once (None
    when none is given: nothing is imported for them). A seed picked at random is picked by
    the main process and handed to pytest-xdist's workers, so every test of the run uses the
    one the header names."""
    handed = getattr(config, "workerinput", {}).get(_SEED_INPUT)
    given = {
        "faults": ("--llm-fault", config.getoption("--llm-fault", None) or ()),
        "rechunk": ("--llm-rechunk", handed if handed is not None else config.getoption("--llm-rechunk", None)),
        "pace": ("--llm-pace", config.getoption("--llm-pace", None)),
    }
    if not any(value for _, value in given.values()):
        return None
    from openprogram.providers.replay import ReplayOptions

    options = ReplayOptions()
    for name, (option, value) in given.items():
        try:  # one option at a time, so the message names the one at fault
            options = options.merged(ReplayOptions.of(**{name: value}, announce=lambda line: None))
        except ValueError as error:
            raise pytest.UsageError(f"{option}: {error}") from None
    return options


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: hand the run's seed to each worker (see :func:`_run_replay_options`)."""
    options = node.config.stash.get(_RUN_OPTIONS, None)
    seed = options.rechunk if options is not None else None
    if seed is not None:
        node.workerinput[_SEED_INPUT] = str(seed)


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Which project file applies (docs/project.md), and the files passed by unread; the
    replay options of the run (with the seed a ``random`` picked)."""
    project = _project_of(config)
    lines = [f"openprogram: project file {project.path}"] if project.path is not None else []
    lines += [f"openprogram: project file {line}" for line in project.passed_by]
    options = config.stash.get(_RUN_OPTIONS, None)
    if options:
        lines.append(f"openprogram: replay with {options.describe()}")
    return lines


def _project_of(config: pytest.Config) -> ProjectConfig:
    from openprogram.project import project_config
    from openprogram.state import ConfigError

    try:
        return project_config(Path(str(config.rootpath)))
    except ConfigError as error:
        raise pytest.UsageError(f"openprogram project configuration: {error}") from None


def record_mode(config: pytest.Config) -> str:
    mode = config.getoption("--llm-record-mode") or config.getini("llm_record_mode") or "replay"
    if mode not in MODES:
        raise pytest.UsageError(f"llm_record_mode must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


def volatile_settings(item: pytest.Item) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """``(ignore, normalize)`` for a test: the ini options, then the marker's keywords."""
    config = item.config
    ignore = list(config.getini("llm_recording_ignore"))
    normalize: list[tuple[str, str]] = []
    for line in config.getini("llm_recording_normalize"):
        regex, separator, replacement = line.partition(NORMALIZE_SEPARATOR)
        if not separator:
            raise pytest.UsageError(
                f"llm_recording_normalize: {line!r} must read 'REGEX{NORMALIZE_SEPARATOR}REPLACEMENT'"
            )
        normalize.append((regex, replacement))
    marker = item.get_closest_marker(MARKER)
    if marker is not None:
        ignore.extend(marker.kwargs.get("ignore", ()))
        normalize.extend(tuple(rule) for rule in marker.kwargs.get("normalize", ()))
    rules = _project_rules(item)
    ignore[:0] = rules.get("ignore", ())
    normalize[:0] = (tuple(rule) for rule in rules.get("normalize", ()))
    return tuple(ignore), tuple(normalize)


def _project_rules(item: pytest.Item) -> dict[str, Any]:
    """The project's ``record_replay`` rules (docs/project.md), found from the rootdir: what the
    committed recordings need to replay, before the ini options and the marker's."""
    from openprogram.project import project_config
    from openprogram.state import ConfigError

    try:
        return project_config(Path(str(item.config.rootpath))).record_replay
    except ConfigError as error:
        raise pytest.UsageError(f"openprogram project configuration: {error}") from None


class LlmRecording:
    """What the ``llm_recording`` fixture gives a test: where its recording is, the mode in
    force, and (while the test runs) the active scope."""

    def __init__(
        self,
        path: Path,
        mode: str,
        nodeid: str,
        legacy_path: Path | None = None,
        ignore: tuple[str, ...] = (),
        normalize: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.path = path
        self.ignore = ignore
        self.normalize = normalize
        #: Run values (``{name: text}``), stored as ``{{name}}``: the test's ``tmp_path``.
        self.values: dict[str, str] = {}
        #: Values to remove wherever they occur (the marker's ``secrets=``).
        self.secrets: tuple[str, ...] = ()
        #: Faults, re-chunking and pacing of this test's replay: the run's, then the marker's.
        self.replay_options: ReplayOptions | None = None
        self.legacy_path = legacy_path
        self.mode = mode
        self.nodeid = nodeid
        self.scope: RecordingScope | None = None
        #: Where this test's drift page goes (set by the fixture).
        self.drift_page: Path | None = None
        #: What the test's live calls went through (record, rewrite, update and off modes).
        self.watch = CallWatch()
        #: Set when the test had no recording to replay, or failed and lost its new recording.
        self.missing = False
        self.discarded = False
        #: Set by the ``llm_proxy`` fixture: the test's calls arrive through a proxy.
        self.proxied = False
        #: The context of the running test body (its recording scope, run values, declared
        #: secrets): the one ``llm_proxy``'s requests run in. None while no body runs.
        self.context: contextvars.Context | None = None
        #: Run when the test body ends, before its recording is closed (``llm_proxy`` ends the
        #: calls it is still answering there, so they are recorded whole).
        self.at_body_end: list[Callable[[], object]] = []

    @property
    def call_count(self) -> int:
        return self.scope.call_count if self.scope is not None else 0


def recording_path(item: pytest.Item) -> Path:
    test_file = Path(str(item.path))
    stem = file_stem(_original_name(item), _marker_secrets(item))
    return test_file.parent / "recordings" / test_file.stem / f"{stem}.jsonl"


def legacy_recording_path(item: pytest.Item) -> Path | None:
    """Where openprogram 0.1 stored this test's recording, when that name differs (it was not
    unique for ids with punctuation); used only to point a user at an old file, and never for
    a name that holds a secret (it would be shown)."""
    name = _original_name(item)
    if file_stem(name) == _legacy_stem(name) or _redacted_name(name, _marker_secrets(item)) != name:
        return None
    return recording_path(item).with_name(f"{_legacy_stem(name)}.jsonl")


def _original_name(item: pytest.Item) -> str:
    marker = item.get_closest_marker(MARKER)
    if marker is not None:
        name: str | None = marker.kwargs.get("name") or (marker.args[0] if marker.args else None)
        if name:
            return name
    return item.name


def file_stem(name: str, secrets: tuple[str, ...] = ()) -> str:
    """A readable file name for a test (or marker) name, unique per exact name.

    ``test_x`` and a parametrised ``test_x[3-abc]`` keep the names openprogram always gave them
    (``test_x``, ``test_x_3-abc``). Where other characters had to be replaced by ``_``, a short
    hash of the exact name is appended, so parametrised ids that differ only in such characters
    (``[a/b]``, ``[a_b]``, ``[a b]``; ``6*7`` and ``6+7``) get files of their own instead of
    sharing one.

    A recording's name is committed with it, so the name is redacted first by the rules of
    the file (``docs/file-format.md``, "Redaction"; ``secrets``: the marker's declared values):
    a parametrised id that holds a key becomes ``test_x_secret_removed_-1a2b3c4d``, the hash
    of the exact id keeping two such ids apart (a hash does not give back the key).
    """
    shown = _redacted_name(name, secrets)
    readable = _legacy_stem(shown)
    base, bracket, rest = name.partition("[")
    lossless = shown == name and (
        name == readable or (bracket and rest.endswith("]") and f"{base}_{rest[:-1]}" == readable)
    )
    if lossless:
        return readable
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{readable}-{digest}"


def _redacted_name(name: str, secrets: tuple[str, ...]) -> str:
    """``name`` redacted as a recording would store it, the marker's secrets included."""
    from openprogram.recordings.redaction import redact_text, use_declared_secrets

    with use_declared_secrets(secrets):
        return redact_text(name)


def _marker_secrets(item: pytest.Item) -> tuple[str, ...]:
    """The values the test's marker declares secret (``secrets=``), as far as they are valid
    (an invalid one fails the test when its recording is opened, not here)."""
    from openprogram.recordings.redaction import check_declared_secrets

    marker = item.get_closest_marker(MARKER)
    try:
        return tuple(sorted(check_declared_secrets(marker.kwargs.get("secrets") if marker is not None else None)))
    except (ValueError, TypeError):
        return ()


def _legacy_stem(name: str) -> str:
    """The name openprogram 0.1 gave a recording (not unique: kept to point users at it)."""
    return _UNSAFE.sub("_", name).strip("_") or "recording"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker(MARKER) is not None and MARKER not in getattr(item, "fixturenames", ()):
            cast(pytest.Function, item).fixturenames.append(MARKER)  # declared on Function, not Item
    _refuse_shared_recordings(items)


def _refuse_shared_recordings(items: list[pytest.Item]) -> None:
    """Two tests whose names map to one file (``test_load[user_admin]`` and
    ``test_load_user[admin]`` both read ``test_load_user_admin``; methods of two classes with
    one name) would record over and replay each other's calls: both fail, saying how to part
    them, and the rest of the suite runs. Tests that give the marker the same ``name=`` share
    a recording on purpose and are left alone."""
    owners: dict[Path, list[pytest.Item]] = {}
    for item in items:
        if MARKER in getattr(item, "fixturenames", ()) and not _named_by_marker(item):
            owners.setdefault(recording_path(item), []).append(item)
    for path, sharing in owners.items():
        if len(sharing) < 2:
            continue
        names = " and ".join(item.nodeid for item in sharing)
        for item in sharing:
            item._openprogram_shared_recording = (  # type: ignore[attr-defined]
                f"{names} would share the recording {path}; give each a name of its own: "
                f'@pytest.mark.{MARKER}(name="...")'
            )


def _named_by_marker(item: pytest.Item) -> bool:
    marker = item.get_closest_marker(MARKER)
    return marker is not None and bool(marker.kwargs.get("name") or marker.args)


@pytest.fixture
def llm_recording(request: pytest.FixtureRequest) -> LlmRecording:
    """The test's recording. Routing happens while the test function runs."""
    node = request.node
    shared = getattr(node, "_openprogram_shared_recording", None)
    if shared is not None:
        pytest.fail(shared, pytrace=False)
    ignore, normalize = volatile_settings(node)
    handle = LlmRecording(
        recording_path(node),
        record_mode(request.config),
        node.nodeid,
        legacy_recording_path(node),
        ignore=ignore,
        normalize=normalize,
    )
    marker = node.get_closest_marker(MARKER)
    if marker is not None:
        handle.secrets = tuple(marker.kwargs.get("secrets", ()))
    handle.replay_options = replay_options(node)
    # The project's secret_env: the values of those variables, wherever they are set.
    project_secrets = [os.environ[name] for name in _project_rules(node).get("secret_env", ()) if os.environ.get(name)]
    handle.secrets = (*handle.secrets, *project_secrets)
    handle.drift_page = drift_page_path(request.config, handle.path)
    request.node._openprogram_recording = handle
    return handle


def replay_options(item: pytest.Item) -> ReplayOptions | None:
    """The test's replay options: the run's (``--llm-fault`` ...), then its marker's
    ``faults=``, ``rechunk=`` and ``pace=`` on top; a bad one fails the test, named."""
    run = item.config.stash.get(_RUN_OPTIONS, None)
    marker = item.get_closest_marker(MARKER)
    keywords = {} if marker is None else {
        name: marker.kwargs[name] for name in ("faults", "rechunk", "pace") if name in marker.kwargs
    }
    if not keywords:
        return run
    from openprogram.providers.replay import ReplayOptions

    run = run or ReplayOptions()
    try:
        own = ReplayOptions.of(**keywords, announce=lambda line: None)  # the report names a seed
    except ValueError as error:
        pytest.fail(f"@pytest.mark.{MARKER}: {error}", pytrace=False)
    return run.merged(own)


def report_dir(config: pytest.Config) -> Path:
    """The folder of drift pages: ``--llm-report-dir`` (or the ini option), relative to the
    rootdir."""
    value = config.getoption("--llm-report-dir") or config.getini("llm_report_dir") or DEFAULT_REPORT_DIR
    return Path(config.rootpath) / Path(str(value)).expanduser()


def drift_page_path(config: pytest.Config, recording: Path) -> Path:
    """Where a test's drift page goes: its recording's path below the rootdir, under the report
    folder (``llm-reports/tests/recordings/test_agent/test_x.drift.html``), so two tests never
    share one page and no page lands among the committed recordings."""
    from openprogram.recordings.views.view import DRIFT_SUFFIX

    try:
        relative = recording.absolute().relative_to(Path(config.rootpath).absolute())
    except ValueError:  # a recording outside the rootdir: by its name and a digest of its path
        digest = hashlib.sha256(str(recording.absolute()).encode("utf-8", "surrogatepass")).hexdigest()[:8]
        relative = Path("elsewhere") / f"{recording.stem}-{digest}{recording.suffix}"
    return report_dir(config) / relative.with_name(relative.name.removesuffix(".jsonl") + DRIFT_SUFFIX)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Result[None], None]:
    """Run the test function wrapped (see :func:`_wrapped_test`), and put it back after."""
    function = getattr(item, "obj", None)
    wrapped = None if function is None else _wrapped_test(item, function)
    if wrapped is None:
        yield
        return
    test = cast(pytest.Function, item)  # an item with an ``obj``, like Function
    test.obj = wrapped
    try:
        yield
    finally:
        test.obj = function


def _wrapped_test(item: pytest.Item, function: Callable[..., Any]) -> Callable[..., Any] | None:
    """What the test function runs inside: its recording session (replay, record, update),
    the watch of its live calls (``off``), the refusal of live calls (a test without a
    recording in replay mode), or nothing."""
    handle: LlmRecording | None = getattr(item, "_openprogram_recording", None)
    if handle is None:
        return _without_live_calls(function, item.nodeid) if _blocks_live_calls(item) else None
    if handle.mode == "off":
        return _watched(function, handle)
    temporary = getattr(item, "funcargs", {}).get("tmp_path")
    if temporary is not None:  # a prompt that names it replays in later runs (other folders)
        handle.values = {"tmp_path": str(temporary)}
    return _wrap(function, handle, item.config.getoption("--llm-keep-failed"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Result[pytest.TestReport], None]:
    """A drifted request is a diagnosis, not a crash: show the two-line mismatch report and
    how to re-record, instead of a traceback through the agent loop. A passing test removes its
    old drift page; an updated test's report says how its recording was settled."""
    outcome = yield
    handle: LlmRecording | None = getattr(item, "_openprogram_recording", None)
    if handle is None or call.when != "call":
        return
    report = outcome.get_result()
    update = handle.scope.update if handle.scope is not None else None
    if update is not None and update.report is not None:
        report.sections.append((UPDATE_SECTION, update.report.message))
    if handle.watch.failures:
        report.sections.append((CALLS_SECTION, "\n".join(f.describe() for f in handle.watch.failures)))
    if handle.missing:
        report.user_properties.append((MISSING_PROPERTY, handle.nodeid))
    if handle.discarded:
        report.sections.append((
            RECORDING_SECTION,
            f"The test failed, so its new recording was not kept ({handle.path} is as it was). "
            "To keep it and see what the model said, run it again with --llm-keep-failed:\n"
            f"  pytest {shlex.quote(handle.nodeid)} --llm-record-mode={handle.mode} --llm-keep-failed",
        ))
    if call.excinfo is None:
        if report.passed:
            _remove_drift_pages(handle)
        return
    options = handle.scope.replay_provider.replay_options if handle.scope and handle.scope.replay_provider else None
    if options:
        run = item.config.stash.get(_RUN_OPTIONS, None)
        report.sections.append((REPLAY_OPTIONS_SECTION, replay_options_note(handle.nodeid, options, run)))
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.replay.differences import ReplayMismatch

    if handle.mode == "update" and isinstance(call.excinfo.value, RecordingFileError):
        # The update could not record (a folder that cannot be written): one message, naming
        # the file and what to do, not a traceback through the agent loop.
        report.longrepr = f"{call.excinfo.value}\nThe recording {handle.path} is left as it was."
        return
    mismatch = call.excinfo.value if isinstance(call.excinfo.value, ReplayMismatch) else handle.watch.mismatch
    if mismatch is not None:
        # Through llm_proxy the client got the mismatch as an HTTP 400 and raised its own
        # error: the report is the mismatch's all the same.
        client = "" if mismatch is call.excinfo.value else (
            f"(the client got it from llm_proxy as an HTTP 400: {type(call.excinfo.value).__name__})\n"
        )
        page = _write_drift_page(handle, mismatch)
        report.longrepr = (
            f"{mismatch}\n{client}\n"
            f"The test's requests no longer match its recording {handle.path}.\n"
            f"{page}{_ways_out(handle.nodeid, mismatch)}"
        )


def _ways_out(nodeid: str, mismatch: Any) -> str:
    """The commands that take a drifted test's change into its recording: ``update`` (live
    from the first drifted call on, the calls before it replayed) and ``rewrite`` (every call
    live); for calls left unused only ``rewrite``, since an update keeps a file that did not
    drift."""
    from openprogram.recordings.replay.differences import REMAINING_CALLS

    node = shlex.quote(nodeid)
    if mismatch.field_path == REMAINING_CALLS:
        return (
            "If the test now makes fewer calls on purpose, re-record it (an update keeps a "
            f"recording that did not drift):\n  pytest {node} --llm-record-mode=rewrite"
        )
    return (
        f"If the change is intended, update the recording (the calls before call {mismatch.call_index} "
        f"are replayed, the rest made live and recorded):\n  pytest {node} --llm-record-mode=update\n"
        f"or re-record the whole test (every call live):\n  pytest {node} --llm-record-mode=rewrite"
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """At the end of the run (also under xdist: all of it travels in the test reports): how an
    ``update`` run settled each test's recording, and the errors the tests' live calls
    ended in."""
    reports = [
        report
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
    ]
    for title, heading in ((UPDATE_SECTION, "openprogram update"), (CALLS_SECTION, "openprogram model calls")):
        lines = [
            f"{report.nodeid}: {line}"
            for report in reports
            for section, content in getattr(report, "sections", ())
            if section == title
            for line in content.splitlines()
        ]
        if lines:
            terminalreporter.write_sep("-", heading)
            for line in lines:
                terminalreporter.write_line(line)


@pytest.hookimpl(hookwrapper=True, tryfirst=True, specname="pytest_terminal_summary")
def pytest_terminal_summary_closing_lines(terminalreporter: Any) -> Generator[None, None, None]:
    """The run's closing lines (after pytest's short summary): one command that records every
    test that had no recording."""
    yield
    missing = sorted({
        value
        for reports in terminalreporter.stats.values()
        for report in reports
        for key, value in getattr(report, "user_properties", ())
        if key == MISSING_PROPERTY
    })
    if missing:
        terminalreporter.write_sep("-", "openprogram: missing recordings")
        terminalreporter.write_line(missing_recordings_command(missing))


def replay_options_note(nodeid: str, options: ReplayOptions, run: ReplayOptions | None) -> str:
    """What a failed test ran under (``options``: the run's and its marker's), and the command
    that runs it so again: the run's options (``run``) as flags, the seed a ``random`` picked
    above all (without it the failure may not come back); the marker's apply by themselves."""
    command = [f"pytest {shlex.quote(nodeid)}"]
    if run is not None:
        command += [f"--llm-fault={shlex.quote(fault.spec)}" for fault in run.faults]
        if run.rechunk is not None:
            command.append(f"--llm-rechunk={run.rechunk}")
        if run.pace is not None:
            command.append(f"--llm-pace={'recorded' if run.pace == 1 else run.pace}")
    return f"The test failed under replay with {options.describe()}; run it so again with:\n  {' '.join(command)}"


def missing_recordings_command(nodeids: list[str]) -> str:
    """One shell line that records every test in ``nodeids`` (shell-quoted)."""
    count = f"{len(nodeids)} test{'s' if len(nodeids) != 1 else ''} had no recording"
    return f"{count}; record {'them all' if len(nodeids) != 1 else 'it'} with:\n  pytest " + " ".join(
        shlex.quote(nodeid) for nodeid in nodeids
    ) + " --llm-record-mode=record"


def _write_drift_page(handle: LlmRecording, mismatch: ReplayMismatch) -> str:
    """Write the drift page (``openprogram recordings view``'s drift view) into the report
    folder and return the line naming it. Only a failing replay gets here, so passing tests
    never write one; a page that cannot be written is mentioned, never a second failure."""
    from openprogram.recordings.views import view
    from openprogram.recordings.views.inspection import read_recording

    target = handle.drift_page or view.drift_page_path(handle.path)
    try:
        _ensure_report_folder(target.parent)
        view.write_page(view.render_drift_page(read_recording(handle.path), mismatch), target)
    except Exception as error:  # noqa: BLE001 - the mismatch is the failure to report
        return f"(the drift page could not be written to {target}: {type(error).__name__}: {error})\n"
    return f"See the drift in a browser: {target}\n"


def _ensure_report_folder(folder: Path) -> None:
    """Create the report folder (0700 at every level it creates: pages hold prompts), with a
    ``.gitignore`` of ``*`` at the top of the tree it creates, so that ``git add`` never picks
    a page up."""
    from openprogram.recordings.file.folders import make_private_folders

    created = make_private_folders(folder)
    if created:
        top = created[0]
        with contextlib.suppress(OSError):
            (top / ".gitignore").write_text("# written by openprogram: drift pages are not committed\n*\n")


def _remove_drift_pages(handle: LlmRecording) -> None:
    """A test that passes again has no drift to show: remove its page, and the one openprogram
    0.2 wrote beside the recording. Only regular files are removed (a symbolic link is left)."""
    from openprogram.recordings.views.view import drift_page_path as beside_the_recording

    for page in (handle.drift_page, beside_the_recording(handle.path)):
        if page is None:
            continue
        try:
            if stat.S_ISREG(os.lstat(page).st_mode):
                os.unlink(page)
        except OSError:
            continue


def _wrap(function: Callable[..., Any], handle: LlmRecording, keep_failed: bool) -> Callable[..., Any]:
    return _inside(function, lambda: _session(handle, keep_failed))


def _inside(function: Callable[..., Any], enter: Callable[[], contextlib.AbstractContextManager[Any]]) -> Callable[..., Any]:
    """``function`` (sync or async) run inside the context ``enter()`` makes at each call:
    entered in the test function's own frame, so a context variable it sets is the test's."""
    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            with enter():
                return await function(*args, **kwargs)

        return run_async

    @functools.wraps(function)
    def run_sync(*args: Any, **kwargs: Any) -> Any:
        with enter():
            return function(*args, **kwargs)

    return run_sync


def _blocks_live_calls(item: pytest.Item) -> bool:
    """Replay mode never calls a model: a test with no recording is kept from calling one by
    accident, unless it says it means to (``llm_live``)."""
    return record_mode(item.config) == "replay" and item.get_closest_marker(LIVE_MARKER) is None


def live_call_refusal(nodeid: str, api: str) -> str:
    """Why a test without a recording may not call a network model in replay mode, and the
    two ways out (shell-quoted commands that paste into a POSIX shell)."""
    test = shlex.quote(nodeid)
    return (
        f"{nodeid} called a model live (api {api}), and --llm-record-mode=replay (the default) "
        "never calls a model. Record it once and replay it from then on: mark the test "
        f"@pytest.mark.{MARKER} and run\n  pytest {test} --llm-record-mode=record\n"
        f"or, for a test meant to call the model, run it with --llm-record-mode=off or mark it "
        f"@pytest.mark.{LIVE_MARKER}"
    )


class _RefusedLiveCall:
    """Stands for a network provider while a test without a recording runs in replay mode:
    the first call fails the test (``pytest.fail`` is no ``Exception``, so an agent loop that
    turns errors into answers cannot swallow it) before anything is sent."""

    requires_credentials = False

    def __init__(self, nodeid: str, api: str) -> None:
        self._message = live_call_refusal(nodeid, api)

    def stream(self, model: Any, context: Any, options: Any = None) -> Any:
        pytest.fail(self._message, pytrace=False)

    stream_simple = stream


@contextlib.contextmanager
def _live_calls_refused(nodeid: str) -> Iterator[None]:
    from openprogram.providers.api_registry import _scoped_route, served_provider

    def route(api: str, original: Any) -> Any:
        if api in NETWORK_APIS:
            return _RefusedLiveCall(nodeid, api)
        return served_provider(api)

    token = _scoped_route.set(route)
    try:
        yield
    finally:
        _scoped_route.reset(token)


def _without_live_calls(function: Callable[..., Any], nodeid: str) -> Callable[..., Any]:
    return _inside(function, lambda: _live_calls_refused(nodeid))


def _legacy_hint(handle: LlmRecording) -> str:
    """Point at a recording stored under openprogram 0.1's (not unique) name, if there is one."""
    legacy = handle.legacy_path
    if legacy is None or not legacy.exists():
        return ""
    return (
        f"\n(openprogram 0.1 stored recordings of test ids with punctuation under shared names: "
        f"if {legacy.name} was recorded for this test, rename it to {handle.path.name})"
    )


def _unreadable_message(error: RecordingFileError, handle: LlmRecording) -> str:
    """Why the test's recording cannot be used and how to fix it: recover a file whose writer
    died (keeping the calls that ended), or re-record."""
    from openprogram.recordings.file.writer_lock import RecordingBusyError
    from openprogram.recordings.store.activation import recover_command

    rerecord = f"  pytest {shlex.quote(handle.nodeid)} --llm-record-mode=rewrite"
    if isinstance(error, RecordingBusyError):
        return str(error)
    if error.kind == "interrupted":
        return (
            f"{error}\nKeep the calls that ended before the writer died with:\n"
            f"  {recover_command(error)}\nor re-record it with:\n{rerecord}"
        )
    return f"{error}\nRe-record it with:\n{rerecord}"


@contextlib.contextmanager
def _session(handle: LlmRecording, keep_failed: bool) -> Iterator[None]:
    """Replay or record around one test body, and settle the file by how the body ended."""
    from openprogram.recordings.file.folders import make_private_folders
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.store.scoped import use_recording

    exists = handle.path.exists()
    if handle.mode == "update":
        try:
            make_private_folders(handle.path.parent)
        except OSError as error:
            pytest.fail(
                f"llm_recording: cannot create the folder of {handle.path}: {error.strerror or error}; "
                "make its parent writable, or run without --llm-record-mode=update",
                pytrace=False,
            )
        with contextlib.ExitStack() as stack:
            try:
                scope = stack.enter_context(
                    use_recording(
                        handle.path, "update", ignore=handle.ignore, normalize=handle.normalize, values=handle.values,
                        secrets=handle.secrets,
                    )
                )
            except ValueError as error:
                pytest.fail(f"llm_recording: {error}", pytrace=False)
            except RecordingFileError as error:
                pytest.fail(_unreadable_message(error, handle), pytrace=False)
            handle.scope = scope
            # A call the vendor never answered fails the test inside the scope, so the update
            # ends as a failed run: the file stays as it was.
            with _failing_unanswered(handle, f"{handle.path} is left as it was"):
                yield
        # Nothing drifted but calls were left unused: the file stayed, and the test fails as
        # its replay would (after the scope, so the report says "nothing drifted").
        scope.assert_consumed()
        return
    if handle.mode == "replay" or (handle.mode == "record" and exists):
        if not exists:
            handle.missing = True
            pytest.fail(
                f"no LLM recording for {handle.nodeid} at {handle.path}; record it with:\n"
                f"  pytest {shlex.quote(handle.nodeid)} --llm-record-mode=record{_legacy_hint(handle)}",
                pytrace=False,
            )
        options = handle.replay_options
        with contextlib.ExitStack() as stack:
            try:
                scope = stack.enter_context(
                    use_recording(
                        handle.path, "replay", ignore=handle.ignore, normalize=handle.normalize, values=handle.values,
                        secrets=handle.secrets,
                        faults=options.faults if options else None,
                        rechunk=options.rechunk if options else None,
                        pace=options.pace if options else None,
                    )
                )
            except ValueError as error:  # a bad ignore pattern or normalize regex
                pytest.fail(f"llm_recording: {error}", pytrace=False)
            except RecordingFileError as error:
                pytest.fail(_unreadable_message(error, handle), pytrace=False)
            handle.scope = scope
            with _test_body(handle, watched=handle.proxied):  # a proxy's mismatch is seen there
                yield
            scope.assert_consumed()
        return

    make_private_folders(handle.path.parent)
    pending = handle.path.with_name(f".{handle.path.name}.{os.getpid()}.recording")
    with contextlib.suppress(FileNotFoundError):
        pending.unlink()
    succeeded = False
    try:
        with use_recording(
            pending, "record", ignore=handle.ignore, normalize=handle.normalize, values=handle.values,
            secrets=handle.secrets,
        ) as scope:
            handle.scope = scope
            kept = "no recording was kept (not even with --llm-keep-failed: it would replay the failure forever)"
            with _failing_unanswered(handle, kept):
                yield
        succeeded = True
    finally:
        if (succeeded or keep_failed) and not handle.watch.unanswered:
            os.replace(pending, handle.path)
        else:
            handle.discarded = not handle.watch.unanswered
            with contextlib.suppress(FileNotFoundError):
                pending.unlink()


@contextlib.contextmanager
def _failing_unanswered(handle: LlmRecording, outcome: str) -> Iterator[None]:
    """Watch the body's calls; when one got no answer from the vendor, fail the test with that
    cause, whatever the body made of the error (an agent loop turns it into an answer, and the
    test then fails on an empty string, or passes)."""
    with _test_body(handle, watched=True):
        try:
            yield
        except Exception:
            if not handle.watch.unanswered:
                raise
            # The test's own failure followed from the unanswered call: the cause replaces it
            # (raised outside this handler, so it is not shown as a second exception).
        _fail_if_unanswered(handle, outcome)


def _fail_if_unanswered(handle: LlmRecording, outcome: str) -> None:
    unanswered = handle.watch.unanswered
    if not unanswered:
        return
    causes = "\n".join(f"  {failure.describe()}" for failure in unanswered)
    pytest.fail(
        f"{handle.nodeid}: a live call got no answer from the vendor, so {outcome}:\n{causes}\n"
        "Start the model server, or set the key, and run it again:\n"
        f"  pytest {shlex.quote(handle.nodeid)} --llm-record-mode={handle.mode}",
        pytrace=False,
    )


def _watched(function: Callable[..., Any], handle: LlmRecording) -> Callable[..., Any]:
    """``function`` with its calls watched (``off`` mode: live calls, nothing recorded, the
    errors they ended in named in the report)."""
    return _inside(function, lambda: _test_body(handle, watched=True))


@contextlib.contextmanager
def _test_body(handle: LlmRecording, *, watched: bool) -> Iterator[None]:
    """Around the test body: its calls watched (when asked), and its context kept for the
    requests ``llm_proxy`` answers from another thread."""
    with watching(handle.watch) if watched else contextlib.nullcontext():
        handle.context = contextvars.copy_context()
        try:
            yield
        finally:
            handle.context = None
            for end in handle.at_body_end:
                end()
