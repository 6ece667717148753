"""Recording at the provider boundary: :class:`RecordingProvider` wraps a provider and writes
every request and event to a JSONL recording file through a shared :class:`RecordingSink`.

Design points (contract sections 4, 5 and 7):

* **Whole lines.** Every line is one ``os.write`` on an ``O_APPEND`` descriptor while holding
  both a thread lock and ``flock``; a crash loses at most the line being written.
* **One total order of calls.** ``call_index`` is allocated under the ``flock`` without
  re-reading the file: the sink remembers the size it last saw, and only when another writer
  appended since does it scan those new bytes for request lines. Allocation is therefore
  amortised linear in the file, whatever its length.
* **Linear size.** An event's ``partial`` is written as a ``partial_patch`` against the
  previous one (see :mod:`.partial_patch`), computed on the redacted values.
* **Linear redaction.** The growing text of a streamed block is redacted incrementally: the
  prefix that no secret pattern can still span (``redaction.safe_cut``) is redacted once, only
  the tail is redacted again at every event. Deltas are redacted in the context of the text
  before them, so a credential split across chunks ("Bearer " + "abc123...") is still caught.
* **Every exit path ends the call.** Normal end, provider exception, synchronous start
  failure, cancellation, early close and a consumer that stops at the terminal event each
  leave exactly one ``call_end`` with the right outcome.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import stat
import threading
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from .partial_patch import compute_patch
from .recording_format import (
    RECORDING_FORMAT_VERSION,
    RecordingFileError,
    encode_line,
    is_plain_int,
)
from .redaction import (
    PLACEHOLDER,
    REDACTION_VERSION,
    SECRET_FIELD_NAMES,
    redact_text,
    remove_secret_values,
    safe_cut,
)
from .types import (
    TERMINAL_EVENT_TYPES,
    AssistantMessageEvent,
    Context,
    Model,
    SimpleStreamOptions,
    StreamOptions,
)

__all__ = [
    "PLACEHOLDER",
    "RECORDING_FORMAT_VERSION",
    "RecordingFileError",
    "RecordingProvider",
    "RecordingSink",
    "SECRET_FIELD_NAMES",
    "remove_secret_values",
    "request_payloads",
]

_READ_CHUNK = 1 << 20


# ============================================================================ the sink


class RecordingSink:
    """The shared, thread-safe and process-safe writer of one recording file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        self._lock = threading.Lock()
        self._fd = -1
        self._pid = -1
        self._known_size = 0  # bytes of the file this sink has seen (written or scanned)
        self._line_count = 0  # newline-terminated lines among them, for error messages
        self._next_index = 0  # the call_index the next request gets
        self._broken: RecordingFileError | None = None
        self._open()

    # ---------------------------------------------------------------- public

    @property
    def path(self) -> Path:
        return self._path

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> RecordingSink:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            if self._fd >= 0 and self._pid == os.getpid():
                os.close(self._fd)
        except Exception:  # noqa: BLE001
            pass

    def begin_call(self, payloads: dict[str, Any]) -> int:
        """Write the request line of a new call and return its ``call_index``.

        The payload is encoded before the locks are taken; only the index is spliced in
        inside them, so a large context does not lengthen the critical section.
        """
        body = orjson.dumps(payloads)  # b'{"model":...}'
        with self._locked():
            size = self._sync()
            index = self._next_index
            line = b'{"type":"request","call_index":%d,%s\n' % (index, body[1:])
            self._append(line, size, consumes_index=True)
            return index

    def write_row(self, row: dict[str, Any]) -> None:
        """Append one event or call_end line."""
        line = encode_line(row)
        with self._locked():
            self._append(line, self._sync(), consumes_index=False)

    # ---------------------------------------------------------------- opening

    def _open(self) -> None:
        path = self._path
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            info = None
        except OSError as error:
            raise RecordingFileError(path, f"cannot inspect the file: {error.strerror}") from None
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise RecordingFileError(path, "is a symbolic link; refusing to record through it")
        if info is not None and not stat.S_ISREG(info.st_mode):
            raise RecordingFileError(path, "is not a regular file")
        _make_private_parents(path.parent)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as error:
            raise RecordingFileError(path, f"cannot open for writing: {error.strerror}") from None
        self._fd, self._pid = fd, os.getpid()
        self._known_size = self._line_count = self._next_index = 0
        try:
            with self._flock():
                size = os.fstat(fd).st_size
                if size == 0:
                    self._append(encode_line(_new_header()), 0, consumes_index=False)
                else:
                    self._check_header()
                    self._catch_up(size)
        except BaseException:
            os.close(fd)
            self._fd = -1
            raise

    def _check_header(self) -> None:
        """Refuse to append to anything but a version-1 recording."""
        first = b""
        offset = 0
        reader = _reader_fd(self._path)
        try:
            while b"\n" not in first:
                chunk = os.pread(reader, _READ_CHUNK, offset)
                if not chunk:
                    raise RecordingFileError(self._path, "the header line is incomplete", 1)
                first += chunk
                offset += len(chunk)
        finally:
            os.close(reader)
        line = first.split(b"\n", 1)[0]
        try:
            header = orjson.loads(line)
        except orjson.JSONDecodeError:
            header = None
        if not isinstance(header, dict) or header.get("type") != "header":
            raise RecordingFileError(
                self._path, "does not start with a recording header; refusing to append", 1
            )
        version = header.get("format_version")
        if not is_plain_int(version) or version != RECORDING_FORMAT_VERSION:
            raise RecordingFileError(
                self._path,
                f"has format_version {version!r}, this program writes "
                f"{RECORDING_FORMAT_VERSION}; refusing to append",
                1,
            )

    # ---------------------------------------------------------------- writing

    def _locked(self):
        if self._pid != os.getpid():
            self._reopen_after_fork()
        return _SinkLock(self)

    def _flock(self):
        return _FileLock(self._fd, self._path)

    def _reopen_after_fork(self) -> None:
        """A forked child must not share the parent's open file description: ``flock`` would
        then not exclude the two."""
        self._lock = threading.Lock()
        self._fd = -1
        self._open()

    def _sync(self) -> int:
        """Bring the cached state up to the file's current size and return it; the caller
        holds both locks. Usually one ``fstat``: only bytes other writers appended since
        are scanned."""
        if self._broken is not None:
            raise self._broken
        if self._fd < 0:
            raise RecordingFileError(self._path, "the recording sink is closed")
        info = os.fstat(self._fd)
        if info.st_nlink == 0:
            self._fail("the file was removed while recording")
        if info.st_size != self._known_size:
            self._catch_up(info.st_size)
        return info.st_size

    def _append(self, line: bytes, size: int, *, consumes_index: bool) -> None:
        """Append one whole line at ``size``, the end of the file; the caller holds both
        locks."""
        written = 0
        try:
            while written < len(line):
                count = os.write(self._fd, line[written:] if written else line)
                if count <= 0:
                    raise OSError(0, "the write made no progress")
                written += count
        except OSError as error:
            reason = f"cannot write: {error.strerror or error}"
            if written or not consumes_index:
                self._fail(reason)  # a partial or missing line: the file is now incomplete
            raise RecordingFileError(self._path, reason, self._line_count + 1) from None
        self._known_size = size + len(line)
        self._line_count += 1
        if consumes_index:
            self._next_index += 1

    def _fail(self, reason: str) -> None:
        self._broken = RecordingFileError(
            self._path, f"{reason}; the recording is incomplete and takes no more calls"
        )
        raise self._broken

    def _catch_up(self, size: int) -> None:
        """Scan the bytes other writers appended since we last looked, for request lines."""
        start = self._known_size
        if size < start:
            self._fail("the file shrank while recording")
        reader = _reader_fd(self._path)
        try:
            pending = b""
            offset = start
            while offset < size:
                chunk = os.pread(reader, min(_READ_CHUNK, size - offset), offset)
                if not chunk:
                    break
                offset += len(chunk)
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                for line in lines:
                    self._line_count += 1
                    self._note_line(line)
        finally:
            os.close(reader)
        if pending or offset != size:
            self._fail(
                f"line {self._line_count + 1} was left incomplete by an interrupted writer"
            )
        self._known_size = size

    def _note_line(self, line: bytes) -> None:
        if b'"request"' not in line:
            return
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            self._fail(f"line {self._line_count} is not valid JSON")
        if isinstance(row, dict) and row.get("type") == "request":
            index = row.get("call_index")
            if is_plain_int(index) and index >= self._next_index:
                self._next_index = index + 1


