"""Is a recording file being written by a live process?

``delete`` and ``prune`` must never remove a file another process is still recording into, and
"the file was modified recently" is not an answer (a recorder may sit idle for hours). So every
writer holds a *shared* byte-range lock on one byte far beyond any real end of file
(:data:`LIVENESS_OFFSET`) for as long as it keeps the file open, and a checker asks whether an
*exclusive* lock on that byte would conflict. The kernel drops the lock when the writer's
descriptor closes or the process dies, however it dies, so a crashed recorder never leaves a
file that looks busy forever.

Why these lock flavours:

- Byte-range (``fcntl``) locks and ``flock`` locks are separate on Linux, so this lock never
  interferes with the ``flock`` the sink takes to serialise its writes.
- Where available (Linux) we use *open file description* locks (``F_OFD_*``): classic POSIX
  locks belong to the process and vanish when it closes *any* descriptor of the file, and the
  sink does open and close reader descriptors of its file. OFD locks belong to the descriptor
  that took them, survive that, and are inherited across ``fork`` like the descriptor.
- A shared lock needs a readable descriptor. The sink keeps a write-only ``O_APPEND``
  descriptor, so for such a descriptor we open a read-only companion on the same file (through
  ``/proc/self/fd``) and lock that; :func:`release_writer_lock` closes it. A writer that never
  releases keeps the file "live" until it exits: the safe direction.

Two more marks make a busy file say who holds it, and let ``update`` exclude everybody else:

- Every writer also holds a shared lock on the byte :data:`PID_BASE` + its process id. A lock
  query over that range returns a conflicting lock with its offset, so :func:`writer_of` can
  name the process (and its command line) without any file beside the recording.
- An ``update`` run replaces the file when it ends, so for as long as it runs it holds an
  *exclusive* lock on the liveness byte (:func:`claim_for_update`): a second update, or a
  recorder starting on the file, is refused with a message naming the first writer, instead of
  one of them losing the other's calls (``docs/recordings-cli.md``, "Being recorded into").
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from .format import RecordingFileError

__all__ = [
    "LIVENESS_OFFSET",
    "RecordingBusyError",
    "UpdateClaim",
    "Writer",
    "claim_for_update",
    "descriptor_is_being_recorded",
    "hold_writer_lock",
    "is_being_recorded",
    "release_writer_lock",
    "writer_of",
]

#: The locked byte: far beyond any real recording, so no data write ever touches it.
LIVENESS_OFFSET = 2**40
LIVENESS_LENGTH = 1
#: Each writer marks the byte ``PID_BASE + pid``; Linux process ids stay below ``PID_SPAN``.
PID_BASE = 2**41
PID_SPAN = 2**22

# struct flock on 64-bit Linux: short l_type, short l_whence, off_t l_start, off_t l_len,
# pid_t l_pid, padded to 32 bytes. OFD locks need l_pid == 0.
_FLOCK_FORMAT = "hhqqi4x"
_USE_OFD = (
    sys.platform.startswith("linux") and hasattr(fcntl, "F_OFD_SETLK") and sys.maxsize > 2**32
)

_companions: dict[int, int] = {}
_companions_lock = threading.Lock()


class RecordingBusyError(RecordingFileError):
    """Another process writes the file in a way that cannot share it: an ``update`` run (which
    will replace the file) or, for an update, a recorder appending to it. The message names that
    process and what to do; ``kind`` is ``unreadable`` (the file cannot be used now)."""

    def __init__(
        self,
        path: str | Path,
        reason: str,
        line_number: int | None = None,
        call_index: int | None = None,
        kind: str = "unreadable",
    ) -> None:
        super().__init__(path, reason, line_number, call_index, kind)


@dataclass(frozen=True)
class Writer:
    """A process holding a file: its id (None when the platform cannot tell), whether it is an
    ``update`` run, and its command line (redacted, shortened; None when unreadable)."""

    pid: int | None
    updating: bool
    command: str | None = None

    def describe(self) -> str:
        """``process 1234 (openprogram run hello)``, or ``another process``."""
        if self.pid is None:
            return "another process"
        if self.pid == os.getpid():
            return f"this process ({self.pid}), in another scope"
        return f"process {self.pid}" + (f" ({self.command})" if self.command else "")


def hold_writer_lock(fd: int) -> None:
    """Mark the file behind ``fd`` as being written for as long as ``fd`` stays open (or until
    :func:`release_writer_lock`). Never blocks. Raises :class:`RecordingBusyError` while an
    ``update`` run holds the file: it will replace the file when it ends, and every call
    recorded into it meanwhile would be lost."""
    if _is_readable(fd):
        _hold_shared(fd, fd)
        return
    companion = _open_companion(fd)
    try:
        _hold_shared(companion, fd)
    except BaseException:
        os.close(companion)
        raise
    with _companions_lock:
        previous = _companions.pop(fd, None)
        _companions[fd] = companion
    if previous is not None:
        os.close(previous)


def _hold_shared(lock_fd: int, named_fd: int) -> None:
    try:
        _lock(lock_fd, fcntl.F_RDLCK)
    except OSError as error:
        if error.errno not in (errno.EACCES, errno.EAGAIN):
            raise
        path = _path_of(named_fd)
        writer = _holder(lock_fd)
        raise RecordingBusyError(
            path,
            f"is being updated by {writer.describe()}, which replaces the file when it ends: "
            "calls recorded into it now would be lost; wait for that run to finish, then record "
            "again",
        ) from None
    if os.fstat(lock_fd).st_nlink == 0:
        # An update replaced the file between our open and our lock (it held the file until
        # then): this descriptor is the old file, which nobody will ever read again.
        _unlock(lock_fd)
        raise RecordingBusyError(
            _path_of(named_fd).removesuffix(" (deleted)"),
            "was replaced (by an update) or removed while this writer opened it; nothing was recorded: run again",
        )
    _mark_pid(lock_fd)


def release_writer_lock(fd: int) -> None:
    """Drop the mark taken by :func:`hold_writer_lock` on a write-only ``fd``; call it before
    closing ``fd``. (On a readable descriptor the lock goes with the descriptor anyway.)"""
    with _companions_lock:
        companion = _companions.pop(fd, None)
    if companion is not None:
        os.close(companion)


def is_being_recorded(path: str | os.PathLike[str]) -> bool:
    """True when some live process holds the writer mark on ``path`` (a recorder, or an
    ``update`` run).

    Asks the kernel whether an exclusive lock would conflict (``F_GETLK``) instead of taking
    one, so a check can never make a starting writer fail. A missing file is not being
    recorded; a symbolic link is not followed.
    """
    fd = _open_for_query(Path(path))
    if fd is None:
        return False
    try:
        return _conflicts(fd)
    finally:
        os.close(fd)


def descriptor_is_being_recorded(fd: int) -> bool:
    """:func:`is_being_recorded` for a file the caller has open already (one system call)."""
    return _conflicts(fd)


def writer_of(path: str | os.PathLike[str]) -> Writer | None:
    """The process holding ``path`` (one of them when several record into it), or None."""
    fd = _open_for_query(Path(path))
    if fd is None:
        return None
    try:
        if not _conflicts(fd):
            return None
        return _holder(fd)
    finally:
        os.close(fd)


class UpdateClaim:
    """An ``update`` run's hold on the recording it will replace (see the module docstring).

    Made by :func:`claim_for_update`; :meth:`unchanged` tells whether the file at the path is
    still the one claimed, as claimed (nothing replaced or appended to it meanwhile), which is
    checked again just before the file is replaced."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd
        info = os.fstat(fd)
        self._identity = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)

    @property
    def mode(self) -> int:
        """The permission bits of the claimed file (an update keeps them)."""
        return stat.S_IMODE(os.fstat(self._fd).st_mode)

    def unchanged(self) -> bool:
        if self._fd < 0:
            return False
        try:
            now = os.lstat(self.path)
        except OSError:
            return False
        return (now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns) == self._identity

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:  # pragma: no cover - a claim dropped without release
        try:
            self.release()
        except Exception:  # noqa: BLE001
            pass


