"""The plugin's options and markers: ``--llm-record-mode`` and the other command-line and ini
options, the ``llm_recording`` and ``llm_live`` markers, the run's replay options, the report
header, and what a test's rules are (the project's, the ini's, then its marker's)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from openprogram.recordings.modes.vocabulary import (
    PLUGIN_MODES,
    PluginMode,
    validate_record_mode,
)

if TYPE_CHECKING:  # the recordings modules are imported when a test first needs them
    from openprogram.project import ProjectConfig
    from openprogram.providers.replay import ReplayOptions


#: ``--llm-record-mode``'s modes (``docs/architecture.md``, "The modes").
MODES = PLUGIN_MODES
#: The folder of drift pages, in the rootdir unless ``--llm-report-dir`` says otherwise.
DEFAULT_REPORT_DIR = "llm-reports"
MARKER = "llm_recording"
#: A test meant to call models live: replay mode does not block it.
LIVE_MARKER = "llm_live"
NORMALIZE_SEPARATOR = " => "
#: The run's replay options (``--llm-fault``, ``--llm-rechunk``, ``--llm-pace``).
_RUN_OPTIONS = pytest.StashKey["ReplayOptions | None"]()
#: The pytest-xdist worker input that carries the run's re-chunking seed.
_SEED_INPUT = "openprogram_rechunk_seed"


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
        "rechunk": (
            "--llm-rechunk",
            handed if handed is not None else config.getoption("--llm-rechunk", None),
        ),
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


def record_mode(config: pytest.Config) -> PluginMode:
    mode = config.getoption("--llm-record-mode") or config.getini("llm_record_mode") or "replay"
    return validate_record_mode(mode, PLUGIN_MODES, "llm_record_mode", pytest.UsageError)


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


def replay_options(item: pytest.Item) -> ReplayOptions | None:
    """The test's replay options: the run's (``--llm-fault`` ...), then its marker's
    ``faults=``, ``rechunk=`` and ``pace=`` on top; a bad one fails the test, named."""
    run = item.config.stash.get(_RUN_OPTIONS, None)
    marker = item.get_closest_marker(MARKER)
    keywords = (
        {}
        if marker is None
        else {
            name: marker.kwargs[name]
            for name in ("faults", "rechunk", "pace")
            if name in marker.kwargs
        }
    )
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
    value = (
        config.getoption("--llm-report-dir")
        or config.getini("llm_report_dir")
        or DEFAULT_REPORT_DIR
    )
    return Path(config.rootpath) / Path(str(value)).expanduser()