class _SinkLock:
    """Thread lock, then ``flock``: threads of one process share the descriptor, so
    ``flock`` alone would not exclude them."""

    __slots__ = ("_sink", "_file_lock")

    def __init__(self, sink: RecordingSink) -> None:
        self._sink = sink

    def __enter__(self) -> None:
        self._sink._lock.acquire()
        try:
            self._file_lock = self._sink._flock()
            self._file_lock.__enter__()
        except BaseException:
            self._sink._lock.release()
            raise

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._file_lock.__exit__(*exc_info)
        finally:
            self._sink._lock.release()


class _FileLock:
    __slots__ = ("_fd", "_path")

    def __init__(self, fd: int, path: Path) -> None:
        self._fd, self._path = fd, path

    def __enter__(self) -> None:
        if self._fd < 0:
            raise RecordingFileError(self._path, "the recording sink is closed")
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, *exc_info: object) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)


def _reader_fd(path: Path) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:
        raise RecordingFileError(path, f"cannot read: {error.strerror}") from None


def _make_private_parents(folder: Path) -> None:
    """Create missing parent folders owner-only (0700); existing ones are left alone."""
    missing: list[Path] = []
    current = folder
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            continue
        except OSError as error:
            raise RecordingFileError(
                directory, f"cannot create the folder: {error.strerror}"
            ) from None
        os.chmod(directory, 0o700)


