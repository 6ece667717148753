"""Mode ``update``: replay what still matches, record from the first call that drifts.

When one prompt of a 40-call agent test changes, re-recording everything costs 40 live calls
and 39 answers that may now differ from the reviewed ones. In ``update`` mode the calls that
match are replayed; from the first call that does not match (or runs past the recording, or
was left abandoned by a crashed run), that call and every later one go to the live provider and
are recorded into a temporary file beside the recording. Users run it on recordings they cannot
make again, so it never loses a call (``docs/tutorial.md``, "Re-recording only what drifted"):

- **Byte for byte unless the run drifted and ended normally.** A run that did not drift leaves
  the file as it was, however many calls it made. A run that ended by an exception, Ctrl-C, a
  failed test or a non-zero exit status leaves it as it was too, and says so; so does a process
  whose exit status could not be seen (:mod:`.process_end`).
- **One session for what one run did.** A drifted run that ended normally replaces the file
  atomically by the replayed calls followed by the new ones, written as one session (so an
  unused recorded call still fails a test later), ``call_index`` renumbered from 0, the file's
  mode kept. Calls of that session the run did not reach are dropped; in a recording of several
  sessions (several commands recorded into one recording) the sessions the run did not follow
  are kept as they were.
- **One writer at a time.** For as long as it runs, an update holds the file
  (:func:`~..file.writer_lock.claim_for_update`): a second update or a recorder is refused with
  a message naming this one, and this one is refused while another process records into it. A
  run that found no file creates it only if nobody else did meanwhile.
- **A failed rewrite loses nothing.** The old file stays; the new calls are kept in
  ``NAME.unsaved-XXXXXXXX.jsonl`` beside it and the report names that file.

:func:`watch_process` makes a whole process one update run (``record_replay.mode=update``):
the file is settled when the process ends, by how it ends.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...providers.types import AssistantMessageEvent, Context, Model, StreamOptions
from ..file.atomic import (
    LEFTOVER_AFTER_SECONDS,
    create_exclusively,
    remove_leftovers,
    replace_atomically,
)
from ..file.folders import make_private_folders
from ..file.format import HEADER, RecordingFileError, header_row, iter_rows, rewrite_rows
from ..file.reader import RecordedCall
from ..file.writer_lock import UpdateClaim, claim_for_update
from ..replay.differences import ReplayMismatch
from ..replay.replayer import ReplayProvider
from .process_end import UNSEEN_EXIT, ProcessEnd

__all__ = [
    "ABANDONED_AFTER_SECONDS",
    "UpdateReport",
    "UpdateSession",
    "ended_by",
    "finish_process_update",
    "remove_abandoned_updates",
    "watch_process",
]

#: An update file nobody holds open and nobody wrote to for this long was left by an update
#: run that was killed: an idle live run keeps its writer lock, so age alone never decides.
ABANDONED_AFTER_SECONDS = LEFTOVER_AFTER_SECONDS
UPDATE_SUFFIX = ".update"


def remove_abandoned_updates(path: Path) -> list[Path]:
    """Delete the temporary files (``.NAME.PID-*.update`` beside ``path``) that killed
    ``update`` runs left behind: regular files of this user that no live process is recording
    into, and whose process has exited (or, for a name without a process id, that were not
    written to for a minute). Every update run calls it when it starts. Returns the files it
    removed."""
    prefix = f".{path.name}."
    return remove_leftovers(
        path,
        UPDATE_SUFFIX,
        older_than=ABANDONED_AFTER_SECONDS,
        writer_gone=lambda name: _writer_gone(name, prefix),
    )


def _writer_gone(name: str, prefix: str) -> bool:
    """Whether the process named in an update file's name (``.NAME.PID-XXXXXXXX.update``, see
    :meth:`UpdateSession._new_file`) has exited. A file is created a moment before its writer
    marks it, so this (not the writer mark alone) tells a killed run's file from a starting
    one's. False when the name holds no process id or the process may be alive (a reused id
    only delays the removal)."""
    pid_text, dash, _rest = name[len(prefix) :].partition("-")
    if not dash or not pid_text.isascii() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process with that id: alive
        return False
    return False


def _plural(count: int, word: str = "call") -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


@dataclass(frozen=True)
class UpdateReport:
    """How an update run settled its recording, for stderr or a test's report.

    ``changed``: the file was rewritten. ``kept``: recorded calls still in it (the replayed
    ones and the calls of sessions the run did not follow); ``recorded``: the run's new calls;
    ``dropped``: recorded calls the rewrite left out (the run did not reach them).
    ``unchanged_because`` says why the file was left alone; ``failed`` is a rewrite that was
    due and could not be made (then ``saved_to`` holds the new calls, if they could be kept)."""

    path: Path
    changed: bool
    replayed: int = 0
    kept: int = 0
    recorded: int = 0
    dropped: int = 0
    unchanged_because: str | None = None
    failed: str | None = None
    saved_to: Path | None = None

    @property
    def message(self) -> str:
        if self.failed is not None:
            if self.saved_to is not None:
                are = "is" if self.recorded == 1 else "are"
                kept = f"its {_plural(self.recorded, 'new call')} {are} kept in {self.saved_to}"
            elif self.recorded:
                kept = f"its {_plural(self.recorded, 'new call')} could not be kept"
            else:
                kept = "the run recorded no new call"
            return f"{self.path}: could not be updated: {self.failed}; it is left as it was, and {kept}"
        if self.changed:
            dropped = (
                f", dropped {self.dropped}" if self.dropped else ""
            )  # drifted from, or not reached
            return f"{self.path}: updated: kept {_plural(self.kept)}, recorded {self.recorded}{dropped}"
        were = "was" if self.recorded == 1 else "were"
        lost = (
            f"; its {_plural(self.recorded, 'new call')} {were} not kept" if self.recorded else ""
        )
        return f"{self.path}: left unchanged: {self.unchanged_because}{lost}"


class UpdateSession:
    """One ``update`` run over one recording file (see the module docstring).

    Made when the run starts: the file is claimed then (so a busy file is refused before any
    call) and read strictly. :meth:`finish` settles it once, by how the run ended."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        ignore: Iterable[str] = (),
        normalize: Iterable[Sequence[str]] = (),
        values: Mapping[str, str] | None = None,
    ) -> None:
        self.path = Path(path)
        self._claim: UpdateClaim | None = claim_for_update(self.path)
        remove_abandoned_updates(self.path)  # what killed update runs of this file left
        try:
            self.replay: ReplayProvider | None = (
                ReplayProvider(self.path, ignore=ignore, normalize=normalize, values=values)
                if self._claim is not None
                else None
            )
        except BaseException:
            self._release()
            raise
        self.live_calls = 0
        self._drifted = self.replay is None
        self._redone: set[int] = set()  # replayed calls recorded again (abandoned ones)
        self._lock = threading.Lock()
        self._sink: Any = None
        self._new_path: Path | None = None
        self._recorders: dict[str, Any] = {}
        self._report: UpdateReport | None = None

    @property
    def drifted(self) -> bool:
        return self._drifted

    @property
    def replayed(self) -> list[RecordedCall]:
        """The recorded calls this run has replayed (and keeps), in file order."""
        if self.replay is None:
            return []
        return [
            call for call in self.replay.consumed_calls() if call.call_index not in self._redone
        ]

    @property
    def report(self) -> UpdateReport | None:
        """How :meth:`finish` settled the file (None before)."""
        return self._report

    def provider_for(self, api: str, original: Any) -> Any:
        """What the registry hands out for ``api`` inside the scope."""
        return _UpdatingProvider(self, api, original)

    def take_replayed(
        self, model: Model, context: Context, options: StreamOptions | None
    ) -> RecordedCall | None:
        """The recorded call this request replays, or None once the session has drifted (this
        request drifting makes it so). A recorded call that was abandoned (its run died inside
        it and ``recordings recover`` closed it, or its consumer stopped reading) is not
        replayed: it drifts, so the call is made live and recorded whole."""
        with self._lock:
            if self._drifted:
                return None
            assert (
                self.replay is not None
            )  # not drifted: _drifted starts True when there is no replay
            try:
                call = self.replay.take(model, context, options)
            except ReplayMismatch:
                self._drifted = True
                return None
            if call.outcome == "abandoned":
                self._redone.add(call.call_index)
                self._drifted = True
                return None
            return call

    def assert_consumed(self) -> None:
        """Raise :class:`ReplayMismatch` when the run did not drift and left recorded calls of
        its session unused: the file stays as it was, and its next replay would fail."""
        if self.replay is not None and not self._drifted:
            self.replay.assert_consumed()

    def recorder_for(self, api: str, original: Any) -> Any:
        from ..file.sink import RecordingSink
        from ..record.recorder import RecordingProvider

        with self._lock:
            if self._sink is None:
                self._new_path = self._new_file()
                self._sink = RecordingSink(self._new_path)
            recorder = self._recorders.get(api)
            if recorder is None or recorder.wrapped_provider is not original:
                recorder = self._recorders[api] = RecordingProvider(original, self._sink)
            self.live_calls += 1
            return recorder

    def _new_file(self) -> Path:
        """A fresh name for the new calls beside the recording (the sink creates the file)."""
        folder = self.path.parent
        try:
            make_private_folders(folder)
            remove_abandoned_updates(self.path)
            # The process id in the name lets the next run tell a killed run's file at once.
            descriptor, name = tempfile.mkstemp(
                prefix=f".{self.path.name}.{os.getpid()}-", suffix=UPDATE_SUFFIX, dir=folder
            )
        except OSError as error:
            raise RecordingFileError(
                self.path,
                f"cannot record the drifted call: the folder {folder} cannot be written "
                f"({error.strerror or error}); the recording is left as it was. Make the folder "
                "writable, or replay instead of updating",
                kind="unreadable",
            ) from None
        os.close(descriptor)
        os.unlink(name)  # the sink creates it (0600, header first) and refuses to overwrite
        return Path(name)

    def finish(self, ended: str | None = None) -> UpdateReport:
        """Settle the file once (later calls return the same report): rewrite it when the run
        drifted and ended normally (``ended`` None), else leave it as it was. ``ended`` says
        how the run ended otherwise (``"an exception (ValueError)"``, ``"exit status 1"``)."""
        with self._lock:
            if self._report is not None:
                return self._report
            saved: Path | None = None
            try:
                if self._sink is not None:
                    self._sink.close()
                report = self._settle(ended)
                saved = report.saved_to
            except BaseException:  # Ctrl-C while settling: the old file is still there
                report = UpdateReport(
                    self.path, changed=False, unchanged_because="the update was interrupted"
                )
                raise
            finally:
                self._report = report
                if self._new_path is not None and saved != self._new_path:
                    with contextlib.suppress(FileNotFoundError):
                        self._new_path.unlink()
                self._release()
            return report

    def _release(self) -> None:
        if self._claim is not None:
            self._claim.release()
            self._claim = None

    def _settle(self, ended: str | None) -> UpdateReport:
        new = self._new_calls()
        replayed = len(self.replayed)
        if isinstance(new, str):  # the new calls cannot be read back: keep them as they are
            return self._failed(new, self.live_calls)
        new_header, new_calls = new
        if ended is not None:
            return UpdateReport(
                self.path,
                False,
                replayed,
                recorded=len(new_calls),
                unchanged_because=f"the run ended with {ended}",
            )
        if not self._drifted:
            return UpdateReport(
                self.path,
                False,
                replayed,
                unchanged_because=f"nothing drifted ({_plural(replayed)} replayed)",
            )
        data, kept, dropped = self._rewritten(new_header, new_calls)
        try:
            remove_leftovers(self.path)
            if self._claim is None:
                create_exclusively(self.path, data)
            elif not self._claim.unchanged():
                return self._failed(
                    "another program changed or replaced it while this run was updating it",
                    len(new_calls),
                )
            else:
                replace_atomically(self.path, data, self._claim.mode)
        except FileExistsError:
            return self._failed(
                "another run created it while this run was recording it", len(new_calls)
            )
        except OSError as error:
            return self._failed(f"cannot write it: {error.strerror or error}", len(new_calls))
        return UpdateReport(
            self.path, True, replayed, kept=kept, recorded=len(new_calls), dropped=dropped
        )

    def _new_calls(
        self,
    ) -> tuple[dict[str, Any] | None, list[tuple[list[dict[str, Any]], Any]]] | str:
        """The header and the rows and resolved context of each new call, in order (or the
        reason, when the file of new calls does not read back whole)."""
        if self._new_path is None:
            return None, []
        from ..file.reader import read_recording_file

        try:
            recording = read_recording_file(self._new_path)
            header, rows = _calls_of(self._new_path, None)
        except RecordingFileError as error:
            return f"its new calls did not all end ({error.reason})"
        return header, [(rows[call.call_index], call.context) for call in recording.calls]

    def _rewritten(
        self, new_header: dict[str, Any] | None, new_calls: list[tuple[list[dict[str, Any]], Any]]
    ) -> tuple[bytes, int, int]:
        """The updated file (see the module docstring), with the count of recorded calls it
        keeps and drops: the run's calls (replayed, then new) as one session where the first
        session it followed stood, every context written again against the new numbering
        (``format.rewrite_rows``), in the version of the file being updated."""
        replay = self.replay
        calls = replay.recording.calls if replay is not None else []
        consumed = {call.call_index for call in self.replayed}
        followed = replay.followed_sessions() if replay is not None else []
        several = len({call.session for call in calls}) > 1
        kept = {
            call.call_index
            for call in calls
            if call.call_index in consumed or (several and call.session not in followed)
        }
        header, rows = _calls_of(self.path, kept) if replay is not None else (None, {})
        run = [
            (rows[call.call_index], call.context) for call in calls if call.call_index in consumed
        ]
        run += [(_in_session(call_rows, followed), context) for call_rows, context in new_calls]
        ordered: list[tuple[list[dict[str, Any]], Any]] = []
        placed = False
        for call in calls:
            if call.session in followed:
                if not placed:
                    ordered.extend(run)
                    placed = True
            elif call.call_index in kept:
                ordered.append((rows[call.call_index], call.context))
        if not placed:
            ordered.extend(run)
        written = rewrite_rows(
            header or new_header or header_row(),
            ((rows_[0], context, rows_[1:]) for rows_, context in ordered),
        )
        return written, len(kept), len(calls) - len(kept)

    def _failed(self, reason: str, recorded: int) -> UpdateReport:
        """Leave the recording as it was and keep the new calls in a file of their own."""
        saved: Path | None = None
        if self._new_path is not None and self._new_path.exists():
            stem = self.path.name.removesuffix(".jsonl")
            token = self._new_path.name[len(self.path.name) + 2 : -len(UPDATE_SUFFIX)] or "new"
            target = self.path.with_name(f"{stem}.unsaved-{token}.jsonl")
            with contextlib.suppress(OSError):
                os.link(self._new_path, target)  # never over an existing file
                saved = target
            if saved is not None:
                with contextlib.suppress(FileNotFoundError):
                    self._new_path.unlink()
            else:  # cannot even link: the hidden file stays, named in the report
                saved = self._new_path
        return UpdateReport(
            self.path, False, len(self.replayed), recorded=recorded, failed=reason, saved_to=saved
        )


