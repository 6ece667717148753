"""Replay at the provider boundary: the offline :class:`ReplayProvider`.

It holds nothing but the parsed file (:mod:`.reader`): no vendor provider, no HTTP client, no
credential. It compares each incoming request with the recorded one and raises
:class:`ReplayMismatch` at the first difference (see ``docs/file-format.md``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ...providers.faults import Fault
from ...providers.lanes import ROOT_LANE, current_lane
from ...providers.types import (
    AssistantMessageEvent,
    Context,
    Model,
    SimpleStreamOptions,
    StreamOptions,
)
from ..file.format import EVENT_CLASSES, answer_chunks, raw_request_payloads, request_payloads
from ..file.reader import RecordedCall, Recording, read_event_times, read_recording_file
from ..redaction import (
    PLACEHOLDER,
    Redactor,
    check_run_values,
    current_redactor,
    redact_lane,
    remove_secret_values,
    use_run_values,
    value_token,
)
from .differences import REMAINING_CALLS, ReplayMismatch, find_first_difference
from .faulting import FaultBook, faulted_events
from .lazy_redaction import settle
from .options import ReplayOptions
from .pacing import paced
from .rechunk import rechunked
from .volatile import RequestFilter

__all__ = ["RecordedCallInterrupted", "ReplayProvider", "ServedAnswer", "served_answers"]


# ============================================================================ the vendor's answer


class ServedAnswer:
    """Where a replay leaves the vendor's own answer of the call it served (see
    :func:`served_answers`): ``answer`` is ``(status, content_type, chunks, complete)``
    (``complete`` False: the connection broke off after the chunks), or None when the
    call keeps none (it replays from its events); ``served`` says whether a recorded call was
    served at all (a request that drifted in ``update`` goes live instead)."""

    __slots__ = ("answer", "served")

    def __init__(self) -> None:
        self.answer: tuple[int, str, list[bytes], bool] | None = None
        self.served = False


_served_answer: ContextVar[ServedAnswer | None] = ContextVar(
    "openprogram_served_answer", default=None
)


@contextlib.contextmanager
def served_answers() -> Iterator[ServedAnswer]:
    """Inside the block, a replayed call leaves its stored vendor answer in the yielded slot,
    so whoever made the call (``openprogram proxy``) can hand the client those bytes instead
    of encoding the events. Replay itself knows nothing of who reads it, or of any vendor."""
    slot = ServedAnswer()
    token = _served_answer.set(slot)
    try:
        yield slot
    finally:
        _served_answer.reset(token)


def _offer_answer(call: RecordedCall) -> None:
    slot = _served_answer.get()
    if slot is not None:
        slot.served = True
        slot.answer = None if call.vendor_answer is None else answer_chunks(call.vendor_answer)


class RecordedCallInterrupted(Exception):
    """A recorded call that did not end normally (``error``, ``cancelled``, ``abandoned``):
    replay hands back the events it produced and then raises this, as the live run failed."""

    def __init__(self, call_index: int, outcome: str) -> None:
        self.call_index = call_index
        self.outcome = outcome
        super().__init__(
            f"recorded call {call_index} ended with outcome {outcome!r}: the recorded run was "
            "interrupted here, so the replay stops here too"
        )

    def __reduce__(self) -> tuple[type[RecordedCallInterrupted], tuple[int, str]]:
        return (type(self), (self.call_index, self.outcome))


# ============================================================================ the provider


@functools.lru_cache(maxsize=1)
def _default_options_dump() -> dict[str, Any]:
    """What ``options=None`` is compared as: the redacted default ``StreamOptions``.

    A call made with ``options=None`` and one made with default options behave the same, and
    the facade turns one into the other when it fills in a key. A field one side lacks equals
    ``null`` on the other (``find_first_difference``), so ``stream`` recordings
    (``StreamOptions``) replay through ``stream_simple`` (``SimpleStreamOptions`` adds
    ``reasoning`` and ``thinking_budgets``, both ``null`` by default) whenever the options
    agree. Cached: it is the same for the whole process and is only ever compared.
    """
    return cast(
        "dict[str, Any]", remove_secret_values(StreamOptions().model_dump(mode="json"))
    )  # the redaction of a dict is a dict


#: The fields that say which model a request is for: a changed model is reported by the field
#: that tells it (``model.id``), not by whichever of its numbers sorts first.
MODEL_IDENTITY_FIELDS = ("id", "provider", "api")
#: Catalog metadata of a model that never reaches the vendor: recorded, never compared, so a
#: teammate whose local server listens on another port, or a release with new prices, replays
#: the same recordings (docs/file-format.md, "What a replay compares"). ``max_tokens`` is
#: compared: providers send it as the default output limit.
CATALOG_ONLY_MODEL_FIELDS = frozenset({"name", "base_url", "cost", "context_window"})


def _compared_model(model: Any) -> Any:
    if type(model) is not dict or CATALOG_ONLY_MODEL_FIELDS.isdisjoint(model):
        return model
    return {key: value for key, value in model.items() if key not in CATALOG_ONLY_MODEL_FIELDS}


def first_request_difference(
    recorded: dict[str, Any], incoming: dict[str, Any]
) -> tuple[str, Any, Any] | None:
    """The first difference between two requests' payloads: ``model`` (its identity fields
    first, then the rest in sorted order, catalog metadata left out), then ``context``, then
    ``options``."""
    recorded_model, incoming_model = recorded["model"], incoming["model"]
    if isinstance(recorded_model, dict) and isinstance(incoming_model, dict):
        for field in MODEL_IDENTITY_FIELDS:
            difference = find_first_difference(
                recorded_model.get(field), incoming_model.get(field), f"model.{field}"
            )
            if difference is not None:
                return difference
    difference = find_first_difference(
        _compared_model(recorded_model), _compared_model(incoming_model), "model"
    )
    if difference is not None:
        return difference
    for name in ("context", "options"):
        difference = find_first_difference(recorded[name], incoming[name], name)
        if difference is not None:
            return difference
    return None


def with_run_values(
    event: AssistantMessageEvent, values: tuple[tuple[str, str], ...]
) -> AssistantMessageEvent:
    """A recorded event with every ``{{name}}`` of a run value replaced by this run's text: a
    streamed tool-call argument delta is JSON text, so there the value goes in JSON-escaped."""
    dump = event.model_dump(mode="json")
    tokens = [(value_token(name), text) for name, text in values]
    replaced = _substituted(dump, tokens)
    if dump.get("type") == "toolcall_delta" and isinstance(dump.get("delta"), str):
        replaced["delta"] = _with_values(
            dump["delta"], [(token, json.dumps(text)[1:-1]) for token, text in tokens]
        )
    if replaced == dump:
        return event
    return cast(
        "AssistantMessageEvent", EVENT_CLASSES[dump["type"]].model_validate(replaced)
    )  # EVENT_CLASSES holds only event classes, typed type[BaseModel]


def _substituted(value: Any, tokens: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        if "{{" in value:
            return _with_values(value, tokens)
        return value
    if isinstance(value, dict):
        return {key: _substituted(item, tokens) for key, item in value.items()}
    if isinstance(value, list):
        return [_substituted(item, tokens) for item in value]
    return value


def _with_values(text: str, tokens: list[tuple[str, str]]) -> str:
    """``{{name}}`` as this run's text, ``{{!name}}`` (a literal the model wrote) as the
    literal ``{{name}}``, one bang fewer each (see ``redaction.value_token``)."""
    texts = {token[2:-2]: text for token, text in tokens}
    pattern = re.compile(r"\{\{(!*)(" + "|".join(map(re.escape, texts)) + r")\}\}")

    def replacement(match: re.Match[str]) -> str:
        bangs, name = match.group(1), match.group(2)
        return texts[name] if not bangs else value_token(name, len(bangs) - 1)

    return pattern.sub(replacement, text)


#: How deep replay looks for the parts of a context that differ from the recording before
#: redacting them: context -> messages -> one message (redacted whole).
_SETTLE_DEPTH = 2


@dataclass(frozen=True)
class _Incoming:
    """An incoming request as it is compared. ``model`` and ``options`` (small) are redacted
    at once; the context stays unredacted, with the redactor of this call, so that only what
    differs from a recorded context gets redacted (:mod:`.lazy_redaction`): redacting a long
    context whole would cost more than everything else replay does for the call. With
    ignore/normalize rules the request is redacted and filtered whole instead (``redactor`` is
    None): the rules apply to the redacted request."""

    payloads: dict[str, Any]
    redactor: Redactor | None

    @classmethod
    def of(
        cls,
        model: Model,
        context: Context,
        options: StreamOptions | None,
        request_filter: RequestFilter,
    ) -> _Incoming:
        if request_filter:
            payloads = request_payloads(model, context, options)
            if payloads["options"] is None:
                payloads["options"] = _default_options_dump()
            return cls(request_filter.apply(payloads), None)
        redactor = current_redactor()
        payloads = raw_request_payloads(model, context, options)
        payloads["model"] = redactor.remove_secret_values(payloads["model"])
        options_dump = payloads["options"]
        payloads["options"] = (
            _default_options_dump()
            if options_dump is None
            else redactor.remove_secret_values(options_dump)
        )
        return cls(payloads, redactor)

    def difference(self, recorded: dict[str, Any]) -> tuple[str, Any, Any] | None:
        """The first difference from ``recorded``, as the redacted request would show it. A
        context equal to the recorded one as it is costs one comparison and no redaction."""
        if self.redactor is None:
            return first_request_difference(recorded, self.payloads)
        recorded_context, context = recorded["context"], self.payloads["context"]
        if find_first_difference(recorded_context, context) is None:
            # Equal as it is: the recorded context stands in for it (compared by identity),
            # so only the (redacted) model and options are walked.
            return first_request_difference(
                recorded, {**self.payloads, "context": recorded_context}
            )
        settled = settle(recorded_context, context, self.redactor, _SETTLE_DEPTH)
        return first_request_difference(recorded, {**self.payloads, "context": settled.value})


@dataclass(eq=False)
class _Session:
    """The calls one recording sink wrote (lines without a session form one implicit
    session), by lane, each lane in ``call_index`` order."""

    key: str | None
    number: int  # 1-based, in file order
    lanes: dict[str, list[RecordedCall]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(len(calls) for calls in self.lanes.values())


def _sessions_of(recording: Recording) -> list[_Session]:
    sessions: dict[str | None, _Session] = {}
    for call in recording.calls:
        session = sessions.get(call.session)
        if session is None:
            session = sessions[call.session] = _Session(call.session, len(sessions) + 1)
        session.lanes.setdefault(call.lane, []).append(call)
    return list(sessions.values())


@dataclass(frozen=True)
class _Adjustments:
    """The replay options, ready for the replayer: the faults' book, and each event's time
    when it paces (read once, when the replay starts)."""

    options: ReplayOptions
    faults: FaultBook | None
    times: dict[int, list[int | None]] | None

    @classmethod
    def of(cls, options: ReplayOptions, recording: Recording) -> _Adjustments:
        return cls(
            options,
            FaultBook(options.faults) if options.faults else None,
            read_event_times(recording) if options.pace is not None else None,
        )

    def times_of(self, call: RecordedCall) -> list[int | None] | None:
        """The recorded times of ``call``'s events when this replay paces, else None."""
        return None if self.times is None else self.times.get(call.call_index)


