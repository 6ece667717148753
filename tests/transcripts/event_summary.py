"""Compact, exact descriptions of event streams, so a test can compare a whole stream with one
literal list."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from tests.event_checks import assert_well_formed


def summarize(events: list[Any], *, error_message: bool = True) -> list[tuple]:
    """``(type, content_index, payload)`` per event: the delta for deltas, the final text for
    text/thinking ends, the tool call for tool call ends, the reason for terminals (and, for an
    ``error``, its message unless ``error_message`` is False)."""
    rows: list[tuple] = []
    for event in events:
        kind = event.type
        if kind == "start":
            rows.append(("start",))
        elif kind.endswith("_delta"):
            rows.append((kind, event.content_index, event.delta))
        elif kind in ("text_end", "thinking_end"):
            rows.append((kind, event.content_index, event.content))
        elif kind == "toolcall_end":
            call = event.tool_call
            rows.append((kind, event.content_index, (call.id, call.name, call.arguments)))
        elif kind.endswith("_start"):
            rows.append((kind, event.content_index))
        elif kind == "done":
            rows.append(("done", event.reason))
        elif error_message:
            rows.append(("error", event.reason, event.error.error_message))
        else:
            rows.append(("error", event.reason))
    return rows


async def collect(stream: AsyncIterator[Any]) -> list[Any]:
    """Every event of a stream, after checking the stream contract on them."""
    events = [event async for event in stream]
    assert_well_formed(events)
    return events
