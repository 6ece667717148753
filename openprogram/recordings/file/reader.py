"""The one strict reader of recording files, :func:`read_recording_file`.

It validates a whole file when it is opened (every rule of ``docs/file-format.md``, every
event parsed into its class, every ``partial_patch`` applied), so a replay never fails halfway
because of the file. What it keeps is compact, and no ``partial`` snapshot is built at open:

* an event that only grows the previous snapshot's text (nearly every streamed event), or
  leaves it unchanged, is kept as its validated object without a snapshot, and its append;
  its snapshot is built when the event is served, from the previous one, without a second
  validation;
* an event without a snapshot (``done``, ``error``) is kept as its validated object;
* any other event (a full ``partial``, or a patch that adds a block or sets a value) is kept
  as its stored form and validated again when served: the same input, so it cannot fail.

So a 20,000-delta answer never has all its snapshots in memory at once, and opening it costs
no quadratic copying of its text. Its speed shortcuts live in :mod:`.reader_fast`.
"""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import orjson
from pydantic import ValidationError

from ...providers.types import AssistantMessageEvent
from ...state import READ_SLACK_BYTES, FileRefusal, open_regular_file
from .contexts import CallContexts
from .format import (
    ANSWER,
    ANSWER_WITHHELD,
    EVENT_CLASSES,
    LINE_TYPES,
    MAX_NESTING,
    OUTCOMES,
    PARTIAL_EVENT_TYPES,
    TOO_DEEP,
    RecordingFileError,
    answer_problem,
    context_source,
    is_plain_int,
    version_problem,
)
from .patches import PatchError, apply_patch, nesting, too_deep_operation
from .reader_fast import (
    Append,
    DeltaKind,
    Snapshots,
    collector_paused,
    kept_for_later,
)

__all__ = ["RecordedCall", "Recording", "read_event_times", "read_recording_file"]

#: The largest recording the reader opens (bytes): it reads a whole file at once, so a
#: bigger one is refused with a message instead of exhausting memory (docs/recordings-cli.md).
MAX_RECORDING_BYTES = 2 * 1024 * 1024 * 1024
_READ_BUFFER = 1024 * 1024
#: A ``partial`` sits two levels below its event line (line, event), which the limit counts from.
_PARTIAL_NESTING = MAX_NESTING - 2
_NO_TIME = object()  # an event line without ``t`` (written before timings)

# ============================================================================ the parsed file


