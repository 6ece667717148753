"""Mode ``update``: replay what still matches, record from the first call that drifts.

When one prompt of a 40-call agent test changes, re-recording everything costs 40 live calls
and 39 answers that may now differ from the reviewed ones. In ``update`` mode the calls that
match are replayed; from the first call that does not match (or runs past the recording), that
call and every later one go to the live provider and are recorded into a temporary file beside
the recording. When the scope ends normally, the recording is replaced atomically by the
replayed calls followed by the new ones (calls never reached are dropped, ``call_index``
renumbered from 0, the file's mode kept; in a recording of several sessions, the sessions this
run did not follow are kept as they were); when nothing drifted, the file is left byte for byte
as it was; when the scope ends with an exception, the new calls are thrown away.
See ``docs/tutorial.md``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import stat
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...providers.types import AssistantMessageEvent, Context, Model, StreamOptions
from ..file.atomic import replace_atomically
from ..file.format import HEADER, header_row, iter_rows, rewrite_rows
from ..file.reader import RecordedCall
from ..replay.differences import ReplayMismatch

__all__ = ["ABANDONED_AFTER_SECONDS", "UpdateSession", "remove_abandoned_updates"]


#: An update file nobody holds open and nobody wrote to for this long was left by an update
#: run that was killed: an idle live run keeps its writer lock, so age alone never decides.
ABANDONED_AFTER_SECONDS = 60.0


def remove_abandoned_updates(path: Path) -> list[Path]:
    """Delete the temporary files (``.NAME.*.update`` beside ``path``) that killed ``update``
    runs left behind: regular files of this user that no live process is recording into and
    that were not written to for a minute. Returns the files it removed."""
    removed = []
    now = time.time()
    for candidate in path.parent.glob(f".{glob.escape(path.name)}.*.update"):
        try:
            info = candidate.lstat()
        except OSError:
            continue
        if (
            not stat.S_ISREG(info.st_mode)
            or info.st_uid != os.getuid()
            or now - info.st_mtime < ABANDONED_AFTER_SECONDS
            or _maybe_live(candidate)
        ):
            continue
        with contextlib.suppress(FileNotFoundError):
            candidate.unlink()
            removed.append(candidate)
    return removed


def _maybe_live(path: Path) -> bool:
    from ..file.writer_lock import is_being_recorded

    try:
        return is_being_recorded(path)
    except OSError:  # cannot tell: leave it
        return True


class UpdateSession:
    """One ``update`` scope over one recording file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        ignore: Iterable[str] = (),
        normalize: Iterable[Sequence[str]] = (),
        values: Mapping[str, str] | None = None,
    ) -> None:
        from ..replay.replayer import ReplayProvider

        self.path = Path(path)
        self.replay = (
            ReplayProvider(self.path, ignore=ignore, normalize=normalize, values=values)
            if os.path.lexists(self.path)
            else None
        )
        self.replayed: list[RecordedCall] = []
        self.live_calls = 0
        self._drifted = self.replay is None
        self._lock = threading.Lock()
        self._sink: Any = None
        self._new_path: Path | None = None
        self._recorders: dict[str, Any] = {}

    @property
    def drifted(self) -> bool:
        return self._drifted

    def provider_for(self, api: str, original: Any) -> Any:
        """What the registry hands out for ``api`` inside the scope."""
        return _UpdatingProvider(self, api, original)

    def take_replayed(self, model: Model, context: Context, options: StreamOptions | None) -> RecordedCall | None:
        """The recorded call this request replays, or None once the session has drifted (this
        request drifting makes it so)."""
        with self._lock:
            if self._drifted:
                return None
            assert self.replay is not None  # not drifted: _drifted starts True when there is no replay
            try:
                call = self.replay.take(model, context, options)
            except ReplayMismatch:
                self._drifted = True
                return None
            self.replayed.append(call)
            return call

    def recorder_for(self, api: str, original: Any) -> Any:
        from ..file.sink import RecordingSink
        from ..record.recorder import RecordingProvider

        with self._lock:
            if self._sink is None:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                remove_abandoned_updates(self.path)
                descriptor, name = tempfile.mkstemp(
                    prefix=f".{self.path.name}.", suffix=".update", dir=self.path.parent
                )
                os.close(descriptor)
                os.unlink(name)  # the sink creates it (0600, header first) and refuses to overwrite
                self._new_path = Path(name)
                self._sink = RecordingSink(self._new_path)
            recorder = self._recorders.get(api)
            if recorder is None or recorder.wrapped_provider is not original:
                recorder = self._recorders[api] = RecordingProvider(original, self._sink)
            self.live_calls += 1
            return recorder

    def finish(self, succeeded: bool) -> None:
        """Write the updated recording (see the module docstring), or throw the new calls away."""
        try:
            if self._sink is not None:
                self._sink.close()
            if not succeeded:
                return
            kept = self._kept_calls()
            unchanged = self.replay is not None and len(kept) == len(self.replay.recording.calls)
            if not self._drifted and unchanged:
                return  # nothing changed: the file stays byte for byte as it was
            self._write_updated(kept)
        finally:
            if self._new_path is not None:
                with contextlib.suppress(FileNotFoundError):
                    self._new_path.unlink()

    def _kept_calls(self) -> list[int]:
        """The ``call_index`` of every recorded call the updated file keeps, in file order: the
        replayed ones, and in a file of several sessions (several commands recorded into one
        recording) every call of the sessions this run did not follow. Unreached calls of the
        followed session are dropped: the run went another way."""
        if self.replay is None:
            return []
        replayed = {call.call_index for call in self.replayed}
        calls = self.replay.recording.calls
        several = len({call.session for call in calls}) > 1
        followed = {call.session for call in self.replayed}
        return [
            call.call_index
            for call in calls
            if call.call_index in replayed or (several and call.session not in followed)
        ]

    def _write_updated(self, kept_indexes: list[int]) -> None:
        """The recording, replaced by its kept calls and then the new ones, renumbered; each
        context is written again against the new numbering (``format.rewrite_rows``), in the
        version of the file being updated."""
        header, kept = _calls_of(self.path, set(kept_indexes)) if self.replay else (None, {})
        new_header, new_calls = _calls_of(self._new_path, None) if self._new_path is not None else (None, {})
        assert self.replay is None or header is not None  # the strict reader accepted the file
        calls = self.replay.recording.calls if self.replay is not None else []
        renumbered = [(kept[index], calls[index].context) for index in kept_indexes]
        if self._new_path is not None and new_calls:
            from ..file.reader import read_recording_file

            new_recording = read_recording_file(self._new_path)
            renumbered += [(new_calls[index], new_recording.calls[index].context) for index in sorted(new_calls)]
        mode = stat.S_IMODE(os.stat(self.path).st_mode) if self.replay is not None else 0o600
        written = rewrite_rows(
            header or new_header or header_row(),
            ((rows[0], context, rows[1:]) for rows, context in renumbered),
        )
        replace_atomically(self.path, written, mode)


