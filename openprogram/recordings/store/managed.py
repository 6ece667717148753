"""The rules for the files of the managed recordings folder: which files it holds, which of them
may be deleted (``recordings delete`` and ``prune``), and creating an empty recording
(``recordings record``). The command line asks these and prints the answers; see
``docs/recordings-cli.md`` ("The commands").
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .store import FIX_OFF, RECORDING_ID_PATTERN, RECORDING_SUFFIX

__all__ = [
    "PrunePlan",
    "create_empty_recording",
    "deletion_refusal",
    "managed_entries",
    "plan_prune",
    "same_file",
]


def managed_entries(folder: Path) -> list[tuple[Path, str | None]]:
    """``*.jsonl`` entries of the managed folder, sorted, with their ID (None when the name is
    not a valid ID, so such a file is listed but never treated as managed). Hidden files (an
    update's or a rewrite's temporary file) are not recordings. Raises ``OSError`` for a folder
    that cannot be listed; a missing folder holds nothing."""
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    entries = []
    for name in names:
        if not name.endswith(RECORDING_SUFFIX) or name.startswith("."):
            continue
        stem = name[: -len(RECORDING_SUFFIX)]
        entries.append((folder / name, stem if RECORDING_ID_PATTERN.match(stem) else None))
    return entries


def same_file(path: Path, other: Path | None) -> bool:
    """Whether ``path`` is the file ``other`` names (a symlink to it is not the file itself)."""
    if other is None:
        return False
    if path.absolute() == other.absolute():
        return True
    try:
        return not path.is_symlink() and os.path.samefile(path, other)
    except OSError:
        return False


def deletion_refusal(path: Path, active: Path | None) -> str | None:
    """Why ``path`` must not be deleted now (the reason, without the path), or None: it is not
    a regular file, it is the active recording (``active``, in record, replay or update mode
    alike: :func:`~..modes.activation.active_recording`), or a live process is recording into
    or updating it."""
    from ..file.writer_lock import is_being_recorded

    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "does not exist (already deleted?)"
    except OSError as error:
        return f"cannot be inspected: {error.strerror or error}"
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link; refusing to delete it (not a managed recording)"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file; refusing to delete it"
    if same_file(path, active):
        return f"is the active recording; run '{FIX_OFF}' (or select another) first"
    try:
        live = is_being_recorded(path)
    except OSError as error:
        return f"cannot check for a live writer: {error.strerror or error}"
    if live:
        return "is being recorded into by a running process; refusing to delete it"
    return None


@dataclass
class PrunePlan:
    """What ``prune`` would delete (path, ID, modification time) and what it skips, and why."""

    old: list[tuple[Path, str, float]] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def plan_prune(folder: Path, cutoff: float, active: Path | None) -> PrunePlan:
    """The managed recordings not modified since ``cutoff`` that may be deleted (``active``:
    the active recording, never one of them)."""
    plan = PrunePlan()
    for path, recording_id in managed_entries(folder):
        try:
            modified = os.lstat(path).st_mtime
        except FileNotFoundError:
            continue
        if modified >= cutoff:
            continue
        if recording_id is None:
            plan.skipped.append((path, "not a valid recording ID; not a managed recording"))
            continue
        refusal = deletion_refusal(path, active)
        if refusal:
            plan.skipped.append((path, refusal))
        else:
            plan.old.append((path, recording_id, modified))
    return plan


def create_empty_recording(path: Path) -> None:
    """Create ``path`` holding only the header: exclusively (0600, never through a symbolic
    link, never over anything), then the sink writes the header, so the format is written in
    one place only. Raises ``FileExistsError``, or :class:`RecordingFileError` naming the file;
    a file it created is removed again if the header cannot be written."""
    from ..file.format import RecordingFileError

    try:
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
    except FileExistsError:
        raise
    except OSError as error:
        raise RecordingFileError(
            path, f"cannot create: {error.strerror}", kind="unreadable"
        ) from None
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    from ..file.sink import RecordingSink

    try:
        RecordingSink(path).close()
    except BaseException:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        raise
