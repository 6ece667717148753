"""What a test's model calls used: tokens and cost per call, per test and per run.

The figures are the vendor's, as each call's final message carries them (``Usage``): in a
replay the recorded ones (what the run would have cost live, and what replaying saved), in a
recording or live run what the vendor reported this time. ``reasoning`` is the part of
``output`` the vendor reported as reasoning, never added to it again; ``total_tokens`` is
``input + cache_read + cache_write + output`` unless the vendor gave its own total, and the
budget's ``tokens`` (:mod:`.budget`) counts it. The JSON shape (``--llm-usage-json``) is
documented by ``docs/usage-report.schema.json``: fields are only ever added, and
:data:`USAGE_SCHEMA_VERSION` changes if that promise has to be broken.

Reading a call's usage costs one look at its final message: nothing here walks the events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = [
    "USAGE_SCHEMA_VERSION",
    "CallUsage",
    "TestUsage",
    "UsageTotals",
    "call_usage",
    "recorded_usage",
    "render_usage",
    "terminal_message",
    "usage_document",
]

USAGE_SCHEMA_VERSION = 1
#: The token counts of a call, in the order they are shown.
TOKEN_FIELDS = ("input", "cache_read", "cache_write", "output", "reasoning", "total_tokens")


@dataclass(frozen=True)
class CallUsage:
    """One call: its number in the test (from 0, in the order the calls were made, or in file
    order for a replay), its lane, the model asked, the vendor's counts and the cost, and
    whether a recording served it (then nobody paid for it this time)."""

    call: int
    lane: str = ""
    model: str | None = None
    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    reasoning: int = 0
    total_tokens: int = 0
    cost: float = 0.0
    replayed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "call": self.call,
            "lane": self.lane,
            "model": self.model,
            **{name: getattr(self, name) for name in TOKEN_FIELDS},
            "cost": self.cost,
            "replayed": self.replayed,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CallUsage:
        names = {item.name for item in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})


def _count(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0


def _amount(value: Any) -> float:
    return float(value) if type(value) in (int, float) and value > 0 else 0.0


def call_usage(message: Any, *, call: int, lane: str = "", replayed: bool = False) -> CallUsage:
    """The usage of one call from its final message: an ``AssistantMessage``, or its JSON dump
    (as a recording stores it). A call without one (it ended before the vendor answered)
    used nothing that anyone reported."""
    if message is None:
        return CallUsage(call=call, lane=lane, replayed=replayed)
    if not isinstance(message, Mapping):
        message = {
            "model": getattr(message, "model", None),
            "usage": getattr(message, "usage", None),
        }
        usage = message["usage"]
        usage = usage.model_dump() if hasattr(usage, "model_dump") else {}
    else:
        usage = message.get("usage")
        usage = usage if isinstance(usage, Mapping) else {}
    counts = {name: _count(usage.get(name)) for name in TOKEN_FIELDS}
    if not counts["total_tokens"]:
        counts["total_tokens"] = (
            counts["input"] + counts["cache_read"] + counts["cache_write"] + counts["output"]
        )
    cost = usage.get("cost")
    model = message.get("model")
    return CallUsage(
        call=call,
        lane=lane,
        model=model if isinstance(model, str) else None,
        cost=_amount(cost.get("total")) if isinstance(cost, Mapping) else 0.0,
        replayed=replayed,
        **counts,
    )


def terminal_message(call: Any) -> dict[str, Any] | None:
    """The message a recorded call ended with (a ``done`` event's, or an ``error`` event's),
    from its last event alone; None for a call that has neither."""
    last = call.last_event_dump()
    if not isinstance(last, dict):
        return None
    message = (
        last.get("message")
        if last.get("type") == "done"
        else last.get("error")
        if last.get("type") == "error"
        else None
    )
    return message if isinstance(message, dict) else None


def recorded_usage(calls: Iterable[Any], *, replayed: bool = True) -> list[CallUsage]:
    """The recorded usage of ``calls`` (``RecordedCall`` objects, in the order served)."""
    return [
        call_usage(
            terminal_message(call), call=number, lane=getattr(call, "lane", ""), replayed=replayed
        )
        for number, call in enumerate(calls)
    ]


@dataclass
class UsageTotals:
    """The sum of some calls: counts and cost, and the part a recording served (``saved``: the
    cost not paid this time)."""

    calls: int = 0
    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    reasoning: int = 0
    total_tokens: int = 0
    cost: float = 0.0
    replayed_calls: int = 0
    saved: float = 0.0

    @classmethod
    def of(cls, calls: Iterable[CallUsage]) -> UsageTotals:
        totals = cls()
        for usage in calls:
            totals.calls += 1
            for name in TOKEN_FIELDS:
                setattr(totals, name, getattr(totals, name) + getattr(usage, name))
            totals.cost += usage.cost
            if usage.replayed:
                totals.replayed_calls += 1
                totals.saved += usage.cost
        return totals

    def add(self, other: UsageTotals) -> None:
        for item in fields(self):
            setattr(self, item.name, getattr(self, item.name) + getattr(other, item.name))

    def to_json(self) -> dict[str, Any]:
        return {item.name: getattr(self, item.name) for item in fields(self)}


@dataclass
class TestUsage:
    """One test's calls. ``mode`` is the record mode it ran in; ``outcome`` pytest's."""

    __test__ = False  # not a test class, whatever pytest's collection makes of the name

    nodeid: str
    mode: str
    outcome: str = "passed"
    calls: list[CallUsage] = field(default_factory=list)

    @property
    def totals(self) -> UsageTotals:
        return UsageTotals.of(self.calls)

    def to_json(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "mode": self.mode,
            "outcome": self.outcome,
            "totals": self.totals.to_json(),
            "calls": [call.to_json() for call in self.calls],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TestUsage:
        return cls(
            nodeid=str(data["nodeid"]),
            mode=str(data["mode"]),
            outcome=str(data.get("outcome", "passed")),
            calls=[CallUsage.from_json(call) for call in data.get("calls", ())],
        )


def usage_document(tests: Iterable[TestUsage]) -> dict[str, Any]:
    """The JSON report (``docs/usage-report.schema.json``): every test, then the run's totals."""
    tests = list(tests)
    totals = UsageTotals()
    for test in tests:
        totals.add(test.totals)
    return {
        "schema_version": USAGE_SCHEMA_VERSION,
        "tests": [test.to_json() for test in tests],
        "totals": {"tests": len(tests), **totals.to_json()},
    }


