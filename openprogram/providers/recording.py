"""Recording at the provider boundary: :class:`RecordingProvider` wraps a provider and writes
every request and event to a JSONL recording file through a shared :class:`RecordingSink`.

Design points (contract sections 4, 5 and 7):

* **Whole lines.** Every line is one ``os.write`` of the whole line on an ``O_APPEND``
  descriptor under the sink's thread lock; the kernel never interleaves two such writes, so
  concurrent writers (threads or processes) cannot mix their lines, and a crash loses at most
  the line being written. Request lines are also written under ``flock``.
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
from collections.abc import AsyncIterator, Callable
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
from .recording_liveness import hold_writer_lock, release_writer_lock
from .redaction import (
    PLACEHOLDER,
    REDACTION_VERSION,
    SECRET_FIELD_NAMES,
    Redactor,
    current_redactor,
    remove_secret_values,
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

# Bumped in a forked child, so that a sink notices (with an int comparison, not a system
# call per line) that it must reopen its file before writing.
_fork_generation = 0


def _count_fork() -> None:
    global _fork_generation
    _fork_generation += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_count_fork)


# ============================================================================ the sink


class RecordingSink:
    """The shared, thread-safe and process-safe writer of one recording file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        self._lock = threading.Lock()
        self._fd = -1
        self._pid = -1
        self._generation = _fork_generation
        self._known_size = 0  # bytes of the file this sink has seen (written or scanned)
        self._line_count = 0  # newline-terminated lines among them, for error messages
        self._next_index = 0  # the call_index the next request gets
        self._unchecked_bytes = 0  # appended by us since the last fstat (see write_line)
        self._unchecked_lines = 0
        self._broken: RecordingFileError | None = None
        self._open()

    # ---------------------------------------------------------------- public

    @property
    def path(self) -> Path:
        return self._path

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                release_writer_lock(self._fd)
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
        fd = self._acquire()
        try:
            size = self._sync()
            index = self._next_index
            line = b'{"type":"request","call_index":%d,%s\n' % (index, body[1:])
            self._append(line, size, consumes_index=True)
            return index
        finally:
            self._release(fd)

    def write_row(self, row: dict[str, Any]) -> None:
        """Append one event or call_end line."""
        self.write_line(encode_line(row))

    def write_line(self, line: bytes, *, check: bool = True) -> None:
        """Append one whole, already encoded line (newline included).

        Only request lines need ``flock`` (they allocate ``call_index``): this line is one
        ``write`` on the ``O_APPEND`` descriptor, which the kernel never interleaves with
        another, and a process catching up under ``flock`` re-reads a line it sees half
        copied. Its bytes are accounted for at the next request. ``check`` (the call's
        ``call_end``) also notices a removed file, failing the call rather than recording
        into nothing; event lines skip that ``fstat``.
        """
        if self._generation != _fork_generation:
            self._reopen_after_fork()
        with self._lock:
            fd = self._fd
            if fd < 0:
                raise RecordingFileError(self._path, "the recording sink is closed")
            if self._broken is not None:
                raise self._broken
            if check and os.fstat(fd).st_nlink == 0:
                self._fail("the file was removed while recording")
            self._append(line, None, consumes_index=False)

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
        # Read-write so that catching up reads this very file (``pread``), even if the path
        # is replaced meanwhile; every write still goes to the end (O_APPEND).
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as error:
            raise RecordingFileError(path, f"cannot open for writing: {error.strerror}") from None
        self._fd, self._pid, self._generation = fd, os.getpid(), _fork_generation
        # Marks the file as being recorded (for ``recordings delete``/``prune``) until the
        # descriptor closes, however this process ends.
        hold_writer_lock(fd)
        self._known_size = self._line_count = self._next_index = 0
        self._unchecked_bytes = self._unchecked_lines = 0
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                size = os.fstat(fd).st_size
                if size == 0:
                    self._append(encode_line(_new_header()), 0, consumes_index=False)
                else:
                    self._check_header()
                    self._catch_up(size)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        except BaseException:
            os.close(fd)
            self._fd = -1
            raise

    def _check_header(self) -> None:
        """Refuse to append to anything but a version-1 recording."""
        first = b""
        offset = 0
        while b"\n" not in first:
            chunk = os.pread(self._fd, _READ_CHUNK, offset)
            if not chunk:
                raise RecordingFileError(self._path, "the header line is incomplete", 1)
            first += chunk
            offset += len(chunk)
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

    def _acquire(self) -> int:
        """Take the thread lock, then ``flock`` (threads of one process share the descriptor,
        so ``flock`` alone would not exclude them); return the locked descriptor."""
        if self._generation != _fork_generation:
            self._reopen_after_fork()
        self._lock.acquire()
        fd = self._fd
        if fd < 0:
            self._lock.release()
            raise RecordingFileError(self._path, "the recording sink is closed")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            self._lock.release()
            raise
        return fd

    def _release(self, fd: int) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            self._lock.release()

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
        info = os.fstat(self._fd)
        if info.st_nlink == 0:
            self._fail("the file was removed while recording")
        expected = self._known_size + self._unchecked_bytes
        if info.st_size == expected:  # nobody else wrote: our unchecked lines are all there is
            self._known_size = expected
            self._line_count += self._unchecked_lines
        else:  # scan from the last known point; our own unchecked lines are scanned too
            self._catch_up(info.st_size)
        self._unchecked_bytes = self._unchecked_lines = 0
        return info.st_size

    def _append(self, line: bytes, size: int | None, *, consumes_index: bool) -> None:
        """Append one whole line at ``size``, the end of the file (None: not checked, see
        :meth:`write_line`); the caller holds both locks."""
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
        if size is None:
            self._unchecked_bytes += len(line)
            self._unchecked_lines += 1
            return
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
        pending = b""
        offset = start
        while offset < size:
            chunk = os.pread(self._fd, min(_READ_CHUNK, size - offset), offset)
            if not chunk:
                break
            offset += len(chunk)
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for line in lines:
                self._line_count += 1
                self._note_line(line)
        # An unfinished last line is another writer's event line still being copied in (event
        # lines are written without flock); it is read again, whole, next time. (If that
        # writer died instead, the next line appended completes it into one invalid line,
        # which the strict reader names.) Request lines are written under flock, so one can
        # never be unfinished here.
        self._known_size = offset - len(pending)

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
    model: Model,
    context: Context,
    options: StreamOptions | None,
    redactor: Redactor | None = None,
) -> dict[str, Any]:
    """The redacted ``model``, ``context`` and ``options`` of a request, as recorded and as
    compared on replay (runtime-only options are excluded by the types themselves)."""
    payloads = {
        "model": model.model_dump(mode="json"),
        "context": context.model_dump(mode="json"),
        "options": None if options is None else options.model_dump(mode="json"),
    }
    return (redactor or current_redactor()).remove_secret_values(payloads)


