"""The shared writer of a recording file, :class:`RecordingSink`.

* **Whole lines.** Every line is one ``os.write`` of the whole line on an ``O_APPEND``
  descriptor under the sink's thread lock; the kernel never interleaves two such writes, so
  concurrent writers (threads or processes) cannot mix their lines, and a crash loses at most
  the line being written. Request lines are also written under ``flock``.
* **One total order of calls.** ``call_index`` is allocated under the ``flock`` without
  re-reading the file: the sink remembers the size it last saw, and only when another writer
  appended since does it scan those new bytes for request lines. Allocation is therefore
  amortised linear in the file, whatever its length.
* **Opening reads the tail.** Appending to an existing file reads its header and then reads
  backwards from the end only as far as the last request line, whose ``call_index`` the next
  call continues (request lines are written in ``call_index`` order, under ``flock``): opening
  a 1,000-call file costs about what opening an empty one does.
* **A torn last line is refused.** A file whose last line has no newline (its writer died
  mid-write) is refused with a message naming ``openprogram recordings recover``, unless
  another live writer is recording into it (then the line is that writer's, still being
  written). Appending after it would glue the next line onto the torn one. So is a file whose
  last call (or a call that streamed after it began) has no ``call_end`` while nobody writes it:
  its writer died mid-call, and no replay would read the calls appended after it.

The file format is described in ``docs/file-format.md``.
"""

from __future__ import annotations

import fcntl
import os
import stat
import threading
import uuid
from pathlib import Path
from typing import Any

import orjson

from .folders import make_private_folders
from .format import (
    REQUEST_MARKER,
    ContextBases,
    RecordingFileError,
    call_end_row,
    encode_line,
    event_line_head,
    header_of_line,
    header_row,
    is_plain_int,
    request_index_of_row,
    request_line,
    request_line_index,
    version_problem,
)
from .writer_lock import descriptor_is_being_recorded, hold_writer_lock, release_writer_lock

__all__ = ["RecordingSink"]

_READ_CHUNK = 1 << 20
#: Reading backwards for the last request line goes this many bytes at a time.
_TAIL_CHUNK = 1 << 16
#: A header line is a few hundred bytes; a "header" longer than this is not one.
_MAX_HEADER_BYTES = 1 << 20

#: How the writer starts event and call_end lines (from ``format``'s own builders), each
#: followed by the call's index.
_EVENT_PREFIX = event_line_head(0).partition(b"0")[0]
_CALL_END_PREFIX = encode_line(call_end_row(0, 0)).partition(b"0")[0]


def _index_after(line: bytes, start: int) -> int:
    """The ``call_index`` at ``start`` of a line in the writer's form (-1 if it is not one)."""
    digits = line[start : line.find(b",", start)]
    return int(digits) if digits.isdigit() else -1


# Bumped in a forked child, so that a sink notices (with an int comparison, not a system
# call per line) that it must reopen its file before writing.
_fork_generation = 0


def _count_fork() -> None:
    global _fork_generation
    _fork_generation += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_count_fork)


