"""A small user program written against openprogram's public API, checked with ``mypy
--strict`` by tests/repo/test_typing.py: every name it uses must be typed for it to pass."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from openprogram.agent import (
    AgentContext,
    AgentEndEvent,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    agent_loop,
)
from openprogram.providers import (
    FauxProvider,
    ReplayMismatch,
    complete,
    faux_text,
    faux_tool_call,
    lane,
    read_recording_file,
    register_api_provider,
    remove_secret_values,
    stream_simple,
    use_recording,
)
from openprogram.providers.types import (
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    Model,
    SimpleStreamOptions,
    TextContent,
    ToolCall,
    UserMessage,
)
from openprogram.testing import LlmRecording
from openprogram.tools import builtin_tools

ECHO = Model(id="echo", api="faux", provider="faux")


async def shout(
    call_id: str, arguments: dict[str, Any], signal: asyncio.Event | None, update: Any
) -> AgentToolResult:
    return AgentToolResult.text(str(arguments.get("text", "")).upper())


SHOUT = AgentTool(
    name="shout",
    description="Upper-cases a text.",
    parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    execute=shout,
)


async def ask(prompt: str) -> str:
    message: AssistantMessage = await complete(
        ECHO, Context(messages=[UserMessage(content=prompt)])
    )
    first = message.content[0]
    return first.text if isinstance(first, TextContent) else ""


async def deltas(prompt: str) -> list[str]:
    found: list[str] = []
    options = SimpleStreamOptions(temperature=0.0, max_tokens=64)
    event: AssistantMessageEvent
    async for event in stream_simple(
        ECHO, Context(messages=[UserMessage(content=prompt)]), options
    ):
        if event.type == "text_delta":
            found.append(event.delta)
    return found


async def run_agent(prompt: str) -> list[str]:
    context = AgentContext(tools=[SHOUT, *builtin_tools(["calculator"])])
    texts: list[str] = []
    async for event in agent_loop(
        [UserMessage(content=prompt)], context, AgentLoopConfig(model=ECHO, max_turns=3)
    ):
        if isinstance(event, AgentEndEvent):
            for message in event.messages:
                if isinstance(message, AssistantMessage):
                    texts.extend(
                        block.text for block in message.content if isinstance(block, TextContent)
                    )
    return texts


def scripted() -> list[ToolCall]:
    provider = FauxProvider([faux_tool_call("shout", {"text": "hi"}), faux_text("done")])
    register_api_provider("scripted", provider)
    return []


def record_and_replay(folder: Path) -> int:
    path = folder / "calls.jsonl"
    with use_recording(path, "record", values={"folder": str(folder)}, secrets=["acme-7731"]):
        with lane("worker"):
            asyncio.run(ask("hello"))
    try:
        with use_recording(path, "replay") as scope:
            with lane("worker"):
                asyncio.run(ask("hello"))
            scope.assert_consumed()
    except ReplayMismatch as mismatch:
        return mismatch.call_index
    redacted: Any = remove_secret_values({"api_key": "sk-123"})
    assert isinstance(redacted, dict)
    return len(read_recording_file(path).calls)


@pytest.mark.llm_recording(name="typed")
def test_typed(llm_recording: LlmRecording) -> None:
    assert asyncio.run(ask("hi")) == "echo: hi"
    assert llm_recording.call_count >= 0