def dollars(amount: float) -> str:
    """A cost as the reports print it: six decimals (a call of a small model costs fractions
    of a cent)."""
    return f"${amount:.6f}"


def render_usage(tests: Iterable[TestUsage]) -> list[str]:
    """The lines of the ``openprogram usage`` section: a row per test, the totals, and what
    replaying saved."""
    tests = list(tests)
    headings = ["TEST", "MODE", "CALLS", "INPUT", "CACHE_READ", "OUTPUT", "REASONING", "COST"]
    grand = UsageTotals()
    rows = []
    for test in tests:
        totals = test.totals
        grand.add(totals)
        rows.append(_row(test.nodeid, test.mode, totals))
    rows.append(_row("total", "", grand))
    widths = [max(len(row[i]) for row in [headings, *rows]) for i in range(len(headings))]
    lines = [
        "  ".join(
            cell.ljust(width) if i < 2 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in [headings, *rows]
    ]
    if grand.replayed_calls:
        lines.append(
            f"replaying saved {dollars(grand.saved)}: {grand.replayed_calls} of {grand.calls} calls were served "
            "from recordings (their recorded cost)"
        )
    else:
        lines.append("replaying saved $0.000000: every call was made live")
    return lines


def _row(name: str, mode: str, totals: UsageTotals) -> list[str]:
    return [
        name,
        mode,
        str(totals.calls),
        str(totals.input),
        str(totals.cache_read),
        str(totals.output),
        str(totals.reasoning),
        dollars(totals.cost),
    ]
