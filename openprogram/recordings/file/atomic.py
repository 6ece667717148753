"""Replacing a recording in one step: write a private temporary file beside it, ``fsync``,
then ``rename`` over it, so a reader sees the old file or the new one and never a mix, and a
failure leaves the old file as it was.

The temporary file (``.NAME.XXXXXXXX.tmp``) carries the writer mark of
:mod:`.writer_lock` while it is written, so one left behind by a process killed mid-write is
told from one being written now: :func:`remove_leftovers` removes the first kind only, and
every rewrite of a recording (``update``, ``recover``) calls it first.
"""

from __future__ import annotations

import contextlib
import glob
import os
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["LEFTOVER_AFTER_SECONDS", "create_exclusively", "remove_leftovers", "replace_atomically"]

#: A temporary file nobody holds open and nobody wrote to for this long was left by a process
#: that was killed: a live writer keeps its writer mark, so age alone never decides.
LEFTOVER_AFTER_SECONDS = 60.0


def replace_atomically(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Make ``path`` hold ``data`` (with permission bits ``mode``), atomically."""
    temporary = _written_temporary(path, data, mode)
    try:
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def create_exclusively(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Make ``path`` hold ``data`` only if nothing is there yet, atomically: the file appears
    whole or not at all, and ``FileExistsError`` is raised (nothing written) when another
    process created it first, so a run that started without the file never replaces one."""
    temporary = _written_temporary(path, data, mode)
    try:
        os.link(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def _written_temporary(path: Path, data: bytes, mode: int) -> str:
    """A private temporary file beside ``path`` holding ``data``, synced, with ``mode``."""
    from .writer_lock import hold_writer_lock

    descriptor, temporary = tempfile.mkstemp(
        prefix=f".{path.name}.", suffix=".tmp", dir=path.parent
    )
    try:
        hold_writer_lock(descriptor)  # released when the descriptor closes
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    return temporary


def remove_leftovers(
    path: Path,
    suffix: str = ".tmp",
    *,
    older_than: float = LEFTOVER_AFTER_SECONDS,
    writer_gone: Callable[[str], bool] | None = None,
) -> list[Path]:
    """Delete the temporary files beside ``path`` (``.NAME.*SUFFIX``) that killed processes
    left: regular files of this user that no live process holds and that were not written to
    for ``older_than`` seconds, or at once when ``writer_gone(name)`` says the process that
    made the file has exited (a file is created a moment before its writer marks it, so an
    unmarked young file may be one being started). Never raises for a file it cannot judge or
    remove (it is left). Returns the files it removed."""
    from .writer_lock import is_being_recorded

    removed = []
    now = time.time()
    try:
        candidates = list(path.parent.glob(f".{glob.escape(path.name)}.*{glob.escape(suffix)}"))
    except OSError:
        return []
    for candidate in candidates:
        try:
            info = candidate.lstat()
            if (
                not stat.S_ISREG(info.st_mode)
                or info.st_uid != os.getuid()
                or (
                    now - info.st_mtime < older_than
                    and not (writer_gone and writer_gone(candidate.name))
                )
                or is_being_recorded(candidate)
            ):
                continue
            candidate.unlink()
        except OSError:  # gone, or cannot tell, or cannot remove: leave it
            continue
        removed.append(candidate)
    return removed
