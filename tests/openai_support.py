"""Test support shared by the vendor provider tests: collecting events, an outline of an event
stream that tests compare exactly, OpenAI's scripted error response, a port where nothing
listens, and the two ways of aborting a stream."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from openprogram.providers.types import (
    Context,
    Model,
    StreamOptions,
)
from tests.event_checks import assert_well_formed
from tests.transcripts.event_summary import collect, summarize
from tests.vendor_server import ScriptedResponse, VendorServer

#: Every assistant message in these tests carries this timestamp (providers take it as an
#: argument), so final messages compare exactly.
TIMESTAMP = 1_700_000_000_000

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"],
}


def outline(events: list) -> list[tuple]:
    """What an event says, without its ``partial`` snapshot (error messages are asserted
    apart in these tests)."""
    return summarize(events, error_message=False)


def error_response(status: int, message: str, *, code: str = "error") -> ScriptedResponse:
    """An OpenAI-style JSON error. ``x-should-retry: false`` keeps the SDK from retrying."""
    body = {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}
    }
    return ScriptedResponse(
        status=status,
        headers={"content-type": "application/json", "x-should-retry": "false"},
        chunks=[json.dumps(body).encode()],
    )


def closed_port_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (a server that was started and stopped)."""
    with VendorServer() as server:
        url = server.url
    return url + "/v1"


async def abort_on_first_delta(
    provider: Any, model: Model, context: Context, server: VendorServer, api_key: str | None = None
) -> list:
    """Stream until the first text delta, set the signal there, and collect the rest."""
    signal = asyncio.Event()
    events = []
    async for event in provider.stream(
        model, context, StreamOptions(api_key=api_key, signal=signal)
    ):
        events.append(event)
        if event.type == "text_delta":
            signal.set()
    assert_well_formed(events)
    server.release.set()
    return events


async def abort_while_waiting(
    provider: Any,
    model: Model,
    context: Context,
    server: VendorServer,
    text_before_hold: str,
    api_key: str | None = None,
) -> list:
    """Abort a read that is waiting on the network: once the text sent before the server's
    hold has arrived, a task sets the signal as soon as the server is holding, while this
    consumer is already waiting for the next event."""
    signal = asyncio.Event()
    trigger: asyncio.Task | None = None

    async def fire_when_held() -> None:
        held = await asyncio.to_thread(server.holding.wait, 10)
        assert held, "the server never reached its hold point"
        signal.set()

    events = []
    try:
        async for event in provider.stream(
            model, context, StreamOptions(api_key=api_key, signal=signal)
        ):
            events.append(event)
            if (
                event.type == "text_delta"
                and event.partial.content[event.content_index].text == text_before_hold
            ):
                trigger = asyncio.get_running_loop().create_task(fire_when_held())
    finally:
        server.release.set()
        if trigger is not None:
            await trigger
    assert trigger is not None, f"the text {text_before_hold!r} never arrived"
    assert_well_formed(events)
    return events


__all__ = [
    "TIMESTAMP",
    "WEATHER_SCHEMA",
    "abort_on_first_delta",
    "abort_while_waiting",
    "closed_port_url",
    "collect",
    "error_response",
    "outline",
]
