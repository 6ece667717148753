"""One test's recording session: what the ``llm_recording`` fixture gives the test
(:class:`LlmRecording`) and the body run inside ``use_recording`` in the mode the plugin's mode
maps onto (``route_mode_for_test``), the file settled by how the body ended."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import os
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from openprogram.recordings.modes.vocabulary import FileMode, PluginMode

from .watch import CallWatch, watching

if TYPE_CHECKING:  # the recordings modules are imported when a test first needs them
    from openprogram.providers.replay import ReplayOptions
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.modes.scoped import RecordingScope


class LlmRecording:
    """What the ``llm_recording`` fixture gives a test: where its recording is, the mode in
    force, and (while the test runs) the active scope."""

    def __init__(
        self,
        path: Path,
        mode: PluginMode,
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


def _wrap(
    function: Callable[..., Any], handle: LlmRecording, keep_failed: bool
) -> Callable[..., Any]:
    return _inside(function, lambda: _session(handle, keep_failed))


def _inside(
    function: Callable[..., Any], enter: Callable[[], contextlib.AbstractContextManager[Any]]
) -> Callable[..., Any]:
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
    from openprogram.recordings.modes.activation import recover_command

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
    """Replay, record or update around one test body (the plugin's mode mapped onto the mode
    of a route: :func:`~openprogram.recordings.modes.vocabulary.route_mode_for_test`), and
    settle the file by how the body ended."""
    from openprogram.recordings.file.folders import make_private_folders
    from openprogram.recordings.modes.vocabulary import RECORD, REPLAY, UPDATE, route_mode_for_test

    exists = handle.path.exists()
    mode = route_mode_for_test(handle.mode, exists)
    if mode == REPLAY:
        if not exists:
            handle.missing = True
            pytest.fail(
                f"no LLM recording for {handle.nodeid} at {handle.path}; record it with:\n"
                f"  pytest {shlex.quote(handle.nodeid)} --llm-record-mode=record{_legacy_hint(handle)}",
                pytrace=False,
            )
        with _scope(handle, REPLAY, handle.path) as scope:
            with _test_body(handle, watched=handle.proxied):  # a proxy's mismatch is seen there
                yield
            scope.assert_consumed()
        return
    if mode == RECORD:
        make_private_folders(handle.path.parent)
        # Written beside its place, and moved there when the test passes.
        pending = handle.path.with_name(f".{handle.path.name}.{os.getpid()}.recording")
        with contextlib.suppress(FileNotFoundError):
            pending.unlink()
        succeeded = False
        try:
            with _scope(handle, RECORD, pending):
                kept = "no recording was kept (not even with --llm-keep-failed: it would replay the failure forever)"
                with _failing_unanswered(handle, kept):
                    yield
            succeeded = True
        finally:
            _settle_recording(handle, pending, succeeded or keep_failed)
        return
    try:
        make_private_folders(handle.path.parent)
    except OSError as error:
        pytest.fail(
            f"llm_recording: cannot create the folder of {handle.path}: {error.strerror or error}; "
            "make its parent writable, or run without --llm-record-mode=update",
            pytrace=False,
        )
    with _scope(handle, UPDATE, handle.path) as scope:
        # A call the vendor never answered fails the test inside the scope, so the update
        # ends as a failed run: the file stays as it was.
        with _failing_unanswered(handle, f"{handle.path} is left as it was"):
            yield
    # Nothing drifted but calls were left unused: the file stayed, and the test fails as
    # its replay would (after the scope, so the report says "nothing drifted").
    scope.assert_consumed()


@contextlib.contextmanager
def _scope(handle: LlmRecording, mode: FileMode, target: Path) -> Iterator[RecordingScope]:
    """``use_recording`` of ``target`` in ``mode`` with the test's rules (the replay options in
    replay only); a recording that cannot be opened, or a bad rule, fails the test with what
    to do."""
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.modes.scoped import use_recording

    options = handle.replay_options if mode == "replay" else None
    with contextlib.ExitStack() as stack:
        try:
            scope = stack.enter_context(
                use_recording(
                    target,
                    mode,
                    ignore=handle.ignore,
                    normalize=handle.normalize,
                    values=handle.values,
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
        yield scope


def _settle_recording(handle: LlmRecording, pending: Path, keep: bool) -> None:
    """Move a test's new recording into place when it is kept (the test passed, or
    ``--llm-keep-failed``) and no call went unanswered; else remove it, saying so."""
    if keep and not handle.watch.unanswered:
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
    return _inside(function, lambda: _live(handle))


@contextlib.contextmanager
def _live(handle: LlmRecording) -> Iterator[None]:
    """Mode ``off``: every call to the vendor provider itself (the route of ``off``, past a
    ``record_replay`` configuration of the process), watched. A route already in force around
    the body stays: ``--llm-doctor`` records each of its two live runs that way."""
    from openprogram.providers.api_registry import current_route, routed
    from openprogram.recordings.modes.routes import route_for

    route = current_route() or route_for("off", None).route
    with routed(route), _test_body(handle, watched=True):
        yield


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
