"""Compact, exact descriptions of event streams, so a test can compare a whole stream with one
literal list."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any


def summarize(events: list[Any]) -> list[tuple]:
    """``(type, content_index, payload)`` per event: the delta for deltas, the final text for
    text/thinking ends, the tool call for tool call ends, the reason for terminals."""
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
        else:
            rows.append(("error", event.reason, event.error.error_message))
    return rows


async def collect(stream: AsyncIterator[Any]) -> list[Any]:
    return [event async for event in stream]
