"""Serving a fault instead of a recorded answer (docs/tutorial.md, "Testing what goes wrong").

:class:`FaultBook` decides which request a fault fires for: the replayer asks it under its
lock, with the call's lane and its position there, before it consumes the call; a faulted call
stays unconsumed, so the retry that follows is served the recording once the fault has fired
``times`` times. :func:`faulted_events` is what the faulted request gets: the ``error`` event
the vendor provider gives live for that failure, after the recorded events a broken stream had
delivered (``cut``, or a ``timeout`` after an event).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from ...providers.faults import MID_STREAM_KINDS, Fault, fault_error_message, mark_faulted
from ...providers.types import AssistantMessage, AssistantMessageEvent, EventError, Model
from ..file.reader import RecordedCall

__all__ = ["FaultBook", "faulted_events"]


class FaultBook:
    """Counts, per fault and call, how many times the fault has fired. Not locked: the
    replayer asks it under its own lock."""

    def __init__(self, faults: tuple[Fault, ...]) -> None:
        self._faults = faults
        self._fired: dict[tuple[int, str, int], int] = {}

    def fire(self, lane: str, position: int) -> Fault | None:
        """The fault to serve to the request for call ``position`` of ``lane``, counted as
        fired; None when none applies (any more): the call is then served and consumed. The
        faults fire in the order they were given."""
        for number, fault in enumerate(self._faults):
            if not fault.applies_to(lane, position):
                continue
            key = (number, lane, position)
            fired = self._fired.get(key, 0)
            if fired < fault.times:
                self._fired[key] = fired + 1
                return fault
        return None


def faulted_events(
    call: RecordedCall, events: Iterator[AssistantMessageEvent], model: Model, fault: Fault
) -> Iterator[tuple[int, AssistantMessageEvent]]:
    """``(recorded event index, event)`` for a faulted request: the recorded events a broken
    stream delivered, then the vendor's ``error`` event (its index that of the last event
    served, or -1 when the failure came before any)."""
    last = _last_served(call, fault)
    served: AssistantMessageEvent | None = None
    index = -1
    for index, event in enumerate(events):
        if index > last:
            break
        served = event
        yield index, event
    if served is None:
        yield (
            -1,
            mark_faulted(
                EventError(reason="error", error=_before_answer(call, model, fault)), fault
            ),
        )
        return
    if served.type == "done" or served.type == "error":  # pragma: no cover - see _last_served
        raise AssertionError("a fault must break the stream before its terminal event")
    failed = served.partial.model_copy(
        update={
            "stop_reason": "error",
            "error_message": fault_error_message(model, fault.kind, mid_stream=True),
        }
    )
    yield min(index, last), mark_faulted(EventError(reason="error", error=failed), fault)


def _last_served(call: RecordedCall, fault: Fault) -> int:
    """The index of the last recorded event served before the failure (-1: none). A broken
    stream never reaches the recorded terminal event; ``cut`` without an event breaks midway."""
    if fault.kind not in MID_STREAM_KINDS or (fault.kind == "timeout" and fault.at_event is None):
        return -1
    ends_in_terminal = call.outcome == "complete" and call.event_count > 0
    before_terminal = call.event_count - (1 if ends_in_terminal else 0) - 1
    if fault.at_event is None:
        return before_terminal // 2 if before_terminal > 0 else before_terminal
    return min(fault.at_event, before_terminal)


def _before_answer(call: RecordedCall, model: Model, fault: Fault) -> AssistantMessage:
    """The message of a call that failed before the vendor answered: empty, as the provider
    makes it, with the recorded call's identity (api, model, timestamp) when it has one."""
    first = next(iter(call.events()), None) if call.event_count else None
    recorded = (
        None
        if first is None
        else first.message
        if first.type == "done"
        else first.error
        if first.type == "error"
        else first.partial
    )
    return AssistantMessage(
        content=[],
        api=model.api if recorded is None else recorded.api,
        provider=model.provider if recorded is None else recorded.provider,
        model=model.id if recorded is None else recorded.model,
        timestamp=int(time.time() * 1000) if recorded is None else recorded.timestamp,
        stop_reason="error",
        error_message=fault_error_message(model, fault.kind, mid_stream=False),
    )
