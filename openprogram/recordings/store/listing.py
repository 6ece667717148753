"""``recordings list FOLDER``: the recordings below a folder (the pytest plugin's
``recordings/<module>/<test>.jsonl``), each with its state, calls, sessions, size and age.

A test suite has hundreds of recordings, so a listing cannot read each one strictly (the strict
reader validates every event; ``show`` does that for one file). It checks what tells a usable
file from a broken one: the header and its version, that the last line is complete, and that
every call has its ``call_end``; and it counts calls and sessions from the request lines alone.
Lines are told apart by the prefixes the writer gives them (taken from ``format``'s own
builders), so a file costs about one read of its bytes; a line in any other form is parsed.
``docs/recordings-cli.md`` ("list") describes the states.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..file.format import (
    CALL_END,
    REQUEST,
    REQUEST_LINE_PREFIX,
    call_end_row,
    encode_line,
    event_line_head,
    header_of_line,
    version_problem,
)
from .store import RECORDING_SUFFIX

__all__ = [
    "INTERRUPTED",
    "INVALID",
    "RECORDING",
    "SYMLINK",
    "USABLE",
    "ListedRecording",
    "list_folder",
    "recording_files",
    "recordings_named",
]

USABLE, INTERRUPTED, INVALID, RECORDING, SYMLINK = "usable", "interrupted", "invalid", "recording", "symlink"

_CALL_END_PREFIX = encode_line(call_end_row(0, 0)).partition(b"0")[0]
_EVENT_PREFIX = event_line_head(0).partition(b"0")[0]
_SESSION_KEY = b'"session":"'
_CHUNK = 1 << 20
#: Files above this size are read no further: a recording that large is not a test's.
_MAX_BYTES = 1 << 31


@dataclass
class ListedRecording:
    """One row of ``list FOLDER``; ``name`` is the path below the folder."""

    path: Path
    name: str
    state: str = USABLE
    reason: str | None = None
    size: int | None = None
    mtime: float | None = None
    calls: int | None = None
    sessions: int | None = None

    def to_json(self, now: float) -> dict[str, Any]:
        from datetime import UTC, datetime

        modified = (
            None
            if self.mtime is None
            else datetime.fromtimestamp(self.mtime, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        )
        return {
            "name": self.name,
            "path": str(self.path),
            "state": self.state,
            "reason": self.reason,
            "size_bytes": self.size,
            "modified_at": modified,
            "age_seconds": None if self.mtime is None else round(max(0.0, now - self.mtime), 3),
            "calls": self.calls,
            "sessions": self.sessions,
        }


def recording_files(folder: Path) -> list[Path]:
    """Every ``*.jsonl`` file below ``folder``, sorted; hidden files and folders (temporary
    files, caches) are skipped, and symbolic links to folders are not followed. Raises
    ``OSError`` when ``folder`` itself cannot be listed."""
    os.listdir(folder)  # the folder itself: a clear error, not an empty listing
    found: list[Path] = []
    for root, folders, names in os.walk(folder):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        found.extend(Path(root) / name for name in names if name.endswith(RECORDING_SUFFIX) and not name.startswith("."))
    return sorted(found)


#: How deep, and through how many folders, :func:`recordings_named` looks for a test's recording.
_SEARCH_DEPTH, _SEARCH_FOLDERS = 6, 2000
_NOT_SEARCHED = frozenset({"node_modules", "site-packages", "__pycache__", "llm-reports"})


def recordings_named(name: str, start: Path, limit: int = 3) -> list[Path]:
    """Recordings called ``NAME.jsonl`` in a ``recordings`` folder below ``start`` (the pytest
    plugin's layout), for the hint of a ``show NAME`` that names no managed recording: at most
    ``limit``, found within a bounded walk (hidden folders and virtual environments skipped)."""
    wanted = f"{name}{RECORDING_SUFFIX}"
    found: list[Path] = []
    visited = 0
    base_depth = len(start.parts)
    for root, folders, names in os.walk(start):
        visited += 1
        here = Path(root)
        if visited > _SEARCH_FOLDERS or len(found) >= limit:
            break
        depth = len(here.parts) - base_depth
        folders[:] = (
            []
            if depth >= _SEARCH_DEPTH
            else sorted(f for f in folders if not f.startswith(".") and f not in _NOT_SEARCHED and not f.endswith("venv"))
        )
        if wanted in names and "recordings" in here.parts[base_depth - 1 :]:
            found.append(here / wanted)
    return found[:limit]


def list_folder(folder: Path) -> list[ListedRecording]:
    """:func:`describe` of every recording below ``folder``."""
    return [describe(path, str(path.relative_to(folder))) for path in recording_files(folder)]


def describe(path: Path, name: str) -> ListedRecording:
    """One file's row; never raises (a file that cannot be read is an ``invalid`` row)."""
    row = ListedRecording(path=path, name=name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        if error.errno == errno.ELOOP:
            row.state, row.reason = SYMLINK, f"is a symbolic link to {_link_target(path)}"
            try:
                info = os.lstat(path)
                row.size, row.mtime = info.st_size, info.st_mtime
            except OSError:
                pass
        else:
            row.state, row.reason = INVALID, f"cannot be opened: {error.strerror or error}"
        return row
    try:
        info = os.fstat(fd)
        row.size, row.mtime = info.st_size, info.st_mtime
        if not stat.S_ISREG(info.st_mode):
            row.state, row.reason = INVALID, "is not a regular file"
            return row
        from ..file.writer_lock import descriptor_is_being_recorded

        _scan(fd, row, live=descriptor_is_being_recorded(fd))
    except OSError as error:
        row.state, row.reason = INVALID, f"cannot be read: {error.strerror or error}"
    finally:
        os.close(fd)
    return row


def _link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _scan(fd: int, row: ListedRecording, *, live: bool) -> None:
    """Fill in the state, calls and sessions of the recording open at ``fd``."""
    pending = b""
    first = True
    requests = ended = 0
    sessions: set[Any] = set()
    offset = 0
    while offset < _MAX_BYTES:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            break
        offset += len(chunk)
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            if first:
                first = False
                if not _header_ok(line, row):
                    return
                continue
            if line.startswith(REQUEST_LINE_PREFIX):
                requests += 1
                sessions.add(_session_of(line))
            elif line.startswith(_CALL_END_PREFIX):
                ended += 1
            elif line.startswith(_EVENT_PREFIX) or not line.strip():
                continue
            else:  # a line in another writer's form
                kind = _kind_of(line)
                if kind is None:
                    row.state, row.reason = INVALID, "holds a line that is not a JSON object"
                    return
                if kind == REQUEST:
                    requests += 1
                    sessions.add(_loaded(line).get("session"))
                elif kind == CALL_END:
                    ended += 1
    row.calls, row.sessions = requests, len(sessions)
    if first and not pending:
        row.state, row.reason, row.calls, row.sessions = INVALID, "is empty", None, None
        return
    if first and not _header_ok(pending, row):
        return
    if live:
        row.state = RECORDING
    elif pending:
        row.state, row.reason = INTERRUPTED, "ends with an incomplete line (its writer died); run 'openprogram recordings recover' on it"
    elif ended < requests:
        row.state = INTERRUPTED
        row.reason = f"{requests - ended} call(s) have no call_end (its writer died); run 'openprogram recordings recover' on it"


def _header_ok(line: bytes, row: ListedRecording) -> bool:
    header = header_of_line(line)
    if header is None:
        row.state, row.reason = INVALID, "does not start with a recording header"
        return False
    problem = version_problem(header.get("format_version"))
    if problem is not None:
        row.state, row.reason = INVALID, problem
        return False
    return True


def _session_of(line: bytes) -> Any:
    """The session of a request line in the writer's form (read from its head), else parsed."""
    head = line[len(REQUEST_LINE_PREFIX) :]
    comma = head.find(b",")
    rest = head[comma + 1 :] if comma >= 0 else b""
    if rest.startswith(_SESSION_KEY):
        end = rest.find(b'"', len(_SESSION_KEY))
        if end > 0 and b"\\" not in rest[len(_SESSION_KEY) : end]:
            return rest[len(_SESSION_KEY) : end].decode("utf-8", "replace")
    return _loaded(line).get("session")


def _loaded(line: bytes) -> dict[str, Any]:
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError:
        return {}
    return row if type(row) is dict else {}


def _kind_of(line: bytes) -> str | None:
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(row) is not dict:
        return None
    kind = row.get("type")
    return kind if isinstance(kind, str) else ""
