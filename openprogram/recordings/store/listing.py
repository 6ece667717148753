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
from typing import Any, Literal

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
from ..file.writer_lock import descriptor_is_being_recorded
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

USABLE, INTERRUPTED, INVALID, RECORDING, SYMLINK = (
    "usable",
    "interrupted",
    "invalid",
    "recording",
    "symlink",
)

_CALL_END_PREFIX = encode_line(call_end_row(0, 0)).partition(b"0")[0]
_EVENT_PREFIX = event_line_head(0).partition(b"0")[0]
_SESSION_KEY = b'"session":"'
_CHUNK = 1 << 20
#: Files above this size are read no further: a recording that large is not a test's.
_MAX_BYTES = 1 << 31
#: Files up to this size are counted on their bytes in one read.
_WHOLE_BYTES = 1 << 26


@dataclass
class ListedRecording:
    """One row of ``list FOLDER``; ``name`` is the path below the folder (``path`` is kept as
    the string it was found as: a listing of hundreds builds no path objects)."""

    path: str
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
            else datetime.fromtimestamp(self.mtime, UTC)
            .isoformat(timespec="seconds")
            .replace("+00:00", "Z")
        )
        return {
            "name": self.name,
            "path": self.path,
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
    return [Path(name) for name in _recording_names(str(folder))]


def _recording_names(folder: str) -> list[str]:
    """:func:`recording_files` as strings (a listing of hundreds builds no path object twice)."""
    os.listdir(folder)  # the folder itself: a clear error, not an empty listing
    found: list[str] = []
    for root, folders, names in os.walk(folder):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        found.extend(
            os.path.join(root, name)
            for name in names
            if name.endswith(RECORDING_SUFFIX) and not name.startswith(".")
        )
    found.sort()
    return found


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
            else sorted(
                f
                for f in folders
                if not f.startswith(".") and f not in _NOT_SEARCHED and not f.endswith("venv")
            )
        )
        if wanted in names and "recordings" in here.parts[base_depth - 1 :]:
            found.append(here / wanted)
    return found[:limit]


def list_folder(folder: Path) -> list[ListedRecording]:
    """:func:`describe` of every recording below ``folder``."""
    base = os.path.join(str(folder), "")
    return [describe(name, name[len(base) :]) for name in _recording_names(str(folder))]


def describe(path: Path | str, name: str) -> ListedRecording:
    """One file's row; never raises (a file that cannot be read is an ``invalid`` row)."""
    row = ListedRecording(path=str(path), name=name)
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
        _scan(fd, row, live=descriptor_is_being_recorded(fd), size=info.st_size)
    except OSError as error:
        row.state, row.reason = INVALID, f"cannot be read: {error.strerror or error}"
    finally:
        os.close(fd)
    return row


def _link_target(path: Path | str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _scan(fd: int, row: ListedRecording, *, live: bool, size: int) -> None:
    """Fill in the state, calls and sessions of the recording open at ``fd``: a file of a
    usual size is counted on its bytes (the writer's line prefixes, each after a newline), a
    larger one, or one with lines in another form, line by line."""
    if size <= _WHOLE_BYTES:
        data = _read_all(fd, size)
        counted = _counted(data, row)
        if counted is None:
            return  # the header refused it
        if counted is not False:
            requests, ended, sessions, torn = counted
            _settle(row, requests, ended, sessions, torn, live)
            return
        os.lseek(fd, 0, os.SEEK_SET)
    _scan_lines(fd, row, live=live)


def _read_all(fd: int, size: int) -> bytes:
    """The file's bytes, read once when it is as large as ``fstat`` said (and at most
    :data:`_CHUNK` past that size: a growing file still ends)."""
    wanted = size + 1
    data = os.read(fd, wanted)
    if len(data) < wanted:
        return data
    pieces = [data]
    remaining = _CHUNK
    while remaining > 0:
        chunk = os.read(fd, min(_CHUNK, remaining))
        if not chunk:
            break
        pieces.append(chunk)
        remaining -= len(chunk)
    return b"".join(pieces)


def _counted(
    data: bytes, row: ListedRecording
) -> tuple[int, int, int, bool] | Literal[False] | None:
    """``(requests, call_ends, sessions, torn)`` from the bytes alone; None when the header
    refuses the file (``row`` says why), False when some line is in another form."""
    if not data:
        row.state, row.reason = INVALID, "is empty"
        return None
    first_end = data.find(b"\n")
    if not _header_ok(data if first_end < 0 else data[:first_end], row):
        return None
    if first_end < 0:
        return 0, 0, 0, True
    last = data.rfind(b"\n") + 1  # the lines from the header's newline to the last newline
    marker = b"\n" + REQUEST_LINE_PREFIX
    requests = 0
    sessions = set()
    position = data.find(marker, first_end, last)
    while position >= 0:  # one pass over the request lines, reading each one's session
        requests += 1
        sessions.add(_session_at(data, position + 1))
        position = data.find(marker, data.find(b"\n", position + 1), last)
    if not requests and data[first_end:last].strip():
        return False  # lines, but none in the writer's form: read them one by one
    ended = data.count(b"\n" + _CALL_END_PREFIX, first_end, last)
    return requests, ended, len(sessions), last != len(data)


def _scan_lines(fd: int, row: ListedRecording, *, live: bool) -> None:
    """:func:`_scan` line by line, for a large file or one written in another form."""
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
    if first and not pending:
        row.state, row.reason = INVALID, "is empty"
        return
    if first and not _header_ok(pending, row):
        return
    _settle(row, requests, ended, len(sessions), bool(pending), live)


def _settle(
    row: ListedRecording, requests: int, ended: int, sessions: int, torn: bool, live: bool
) -> None:
    row.calls, row.sessions = requests, sessions
    if live:
        row.state = RECORDING
    elif torn:
        row.state, row.reason = (
            INTERRUPTED,
            "ends with an incomplete line (its writer died); run 'openprogram recordings recover' on it",
        )
    elif ended < requests:
        row.state = INTERRUPTED
        row.reason = f"{requests - ended} call(s) have no call_end (its writer died); run 'openprogram recordings recover' on it"
    elif ended > requests:
        row.state, row.reason = INVALID, "holds more call_end lines than calls"


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
    """The session of one request line."""
    return _session_at(line, 0)


def _session_at(data: bytes, start: int) -> Any:
    """The session of the request line at ``start`` of ``data``: read from the line's head in
    the writer's form (``..."call_index":N,"session":"ID",...``) without copying the line, else
    parsed whole."""
    comma = data.find(b",", start + len(REQUEST_LINE_PREFIX), start + len(REQUEST_LINE_PREFIX) + 24)
    if comma >= 0 and data.startswith(_SESSION_KEY, comma + 1):
        begin = comma + 1 + len(_SESSION_KEY)
        end = data.find(b'"', begin, begin + 256)
        if end > 0 and data.find(b"\\", begin, end) < 0:
            return data[begin:end].decode("utf-8", "replace")
    line_end = data.find(b"\n", start)
    line_end = line_end if line_end >= 0 else len(data)
    if data.find(_SESSION_KEY[:-1], start, line_end) < 0:
        return None  # no session field: the file's implicit session
    return _loaded(data[start:line_end]).get("session")


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