@dataclass(eq=False)
class RecordedCall:
    """One call of a recording: its request payloads, its events as kept, and its end."""

    call_index: int
    #: The request's ``model`` and ``options`` payloads (``options`` None when the call had none).
    model: dict[str, Any]
    options: dict[str, Any] | None
    request_line: int
    #: The contexts of the recording's calls, this one's among them (built when asked).
    contexts: CallContexts = field(repr=False)
    #: With ``summary_only``: the last event as stored (a one-item list, empty for a call
    #: without events). None otherwise: the events are kept as ``entries``.
    rows: list[dict[str, Any]] | None = None
    #: One per event, in order (see the module's docstring): an event object, a stored event
    #: dict, or ``(event, append)`` (:func:`~.reader_fast.kept_for_later`), ``append`` ``()``
    #: for an unchanged snapshot.
    entries: list[Any] = field(default_factory=list, repr=False)
    event_lines: list[int] = field(default_factory=list, repr=False)
    outcome: str = "complete"
    event_count: int = 0
    end_line: int | None = None
    #: The lane the call was made in (``""``: the root) and the session (the recording sink)
    #: that wrote it (None: a file written before sessions, one implicit session).
    lane: str = ""
    session: str | None = None
    #: False when read for a summary (``summary_only``): only the last event row is kept.
    has_all_events: bool = True
    #: The ``t`` of the first and of the last event (ms since the request was sent), None
    #: when absent (a file written before timings).
    first_event_ms: int | None = None
    duration_ms: int | None = None
    #: What redaction replaced in the call's answer (``call_end``'s ``redactions``): one
    #: ``{"path": ..., "rules": [...]}`` per field of the model's output.
    redactions: list[dict[str, Any]] = field(default_factory=list)
    #: The vendor's own answer as it came (``call_end``'s ``vendor_answer``: a call recorded
    #: through ``openprogram proxy``), which a replay through the proxy serves byte for byte;
    #: None when the call replays from its events. ``answer_withheld`` says why a call that
    #: had one does not keep it (docs/file-format.md, "The vendor's answer").
    vendor_answer: dict[str, Any] | None = field(default=None, repr=False)
    answer_withheld: str | None = None
    #: Whether the call keeps the vendor's answer (also in a ``summary_only`` read, which
    #: does not keep the answer itself).
    answer_kept: bool = False

    @property
    def context(self) -> dict[str, Any]:
        """The request's context, resolved (read-only: it shares its messages with the
        contexts of other calls; see :mod:`.contexts`)."""
        return self.contexts.context(self.call_index)

    @property
    def request(self) -> dict[str, Any]:
        """The request payloads as recorded: ``model``, ``context`` and ``options``."""
        return {"model": self.model, "context": self.context, "options": self.options}

    @property
    def stored_context(self) -> tuple[Any, int | None, Any]:
        """How the file stores the context: ``(context, None, None)`` whole, or ``(None, BASE,
        OPS)`` as the ``context_patch`` of call BASE's (the growth, without building it)."""
        return self.contexts.stored(self.call_index)

    @property
    def message_count(self) -> int:
        """How many messages the request's context holds (without building it)."""
        return self.contexts.message_count(self.call_index)

    @property
    def system_prompt(self) -> Any:
        """The request's system prompt (without building its context)."""
        return self.contexts.system_prompt(self.call_index)

    def messages_from(self, start: int) -> list[Any]:
        """The context's messages from ``start`` on, without building the context when the
        file stores them as pushed onto an earlier call's (see :mod:`.contexts`)."""
        return self.contexts.messages_from(self.call_index, start)

    @property
    def context_growth(self) -> tuple[int | None, int]:
        """``(base, shared)``: the earlier call this call's context was stored as the growth
        of (None when stored whole) and how many leading messages it shares with that call's
        context, the very same objects (what the views need to show a turn's growth)."""
        return self.contexts.growth(self.call_index)

    def event_dumps(self) -> Iterator[dict[str, Any]]:
        """The full event dumps, ``partial`` restored, one at a time."""
        for event in self.events():
            yield event.model_dump(mode="json")

    def last_event_dump(self) -> dict[str, Any] | None:
        """The dump of the call's last event (the terminal one, which carries the final
        message), without building the snapshots of the events before it when it is kept
        whole, as ``done`` and ``error`` events are; None for a call without events."""
        if self.rows:
            return self.rows[-1]  # a summary read keeps just this row
        if not self.has_all_events or not self.entries:
            return None
        last = self.entries[-1]
        if type(last) is dict and "partial_patch" not in last:
            return last
        if type(last) not in (tuple, dict):
            return cast(
                "dict[str, Any]", last.model_dump(mode="json")
            )  # an event object: its dump is a dict
        return next(iter(deque(self.event_dumps(), maxlen=1)), None)

    def events(self) -> Iterator[AssistantMessageEvent]:
        """The recorded events as new event objects, in order, each snapshot built as it is
        reached (see the module's docstring)."""
        if not self.has_all_events:
            raise RuntimeError(
                "this recording was read with summary_only=True: its events were not kept"
            )
        return _served(self.entries)


@dataclass(eq=False)
class Recording:
    """A strictly validated recording file."""

    path: Path
    header: dict[str, Any]
    header_line: int
    calls: list[RecordedCall]
    line_count: int

    @property
    def format_version(self) -> int:
        version: int = self.header["format_version"]  # the reader checked it is an int
        return version

    @property
    def event_count(self) -> int:
        return sum(call.event_count for call in self.calls)