def ended_by(kind: type[BaseException]) -> str:
    """How a run that raised an exception of ``kind`` ended, in the words of its report."""
    if issubclass(kind, KeyboardInterrupt):
        return "Ctrl-C (KeyboardInterrupt)"
    return f"an exception ({kind.__name__})"


def _in_session(rows: list[dict[str, Any]], followed: list[str | None]) -> list[dict[str, Any]]:
    """A new call's rows, its request moved into the first session the run followed (``None``:
    a file's implicit session, which writes no ``session`` field); unchanged when the run
    followed none (then its calls form a session of their own)."""
    if not followed:
        return rows
    request = {name: value for name, value in rows[0].items() if name != "session"}
    if followed[0] is not None:
        request["session"] = followed[0]
    return [request, *rows[1:]]


class _UpdatingProvider:
    """Replays while the session matches, then calls ``original`` through a recorder."""

    def __init__(self, session: UpdateSession, api: str, original: Any) -> None:
        self._session, self._api, self._original = session, api, original
        self.requires_credentials = getattr(original, "requires_credentials", True)

    def stream(
        self, model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        return self._call("stream", model, context, options)

    def stream_simple(
        self, model: Model, context: Context, options: Any = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        return self._call("stream_simple", model, context, options)

    async def _call(
        self, method: str, model: Model, context: Context, options: Any
    ) -> AsyncIterator[AssistantMessageEvent]:
        session = self._session
        call = session.take_replayed(model, context, options)
        if call is not None:
            assert session.replay is not None  # a replayed call comes from the replay
            async for event in session.replay.serve(call):
                yield event
            return
        if self._original is None:
            raise LookupError(
                f"no provider registered for api '{self._api}' to record the drifted call"
            )
        recorder = session.recorder_for(self._api, self._original)
        async for event in getattr(recorder, method)(model, context, options):
            yield event


def _calls_of(
    path: Path, wanted: set[int] | None
) -> tuple[dict[str, Any] | None, dict[int, list[dict[str, Any]]]]:
    """The header row and the rows of each call (only ``wanted`` ones, if given) of a file the
    strict reader has accepted, in file order."""
    header = None
    calls: dict[int, list[dict[str, Any]]] = {}
    with open(path, "rb") as handle:
        for _number, row in iter_rows(path, handle):
            if row.get("type") == HEADER:
                header = row
                continue
            index = row["call_index"]
            if wanted is None or index in wanted:
                calls.setdefault(index, []).append(row)
    return header, calls


# ============================================================================ a process as one run


class _ProcessRun:
    """The update run of a whole process (``record_replay.mode=update``), settled at its end.

    How the process ends comes from :class:`.process_end.ProcessEnd` (an ``atexit`` handler
    cannot see the exit status): an uncaught exception (``sys.last_type``, set before
    ``atexit`` runs; Ctrl-C included), the ``SystemExit`` that ended it, or a normal end; or
    from the status the ``openprogram`` command returns (:func:`finish_process_update`). An
    end that cannot be seen is not taken as normal. A process killed by a signal never runs
    ``atexit`` and leaves the file as it was."""

    def __init__(self, session: UpdateSession, say: Callable[[str], None], end: ProcessEnd) -> None:
        self.session = session
        self.pid = os.getpid()
        self._say = say
        self._end = end

    def ended(self, exit_status: int | None) -> str | None:
        last = getattr(sys, "last_type", None)
        if isinstance(last, type) and issubclass(last, BaseException):
            return ended_by(last)
        status = exit_status if exit_status is not None else self._end.exit_status()
        if status is None:
            return UNSEEN_EXIT
        if status:
            return f"exit status {status}" + (" (interrupted)" if status == 130 else "")
        return None

    def finish(self, exit_status: int | None) -> UpdateReport | None:
        if os.getpid() != self.pid:  # a forked child: the parent settles the file
            return None
        already = self.session.report is not None
        report = self.session.finish(self.ended(exit_status))
        if not already and (report.changed or report.failed or report.recorded or report.replayed):
            self._say(report.message)
        return report

    def at_exit(self) -> None:
        try:
            report = self.finish(None)
        except Exception as error:  # noqa: BLE001 - never a traceback at exit; the file is as it was
            self._say(
                f"{self.session.path}: could not be updated: {type(error).__name__}: {error}; it is left as it was"
            )
            report = None
            failed = True
        else:
            failed = report is not None and report.failed is not None
        if failed:
            # The process was ending normally, so its status would be 0: a rewrite that failed
            # must not pass for success. atexit cannot change the status but by ending here.
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(1)


_process_run: _ProcessRun | None = None
_process_end: ProcessEnd | None = None


def _stderr(message: str) -> None:
    with contextlib.suppress(Exception):
        print(f"openprogram: recording {message}", file=sys.stderr, flush=True)


def watch_process(session: UpdateSession, say: Callable[[str], None] = _stderr) -> None:
    """Make the whole process one update run: settle ``session`` when the process ends, by how
    it ends (see :class:`_ProcessRun`), and say the outcome on stderr."""
    global _process_run, _process_end
    if _process_end is None:  # one watch of the process's end, whatever runs it settles
        _process_end = ProcessEnd()
        _process_end.watch()
    run = _process_run = _ProcessRun(session, say, _process_end)
    atexit.register(run.at_exit)


def finish_process_update(exit_status: int) -> UpdateReport | None:
    """Settle the process's update run now, with the exit status the process is about to end
    with (the ``openprogram`` command calls it before returning); None when there is none."""
    run = _process_run
    if run is None:
        return None
    return run.finish(exit_status)
