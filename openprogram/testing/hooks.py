"""The hooks around each test: the ``llm_recording`` fixture, the test function wrapped in its
session (or in the refusal of live calls), its report (the mismatch and the ways out, the
drift page, the update's outcome, the replay options), and the run's closing summary."""

from __future__ import annotations

import contextlib
import os
import shlex
import stat
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from .naming import drift_page_path, legacy_recording_path, recording_path
from .options import (
    _RUN_OPTIONS,
    MARKER,
    _project_rules,
    record_mode,
    replay_options,
    volatile_settings,
)
from .refusal import _blocks_live_calls, _without_live_calls
from .session import LlmRecording, _watched, _wrap

if TYPE_CHECKING:  # the recordings modules are imported when a test first needs them
    from pluggy import Result

    from openprogram.providers.replay import ReplayOptions
    from openprogram.recordings.replay.differences import ReplayMismatch


#: The title of the report section that says how an ``update`` settled a test's recording.
UPDATE_SECTION = "openprogram update"
#: The title of the report section that names the errors a test's live calls ended in.
CALLS_SECTION = "openprogram model calls"
#: The title of the report section that says a failed test's new recording was not kept.
RECORDING_SECTION = "openprogram recording"
#: The ``user_properties`` key of a test that had no recording to replay.
MISSING_PROPERTY = "openprogram_missing_recording"
#: The title of the report section that names the replay options a failed test ran under.
REPLAY_OPTIONS_SECTION = "openprogram replay options"


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
    project_secrets = [
        os.environ[name]
        for name in _project_rules(node).get("secret_env", ())
        if os.environ.get(name)
    ]
    handle.secrets = (*handle.secrets, *project_secrets)
    handle.drift_page = drift_page_path(request.config, handle.path)
    request.node._openprogram_recording = handle
    return handle


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
        report.sections.append(
            (CALLS_SECTION, "\n".join(f.describe() for f in handle.watch.failures))
        )
    if handle.missing:
        report.user_properties.append((MISSING_PROPERTY, handle.nodeid))
    if handle.discarded:
        report.sections.append(
            (
                RECORDING_SECTION,
                f"The test failed, so its new recording was not kept ({handle.path} is as it was). "
                "To keep it and see what the model said, run it again with --llm-keep-failed:\n"
                f"  pytest {shlex.quote(handle.nodeid)} --llm-record-mode={handle.mode} --llm-keep-failed",
            )
        )
    if call.excinfo is None:
        if report.passed:
            _remove_drift_pages(handle)
        return
    options = (
        handle.scope.replay_provider.replay_options
        if handle.scope and handle.scope.replay_provider
        else None
    )
    if options:
        run = item.config.stash.get(_RUN_OPTIONS, None)
        report.sections.append(
            (REPLAY_OPTIONS_SECTION, replay_options_note(handle.nodeid, options, run))
        )
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.replay.differences import ReplayMismatch

    if handle.mode == "update" and isinstance(call.excinfo.value, RecordingFileError):
        # The update could not record (a folder that cannot be written): one message, naming
        # the file and what to do, not a traceback through the agent loop.
        report.longrepr = f"{call.excinfo.value}\nThe recording {handle.path} is left as it was."
        return
    mismatch = (
        call.excinfo.value
        if isinstance(call.excinfo.value, ReplayMismatch)
        else handle.watch.mismatch
    )
    if mismatch is not None:
        # Through llm_proxy the client got the mismatch as an HTTP 400 and raised its own
        # error: the report is the mismatch's all the same.
        client = (
            ""
            if mismatch is call.excinfo.value
            else (
                f"(the client got it from llm_proxy as an HTTP 400: {type(call.excinfo.value).__name__})\n"
            )
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
    for title, heading in (
        (UPDATE_SECTION, "openprogram update"),
        (CALLS_SECTION, "openprogram model calls"),
    ):
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
    missing = sorted(
        {
            value
            for reports in terminalreporter.stats.values()
            for report in reports
            for key, value in getattr(report, "user_properties", ())
            if key == MISSING_PROPERTY
        }
    )
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
    return (
        f"{count}; record {'them all' if len(nodeids) != 1 else 'it'} with:\n  pytest "
        + " ".join(shlex.quote(nodeid) for nodeid in nodeids)
        + " --llm-record-mode=record"
    )


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
        return (
            f"(the drift page could not be written to {target}: {type(error).__name__}: {error})\n"
        )
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
            (top / ".gitignore").write_text(
                "# written by openprogram: drift pages are not committed\n*\n"
            )


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