def claim_for_update(path: Path) -> UpdateClaim | None:
    """Hold ``path`` for an ``update`` run: nobody else may record into it or update it until
    :meth:`UpdateClaim.release` (or this process ends). None when there is no file yet (the run
    then creates it, and only if nobody else did meanwhile). Raises
    :class:`RecordingBusyError` naming the process that holds it, or
    :class:`~.format.RecordingFileError` for a file an update cannot replace."""
    for _attempt in range(5):
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as error:
            raise _unclaimable(path, error) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise RecordingFileError(path, "is not a regular file", kind="not_a_file")
            try:
                _lock(fd, fcntl.F_WRLCK)
            except OSError as error:
                if error.errno not in (errno.EACCES, errno.EAGAIN):
                    raise
                raise _busy_for_update(path, _holder(fd)) from None
            _mark_pid(fd)
            opened = os.fstat(fd)
            try:
                now = os.lstat(path)
            except FileNotFoundError:
                now = None
            if now is not None and (now.st_dev, now.st_ino) == (opened.st_dev, opened.st_ino):
                return UpdateClaim(path, fd)
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # replaced between opening and locking: claim the file there now
    raise RecordingBusyError(
        path, "keeps being replaced by another program; try again when it is done"
    )


def _unclaimable(path: Path, error: OSError) -> RecordingFileError:
    if error.errno == errno.ELOOP:
        return RecordingFileError(
            path, "is a symbolic link; refusing to update through it", kind="symlink"
        )
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return RecordingFileError(
            path,
            f"cannot be updated: {error.strerror}; make it and its folder writable "
            f"(chmod u+w {path} {path.parent}), or replay it instead",
            kind="unreadable",
        )
    if error.errno in (errno.ENXIO, errno.EISDIR):
        return RecordingFileError(path, "is not a regular file", kind="not_a_file")
    return RecordingFileError(
        path, f"cannot be opened for updating: {error.strerror or error}", kind="unreadable"
    )


