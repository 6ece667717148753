"""What a recording file holds, as metadata: the rows of ``recordings list``, the calls of
``recordings show``, and their stable ``--json`` shapes.

Everything here is metadata: sizes, ages, counts, apis, models, outcomes, token usage. Request
and response content (prompts, outputs, tool arguments and results) never reaches these
summaries, so the default output of ``list`` and ``show`` cannot leak it. Printing them for
people is the CLI's business (``openprogram/cli/recordings/render.py``).

The JSON shapes built here are the documented, stable ``--json`` schemas (docs/recordings-cli.md):
fields are only ever added, never renamed or removed, and ``schema_version`` changes if that
promise ever has to be broken. Importing this module is light: the strict reader (and with it
pydantic) is imported only when a file is read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ..file.reader import Recording

SCHEMA_VERSION = 1

#: ``state`` values of a listed recording.
VALID, INVALID, RECORDING, SYMLINK = "valid", "invalid", "recording", "symlink"


@dataclass
class RecordingInfo:
    """One row of ``list``: a file in (or, for an explicit replay path, outside) the managed
    folder, whatever state it is in."""

    path: Path
    id: str | None
    managed: bool
    active: bool = False
    state: str = VALID
    reason: str | None = None
    size: int | None = None
    mtime: float | None = None
    calls: int | None = None
    events: int | None = None

    def to_json(self, now: float) -> dict[str, Any]:
        return {
            "id": self.id,
            "path": str(self.path),
            "managed": self.managed,
            "active": self.active,
            "state": self.state,
            "reason": self.reason,
            "size_bytes": self.size,
            "modified_at": iso_time(self.mtime),
            "age_seconds": None if self.mtime is None else round(max(0.0, now - self.mtime), 3),
            "calls": self.calls,
            "events": self.events,
        }


def inspect_recording(
    path: Path, recording_id: str | None, *, managed: bool, active: bool
) -> RecordingInfo:
    """Describe one file without ever raising: a file that cannot be read or parsed is an
    ``invalid`` row with the reason, so one bad file never stops a listing."""
    from ..file.writer_lock import is_being_recorded

    info = RecordingInfo(path=path, id=recording_id, managed=managed, active=active)
    try:
        status = os.lstat(path)
    except OSError as error:
        info.state, info.reason = INVALID, f"cannot inspect: {error.strerror or error}"
        return info
    info.size, info.mtime = status.st_size, status.st_mtime
    if stat.S_ISLNK(status.st_mode):
        info.state = SYMLINK
        info.reason = (
            f"is a symbolic link to {os.readlink(path)}; managed recordings are regular files"
        )
        return info
    if not stat.S_ISREG(status.st_mode):
        info.state, info.reason = INVALID, "is not a regular file"
        return info
    live = _safely(is_being_recorded, path, default=False)
    try:
        recording = read_recording(path)
    except Exception as error:  # noqa: BLE001 - a listing reports every failure, never stops
        if live:
            info.state = RECORDING
        else:
            info.state, info.reason = INVALID, failure_reason(error)
        return info
    info.state = RECORDING if live else VALID
    info.calls, info.events = len(recording.calls), recording.event_count
    return info


def read_recording(path: Path) -> Recording:
    """The one strict reader (imported here, lazily: it brings pydantic with it), keeping per
    call only what every view of a file needs (requests, counts, the final message): a view
    never replays, so it need not hold every event of a large recording."""
    from ..file.reader import read_recording_file

    return read_recording_file(path, summary_only=True)


def failure_reason(error: BaseException) -> str:
    """The reason of a reader failure, without the path (the row already shows it)."""
    reason = getattr(error, "reason", None)
    if reason is None:
        return f"cannot be read: {type(error).__name__}: {error}"
    line, call = getattr(error, "line_number", None), getattr(error, "call_index", None)
    where = (f"line {line}" if line is not None else "") + (
        f"{', ' if line is not None else ''}call {call}" if call is not None else ""
    )
    return f"{where}: {reason}" if where else reason


_T = TypeVar("_T")


def _safely(function: Callable[..., _T], *args: Any, default: _T) -> _T:
    try:
        return function(*args)
    except OSError:
        return default


# ----------------------------------------------------------------------------- show


@dataclass
class CallSummary:
    """One call of ``show``: who was asked and how it went; never what was said."""

    call_index: int
    api: str | None
    provider: str | None
    model: str | None
    event_count: int
    outcome: str
    usage: dict[str, int] | None
    error_message: str | None
    #: Milliseconds from the request to the first event and to the last one (``t``); None
    #: for a file written before timings.
    first_event_ms: int | None = None
    duration_ms: int | None = None
    #: The session (numbered from 1 in file order; the recording sink that wrote the call)
    #: and the lane (``""``: the root) of the call.
    session: int = 1
    lane: str = ""
    #: What redaction replaced in the model's output: ``{"path", "rules"}`` per field.
    redactions: list[dict[str, Any]] = field(default_factory=list)
    #: How a proxied call replays through ``openprogram proxy``: ``"vendor"`` (the vendor's
    #: own answer, byte for byte) or ``"events"`` (its answer was withheld: ``withheld`` says
    #: why); None for a call recorded without the vendor's answer (not through the proxy).
    replays_from: str | None = None
    withheld: str | None = None
    #: The vendor's id of the answer and the model version that answered, where the vendor
    #: named them (None in a file written before answers kept them).
    response_id: str | None = None
    response_model: str | None = None
    #: The cost the call's answer reports (dollars; None without a final message).
    cost: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "call_index": self.call_index,
            "api": self.api,
            "provider": self.provider,
            "model": self.model,
            "event_count": self.event_count,
            "outcome": self.outcome,
            "usage": self.usage,
            "error_message": self.error_message,
            "first_event_ms": self.first_event_ms,
            "duration_ms": self.duration_ms,
            "session": self.session,
            "lane": self.lane,
            "redactions": self.redactions,
            "replays_from": self.replays_from,
            "answer_withheld": self.withheld,
            "response_id": self.response_id,
            "response_model": self.response_model,
            "cost": self.cost,
        }


#: ``reasoning`` is the part of ``output`` the vendor reported as reasoning (0 in a file written
#: before it was counted).
USAGE_FIELDS = ("input", "output", "reasoning", "cache_read", "cache_write", "total_tokens")


def reasoning_note(usage: Any) -> str:
    """`` (N reasoning)``, to follow an output count of which N tokens were reasoning; empty
    when the vendor reported none."""
    reasoning = usage.get("reasoning") if isinstance(usage, dict) else None
    return f" ({reasoning} reasoning)" if type(reasoning) is int and reasoning > 0 else ""


def answered_by(message: Any) -> str | None:
    """``MODEL-VERSION ID`` of an answer, ``-`` for the one the vendor did not name; None
    when it named neither (a file written before answers kept them)."""
    names = [
        message.get(key) if isinstance(message, dict) else None
        for key in ("response_model", "response_id")
    ]
    if not any(isinstance(name, str) and name for name in names):
        return None
    return " ".join(name if isinstance(name, str) and name else "-" for name in names)


def summarize_calls(calls: list[Any]) -> list[CallSummary]:
    """:func:`summarize_call` of each call, with its session numbered in file order."""
    sessions: dict[Any, int] = {}
    summaries = []
    for call in calls:
        summary = summarize_call(call)
        summary.session = sessions.setdefault(getattr(call, "session", None), len(sessions) + 1)
        summaries.append(summary)
    return summaries


def summarize_call(call: Any) -> CallSummary:
    """Metadata of a :class:`RecordedCall`: the model fields of its request and the usage and
    error message of the message its terminal event carries (terminal events are stored in
    full, so no partial snapshot is rebuilt). Redacted, as every view of a file is: a file
    edited by hand may hold a secret in an error message."""
    from ..insight.usage import call_usage
    from ..redaction import remove_secret_values
    from .comparison import final_message

    model = remove_secret_values(call.model)
    message = remove_secret_values(final_message(call))
    usage = None
    error_message = None
    cost = None
    answer: dict[str, Any] = message if isinstance(message, dict) else {}
    if answer:
        raw_usage = answer.get("usage")
        if isinstance(raw_usage, dict):
            usage = {name: raw_usage.get(name, 0) for name in USAGE_FIELDS}
            cost = call_usage(answer, call=call.call_index).cost
        error_message = answer.get("error_message")
    return CallSummary(
        call_index=call.call_index,
        api=_text(model.get("api")),
        provider=_text(model.get("provider")),
        model=_text(model.get("id")),
        event_count=call.event_count,
        outcome=call.outcome,
        usage=usage,
        error_message=error_message if isinstance(error_message, str) else None,
        first_event_ms=call.first_event_ms,
        duration_ms=call.duration_ms,
        lane=getattr(call, "lane", ""),
        redactions=list(getattr(call, "redactions", [])),
        replays_from=_replays_from(call),
        withheld=getattr(call, "answer_withheld", None),
        response_id=_text(answer.get("response_id")),
        response_model=_text(answer.get("response_model")),
        cost=cost,
    )


def _replays_from(call: Any) -> str | None:
    if getattr(call, "answer_kept", False):
        return "vendor"
    return "events" if getattr(call, "answer_withheld", None) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass
class ShowReport:
    path: Path
    id: str | None
    active: bool
    size: int
    mtime: float
    header: dict[str, Any]
    calls: list[CallSummary] = field(default_factory=list)

    def to_json(self, now: float) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "id": self.id,
            "path": str(self.path),
            "active": self.active,
            "size_bytes": self.size,
            "modified_at": iso_time(self.mtime),
            "age_seconds": round(max(0.0, now - self.mtime), 3),
            "format_version": self.header.get("format_version"),
            "created_at": _text(self.header.get("created_at")),
            "openprogram_version": _text(self.header.get("openprogram_version")),
            "call_count": len(self.calls),
            "event_count": sum(call.event_count for call in self.calls),
            "calls": [call.to_json() for call in self.calls],
        }


def list_json(
    folder: Path, mode: str, selector: Any, infos: list[RecordingInfo], now: float
) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "folder": str(folder),
        "mode": mode,
        "selector": selector if isinstance(selector, str) else None,
        "recordings": [info.to_json(now) for info in infos],
    }


def iso_time(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
