"""Replaying at the recorded pace (docs/tutorial.md, "Testing what goes wrong").

A replay serves a call's events as fast as the consumer takes them. Code with deadlines (a
first-token timeout, a progress display, a watchdog) meets the vendor's timing only live:
:func:`paced` holds each event until the time it arrived at in the recording (``t``, docs/
file-format.md), counted from the moment the call began, times the pace factor.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

from ...providers.types import AssistantMessageEvent

__all__ = ["paced"]


async def paced(
    numbered: Iterator[tuple[int, AssistantMessageEvent]], times: list[int | None], factor: float
) -> AsyncIterator[AssistantMessageEvent]:
    """The events of ``numbered`` (``(recorded event index, event)``), the first that each
    recorded event brings held until ``times[index] * factor`` milliseconds after the call
    began; the events it brings besides (a delta re-split in several) follow at once. An
    event without a time, or past the recorded ones (a fault's), waits for nothing."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    waited = -1
    for source, event in numbered:
        if waited < source < len(times):
            waited = source
            recorded = times[source]
            if recorded is not None:
                delay = began + recorded * factor / 1000 - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
        yield event