def _busy_for_update(path: Path, writer: Writer) -> RecordingBusyError:
    if writer.updating:
        reason = (
            f"is being updated by {writer.describe()}; two updates of one file would lose each "
            "other's calls: wait for that run to finish, then update again"
        )
    else:
        reason = (
            f"is being recorded into by {writer.describe()}; an update would replace the file "
            "under it and lose its calls: wait for that recorder to finish, then update"
        )
    return RecordingBusyError(path, reason)


# ----------------------------------------------------------------------------- internals


def _open_for_query(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
            return None
        raise


def _is_readable(fd: int) -> bool:
    return fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_WRONLY


def _open_companion(fd: int) -> int:
    """A read-only descriptor of the same file, not sharing ``fd``'s file description."""
    return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)


def _path_of(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # pragma: no cover - no /proc
        return f"<descriptor {fd}>"


def _pack(lock_type: int, start: int = LIVENESS_OFFSET, length: int = LIVENESS_LENGTH) -> bytes:
    return struct.pack(_FLOCK_FORMAT, lock_type, os.SEEK_SET, start, length, 0)


def _lock(fd: int, lock_type: int) -> None:
    if _USE_OFD:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _pack(lock_type))
    else:  # pragma: no cover - non-Linux fallback: process-owned POSIX locks
        operation = fcntl.LOCK_SH if lock_type == fcntl.F_RDLCK else fcntl.LOCK_EX
        fcntl.lockf(fd, operation | fcntl.LOCK_NB, LIVENESS_LENGTH, LIVENESS_OFFSET, os.SEEK_SET)


def _unlock(fd: int) -> None:
    if _USE_OFD:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _pack(fcntl.F_UNLCK))
    else:  # pragma: no cover - non-Linux
        fcntl.lockf(fd, fcntl.LOCK_UN, LIVENESS_LENGTH, LIVENESS_OFFSET, os.SEEK_SET)


def _mark_pid(fd: int) -> None:
    """The shared lock on ``PID_BASE + pid`` that names this process to a refused writer."""
    pid = os.getpid()
    if _USE_OFD and pid < PID_SPAN:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _pack(fcntl.F_RDLCK, PID_BASE + pid))


def _query(fd: int, lock_type: int, start: int, length: int) -> tuple[int, int]:
    """``(l_type, l_start)`` of a lock that would conflict with ``lock_type`` on the range."""
    answer = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _pack(lock_type, start, length))
    found_type, _whence, found_start = struct.unpack(_FLOCK_FORMAT, answer)[:3]
    return found_type, found_start


def _conflicts(fd: int) -> bool:
    if _USE_OFD:
        return _query(fd, fcntl.F_WRLCK, LIVENESS_OFFSET, LIVENESS_LENGTH)[0] != fcntl.F_UNLCK
    return _probe_with_lockf(fd)  # pragma: no cover - non-Linux


def _holder(fd: int) -> Writer:
    """Who holds the file's marks: an update (an exclusive liveness lock) or a recorder, and
    which process, from its pid mark."""
    if not _USE_OFD:  # pragma: no cover - non-Linux
        return Writer(None, updating=False)
    updating = _query(fd, fcntl.F_RDLCK, LIVENESS_OFFSET, LIVENESS_LENGTH)[0] != fcntl.F_UNLCK
    found_type, start = _query(fd, fcntl.F_WRLCK, PID_BASE, PID_SPAN)
    if found_type == fcntl.F_UNLCK:
        return Writer(None, updating)
    pid = start - PID_BASE
    return Writer(pid, updating, _command_of(pid))


def _command_of(pid: int) -> str | None:
    """The process's command line, redacted (it may hold a key) and shortened, or None."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read(4096)
    except OSError:
        return None
    words = [word.decode("utf-8", "replace") for word in raw.split(b"\0") if word]
    if not words:
        return None
    words[0] = os.path.basename(words[0])
    if words[0].startswith("python") and len(words) > 2 and words[1] == "-m":
        words = words[2:]
    elif words[0].startswith("python") and len(words) > 1 and not words[1].startswith("-"):
        words = [os.path.basename(words[1]), *words[2:]]
    from ..redaction import redact_text

    text = redact_text(" ".join(words))
    return text if len(text) <= 80 else text[:77] + "..."


def _probe_with_lockf(fd: int) -> bool:  # pragma: no cover - non-Linux fallback
    """Without OFD locks: try (and at once drop) an exclusive lock from a writable descriptor.
    Process-owned locks never conflict within one process, so this sees other processes only."""
    try:
        writable = os.open(f"/dev/fd/{fd}", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.lockf(writable, fcntl.LOCK_EX | fcntl.LOCK_NB, LIVENESS_LENGTH, LIVENESS_OFFSET)
    except OSError as error:
        if error.errno in (errno.EACCES, errno.EAGAIN):
            return True
        raise
    else:
        fcntl.lockf(writable, fcntl.LOCK_UN, LIVENESS_LENGTH, LIVENESS_OFFSET)
        return False
    finally:
        os.close(writable)