_CUT_AT = 96  # a growing tail longer than this is cut at a safe point (redacted for good)
_TEXT_FIELDS = ("text", "thinking")


class _GrowingText:
    """Redaction of one string that grows by appending, in time bounded by what is new.

    ``raw[:cut]`` lies before a point no secret pattern can span (``safe_cut``); its
    redaction ``stable`` never changes, so only the tail is redacted again at each event.
    The redacted text is ``stable + tail_redacted``.
    """

    __slots__ = (
        "raw", "cut", "stable", "tail_redacted", "pending_cut", "reset", "gained", "previous_length"
    )

    def __init__(self) -> None:
        self.raw = ""
        self.cut = 0
        self.stable = ""
        self.tail_redacted = ""
        self.pending_cut = 0
        self.reset = False
        self.gained = ""  # what the redacted text gained at the last step (see advance)
        self.previous_length = 0  # of the raw text before the last step

    def full(self) -> str:
        return self.stable + self.tail_redacted

    def prepare(
        self, text: str, safe_cut: Callable[[str], int], *, extends: bool = False
    ) -> tuple[str, str]:
        """The raw pieces to redact for ``text``: the part becoming stable and the new tail.
        ``extends`` says the caller has checked that ``text`` starts with the previous text
        (comparing a long text twice per event is what makes long answers slow)."""
        self.previous_length = len(self.raw)
        self.reset = not (extends or text.startswith(self.raw))
        if self.reset:
            self.cut, self.stable, self.tail_redacted = 0, "", ""
        tail = text[self.cut :]
        cut = safe_cut(tail) if len(tail) > _CUT_AT else 0
        self.pending_cut = cut
        self.raw = text
        return tail[:cut], tail[cut:]

    def advance(self, settled: str, tail: str, path: list[Any]) -> list[Any] | None:
        """Take the redacted pieces; return the operation that moves the redacted text from
        its previous value to the new one (None when unchanged)."""
        before = self.tail_redacted
        grown = settled + tail  # the redaction of raw[old cut:]
        if settled:
            self.stable += settled
            self.cut += self.pending_cut
        self.tail_redacted = tail
        if self.reset:
            self.gained = ""
            return ["set", path, self.full()]
        if grown == before:
            self.gained = ""
            return None
        if grown.startswith(before):
            self.gained = grown[len(before) :]
            return ["append", path, self.gained]
        # A secret completed and replaced text already recorded: the redacted delta is the
        # part after what the two redactions share.
        self.gained = grown[_common_prefix_length(before, grown) :]
        return ["set", path, self.full()]