class _Chain:
    """The previous ``partial`` of a call, both as the plain way patches it (a dict, with
    the appends since made to the object side only still ``pending``) and as
    :class:`Snapshots` (the shortcut's side). The reader and the replay walk a call's events
    through the same chain, so the plain way sees the same dicts at both."""

    __slots__ = ("partial", "pending", "snapshots")

    def __init__(self) -> None:
        self.partial: Any = None
        self.pending: list[Append] = []
        self.snapshots: Snapshots | None = None

    def restart(self, partial: dict[str, Any]) -> None:
        """A full ``partial`` was stored."""
        self.partial, self.pending = partial, []

    def patched(self, patch: Any) -> Any:
        """The partial ``patch`` makes of the previous one (it becomes the previous one);
        raises :class:`PatchError` when it does not apply."""
        self.partial = apply_patch(self.partial_dict(), patch)
        return self.partial

    def partial_dict(self) -> Any:
        """The previous partial as a dict, the pending appends applied (to copies: the dict
        may be a stored row)."""
        if not self.pending:
            return self.partial
        grown: dict[tuple[int, str], list[str]] = {}
        for index, name, suffix in self.pending:
            grown.setdefault((index, name), []).append(suffix)
        root = dict(self.partial)
        content = list(root["content"])
        for (index, name), suffixes in grown.items():
            block = dict(content[index])
            block[name] = block[name] + "".join(suffixes)
            content[index] = block
        root["content"] = content
        self.partial, self.pending = root, []
        return root


def _served(entries: list[Any]) -> Iterator[AssistantMessageEvent]:
    """The events of a call's entries, each built when it is reached.

    Written for speed: this runs for every event of a replay. The appends a stored event
    after kept ones needs (the plain way patches a dict) are taken from the entries between
    them when such an event is reached, not collected event by event."""
    chain = _Chain()
    served: Any = None  # the bound Snapshots.served of the latest stored snapshot
    since = 0  # the entries after the latest stored snapshot
    for position, entry in enumerate(entries):
        kind = type(entry)
        if kind is tuple:
            yield served(*entry)  # served_event(kept, snapshot) after grow(append)
        elif kind is dict:
            if "partial_patch" in entry:
                chain.pending = [
                    kept[1] for kept in entries[since:position] if type(kept) is tuple and kept[1]
                ]
                dump = entry.copy()
                dump["partial"] = chain.patched(dump.pop("partial_patch"))
            else:
                dump = entry
                chain.restart(entry["partial"])
            event = EVENT_CLASSES[dump["type"]].__pydantic_validator__.validate_python(dump)
            served = Snapshots(event.partial).served
            since = position + 1
            yield event
        else:
            yield entry


# ============================================================================ the strict reader


#: The head of this writer's event lines, up to the event's ``t`` (see :func:`read_event_times`).
_EVENT_TIME = re.compile(rb'\{"type":"event","call_index":(\d+),"event_index":(\d+),"t":(\d+),')


def read_event_times(recording: Recording) -> dict[int, list[int | None]]:
    """The ``t`` of every event (milliseconds from the call's request, docs/file-format.md), by
    ``call_index``, None for a line without one. Read from the file again, for a replay that
    paces: the reader keeps only each call's first and last, so a replay that does not pace
    pays nothing for them. A line that no longer holds its event (the file changed since it
    was read) has None."""
    reader = _Reader(recording.path)
    with os.fdopen(reader.open_descriptor(), "rb") as handle:
        lines = handle.read().split(b"\n")
    times: dict[int, list[int | None]] = {}
    for call in recording.calls:
        row: list[int | None] = []
        for event_index, number in enumerate(call.event_lines):
            line = lines[number - 1] if number <= len(lines) else b""
            found = _EVENT_TIME.match(line)
            if found is not None:
                same = (int(found.group(1)), int(found.group(2))) == (call.call_index, event_index)
                row.append(int(found.group(3)) if same else None)
                continue
            try:
                parsed = orjson.loads(line)
            except orjson.JSONDecodeError:
                parsed = None
            same = type(parsed) is dict and (
                parsed.get("call_index"),
                parsed.get("event_index"),
            ) == (call.call_index, event_index)
            t = parsed.get("t") if same else None
            row.append(t if type(t) is int and t >= 0 else None)
        times[call.call_index] = row
    return times


