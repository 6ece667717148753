"""A two-turn agent session (one tool call, then text) that the vendor provider tests run
against their local servers, so the provider is exercised the way the agent loop uses it."""

from __future__ import annotations

from typing import Any

from openprogram.agent import AgentContext, AgentLoopConfig, AgentTool, AgentToolResult, agent_loop
from openprogram.providers.types import Model, TextContent, UserMessage

ECHO_SCHEMA = {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}


async def run_echo_session(
    model: Model, api_key: str | None, **options: Any
) -> tuple[list, list[dict]]:
    """Run the session (``options`` are further :class:`AgentLoopConfig` fields); return the
    agent events and the arguments the tool received."""
    received: list[dict] = []

    async def echo(tool_call_id, args, signal, on_update):
        received.append(args)
        return AgentToolResult(content=[TextContent(text=f"echo:{args['value']}")])

    tool = AgentTool(name="echo", description="Echo a value", parameters=ECHO_SCHEMA, execute=echo)
    context = AgentContext(system_prompt="You are terse.", messages=[], tools=[tool])
    config = AgentLoopConfig(model=model, api_key=api_key, **options)
    events = [
        event async for event in agent_loop([UserMessage(content="use echo")], context, config)
    ]
    return events, received