class _DeltaContext:
    """Redacts the deltas of one streamed block in the context of the text before them.

    A credential split across chunks ("Bearer " + "abc123...") is caught: the redacted delta
    is what the redacted text gained, identical to the delta for ordinary text, the
    placeholder where a secret completed. Only the text after the last safe cut is kept.
    """

    __slots__ = ("pending", "pending_redacted", "pending_cut")

    def __init__(self) -> None:
        self.pending = ""
        self.pending_redacted = ""
        self.pending_cut = 0

    def prepare(self, delta: str, safe_cut: Callable[[str], int]) -> tuple[str, str]:
        text = self.pending + delta
        cut = safe_cut(text) if len(text) > _CUT_AT else 0
        self.pending = text[cut:]
        return text[:cut], self.pending

    def advance(self, settled: str, pending: str) -> str:
        before = self.pending_redacted
        after = settled + pending
        self.pending_redacted = pending
        if after.startswith(before):
            return after[len(before) :]
        return after[_common_prefix_length(before, after) :]


def _common_prefix_length(a: str, b: str) -> int:
    limit = min(len(a), len(b))
    index = 0
    while index < limit and a[index] == b[index]:
        index += 1
    return index


def _lift_texts(partial: dict[str, Any]) -> list[tuple[int, str, str]]:
    """Take the block texts out of ``partial`` (blanking them in place: the dump is ours).
    They are redacted and diffed incrementally; the rest, small, as a whole."""
    content = partial.get("content")
    lifted: list[tuple[int, str, str]] = []
    if type(content) is not list:
        return lifted
    for index, block in enumerate(content):
        if type(block) is dict:
            for field in _TEXT_FIELDS:
                value = block.get(field)
                if type(value) is str and value:
                    block[field] = ""
                    lifted.append((index, field, value))
    return lifted


#: Delta events whose delta is the growth of a text field of the partial.
_DERIVED_DELTAS = {"text_delta": "text", "thinking_delta": "thinking"}

#: What a message holds besides ``content``: strings, ints, None, and the usage value.
_MESSAGE_FIELDS = ("role", "api", "provider", "model", "usage", "stop_reason", "error_message", "timestamp")


def _same_message_fields(current: dict[str, Any], earlier: dict[str, Any]) -> bool:
    """The message fields other than ``content`` are unchanged: the same objects, or equal
    values of the same type (so True never passes for 1)."""
    for name in _MESSAGE_FIELDS:
        value, other = current.get(name), earlier.get(name)
        if value is not other and (type(value) is not type(other) or value != other):
            return False
    return True

#: Event fields that are literals or integers by their type, so they cannot hold a secret.
_FIXED_EVENT_FIELDS = frozenset({"type", "content_index", "reason"})