class _UpdatingProvider:
    """Replays while the session matches, then calls ``original`` through a recorder."""

    def __init__(self, session: UpdateSession, api: str, original: Any) -> None:
        self._session, self._api, self._original = session, api, original
        self.requires_credentials = getattr(original, "requires_credentials", True)

    def stream(self, model: Model, context: Context, options: StreamOptions | None = None) -> AsyncIterator[AssistantMessageEvent]:
        return self._call("stream", model, context, options)

    def stream_simple(self, model: Model, context: Context, options: Any = None) -> AsyncIterator[AssistantMessageEvent]:
        return self._call("stream_simple", model, context, options)

    async def _call(self, method: str, model: Model, context: Context, options: Any) -> AsyncIterator[AssistantMessageEvent]:
        session = self._session
        call = session.take_replayed(model, context, options)
        if call is not None:
            assert session.replay is not None  # a replayed call comes from the replay
            async for event in session.replay.serve(call):
                yield event
            return
        if self._original is None:
            raise LookupError(f"no provider registered for api '{self._api}' to record the drifted call")
        recorder = session.recorder_for(self._api, self._original)
        async for event in getattr(recorder, method)(model, context, options):
            yield event


def _calls_of(path: Path, wanted: set[int] | None) -> tuple[dict[str, Any] | None, dict[int, list[dict[str, Any]]]]:
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