def read_recording_file(path: str | os.PathLike[str], *, summary_only: bool = False) -> Recording:
    """Parse and validate a whole recording file, or raise :class:`RecordingFileError`.

    With ``summary_only`` the file is validated just as strictly, but each call keeps only its
    requests and its last event row (the terminal event, which carries the final message):
    what ``recordings show``, ``list`` and ``diff`` need, in memory that does not grow with
    the number of events. Such calls cannot replay (``events()`` raises)."""
    with collector_paused():  # what is read is kept: no collector rescans meanwhile
        return _Reader(Path(path), summary_only).read()


class _CallState:
    """A call while its lines are read."""

    __slots__ = ("call", "chain", "placeholder", "count", "open", "last_t")

    def __init__(self, call: RecordedCall) -> None:
        self.call = call
        #: The previous partial; its :class:`Snapshots` only checks appends here, the text
        #: is grown when the events are served.
        self.chain = _Chain()
        #: The last snapshot validated whole: it stands in for ``partial`` while the fields
        #: of an event whose snapshot is built later are validated.
        self.placeholder: Any = None
        self.count = 0
        self.open = True
        #: The ``t`` of the latest event when it was read by :meth:`_Reader.delta_line` (the
        #: digits as in the line): the call's ``duration_ms`` once its ``call_end`` is read.
        self.last_t: bytes | None = None