class _EventEncoder:
    """Turns one call's events into redacted ``event`` objects with ``partial_patch``.

    Per event the work is bounded by what changed: one redaction pass over the event's free
    fields, the new text tails and (only if its encoding changed) the rest of the partial.
    When only block texts grew, the patch is built directly from the growing texts;
    otherwise the full redacted partials are diffed with :func:`compute_patch`. Both are
    exact by construction (``append`` only where the new redacted text starts with the old
    one, everything else compared by its exact JSON encoding).
    """

    def __init__(self, redactor: Redactor) -> None:
        self._remove = redactor.remove_secret_values
        self._redact = redactor.redact_text
        self._safe_cut = redactor.safe_cut
        self._texts: dict[tuple[int, str], _GrowingText] = {}
        self._deltas: dict[tuple[str, Any], _DeltaContext] = {}
        self._rest_bytes: bytes | None = None
        self._rest: dict[str, Any] | None = None  # redacted, texts blanked
        self._previous: Any = None  # the previous event's partial, as an object

    def encode(self, event: AssistantMessageEvent) -> bytes:
        """The JSON of the ``event`` object of one event line."""
        previous = self._previous
        partial = getattr(event, "partial", None)
        if partial is not None:
            self._previous = partial
            if previous is not None and event.type in _DERIVED_DELTAS:
                line = self._encode_text_growth(event, partial, previous)
                if line is not None:
                    return line
        return self._encode_general(event)

    def _encode_text_growth(self, event: Any, partial: Any, previous: Any) -> bytes | None:
        """The hot path: a text or thinking delta whose partial is the previous one with the
        delta appended to its block. Content blocks and usage are immutable values that
        snapshots share until they change, so "nothing else changed" is a few identity
        checks, and the partial is never dumped. None sends the event down the general path."""
        index, delta, field = event.content_index, event.delta, _DERIVED_DELTAS[event.type]
        content, before = partial.content, previous.content
        if len(content) != len(before) or not 0 <= index < len(content):
            return None
        if not _same_message_fields(partial.__dict__, previous.__dict__):
            return None
        for position, block in enumerate(content):
            if position != index and block is not before[position]:
                return None
        block, earlier = content[index].__dict__, before[index].__dict__
        text, old_text = block.get(field), earlier.get(field)
        state = self._texts.get((index, field))
        if (
            state is None
            or type(text) is not str
            or state.raw is not old_text and state.raw != old_text
            or len(text) != len(old_text) + len(delta)
            or not text.endswith(delta)
            or not text.startswith(old_text)
            or block.keys() != earlier.keys()
            or any(value is not earlier[key] for key, value in block.items() if key != field)
        ):
            return None
        settled, tail = state.prepare(text, self._safe_cut, extends=True)
        redact = self._redact
        op = state.advance(
            redact(settled) if settled else "", redact(tail) if tail else "", ["content", index, field]
        )
        return orjson.dumps(
            {
                "type": event.type,
                "content_index": index,
                "delta": state.gained,
                "partial_patch": [op] if op is not None else [],
            }
        )

    def _encode_general(self, event: AssistantMessageEvent) -> bytes:
        dump = type(event).__pydantic_serializer__.to_python(event, mode="json")
        partial = dump.pop("partial", None)
        # A text or thinking delta is what its block's text gained: its redaction comes from
        # the block's growing text (below), with no redaction work of its own.
        derived = _DERIVED_DELTAS.get(dump.get("type")) if type(partial) is dict else None
        delta = dump.pop("delta") if derived is not None and type(dump.get("delta")) is str else None
        if delta is None:
            derived = None
        self._redact_free_fields(dump)
        if type(partial) is not dict:
            if partial is not None:
                dump["partial"] = self._remove(partial)
            return orjson.dumps(dump)
        lifted = _lift_texts(partial)
        rest_bytes = orjson.dumps(partial)
        rest_changed = rest_bytes != self._rest_bytes
        if rest_changed:
            previous_full = self._full() if self._rest is not None else None
            self._rest, self._rest_bytes = self._remove(partial), rest_bytes
        texts, redact, cut = self._texts, self._redact, self._safe_cut
        ops: list[Any] = []
        for index, field, value in lifted:
            key = (index, field)
            state = texts.get(key)
            if state is None:
                state = texts[key] = _GrowingText()
            settled, tail = state.prepare(value, cut)
            op = state.advance(
                redact(settled) if settled else "", redact(tail) if tail else "", ["content", index, field]
            )
            if op is not None:
                ops.append(op)
        if derived is not None:
            dump["delta"] = self._derived_delta(dump, derived, delta, partial, lifted)
        if len(lifted) != len(texts):  # a text that was there is gone (blank or removed)
            live = {(index, field) for index, field, _ in lifted}
            for key in [key for key in texts if key not in live]:
                if texts.pop(key).raw and not rest_changed:
                    ops.append(["set", ["content", *key], ""])
        if not rest_changed:
            dump["partial_patch"] = ops
            return orjson.dumps(dump)
        current = self._full()
        patch = compute_patch(previous_full, current) if previous_full is not None else None
        if patch is None:
            dump["partial"] = current
        else:
            dump["partial_patch"] = patch
        return orjson.dumps(dump)

    def _derived_delta(
        self,
        dump: dict[str, Any],
        field: str,
        delta: str,
        partial: dict[str, Any],
        lifted: list[tuple[int, str, str]],
    ) -> str:
        """The redacted delta, taken from the growing text when the block grew by exactly
        the delta; otherwise redacted in the context of the earlier deltas."""
        index = dump.get("content_index")
        state = self._texts.get((index, field))
        if state is not None and not state.reset:
            value = state.raw
            if len(value) == state.previous_length + len(delta) and value.endswith(delta):
                for lifted_index, lifted_field, _ in lifted:
                    if lifted_index == index and lifted_field == field:
                        return state.gained
        key = (dump.get("type"), index)
        context = self._deltas.get(key)
        if context is None:
            context = self._deltas[key] = _DeltaContext()
        settled, pending = context.prepare(delta, self._safe_cut)
        return context.advance(
            self._redact(settled) if settled else "", self._redact(pending) if pending else ""
        )

    def _redact_free_fields(self, dump: dict[str, Any]) -> None:
        """Redact, in place, every event field but the partial; a streamed delta in the
        context of the deltas before it."""
        kind = dump.get("type")
        delta = dump.get("delta")
        if type(delta) is str and type(kind) is str and kind.endswith("_delta"):
            key = (kind, dump.get("content_index"))
            context = self._deltas.get(key)
            if context is None:
                context = self._deltas[key] = _DeltaContext()
            settled, pending = context.prepare(delta, self._safe_cut)
            redact = self._redact
            dump["delta"] = context.advance(
                redact(settled) if settled else "", redact(pending) if pending else ""
            )
            if len(dump) == 3:  # type, content_index, delta: nothing else to redact
                return
            free = {k: v for k, v in dump.items() if k not in _FIXED_EVENT_FIELDS and k != "delta"}
        else:
            free = {k: v for k, v in dump.items() if k not in _FIXED_EVENT_FIELDS}
        if free:
            dump.update(self._remove(free))

    def _full(self) -> dict[str, Any]:
        """The current redacted partial, texts filled in."""
        rest = self._rest
        assert rest is not None
        if not self._texts:
            return rest
        content = list(rest["content"])
        for (index, field), state in self._texts.items():
            content[index] = {**content[index], field: state.full()}
        return {**rest, "content": content}


# ============================================================================ one call


class _CallRecorder:
    """Writes the event and call_end lines of one call."""

    def __init__(self, sink: RecordingSink, call_index: int, redactor: Redactor) -> None:
        self.sink = sink
        self.call_index = call_index
        self.event_count = 0
        self.ended = False
        self._encoder = _EventEncoder(redactor)

    def write_event(self, event: AssistantMessageEvent) -> None:
        body = self._encoder.encode(event)
        self.sink.write_line(
            b'{"type":"event","call_index":%d,"event_index":%d,"event":%s}\n'
            % (self.call_index, self.event_count, body),
            check=False,
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
        # One snapshot of the known secret values serves the whole call: looking them up
        # reads the environment, which costs more than redacting an event.
        redactor = current_redactor()
        payloads = request_payloads(model, context, options, redactor)
        call = _CallRecorder(self._sink, self._sink.begin_call(payloads), redactor)
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