def _new_header() -> dict[str, Any]:
    from .. import __version__

    return {
        "type": "header",
        "format_version": RECORDING_FORMAT_VERSION,
        "recording_id": uuid.uuid4().hex,
        "created_at": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "redaction_version": REDACTION_VERSION,
        "openprogram_version": __version__,
    }


# ============================================================================ redaction


def request_payloads(
    model: Model, context: Context, options: StreamOptions | None
) -> dict[str, Any]:
    """The redacted ``model``, ``context`` and ``options`` of a request, as recorded and as
    compared on replay (runtime-only options are excluded by the types themselves)."""
    return {
        "model": remove_secret_values(model.model_dump(mode="json")),
        "context": remove_secret_values(context.model_dump(mode="json")),
        "options": None
        if options is None
        else remove_secret_values(options.model_dump(mode="json")),
    }


class _GrowingText:
    """Redaction of one string that grows by appending, in time linear in what is new.

    ``stable_raw_length`` characters of the raw text lie before a point no secret pattern can
    span (``safe_cut``); their redaction ``stable`` never changes, so only the rest is redacted
    again each time.
    """

    __slots__ = ("previous", "stable_raw_length", "stable", "tail_redacted")

    def __init__(self) -> None:
        self.previous = ""
        self.stable_raw_length = 0
        self.stable = ""
        self.tail_redacted = ""

    def extend_to(self, text: str) -> bool:
        """Move to ``text``; False (state reset) when it does not extend the previous one."""
        extends = text.startswith(self.previous)
        if not extends:
            self.previous, self.stable_raw_length, self.stable = "", 0, ""
        tail = text[self.stable_raw_length :]
        cut = safe_cut(tail)
        if cut:
            self.stable += redact_text(tail[:cut])
            self.stable_raw_length += cut
            tail = tail[cut:]
        self.tail_redacted = redact_text(tail)
        self.previous = text
        return extends

    def redacted(self) -> str:
        return self.stable + self.tail_redacted


class _DeltaContext:
    """Redacts the deltas of one streamed block in the context of the text before them.

    Only the part after the last safe cut is kept, so the work per delta is bounded by the
    length of a secret, not of the text. The redacted delta is what the redacted text gained:
    identical to the delta for ordinary text, the placeholder where a secret completed.
    """

    __slots__ = ("pending", "pending_redacted")

    def __init__(self) -> None:
        self.pending = ""
        self.pending_redacted = ""

    def redact_delta(self, delta: str) -> str:
        text = self.pending + delta
        cut = safe_cut(text)
        settled = redact_text(text[:cut]) if cut else ""
        self.pending = text[cut:]
        new_pending_redacted = redact_text(self.pending)
        before = self.pending_redacted
        after = settled + new_pending_redacted
        self.pending_redacted = new_pending_redacted
        if after.startswith(before):
            return after[len(before) :]
        return after[_common_prefix_length(before, after) :]


def _common_prefix_length(a: str, b: str) -> int:
    limit = min(len(a), len(b))
    index = 0
    while index < limit and a[index] == b[index]:
        index += 1
    return index


_TEXT_FIELDS = ("text", "thinking")


class _CallRedactor:
    """The incremental redaction state of one call's event stream."""

    def __init__(self) -> None:
        self._texts: dict[tuple[int, str], _GrowingText] = {}
        self._deltas: dict[tuple[str, int], _DeltaContext] = {}

    def event(self, dump: dict[str, Any]) -> dict[str, Any]:
        """The redacted dump of one event, ``partial`` included (same result as
        ``remove_secret_values`` on the whole dump, but without re-scanning old text)."""
        partial = dump.pop("partial", None)
        kind = dump.get("type")
        delta = dump.get("delta")
        if type(delta) is str and type(kind) is str and kind.endswith("_delta"):
            key = (kind, dump.get("content_index"))
            context = self._deltas.get(key)
            if context is None:
                context = self._deltas[key] = _DeltaContext()
            dump["delta"] = context.redact_delta(delta)
        redacted = remove_secret_values(dump)
        if partial is not None:
            redacted["partial"] = self._partial(partial)
        return redacted

    def _partial(self, partial: Any) -> Any:
        content = partial.get("content") if type(partial) is dict else None
        if type(content) is not list:
            return remove_secret_values(partial)
        lifted: list[tuple[int, str, str]] = []
        blocks = []
        for index, block in enumerate(content):
            if type(block) is dict:
                for field in _TEXT_FIELDS:
                    value = block.get(field)
                    if type(value) is str and value:
                        block = {**block, field: ""}
                        lifted.append((index, field, value))
            blocks.append(block)
        if not lifted:
            return remove_secret_values(partial)
        redacted = remove_secret_values({**partial, "content": blocks})
        for index, field, value in lifted:
            growing = self._texts.get((index, field))
            if growing is None:
                growing = self._texts[(index, field)] = _GrowingText()
            growing.extend_to(value)
            redacted["content"][index][field] = growing.redacted()
        return redacted