class _Reader:
    def __init__(self, path: Path, summary_only: bool = False) -> None:
        self.path = path
        self.summary_only = summary_only
        self.header: dict[str, Any] | None = None
        self.header_line = 0
        self.version = 0  # the header's format_version, once read
        self.calls: dict[int, _CallState] = {}
        #: The calls not yet ended, by their ``call_index`` as the writer's line form spells it.
        self.open_calls: dict[bytes, _CallState] = {}
        #: Every call's context, for the ``context_patch`` of a later call to name.
        self.contexts = CallContexts()
        #: The fields set the events kept for later share, the latest one per event class.
        self.fields_sets: dict[type, frozenset[str]] = {}
        #: Lane names and session ids as today's rules store them (the same few repeat).
        self.names: dict[str, str] = {}

    def redacted_name(self, name: str | None) -> Any:
        """A lane name or session id as today's rules store it (both are the caller's text)."""
        if not name:
            return name
        redacted = self.names.get(name)
        if redacted is None:
            from ..redaction import redact_lane

            redacted = self.names[name] = redact_lane(name)
        return redacted

    def fail(
        self, reason: str, line: int | None = None, call: int | None = None, kind: str = "corrupt"
    ) -> RecordingFileError:
        return RecordingFileError(self.path, reason, line, call, kind)

    def read(self) -> Recording:
        """Validate the file line by line as it is read: neither the whole file nor all its
        lines are ever held at once, only what the calls keep."""
        fd = self.open_descriptor()
        with os.fdopen(fd, "rb", buffering=_READ_BUFFER) as handle:
            line_count = self.read_lines(
                handle, os.fstat(handle.fileno()).st_size + READ_SLACK_BYTES
            )
        if line_count == 0:
            raise self.fail("the file is empty")
        if self.header is None:
            raise self.fail("the file has no header line")
        return self.finish(line_count)

    def read_lines(self, handle: Any, budget: int) -> int:
        """Check every line of ``handle`` (each still ends with its ``\n``) and return how many
        there are; stop with an error past ``budget`` bytes (a file growing while read)."""
        loads, event_row, delta_line = orjson.loads, self.event_row, self.delta_line
        match_delta = _DELTA_LINE if not self.summary_only else _no_match  # a summary keeps rows
        number = total = 0
        for number, line in enumerate(handle, start=1):
            total += len(line)
            if total > budget:
                raise self.fail(
                    "the file grew while it was read (still being recorded?); read it again later"
                )
            growth = match_delta(
                line
            )  # this writer's streamed deltas (ending with "\n"): the hot path
            if growth is not None and delta_line(number, growth):
                continue
            if line[-1:] != b"\n":  # only the last line can lack it: one the writer never finished
                raise self.fail(
                    "the last line is incomplete (no newline at its end)",
                    number,
                    kind="interrupted",
                )
            if line.isspace():
                continue
            if line.startswith(b'{"type":"event",'):  # this writer's other event lines
                try:
                    row = loads(line)
                except orjson.JSONDecodeError:
                    self.line(number, line)  # raises with the reason
                if type(row) is dict and row.get("type") == "event" and self.header is not None:
                    self.check_nesting(number, line, row)
                    event_row(number, row)
                    continue
            self.line(number, line)
        return number

    def open_descriptor(self) -> int:
        """A descriptor of the file, refusing what is not a regular file (a FIFO would block
        forever, ``/dev/zero`` never end) and anything above :data:`MAX_RECORDING_BYTES`."""
        try:
            return open_regular_file(self.path, MAX_RECORDING_BYTES)
        except FileRefusal as refusal:
            kind = "not_a_file" if refusal.kind == "not_a_file" else "unreadable"
            raise self.fail(_refusal_reason(refusal), kind=kind) from None
        except FileNotFoundError as error:
            raise self.fail(f"cannot read: {error.strerror or error}", kind="missing") from None
        except OSError as error:
            raise self.fail(f"cannot read: {error.strerror or error}", kind="unreadable") from None

    def line(self, number: int, line: bytes) -> None:
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError as error:
            reason = _json_reason(error)
            if reason.startswith("depth limit"):  # orjson's own limit, far past the format's
                raise self.fail(TOO_DEEP, number) from None
            raise self.fail(f"not valid JSON or UTF-8 ({reason})", number) from None
        if type(row) is not dict:
            raise self.fail("a line must be a JSON object", number)
        self.check_nesting(number, line, row)
        kind = row.get("type")
        read_row = _ROW_READERS.get(kind) if type(kind) is str else None
        if read_row is None:
            raise self.fail(f"unknown line type {_short(kind)}", number)
        if self.header is None and kind != "header":
            raise self.fail("the first line must be the header", number)
        read_row(self, number, row)

    def check_nesting(self, number: int, line: bytes, row: dict[str, Any]) -> None:
        """Refuse a line that nests deeper than :data:`MAX_NESTING`. A line with no more
        brackets than the limit cannot (nearly every line): only the others are walked."""
        if (
            line.count(b"{") + line.count(b"[") > MAX_NESTING
            and nesting(row, MAX_NESTING) > MAX_NESTING
        ):
            raise self.fail(TOO_DEEP, number)

    def header_row(self, number: int, row: dict[str, Any]) -> None:
        if self.header is not None:
            raise self.fail(f"a second header (the first is at line {self.header_line})", number)
        if self.calls:
            raise self.fail("the first line must be the header", number)
        problem = version_problem(row.get("format_version"))
        if problem is not None:
            raise self.fail(problem, number, kind="wrong_version")
        self.header, self.header_line = row, number
        self.version = row["format_version"]

    def call_index_of(self, number: int, row: dict[str, Any]) -> int:
        index = row.get("call_index")
        if not is_plain_int(index) or index < 0:
            raise self.fail(
                f"call_index must be a non-negative integer, not {_short(index)}", number
            )
        return index

    def open_call(self, number: int, row: dict[str, Any], what: str) -> _CallState:
        index = self.call_index_of(number, row)
        state = self.calls.get(index)
        if state is None:
            raise self.fail(f"{what} for a call that has no request line before it", number, index)
        if not state.open:
            raise self.fail(
                f"{what} after the call_end of the call (line {state.call.end_line})", number, index
            )
        return state

    def request_row(self, number: int, row: dict[str, Any]) -> None:
        index = self.call_index_of(number, row)
        if index in self.calls:
            raise self.fail(
                f"a second request for the call (the first is at line "
                f"{self.calls[index].call.request_line})",
                number,
                index,
            )
        if type(row.get("model")) is not dict:
            raise self.fail("the request's model must be a JSON object", number, index)
        try:
            context, base, ops = context_source(row, self.version, index)
            if base is None:
                self.contexts.add_whole(index, context)
            else:
                self.contexts.add_patch(index, base, ops)
        except ValueError as error:
            raise self.fail(str(error), number, index) from None
        options = row.get("options")
        if options is not None and type(options) is not dict:
            raise self.fail("the request's options must be a JSON object or null", number, index)
        lane, session = row.get("lane", ""), row.get("session")
        if type(lane) is not str or (lane and "" in lane.split("/")):
            raise self.fail(
                'the request\'s lane must be a path like "a/b" (no empty segment)', number, index
            )
        if session is not None and type(session) is not str:
            raise self.fail("the request's session must be a string", number, index)
        if lane or session:  # what a file written under older rules holds is shown redacted
            lane, session = self.redacted_name(lane), self.redacted_name(session)
        call = RecordedCall(
            index, row["model"], options, number, self.contexts, lane=lane, session=session
        )
        if self.summary_only:
            call.rows, call.has_all_events = [], False
        self.calls[index] = self.open_calls[b"%d" % index] = _CallState(call)

    def event_row(self, number: int, row: dict[str, Any]) -> None:
        """The hot path of reading: written for speed, the checks of :meth:`open_call` are
        repeated inline and its messages used only on failure."""
        index = row.get("call_index")
        state = self.calls.get(index) if type(index) is int else None
        if state is None or not state.open:
            state = self.open_call(number, row, "an event")  # raises with the reason
        call = state.call
        event_index = row.get("event_index")
        if type(event_index) is not int or event_index != state.count:
            raise self.fail(
                f"event_index {_short(event_index)} where {state.count} was expected", number, index
            )
        t = row.get("t", _NO_TIME)
        if t is not _NO_TIME:
            if type(t) is not int or t < 0:
                raise self.fail(
                    f"t must be a non-negative integer (milliseconds), not {_short(t)}",
                    number,
                    index,
                )
            if not state.count:
                call.first_event_ms = t
        call.duration_ms = None if t is _NO_TIME else t
        state.last_t = None
        stored = row.get("event")
        if type(stored) is not dict:
            raise self.fail("the event must be a JSON object", number, index)
        event_type = stored.get("type")
        cls = EVENT_CLASSES.get(event_type) if type(event_type) is str else None
        if cls is None:
            raise self.fail(f"unknown event type {_short(event_type)}", number, index)
        append: Any = False  # False: the snapshot is validated whole (or there is none)
        if "partial_patch" in stored:
            dump, append = self.patched(state, stored, number)
        else:
            dump = stored
            if "partial" in stored and event_type in PARTIAL_EVENT_TYPES:
                state.chain.restart(stored["partial"])
        try:
            event = cls.__pydantic_validator__.validate_python(dump)
        except ValidationError as error:
            raise self.fail(
                f"the event does not parse as {cls.__name__}: {_validation_reason(error)}",
                number,
                index,
            ) from None
        partial = event.__dict__.get("partial")
        if append is False and partial is not None:
            state.placeholder = partial
            state.chain.snapshots = Snapshots(partial)
        state.count += 1
        if self.summary_only:
            call.rows, call.event_lines = [stored], [number]
            return
        call.event_lines.append(number)
        call.entries.append(self.entry(event, stored, append))

    def delta_line(self, number: int, line: re.Match[bytes]) -> bool:
        """Read a text or thinking delta in this writer's line form (:data:`_DELTA_LINE`, one
        regular-expression match: no dict, no validation), as :meth:`event_row` would; False
        when the line needs the general path (which then accepts it or says what is wrong).
        Written for speed: it runs for nearly every line of a file."""
        call_index, event_index, t, kind, index, delta = line.groups()
        state = self.open_calls.get(call_index)  # the form's numbers have no leading zero
        if state is None:
            return False
        count = state.count
        if (_DIGITS[count] if count < _DIGITS_KEPT else b"%d" % count) != event_index:
            return False
        chain = state.chain
        snapshots = chain.snapshots
        if snapshots is None or chain.partial is None:
            return False
        try:
            delta = _loads(delta)
        except orjson.JSONDecodeError:
            return False
        field_name, delta_kind = _DELTA_SHAPES[kind]
        block = _INDEXES.get(index)
        append = snapshots.append_to(int(index) if block is None else block, field_name, delta)
        if append is None:
            return False
        state.last_t = t  # its digits: only the last event's become the call's duration_ms
        chain.pending.append(append)
        state.count = count + 1
        call = state.call
        call.event_lines.append(number)
        call.entries.append((delta_kind, append))  # the delta is the append's suffix: see DeltaKind
        return True

    def patched(
        self, state: _CallState, stored: dict[str, Any], number: int
    ) -> tuple[dict[str, Any], Any]:
        """The dump to validate of an event stored with ``partial_patch``, and its append:
        ``(index, field, suffix)`` or ``()`` (unchanged) when the shortcut builds its
        snapshot later, the placeholder standing in for it; False when the patch was applied
        to the previous partial as a dict (the plain way), the result standing in the dump."""
        event_type, index = stored["type"], state.call.call_index
        patch = stored["partial_patch"]
        if event_type not in PARTIAL_EVENT_TYPES:
            raise self.fail(f"a {event_type} event has no partial to patch", number, index)
        if "partial" in stored:
            raise self.fail("an event carries both partial and partial_patch", number, index)
        chain = state.chain
        if chain.partial is None:
            raise self.fail(
                "partial_patch on an event with no earlier partial in its call", number, index
            )
        dump = stored.copy()
        del dump["partial_patch"]
        snapshots = chain.snapshots
        append = None if snapshots is None else snapshots.append_of(patch)
        if append is not None:
            # Only text grew, or nothing changed: the snapshot is built from the previous
            # one when served; validation covers the event's own fields.
            dump["partial"] = state.placeholder
            if append:
                chain.pending.append(append)
            return dump, append
        deep = too_deep_operation(patch, _PARTIAL_NESTING)
        if deep is not None:
            raise self.fail(
                f"the partial_patch's operation {deep} nests the partial deeper than {MAX_NESTING} "
                "levels of objects and arrays (the format's limit)",
                number,
                index,
            )
        try:
            dump["partial"] = chain.patched(patch)
        except PatchError as error:
            raise self.fail(f"the partial_patch does not apply: {error}", number, index) from None
        return dump, False

    def entry(self, event: Any, stored: dict[str, Any], append: Any) -> Any:
        """What a call keeps of a validated event (see the module's docstring)."""
        if "partial" not in event.__dict__:
            return event
        if append is not False:
            kept = kept_for_later(event, append, self.fields_sets)
            if kept is not None:
                return kept
        return stored

    def call_end_row(self, number: int, row: dict[str, Any]) -> None:
        state = self.open_call(number, row, "a call_end")
        call = state.call
        count = row.get("event_count")
        if not is_plain_int(count) or count != state.count:
            raise self.fail(
                f"event_count {_short(count)} but the call has {state.count} events",
                number,
                call.call_index,
            )
        outcome = row.get("outcome", "complete")
        if outcome not in OUTCOMES:
            raise self.fail(f"unknown outcome {_short(outcome)}", number, call.call_index)
        redactions = row.get("redactions", [])
        if not _valid_redactions(redactions):
            raise self.fail(
                'call_end redactions must be a list of {"path": TEXT, "rules": [TEXT, ...]}',
                number,
                call.call_index,
            )
        answer, withheld = row.get(ANSWER), row.get(ANSWER_WITHHELD)
        problem = answer_problem(answer) if answer is not None else None
        if (
            problem is None
            and withheld is not None
            and (answer is not None or type(withheld) is not str)
        ):
            problem = (
                f"{ANSWER_WITHHELD} must be a reason (a string), on a call_end without {ANSWER}"
            )
        if problem is not None:
            raise self.fail(problem, number, call.call_index)
        call.outcome, call.event_count, call.end_line = outcome, count, number
        call.redactions = redactions
        call.vendor_answer = None if self.summary_only else answer
        call.answer_kept, call.answer_withheld = answer is not None, withheld
        if state.last_t is not None:
            call.duration_ms = int(state.last_t)
        state.open = False
        del self.open_calls[b"%d" % call.call_index]
        state.chain = state.placeholder = None  # type: ignore[assignment]

    def finish(self, line_count: int) -> Recording:
        assert self.header is not None
        unfinished = [state.call for state in self.calls.values() if state.open]
        if unfinished:
            first = min(unfinished, key=lambda call: call.request_line)
            raise self.fail(
                "the call has no call_end (the recording was interrupted or is still being "
                "written)",
                first.request_line,
                first.call_index,
                kind="interrupted",
            )
        count = len(self.calls)
        if set(self.calls) != set(range(count)):
            missing = min(set(range(count)) - set(self.calls))
            raise self.fail(
                f"call_index values are not contiguous from 0: call {missing} is missing",
                None,
                missing,
            )
        calls = [self.calls[index].call for index in range(count)]
        return Recording(self.path, self.header, self.header_line, calls, line_count)


