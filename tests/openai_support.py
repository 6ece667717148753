"""Test support shared by the two OpenAI provider test modules: collecting events, an outline
of an event stream that tests compare exactly, and the scripted failure responses."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from openprogram.agent import AgentContext, AgentLoopConfig, AgentTool, AgentToolResult, agent_loop
from openprogram.providers.types import (
    Context,
    Model,
    StreamOptions,
    TextContent,
    UserMessage,
)
from tests.event_checks import assert_well_formed
from tests.vendor_server import ScriptedResponse, VendorServer

#: Every assistant message in these tests carries this timestamp (providers take it as an
#: argument), so final messages compare exactly.
TIMESTAMP = 1_700_000_000_000

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"],
}


async def collect(events) -> list:
    """Every event of a stream, after checking the stream contract on them."""
    collected = [event async for event in events]
    assert_well_formed(collected)
    return collected


def outline(events: list) -> list[tuple]:
    """What an event says, without its ``partial`` snapshot: type, content index, and the
    delta, the block's final content, the tool call, or the stop reason."""
    rows: list[tuple] = []
    for event in events:
        if event.type == "start":
            rows.append(("start",))
        elif event.type.endswith("_delta"):
            rows.append((event.type, event.content_index, event.delta))
        elif event.type in ("text_end", "thinking_end"):
            rows.append((event.type, event.content_index, event.content))
        elif event.type == "toolcall_end":
            call = event.tool_call
            rows.append((event.type, event.content_index, (call.id, call.name, call.arguments)))
        elif event.type.endswith("_start"):
            rows.append((event.type, event.content_index))
        elif event.type == "done":
            rows.append(("done", event.reason))
        else:
            rows.append(("error", event.reason))
    return rows


def sse_frames(*payloads: str, names: list[str] | None = None, done: bool = False) -> list[bytes]:
    """Frames written exactly as given (the JSON text is not re-serialised), one chunk each."""
    frames = []
    for position, payload in enumerate(payloads):
        prefix = f"event: {names[position]}\n" if names else ""
        frames.append(f"{prefix}data: {payload}\n\n".encode())
    if done:
        frames.append(b"data: [DONE]\n\n")
    return frames


def error_response(status: int, message: str, *, code: str = "error") -> ScriptedResponse:
    """An OpenAI-style JSON error. ``x-should-retry: false`` keeps the SDK from retrying."""
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
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


async def abort_on_first_delta(provider: Any, model: Model, context: Context, server: VendorServer) -> list:
    """Stream until the first text delta, set the signal there, and collect the rest."""
    signal = asyncio.Event()
    events = []
    async for event in provider.stream(model, context, StreamOptions(signal=signal)):
        events.append(event)
        if event.type == "text_delta":
            signal.set()
    assert_well_formed(events)
    server.release.set()
    return events


async def abort_while_waiting(
    provider: Any, model: Model, context: Context, server: VendorServer, text_before_hold: str
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
        async for event in provider.stream(model, context, StreamOptions(signal=signal)):
            events.append(event)
            if event.type == "text_delta" and event.partial.content[event.content_index].text == text_before_hold:
                trigger = asyncio.get_running_loop().create_task(fire_when_held())
    finally:
        server.release.set()
        if trigger is not None:
            await trigger
    assert trigger is not None, f"the text {text_before_hold!r} never arrived"
    assert_well_formed(events)
    return events


# --------------------------------------------------------------------------- agent loop


async def echo_tool(tool_call_id, args, signal, on_update) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=f"echo:{args['value']}")])


ECHO_TOOL = AgentTool(
    name="echo",
    description="Echo a value",
    parameters={"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]},
    execute=echo_tool,
)


async def run_agent(model: Model) -> list:
    """A two-turn agent session with the echo tool."""
    context = AgentContext(system_prompt="You are terse.", messages=[], tools=[ECHO_TOOL])
    config = AgentLoopConfig(model=model)
    return [event async for event in agent_loop([UserMessage(content="use echo")], context, config)]


__all__ = [
    "TIMESTAMP",
    "WEATHER_SCHEMA",
    "abort_on_first_delta",
    "abort_while_waiting",
    "closed_port_url",
    "collect",
    "error_response",
    "outline",
    "run_agent",
    "sse_frames",
]