class _RecentRequests(OrderedDict[int, dict[str, Any]]):
    """The filtered recorded requests (``ignore``, ``normalize``) of the calls compared last,
    by call index: each holds a whole conversation, so only the most recent are kept (a call
    is compared when it is next, and again only while a replay looks for another session)."""

    KEPT = 64

    def __setitem__(self, index: int, request: dict[str, Any]) -> None:
        super().__setitem__(index, request)
        self.move_to_end(index)
        if len(self) > self.KEPT:
            self.popitem(last=False)


def _lane_name(lane: str) -> str:
    return "the root lane" if lane == ROOT_LANE else f"lane {lane!r}"


class ReplayProvider:
    """Serves recorded events offline. Holds only the parsed recording file.

    One cursor per lane: a call made in lane L is compared with the next unused recorded call
    of lane L, so calls of different lanes (concurrent sub-agents) may arrive in any order
    while each lane stays strict.

    The session rule, one for the runtime, ``use_recording``, ``update`` and
    ``ReplayProvider(path)`` (``docs/file-format.md``, "Sessions and lanes"): a replay follows
    one session (what one recording sink wrote: one command, one test run) at a time. Its
    first call picks the first session whose first call in that lane matches. A call that does
    not match the followed session moves the replay to the first session not yet used that
    holds the same calls so far (compared as replay compares requests) and whose next call
    matches, so two recorded runs that share their first calls and part later both replay, in
    either order. A lane used up may move on to the first session this replay has not used
    whose first call matches.
    """

    requires_credentials = False

    def __init__(
        self,
        recording_path: str | os.PathLike[str],
        *,
        ignore: Iterable[str] = (),
        normalize: Iterable[Sequence[str]] = (),
        values: Mapping[str, str] | None = None,
        replay_note: str | None = None,
        replay_options: ReplayOptions | None = None,
    ) -> None:
        #: Said at the end of every mismatch this replay raises: how replay came to be on and
        #: how to call models live again (a profile's replay mode outlives the command that
        #: set it, and its errors must not read as the agent's own).
        self._replay_note = replay_note
        self._filter = RequestFilter(ignore, normalize)  # first: a bad pattern reads no file
        self._values = check_run_values(values)
        self._filtered = _RecentRequests()  # call_index -> filtered recorded request
        self._recording = read_recording_file(recording_path)
        self._lock = threading.Lock()
        self._call_count = 0
        self._sessions = _sessions_of(self._recording)
        self._session: _Session | None = None
        self._used: list[_Session] = []
        self._cursors: dict[tuple[int, str], int] = {}
        #: A file recorded before lanes existed (or by a sequential agent) has none: it keeps
        #: one strict order, whatever lane the calls are made in now.
        self._uses_lanes = any(call.lane != ROOT_LANE for call in self._recording.calls)
        #: A file whose calls all have lanes (one recorded through ``openprogram proxy``, which
        #: derives a lane per conversation) replays for code that makes its calls in the root
        #: lane in file order: each such call takes the next recorded call of the session.
        self._root_in_file_order = self._uses_lanes and all(
            call.lane != ROOT_LANE for call in self._recording.calls
        )
        #: Faults, re-chunking, pacing (docs/tutorial.md, "Testing what goes wrong"): None
        #: when none is asked for, and then the calls take the plain path of ``_replay``.
        self._adjusted = (
            _Adjustments.of(replay_options, self._recording) if replay_options else None
        )

    @property
    def recording_path(self) -> Path:
        return self._recording.path

    @property
    def recording(self) -> Recording:
        return self._recording

    @property
    def call_count(self) -> int:
        """Recorded calls handed out so far, by ``stream`` and ``stream_simple`` together."""
        return self._call_count

    @property
    def replay_options(self) -> ReplayOptions | None:
        """The faults, re-chunking and pacing this replay applies (None: none)."""
        return None if self._adjusted is None else self._adjusted.options

    def stream(
        self, model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        if self._adjusted is not None:
            return self._replay_adjusted(model, context, options, self._adjusted)
        return self._replay(model, context, options)

    def stream_simple(
        self, model: Model, context: Context, options: SimpleStreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        if self._adjusted is not None:
            return self._replay_adjusted(model, context, options, self._adjusted)
        return self._replay(model, context, options)

    def assert_consumed(self) -> None:
        """Raise :class:`ReplayMismatch` if recorded calls were left unused, in any lane of the
        sessions this replay followed (of every session when it made no call at all)."""
        with self._lock:
            used = self._call_count
            followed = self._used or self._sessions
            total = sum(session.size for session in followed)
        if used < total:
            raise ReplayMismatch(used, REMAINING_CALLS, total, used, note=self._replay_note)

    def consumed_calls(self) -> list[RecordedCall]:
        """Every recorded call this replay has served, in file order (what ``update`` keeps)."""
        with self._lock:
            served = [
                call
                for session in self._used
                for name, calls in session.lanes.items()
                for call in calls[: self._cursors.get((session.number, name), 0)]
            ]
        return sorted(served, key=lambda call: call.call_index)

    def followed_sessions(self) -> list[str | None]:
        """The keys of the sessions this replay followed, in the order it followed them."""
        with self._lock:
            return [session.key for session in self._used]

    def take(self, model: Model, context: Context, options: StreamOptions | None) -> RecordedCall:
        """Match the request against the next recorded call of its lane and consume it,
        atomically; a mismatch consumes nothing, so the same request may be retried."""
        return self._take(model, context, options, None)[0]

    def _take(
        self,
        model: Model,
        context: Context,
        options: StreamOptions | None,
        faults: FaultBook | None,
    ) -> tuple[RecordedCall, Fault | None]:
        """:meth:`take`, and the fault ``faults`` fires for the matched call, if any: a
        faulted call is not consumed (the retry that follows is served it)."""
        incoming = _Incoming.of(model, context, options, self._filter)
        lane = redact_lane(current_lane()) if self._uses_lanes else ROOT_LANE  # as recorded
        with self._lock:
            if lane == ROOT_LANE and self._root_in_file_order:
                lane = self._next_lane_in_file_order()
            session = self._session
            if session is not None:
                call = self._next(session, lane)
                if call is not None:
                    difference = self._differs(call, incoming)
                    if difference is not None:
                        # Another session that agrees with every call so far may go on from
                        # here; switched before a fault may apply, so a faulted request is
                        # answered from the session that matched it and its retry stays there.
                        switch = self._agreeing_session(session, lane, incoming)
                        if switch is None:
                            raise self._mismatch(call, difference, session, lane)
                        other, call = switch
                        self._move(session, other)
                        session = other
                    return self._served(session, lane, call, faults)
            first_mismatch: ReplayMismatch | None = None
            for candidate in self._sessions:
                call = None if candidate in self._used else self._next(candidate, lane)
                if call is None:
                    continue
                difference = self._differs(call, incoming)
                if difference is None:
                    return self._served(candidate, lane, call, faults)
                if first_mismatch is None:
                    first_mismatch = self._mismatch(call, difference, candidate, lane)
            # Nothing matches: report against the call that would have come next.
            raise first_mismatch or self._exhausted(lane)

    def _next_lane_in_file_order(self) -> str:
        """The lane of the first recorded call not yet served, of the session followed (the
        first one with calls left, before any is followed)."""
        sessions = (
            [self._session]
            if self._session is not None
            else [s for s in self._sessions if s not in self._used]
        )
        for session in sessions:
            upcoming = [
                call for name in session.lanes if (call := self._next(session, name)) is not None
            ]
            if upcoming:
                return min(upcoming, key=lambda call: call.call_index).lane
        return ROOT_LANE

    def _next(self, session: _Session, lane: str) -> RecordedCall | None:
        calls = session.lanes.get(lane)
        position = self._cursors.get((session.number, lane), 0)
        return calls[position] if calls is not None and position < len(calls) else None

    def _served(
        self, session: _Session, lane: str, call: RecordedCall, faults: FaultBook | None
    ) -> tuple[RecordedCall, Fault | None]:
        if faults is not None:
            fault = faults.fire(current_lane(), self._cursors.get((session.number, lane), 0))
            if fault is not None:
                return call, fault
        return self._consume(session, lane, call), None

    def _agreeing_session(
        self, session: _Session, lane: str, incoming: _Incoming
    ) -> tuple[_Session, RecordedCall] | None:
        """The first session (in file order) not yet used by this replay that holds the calls
        ``session`` served so far, lane by lane, and whose next call in ``lane`` matches
        ``incoming``; with that call. Only asked when the followed session does not match."""
        served = {name: self._cursors.get((session.number, name), 0) for name in session.lanes}
        position = served.get(lane, 0)
        for candidate in self._sessions:
            if candidate is session or candidate in self._used:
                continue
            calls = candidate.lanes.get(lane, [])
            if position >= len(calls):
                continue
            if (
                all(
                    self._same_calls(session.lanes[name], candidate.lanes.get(name, []), count)
                    for name, count in served.items()
                )
                and self._differs(calls[position], incoming) is None
            ):
                return candidate, calls[position]
        return None

    def _same_calls(
        self, calls: list[RecordedCall], others: list[RecordedCall], count: int
    ) -> bool:
        """Whether the first ``count`` calls of two lanes are the same requests, as replay
        compares them."""
        if len(others) < count:
            return False
        return all(
            first_request_difference(self._recorded(a), self._recorded(b)) is None
            for a, b in zip(calls[:count], others[:count], strict=True)
        )

    def _consume(self, session: _Session, lane: str, call: RecordedCall) -> RecordedCall:
        if session is not self._session:
            self._session = session
            self._used.append(session)
        key = (session.number, lane)
        self._cursors[key] = self._cursors.get(key, 0) + 1
        self._call_count += 1
        return call

    def _move(self, old: _Session, new: _Session) -> None:
        """Follow ``new`` instead of ``old`` from where ``old`` was, lane by lane; ``old`` is
        as unused as it was before this replay began."""
        self._used[self._used.index(old)] = new
        self._session = new
        for name in list(old.lanes):
            count = self._cursors.pop((old.number, name), 0)
            if count:
                self._cursors[(new.number, name)] = count

    def _differs(self, call: RecordedCall, incoming: _Incoming) -> tuple[str, Any, Any] | None:
        return incoming.difference(self._recorded(call))

    def _recorded(self, call: RecordedCall) -> dict[str, Any]:
        """A recorded request as replay compares it: default options for none, then the
        ``ignore`` and ``normalize`` rules (filtered once per recorded call, when first
        compared)."""
        if not self._filter:
            return self._with_options(call.request)
        recorded = self._filtered.get(call.call_index)
        if recorded is None:
            # The default options stand in for none before the filter, as on the incoming
            # side: after it, an ignored ``options`` is blank on both sides.
            recorded = self._filtered[call.call_index] = self._filter.apply(
                self._with_options(call.request)
            )
        return recorded

    @staticmethod
    def _with_options(request: dict[str, Any]) -> dict[str, Any]:
        if request["options"] is None:
            return {**request, "options": _default_options_dump()}
        return request

    def _mismatch(
        self, call: RecordedCall, difference: tuple[str, Any, Any], session: _Session, lane: str
    ) -> ReplayMismatch:
        notes = [self._redaction_note(call, session, lane), self._replay_note]
        note = "\n".join(note for note in notes if note) or None
        return ReplayMismatch(
            call.call_index, *difference, where=self._where(session, lane), note=note
        )

    def _redaction_note(self, call: RecordedCall, session: _Session, lane: str) -> str | None:
        """A drift after an answer that lost a value to redaction may come from it: the replay
        served the placeholder where the live run had the value. Named, so the user knows."""
        served = [
            c
            for c in session.lanes.get(lane, ())
            if c.call_index < call.call_index and c.redactions
        ]
        if not served:
            return None
        last = served[-1]
        where = ", ".join(
            f"{item['path']} ({', '.join(item['rules'])})" for item in last.redactions
        )
        return (
            f"note: the recorded answer of call {last.call_index} lost a value to redaction at {where}; "
            f"the replay served {PLACEHOLDER!r} there, which the live run did not see"
        )

    def _where(self, session: _Session | None, lane: str) -> str | None:
        """Which lane and session a mismatch was compared against, when there is a choice."""
        parts = []
        if lane != ROOT_LANE or any(set(s.lanes) != {ROOT_LANE} for s in self._sessions):
            parts.append(_lane_name(lane))
        if session is not None and len(self._sessions) > 1:
            parts.append(f"session {session.number} of {len(self._sessions)}")
        return ", ".join(parts) or None

    def _exhausted(self, lane: str) -> ReplayMismatch:
        """A call with no recorded call left for it in its lane, in any session it may use."""
        calls = self._recording.calls
        if not any(lane in session.lanes for session in self._sessions):
            recorded = f"no recorded call in {_lane_name(lane)}" if calls else "no recorded calls"
            return ReplayMismatch(
                self._call_count,
                "call_index",
                recorded,
                f"a call in {_lane_name(lane)}",
                note=self._replay_note,
            )
        if (
            lane == ROOT_LANE
            and len(self._sessions) == 1
            and set(self._sessions[0].lanes) == {ROOT_LANE}
        ):
            return ReplayMismatch(
                self._call_count,
                "call_index",
                f"{len(calls)} recorded call(s), the last is call {len(calls) - 1}",
                f"call {self._call_count}",
                note=self._replay_note,
            )
        used = sum(len(s.lanes.get(lane, ())) for s in self._used)
        return ReplayMismatch(
            self._call_count,
            "call_index",
            f"no recorded call left in {_lane_name(lane)} ({used} used)",
            f"call {used} of {_lane_name(lane)}",
            where=self._where(self._session, lane),
            note=self._replay_note,
        )

    async def _replay(
        self, model: Model, context: Context, options: StreamOptions | None
    ) -> AsyncIterator[AssistantMessageEvent]:
        if self._values:
            with use_run_values(dict(self._values)):
                call = self.take(model, context, options)
        else:
            call = self.take(model, context, options)
        # serve(call), without a second async generator per event.
        for event in self._served_events(call):
            yield event
        _check_ended(call)

    async def _replay_adjusted(
        self, model: Model, context: Context, options: StreamOptions | None, adjusted: _Adjustments
    ) -> AsyncIterator[AssistantMessageEvent]:
        """``_replay`` with the replay options applied: a fault served instead of the call,
        the streams re-split, the recorded times waited."""
        if self._values:
            with use_run_values(dict(self._values)):
                call, fault = self._take(model, context, options, adjusted.faults)
        else:
            call, fault = self._take(model, context, options, adjusted.faults)
        events: Iterator[AssistantMessageEvent] = call.events()
        if self._values:
            events = (with_run_values(event, self._values) for event in events)
        numbered: Iterator[tuple[int, AssistantMessageEvent]] = (
            enumerate(events) if fault is None else faulted_events(call, events, model, fault)
        )
        if adjusted.options.rechunk is not None:
            numbered = rechunked(numbered, adjusted.options.rechunk, call.call_index)
        times, factor = adjusted.times_of(call), adjusted.options.pace
        if times and factor is not None:
            async for event in paced(numbered, times, factor):
                yield event
        else:
            for _, event in numbered:
                yield event
        if fault is None and call.outcome != "complete":
            raise RecordedCallInterrupted(call.call_index, call.outcome)

    async def serve(self, call: RecordedCall) -> AsyncIterator[AssistantMessageEvent]:
        """The recorded events of a call :meth:`take` handed out, as the live run saw them
        (``update`` serves the calls it replays so)."""
        for event in self._served_events(call):
            yield event
        _check_ended(call)

    def _served_events(self, call: RecordedCall) -> Iterator[AssistantMessageEvent]:
        """The serving of a plain replay and of ``update``, in one place: the call's vendor
        answer offered (:func:`served_answers`), its events with this run's values; then
        :func:`_check_ended`. An iterator, not a generator: the async generator around it is
        the only frame per event."""
        _offer_answer(call)
        events = call.events()
        if self._values:
            events = (with_run_values(event, self._values) for event in events)
        return events


def _check_ended(call: RecordedCall) -> None:
    """After a served call's events: :class:`RecordedCallInterrupted` when the recorded call
    did not end normally (the live run failed there, so the replay does too)."""
    if call.outcome != "complete":
        raise RecordedCallInterrupted(call.call_index, call.outcome)
