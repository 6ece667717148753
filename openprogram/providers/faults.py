"""Faults a replay can serve in place of a recorded answer: :class:`Fault` and its command-line
spelling ``kind[@call][:event][xtimes]`` (docs/tutorial.md, "Testing what goes wrong").

A recording proves an agent works on the day the vendor answered. A fault replays the other
days: a 429 in the middle of a tool loop, a 529 overload, a stream that drops half-way, a first
token that never comes. The replayer decides *where* a fault applies (a call of a lane, how many
times); what the failure *looks like* is the vendor's own, from :func:`fault_error_message`
(through the provider layer) or the vendor's wire answer (through ``openprogram proxy``), both
built by ``vendors/failures.py`` from the exception the vendor's SDK raises for that failure.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, cast, get_args

from .types import EventError, Model

FaultKind = Literal["rate_limit", "overloaded", "server_error", "timeout", "cut", "network"]
#: Every kind, in the order the docs list them.
FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)
#: The kinds that may break a stream after one of its events (``at_event``); the others fail
#: before the vendor's answer starts (an HTTP status, a refused connection).
MID_STREAM_KINDS: frozenset[FaultKind] = frozenset({"cut", "timeout"})
#: How a fault is written on the command line (``--fault``, ``--llm-fault``).
FAULT_SPEC_GRAMMAR = "kind[@call][:event][xtimes]"

_SPEC = re.compile(r"(?P<kind>[a-z_]+)(?:@(?P<call>\d+))?(?::(?P<event>\d+))?(?:x(?P<times>\d+))?")


@dataclass(frozen=True)
class Fault:
    """One failure to serve instead of a recorded answer.

    ``kind``: ``rate_limit`` (HTTP 429 with ``retry-after``), ``overloaded`` (Anthropic's 529,
    the other vendors' 503), ``server_error`` (500), ``timeout`` (no byte for longer than the
    client waits), ``cut`` (the stream ends after event ``at_event`` as a dropped connection
    ends it) or ``network`` (the connection is refused). ``call``: the call's index in its lane
    (None: every call). ``lane``: the lane path the call is made in (None: any lane; ``""`` is
    the root). ``at_event``: for ``cut`` and ``timeout``, the last recorded event served before
    the failure (``cut`` without one breaks midway; ``timeout`` without one never starts).
    ``times``: how many requests for that call fail before the next one (the retry) is served
    the recording: a faulted call is not consumed.
    """

    kind: FaultKind
    call: int | None = None
    lane: str | None = None
    at_event: int | None = None
    times: int = 1

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(
                f"Fault kind must be one of {', '.join(FAULT_KINDS)}, not {self.kind!r}"
            )
        for name in ("call", "at_event"):
            value = getattr(self, name)
            if value is not None and not _is_count(value, 0):
                raise ValueError(f"Fault {name} must be None or an int >= 0, not {value!r}")
        if not _is_count(self.times, 1):
            raise ValueError(f"Fault times must be an int >= 1, not {self.times!r}")
        if self.lane is not None and not isinstance(self.lane, str):
            raise ValueError(
                f"Fault lane must be None or a lane path (a string), not {self.lane!r}"
            )
        if self.at_event is not None and self.kind not in MID_STREAM_KINDS:
            raise ValueError(
                f"Fault at_event applies to {' and '.join(sorted(MID_STREAM_KINDS))} only; "
                f"a {self.kind} fails before the answer starts"
            )

    def applies_to(self, lane: str, position: int) -> bool:
        """Whether this fault is about the call at ``position`` of ``lane``."""
        return (self.call is None or self.call == position) and (
            self.lane is None or self.lane == lane
        )

    @property
    def spec(self) -> str:
        """The command-line form (the lane, which it cannot say, as ``in lane 'x'``)."""
        text = self.kind + (f"@{self.call}" if self.call is not None else "")
        text += f":{self.at_event}" if self.at_event is not None else ""
        text += f"x{self.times}" if self.times != 1 else ""
        return text if self.lane is None else f"{text} in lane {self.lane!r}"


def _is_count(value: object, least: int) -> bool:
    return type(value) is int and value >= least


def parse_fault(spec: str) -> Fault:
    """A fault from its command-line form ``kind[@call][:event][xtimes]`` (``rate_limit@2``,
    ``cut@0:15``, ``server_error@1x3``); ``ValueError`` naming the spec and the grammar."""
    match = _SPEC.fullmatch(spec.strip()) if isinstance(spec, str) else None
    if match is None:
        raise ValueError(
            f"fault {spec!r} does not read as {FAULT_SPEC_GRAMMAR} (kinds: {', '.join(FAULT_KINDS)}; "
            "e.g. rate_limit@2, cut@0:15, server_error@1x3)"
        )
    call, event, times = match.group("call", "event", "times")
    try:
        return Fault(
            cast("FaultKind", match.group("kind")),
            call=None if call is None else int(call),
            at_event=None if event is None else int(event),
            times=1 if times is None else int(times),
        )
    except ValueError as error:
        raise ValueError(f"fault {spec!r}: {error} (written {FAULT_SPEC_GRAMMAR})") from None


def faults_of(items: Fault | str | Iterable[Fault | str] | None) -> tuple[Fault, ...]:
    """Faults from :class:`Fault` objects and spec strings (one, or any iterable of them)."""
    if items is None:
        return ()
    if isinstance(items, Fault | str):
        items = (items,)
    faults: list[Fault] = []
    for item in items:
        if isinstance(item, Fault):
            faults.append(item)
        elif isinstance(item, str):
            faults.append(parse_fault(item))
        else:
            raise ValueError(
                f"a fault is a Fault or a string written {FAULT_SPEC_GRAMMAR}, not {item!r}"
            )
    return tuple(faults)


#: ``id()`` of the ``error`` events a replay served for a fault, while those events live, with
#: their fault: ``openprogram proxy`` answers such an event as the vendor's server fails (a
#: status, a stall, a dropped connection) rather than as an error the vendor sent. A side
#: table, not a field: the event must stay equal to the one a live provider gives.
_faulted_events: dict[int, Fault] = {}


def mark_faulted(event: EventError, fault: Fault) -> EventError:
    """Remember that ``event`` was served for ``fault`` (see :func:`fault_of`)."""
    key = id(event)
    _faulted_events[key] = fault
    weakref.finalize(event, _faulted_events.pop, key, None)
    return event


def fault_of(event: object) -> Fault | None:
    """The fault ``event`` was served for, if a replay served it for one."""
    return _faulted_events.get(id(event))


def fault_error_message(model: Model, kind: FaultKind, *, mid_stream: bool) -> str:
    """The ``error_message`` the built-in provider of ``model.api`` gives when its vendor fails
    this way live (its SDK's exception through the provider's own describer): ``mid_stream``
    when the answer had started. An api without a built-in vendor provider gets the shared
    description of the same failure."""
    from .vendors.failures import describe_fault

    return describe_fault(model, kind, mid_stream=mid_stream)


__all__ = [
    "FAULT_KINDS",
    "FAULT_SPEC_GRAMMAR",
    "Fault",
    "FaultKind",
    "MID_STREAM_KINDS",
    "fault_error_message",
    "fault_of",
    "faults_of",
    "mark_faulted",
    "parse_fault",
]