class RecordingSink:
    """The shared, thread-safe and process-safe writer of one recording file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        self._lock = threading.Lock()
        self._fd = -1
        self._pid = -1
        self._generation = _fork_generation
        self._known_size = 0  # bytes of the file this sink has seen (written or scanned)
        self._line_count = 0  # newline-terminated lines counted since _count_origin
        self._count_origin = 0  # lines before this offset are counted only for a message
        self._next_index = 0  # the call_index the next request gets
        self._unchecked_bytes = 0  # appended by us since the last fstat (see write_line)
        self._unchecked_lines = 0
        self._broken: RecordingFileError | None = None
        #: This sink's session: every request line it writes carries it, so a replay can tell
        #: the calls of one command (one test run) from those of another in the same file.
        self._session = uuid.uuid4().hex[:16]
        #: The last context this sink wrote per lane, for ``context_patch`` (set by ``_open``
        #: from the file's version: a version 1 file gets whole contexts).
        self._bases = ContextBases(1)
        self._open()

    # ---------------------------------------------------------------- public

    @property
    def path(self) -> Path:
        return self._path

    @property
    def session(self) -> str:
        return self._session

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

    def begin_call(self, payloads: dict[str, Any], lane: str = "") -> int:
        """Write the request line of a new call made in ``lane`` and return its
        ``call_index``. ``payloads`` are redacted: the context is written as its growth from
        this sink's previous call in the lane when it only grew (``docs/file-format.md``).

        The payload is encoded before the locks are taken; only the index is spliced in
        inside them, so a large context does not lengthen the critical section.
        """
        where = {"session": self._session, "lane": lane} if lane else {"session": self._session}
        bases = self._bases
        body = bases.request_body(lane, payloads, where)
        fd = self._acquire()
        try:
            size = self._sync()
            index = self._next_index
            self._append(request_line(index, body), size, consumes_index=True)
            bases.wrote(lane, index, payloads["context"])
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

    def write_event_line(self, line: bytes) -> None:
        """:meth:`write_line` without the ``check``, in one step: this runs for every
        streamed event, so the usual case (one whole ``write``) takes no detour. A closed
        sink's descriptor is -1, which ``write`` refuses like any other failure."""
        if self._generation == _fork_generation:  # before the lock: a child replaces it
            with self._lock:
                if self._broken is None:
                    try:
                        written = os.write(self._fd, line)
                    except OSError:
                        written = 0  # the general path below writes again and reports it
                    if written == len(line):
                        self._unchecked_bytes += written
                        self._unchecked_lines += 1
                        return
                    if written:  # the rest, as in write_line; a failure there is reported
                        self._unchecked_bytes += written
                        self._append(line[written:], None, consumes_index=False)
                        return
        self.write_line(line, check=False)

    # ---------------------------------------------------------------- opening

    def _open(self) -> None:
        path = self._path
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            info = None
        except OSError as error:
            raise RecordingFileError(
                path, f"cannot inspect the file: {error.strerror}", kind="unreadable"
            ) from None
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise RecordingFileError(
                path, "is a symbolic link; refusing to record through it", kind="symlink"
            )
        if info is not None and not stat.S_ISREG(info.st_mode):
            raise RecordingFileError(path, "is not a regular file", kind="not_a_file")
        _make_private_parents(path.parent)
        # Read-write so that catching up reads this very file (``pread``), even if the path
        # is replaced meanwhile; every write still goes to the end (O_APPEND).
        fd = _open_regular_for_append(path)
        self._fd, self._pid, self._generation = fd, os.getpid(), _fork_generation
        self._known_size = self._line_count = self._next_index = self._count_origin = 0
        self._unchecked_bytes = self._unchecked_lines = 0
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                # Asked under flock, before this sink marks the file: every other writer marks
                # it before it writes (under flock), so a live one that left a call open, or a
                # torn last line, holds its mark now; without one, that is a crash's leftover.
                # (Asked before flock, a writer starting in between was taken for a dead one.)
                others_live = info is not None and descriptor_is_being_recorded(fd)
                # Marks the file as being recorded (for ``recordings delete``/``prune``) until
                # the descriptor closes, however this process ends; a file an ``update`` run
                # holds is refused here, and the descriptor is closed with the rest below.
                hold_writer_lock(fd)
                size = os.fstat(fd).st_size
                if size == 0:
                    header = header_row()
                    self._append(encode_line(header), 0, consumes_index=False)
                    self._bases = ContextBases(header["format_version"])
                else:
                    self._bases = ContextBases(self._check_header())
                    self._resume_from_tail(size, others_live)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        except BaseException:
            os.close(fd)
            self._fd = -1
            raise

    def _check_header(self) -> int:
        """The file's format version; refuse to append to anything but a recording this
        program reads (appending keeps the file's version)."""
        first = b""
        offset = 0
        wanted = 4096  # a header is a few hundred bytes: read no more of a large file
        while b"\n" not in first:
            chunk = os.pread(self._fd, wanted, offset)
            if not chunk or offset > _MAX_HEADER_BYTES:
                raise RecordingFileError(self._path, "the header line is incomplete", 1)
            first += chunk
            offset += len(chunk)
            wanted = min(wanted * 2, _READ_CHUNK)
        header = header_of_line(first.split(b"\n", 1)[0])
        if header is None:
            raise RecordingFileError(
                self._path, "does not start with a recording header; refusing to append", 1
            )
        version = header.get("format_version")
        problem = version_problem(version)
        if problem is not None:
            raise RecordingFileError(
                self._path, f"{problem}; refusing to append", 1, kind="wrong_version"
            )
        assert is_plain_int(version)  # version_problem refuses anything else
        return version

    def _resume_from_tail(self, size: int, others_live: bool) -> None:
        """Continue ``call_index`` after the last request line, read backwards from the end;
        the caller holds ``flock``. Falls back to scanning the whole file when a request line
        is not in the sink's own form (a file written by hand or by another tool)."""
        last_newline = size - 1 if os.pread(self._fd, 1, size - 1) == b"\n" else -1
        if last_newline < 0:
            last_newline = self._torn_tail(size, others_live)
        self._known_size = self._count_origin = last_newline + 1
        last = self._last_request(last_newline + 1)
        if last is None:  # not in our form: count from the start, as a catching-up sink does
            self._known_size = self._count_origin = 0
            self._catch_up(last_newline + 1)
            return
        index, start = last
        self._next_index = index + 1
        if index >= 0 and not others_live:
            self._refuse_unended(start, last_newline + 1, index)

    def _refuse_unended(self, start: int, end: int, last_index: int) -> None:
        """Refuse a file whose writer died mid-call (nobody writes it now): the last call, or
        a call that streamed after it began, has no ``call_end``. The strict reader refuses
        such a file, so calls appended after it would not replay either; ``recover`` closes
        the call. Reads from the last request line (at ``start``) to ``end``, as opening does:
        a call left open before that which never streamed after it is not seen here (``status``
        reads the whole file)."""
        data = self._pread_range(start, end)
        begun, ended = {last_index}, set()
        for line in data.split(b"\n")[1:]:  # after the request line itself
            if line.startswith(_EVENT_PREFIX):
                begun.add(_index_after(line, len(_EVENT_PREFIX)))
            elif line.startswith(_CALL_END_PREFIX):
                ended.add(_index_after(line, len(_CALL_END_PREFIX)))
        unended = sorted(index for index in begun - ended if index >= 0)
        if unended:
            raise RecordingFileError(
                self._path,
                f"call {unended[0]} has no call_end (its writer stopped mid-call): no replay reads the "
                "file, nor calls appended after it. Run "
                f"'openprogram recordings recover {self._path}' to close the call (its events are "
                "kept), then record again",
                kind="interrupted",
            )

    def _pread_range(self, start: int, end: int) -> bytes:
        pieces = []
        while start < end:
            chunk = os.pread(self._fd, min(_READ_CHUNK, end - start), start)
            if not chunk:
                break
            pieces.append(chunk)
            start += len(chunk)
        return b"".join(pieces)

    def _torn_tail(self, size: int, others_live: bool) -> int:
        """The offset of the newline before a last line that has none. Refused unless another
        live writer is still writing it (then it is read again, whole, at the next request)."""
        if not others_live:
            self._count_origin = size  # so the message counts every complete line
            raise RecordingFileError(
                self._path,
                "ends with an incomplete line (its writer stopped mid-write); appending would "
                f"glue the next line onto it. Run 'openprogram recordings recover {self._path}' "
                "to drop it, then record again",
                self._lines_total() + 1,
            )
        end = size
        while end > 0:
            start = max(0, end - _TAIL_CHUNK)
            found = os.pread(self._fd, end - start, start).rfind(b"\n")
            if found >= 0:
                return start + found
            end = start
        return -1  # unreachable past a checked header line; kept total

    def _last_request(self, end: int) -> tuple[int, int] | None:
        """The ``call_index`` and offset of the last request line before ``end`` (a line
        start), ``(-1, 0)`` when there is none, None when one is not in the sink's own form.
        Reads backwards in chunks; a line spanning chunks is joined once, so a huge line costs
        linear time."""
        pieces: list[bytes] = []  # the end of the line being read, in reverse order
        while end > 0:
            start = max(0, end - _TAIL_CHUNK)
            chunk = os.pread(self._fd, end - start, start)
            cut = len(chunk)
            newline = chunk.rfind(b"\n", 0, cut)
            while newline >= 0:
                line = chunk[newline + 1 : cut] + b"".join(reversed(pieces))
                pieces.clear()
                if REQUEST_MARKER in line:
                    index = request_line_index(line)
                    return None if index is None else (index, start + newline + 1)
                cut = newline
                newline = chunk.rfind(b"\n", 0, cut)
            pieces.append(chunk[:cut])
            end = start
        return -1, 0  # the first line is the checked header, never a request

    def _lines_total(self) -> int:
        """Newline-terminated lines up to the known size, for an error message: the lines
        before ``_count_origin`` are counted only now, since opening skipped them."""
        total, offset = 0, 0
        while offset < self._count_origin:
            chunk = os.pread(self._fd, min(_READ_CHUNK, self._count_origin - offset), offset)
            if not chunk:
                break
            total += chunk.count(b"\n")
            offset += len(chunk)
        return total + self._line_count

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
            raise RecordingFileError(self._path, reason, self._lines_total() + 1) from None
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
        if REQUEST_MARKER not in line:
            return
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            self._fail(f"line {self._lines_total()} is not valid JSON")
        index = request_index_of_row(row)
        if index is not None and index >= self._next_index:
            self._next_index = index + 1


def _open_regular_for_append(path: Path) -> int:
    """Open ``path`` for appending, never through a symbolic link, and check the descriptor
    itself: something swapped in after the ``lstat`` (a FIFO, a device) is refused, and
    ``O_NONBLOCK`` keeps opening a FIFO from waiting for a reader."""
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as error:
        raise RecordingFileError(
            path, f"cannot open for writing: {error.strerror}", kind="unreadable"
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RecordingFileError(path, "is not a regular file", kind="not_a_file")
    return fd


def _make_private_parents(folder: Path) -> None:
    """Create missing parent folders owner-only (0700); existing ones are left alone."""
    try:
        make_private_folders(folder)
    except OSError as error:
        raise RecordingFileError(
            Path(error.filename or folder), f"cannot create the folder: {error.strerror}"
        ) from None