def _refusal_reason(refusal: FileRefusal) -> str:
    if refusal.kind == "too_large":
        return f"{refusal.reason}; split the recording, or record a shorter session"
    if refusal.kind == "not_a_file":
        return f"{refusal.reason}; a recording must be a regular .jsonl file"
    return refusal.reason


def _valid_redactions(value: Any) -> bool:
    return type(value) is list and all(
        type(item) is dict
        and type(item.get("path")) is str
        and type(item.get("rules")) is list
        and all(type(rule) is str for rule in item["rules"])
        for item in value
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _json_reason(error: orjson.JSONDecodeError) -> str:
    return str(error).split(":", 1)[0]


def _validation_reason(error: ValidationError) -> str:
    first = error.errors(include_input=False, include_url=False)[0]
    where = ".".join(str(step) for step in first.get("loc", ())) or "<root>"
    return f"{where}: {first.get('msg', 'invalid')}"


#: How the strict reader reads each line type: a type not in this table is refused, never
#: taken for another.
_ROW_READERS: dict[str, Any] = {
    "header": _Reader.header_row,
    "request": _Reader.request_row,
    "event": _Reader.event_row,
    "call_end": _Reader.call_end_row,
}
assert set(_ROW_READERS) == LINE_TYPES, "every line type of the format has its reader"


#: A streamed text or thinking delta exactly as this program's writer makes it (the encoder's
#: template, docs/file-format.md): the block index and the delta appear twice, and the
#: back-references make the expression itself check that both copies are the same bytes.
#: Numbers as JSON writes them (no leading zero); the delta a JSON string, decoded by orjson,
#: which also checks its escapes and UTF-8. Anything else takes the general path.
_DELTA_LINE = re.compile(
    rb'\{"type":"event","call_index":(0|[1-9][0-9]*),"event_index":(0|[1-9][0-9]*),"t":(0|[1-9][0-9]*),'
    rb'"event":\{"type":"(text|thinking)_delta","content_index":(0|[1-9][0-9]*),'
    rb'"delta":("[^"\\\x00-\x1f]*+(?:\\.[^"\\\x00-\x1f]*+)*+"),'
    rb'"partial_patch":\[\["append",\["content",\5,"\4"\],\6\]\]\}\}\n\Z'
).match
#: Per block kind of :data:`_DELTA_LINE` (its group 4): the field appended to, and what a call
#: keeps for the event besides its append (one shared value per kind).
_DELTA_SHAPES: dict[bytes, tuple[str, DeltaKind]] = {
    b"text": ("text", DeltaKind(EVENT_CLASSES["text_delta"], "text_delta")),
    b"thinking": ("thinking", DeltaKind(EVENT_CLASSES["thinking_delta"], "thinking_delta")),
}
#: Block indexes as the line form spells them, the common ones read without ``int``.
_INDEXES: dict[bytes, int] = {b"%d" % index: index for index in range(64)}
#: Event indexes as the line form spells them, the first ones compared without formatting.
_DIGITS_KEPT = 4096
_DIGITS: list[bytes] = [b"%d" % index for index in range(_DIGITS_KEPT)]
_loads = orjson.loads


def _no_match(line: bytes) -> None:
    """:data:`_DELTA_LINE` for a summary read, which keeps rows, not events."""
    return None
