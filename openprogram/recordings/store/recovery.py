"""Repairing a recording whose writer died: ``openprogram recordings recover``.

A writer killed mid-call (Ctrl-C twice, an OOM kill, a CI timeout) leaves a file the strict
reader refuses: the last line may be torn (no newline: the write in flight), and the calls that
were streaming have no ``call_end``. Every call before the crash is still whole, so recovery
does the two repairs a crash can need, and nothing else:

* a torn last line is dropped;
* every call without a ``call_end`` is closed with ``outcome`` ``abandoned`` and the count of
  its events present (replay then serves those events and raises ``RecordedCallInterrupted``,
  as for any interrupted call).

The repaired text must then pass the strict reader; any other defect is refused with the
reader's message (which names the line), because guessing would put words in the model's
mouth. The file is replaced atomically, keeping its mode. See ``docs/file-format.md``.
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..file.atomic import remove_leftovers, replace_atomically
from ..file.format import (
    CALL_END,
    EVENT,
    REQUEST,
    RecordingFileError,
    call_end_row,
    encode_line,
    is_plain_int,
    iter_rows,
)

__all__ = ["RecoveryPlan", "apply_recovery", "plan_recovery"]


@dataclass
class RecoveryPlan:
    """What :func:`apply_recovery` would change; ``needed`` is False for a sound file."""

    path: Path
    torn_line: int | None = None  # the number of the dropped last line
    abandoned: dict[int, int] = field(default_factory=dict)  # call_index -> events present
    repaired: bytes = b""
    mode: int = 0o600

    @property
    def needed(self) -> bool:
        return self.torn_line is not None or bool(self.abandoned)

    def describe(self) -> list[str]:
        lines = []
        if self.torn_line is not None:
            lines.append(f"drop the torn last line {self.torn_line}")
        for call_index, events in sorted(self.abandoned.items()):
            lines.append(f"close call {call_index} as abandoned after its {events} event(s)")
        return lines


def plan_recovery(path: str | os.PathLike[str]) -> RecoveryPlan:
    """Work out the repair of ``path`` and check the result with the strict reader; raise
    :class:`RecordingFileError` for a file recovery must not touch or cannot repair."""
    path = Path(path)
    data, mode = _read_regular_file(path)
    plan = RecoveryPlan(path=path, mode=mode)
    lines = data.split(b"\n")
    complete, tail = lines[:-1], lines[-1]
    if tail:  # no newline after the last line: the write in flight when the writer died
        plan.torn_line = len(complete) + 1
    requests: set[int] = set()
    ended: set[int] = set()
    events: dict[int, int] = {}
    try:
        rows = list(iter_rows(path, complete))
    except RecordingFileError as error:
        raise RecordingFileError(
            path, f"{error.reason}; only a torn last line can be recovered", error.line_number
        ) from None
    for _number, row in rows:
        if not is_plain_int(row.get("call_index")):
            continue  # the header, or a defect the strict reader will name below
        index = row["call_index"]
        kind = row.get("type")
        if kind == REQUEST:
            requests.add(index)
        elif kind == CALL_END:
            ended.add(index)
        elif kind == EVENT:
            events[index] = events.get(index, 0) + 1
    plan.abandoned = {index: events.get(index, 0) for index in sorted(requests - ended)}
    repaired = b"".join(line + b"\n" for line in complete)
    for index, count in plan.abandoned.items():
        repaired += encode_line(call_end_row(index, count, "abandoned"))
    plan.repaired = repaired
    _check_strictly(plan)
    return plan


def apply_recovery(plan: RecoveryPlan) -> None:
    """Replace the file with the repaired text, atomically, keeping its mode (after removing
    what killed rewrites left beside it); raise :class:`RecordingFileError` naming the folder
    when it cannot be written, the file unchanged."""
    if not plan.needed:
        return
    remove_leftovers(plan.path)
    try:
        replace_atomically(plan.path, plan.repaired, plan.mode)
    except OSError as error:
        raise RecordingFileError(
            plan.path,
            f"cannot write the repaired file beside it: the folder {plan.path.parent} cannot be written "
            f"({error.strerror or error}); make it writable, or copy the file to a folder you can write",
            kind="unreadable",
        ) from None


def _read_regular_file(path: Path) -> tuple[bytes, int]:
    """The file's bytes and mode, read with the checks every reader makes (a symlink, a FIFO or
    a device is refused without blocking, the read is bounded)."""
    from ...state import FileRefusal, read_regular_file
    from ..file.reader import MAX_RECORDING_BYTES

    try:
        data = read_regular_file(path, MAX_RECORDING_BYTES, follow_symlinks=False)
        mode = stat.S_IMODE(os.lstat(path).st_mode)
    except FileRefusal as refusal:
        reason = (
            "is a symbolic link; recover the file it points to"
            if refusal.kind == "symlink"
            else refusal.reason
        )
        kind = refusal.kind if refusal.kind in ("symlink", "not_a_file") else "corrupt"
        raise RecordingFileError(path, reason, kind=kind) from None
    except OSError as error:
        kind = "missing" if isinstance(error, FileNotFoundError) else "unreadable"
        raise RecordingFileError(path, f"cannot read: {error.strerror}", kind=kind) from None
    return data, mode


def _check_strictly(plan: RecoveryPlan) -> None:
    """Run the strict reader on the repaired text; its error, naming the line, is the refusal.

    The reader reads files, so the text goes to a private temporary folder (0700, removed at
    once), never beside the recording: a dry run writes nothing there, and a folder that cannot
    be written does not stop it."""
    from ..file.reader import read_recording_file

    try:
        folder = tempfile.TemporaryDirectory(prefix="openprogram-recover-")
    except OSError as error:
        raise RecordingFileError(
            plan.path,
            f"cannot check the repair: no temporary folder can be made ({error.strerror or error})",
            kind="unreadable",
        ) from None
    with folder as name:
        temporary = Path(name) / plan.path.name
        descriptor = os.open(
            temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(plan.repaired)
        try:
            read_recording_file(temporary)
        except RecordingFileError as error:
            raise RecordingFileError(
                plan.path,
                f"{error.reason}; recovery repairs only a torn last line and calls left without "
                "a call_end",
                error.line_number,
                error.call_index,
                kind=error.kind,
            ) from None