# ============================================================================ one call


class _CallRecorder:
    """Writes the event and call_end lines of one call."""

    def __init__(self, sink: RecordingSink, call_index: int) -> None:
        self.sink = sink
        self.call_index = call_index
        self.event_count = 0
        self.ended = False
        self._redactor = _CallRedactor()
        self._previous_partial: Any = None

    def write_event(self, event: AssistantMessageEvent) -> None:
        row_event = self._redactor.event(event.model_dump(mode="json"))
        partial = row_event.get("partial")
        if partial is not None:
            if self._previous_partial is not None:
                patch = compute_patch(self._previous_partial, partial)
                if patch is not None:
                    del row_event["partial"]
                    row_event["partial_patch"] = patch
            self._previous_partial = partial
        self.sink.write_row(
            {
                "type": "event",
                "call_index": self.call_index,
                "event_index": self.event_count,
                "event": row_event,
            }
        )
        self.event_count += 1

    def end(self, outcome: str) -> None:
        if self.ended:
            return
        self.ended = True
        row: dict[str, Any] = {
            "type": "call_end",
            "call_index": self.call_index,
            "event_count": self.event_count,
        }
        if outcome != "complete":
            row["outcome"] = outcome
        self.sink.write_row(row)

    def end_quietly(self, outcome: str) -> None:
        """End on a failure path: the original exception must reach the caller unchanged, so
        a write error here is dropped (the call then has no call_end, which the strict reader
        reports)."""
        try:
            self.end(outcome)
        except RecordingFileError:
            pass


# ============================================================================ the provider


class RecordingProvider:
    """A transparent provider that records every call of the provider it wraps."""

    def __init__(self, provider: Any, recording_path_or_sink: str | os.PathLike[str] | RecordingSink) -> None:
        self._provider = provider
        if isinstance(recording_path_or_sink, RecordingSink):
            self._sink = recording_path_or_sink
        else:
            self._sink = RecordingSink(recording_path_or_sink)

    @property
    def recording_path(self) -> Path:
        return self._sink.path

    @property
    def requires_credentials(self) -> bool:
        return getattr(self._provider, "requires_credentials", True)

    @property
    def wrapped_provider(self) -> Any:
        return self._provider

    @property
    def sink(self) -> RecordingSink:
        return self._sink

    def stream(
        self, model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        return self._record("stream", model, context, options)

    def stream_simple(
        self, model: Model, context: Context, options: SimpleStreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        return self._record("stream_simple", model, context, options)

    async def _record(
        self, method: str, model: Model, context: Context, options: StreamOptions | None
    ) -> AsyncIterator[AssistantMessageEvent]:
        call = _CallRecorder(self._sink, self._sink.begin_call(request_payloads(model, context, options)))
        try:
            inner = getattr(self._provider, method)(model, context, options)
            iterator = inner.__aiter__()
        except asyncio.CancelledError:
            call.end_quietly("cancelled")
            raise
        except BaseException:
            call.end_quietly("error")
            raise
        try:
            while True:
                try:
                    event = await iterator.__anext__()
                except StopAsyncIteration:
                    # The provider broke the stream contract (no terminal event): an error.
                    call.end("error")
                    return
                call.write_event(event)
                if event.type in TERMINAL_EVENT_TYPES:
                    call.end("complete")  # before the consumer sees it: it may stop here
                    await _close_quietly(iterator)
                    yield event
                    return
                yield event
        except asyncio.CancelledError:
            call.end_quietly("cancelled")
            raise
        except GeneratorExit:
            call.end_quietly("abandoned")
            raise
        except BaseException:
            call.end_quietly("error")
            raise
        finally:
            await _close_quietly(iterator)


async def _close_quietly(iterator: Any) -> None:
    aclose = getattr(iterator, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except Exception:  # noqa: BLE001 - closing must not mask the call's own outcome
        pass
