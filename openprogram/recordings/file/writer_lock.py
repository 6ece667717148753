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
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import sys
import threading
from pathlib import Path

#: The locked byte: far beyond any real recording, so no data write ever touches it.
LIVENESS_OFFSET = 2**40
LIVENESS_LENGTH = 1

# struct flock on 64-bit Linux: short l_type, short l_whence, off_t l_start, off_t l_len,
# pid_t l_pid, padded to 32 bytes. OFD locks need l_pid == 0.
_FLOCK_FORMAT = "hhqqi4x"
_USE_OFD = sys.platform.startswith("linux") and hasattr(fcntl, "F_OFD_SETLK") and sys.maxsize > 2**32

_companions: dict[int, int] = {}
_companions_lock = threading.Lock()


def hold_writer_lock(fd: int) -> None:
    """Mark the file behind ``fd`` as being written for as long as ``fd`` stays open (or until
    :func:`release_writer_lock`). Never blocks: a shared lock only conflicts with the checker's
    exclusive probe, which is never held."""
    if _is_readable(fd):
        _lock(fd, fcntl.F_RDLCK)
        return
    companion = _open_companion(fd)
    try:
        _lock(companion, fcntl.F_RDLCK)
    except BaseException:
        os.close(companion)
        raise
    with _companions_lock:
        previous = _companions.pop(fd, None)
        _companions[fd] = companion
    if previous is not None:
        os.close(previous)


def release_writer_lock(fd: int) -> None:
    """Drop the mark taken by :func:`hold_writer_lock` on a write-only ``fd``; call it before
    closing ``fd``. (On a readable descriptor the lock goes with the descriptor anyway.)"""
    with _companions_lock:
        companion = _companions.pop(fd, None)
    if companion is not None:
        os.close(companion)


def is_being_recorded(path: str | os.PathLike[str]) -> bool:
    """True when some live process holds the writer mark on ``path``.

    Asks the kernel whether an exclusive lock would conflict (``F_GETLK``) instead of taking
    one, so a check can never make a starting writer fail. A missing file is not being
    recorded; a symbolic link is not followed.
    """
    try:
        fd = os.open(Path(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
            return False
        raise
    try:
        return _conflicts(fd)
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- internals


def _is_readable(fd: int) -> bool:
    return fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_WRONLY


def _open_companion(fd: int) -> int:
    """A read-only descriptor of the same file, not sharing ``fd``'s file description."""
    return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)


def _pack(lock_type: int) -> bytes:
    return struct.pack(_FLOCK_FORMAT, lock_type, os.SEEK_SET, LIVENESS_OFFSET, LIVENESS_LENGTH, 0)


def _lock(fd: int, lock_type: int) -> None:
    if _USE_OFD:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _pack(lock_type))
    else:  # pragma: no cover - non-Linux fallback: process-owned POSIX locks
        operation = fcntl.LOCK_SH if lock_type == fcntl.F_RDLCK else fcntl.LOCK_EX
        fcntl.lockf(fd, operation | fcntl.LOCK_NB, LIVENESS_LENGTH, LIVENESS_OFFSET, os.SEEK_SET)


def _conflicts(fd: int) -> bool:
    if _USE_OFD:
        answer = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _pack(fcntl.F_WRLCK))
        lock_type: int = struct.unpack(_FLOCK_FORMAT, answer)[0]  # l_type, a short ("h")
        return lock_type != fcntl.F_UNLCK
    return _probe_with_lockf(fd)  # pragma: no cover - non-Linux


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
