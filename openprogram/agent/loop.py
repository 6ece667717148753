"""The agent loop: call the model, run the tools it asks for, feed the results back, repeat.

Every turn goes through ``openprogram.providers.stream_simple``, so whatever the registry
serves (a vendor, a recorder, a replayer) drives the loop unchanged. Tool failures of every
kind become error tool results the model can act on; only a provider ``error`` event (or a
programming error such as an unknown api) ends the run early.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import jsonschema
from jsonschema.protocols import Validator

from ..providers.facade import stream_simple
from ..providers.lanes import lane, lane_segment
from ..providers.types import (
    AssistantMessage,
    Context,
    Message,
    ServerToolContent,
    SimpleStreamOptions,
    Tool,
    ToolCall,
    ToolResultMessage,
)
from .types import (
    AgentContext,
    AgentEndEvent,
    AgentEvent,
    AgentLoopConfig,
    AgentStartEvent,
    AgentTool,
    AgentToolResult,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)


async def agent_loop(
    prompts: list[Message],
    context: AgentContext,
    config: AgentLoopConfig,
    signal: asyncio.Event | None = None,
) -> AsyncIterator[AgentEvent]:
    """Run turns until the assistant stops calling tools, an error ends a call, or
    ``config.max_turns`` turns have run. ``context.messages`` is extended in place."""
    added: list[Message] = []

    def append(message: Message) -> None:
        context.messages.append(message)
        added.append(message)

    yield AgentStartEvent()
    for prompt in prompts:
        append(prompt)
        yield MessageStartEvent(message=prompt)
        yield MessageEndEvent(message=prompt)

    options = config.stream_options(signal)
    tools_by_name = {tool.name: tool for tool in context.tools}
    for turn in range(1, config.max_turns + 1):
        yield TurnStartEvent(turn=turn)
        assistant: AssistantMessage | None = None
        async for event in _assistant_turn(context, config, options):
            if isinstance(event, MessageEndEvent):
                assistant = cast(
                    AssistantMessage, event.message
                )  # a turn's message_end is its reply
            yield event
        assert assistant is not None
        append(assistant)

        if assistant.stop_reason in ("error", "aborted"):
            yield TurnEndEvent(message=assistant, tool_results=[])
            break

        calls = [block for block in assistant.content if isinstance(block, ToolCall)]
        results: list[ToolResultMessage] = []
        if calls:
            async for item in _run_tools(calls, tools_by_name, signal or config.signal):
                if isinstance(item, ToolResultMessage):
                    results.append(item)
                else:
                    yield item
            for result in results:
                append(result)
                yield MessageStartEvent(message=result)
                yield MessageEndEvent(message=result)
        yield TurnEndEvent(message=assistant, tool_results=results)
        if not calls and not is_paused(assistant):
            break
    yield AgentEndEvent(messages=added)


def is_paused(message: AssistantMessage) -> bool:
    """Whether the vendor paused a long turn (Anthropic ``pause_turn``, kept as a marker block
    at the end of the message, see docs/vendors.md): the loop then sends the message back as
    it is so the vendor continues, instead of ending the run."""
    last = message.content[-1] if message.content else None
    return isinstance(last, ServerToolContent) and last.kind == "pause_turn"


async def _assistant_turn(
    context: AgentContext, config: AgentLoopConfig, options: SimpleStreamOptions
) -> AsyncIterator[AgentEvent]:
    """One model call: message_start, one message_update per provider event, message_end."""
    llm_context = Context(
        system_prompt=context.system_prompt,
        messages=list(context.messages),
        tools=[_tool_spec(tool) for tool in context.tools] or None,
    )
    started = False
    final: AssistantMessage | None = None
    async for event in stream_simple(config.model, llm_context, options):
        # ``final`` is still None here: the loop ends at the first terminal event.
        if event.type == "done":
            final = current = event.message
        elif event.type == "error":
            final = current = event.error
        else:
            current = event.partial
        if not started:
            started = True
            yield MessageStartEvent(message=current)
        yield MessageUpdateEvent(message=current, assistant_message_event=event)
        if final is not None:
            break
    if final is None:
        raise RuntimeError(
            f"the provider for api '{config.model.api}' ended its stream without a terminal event"
        )
    yield MessageEndEvent(message=final)


def _tool_spec(tool: AgentTool) -> Tool:
    return Tool(name=tool.name, description=tool.description, parameters=tool.parameters)


async def _run_tools(
    calls: list[ToolCall],
    tools_by_name: dict[str, AgentTool],
    signal: asyncio.Event | None,
) -> AsyncIterator[AgentEvent | ToolResultMessage]:
    """Run every call concurrently, streaming their events as they happen, then yield the
    result messages in the order the model issued the calls."""
    queue: asyncio.Queue[AgentEvent] = asyncio.Queue()
    tasks = [
        asyncio.ensure_future(
            _run_one_tool(call, tools_by_name.get(call.name), tools_by_name, signal, queue)
        )
        for call in calls
    ]
    pending = set(tasks)
    try:
        while pending or not queue.empty():
            while not queue.empty():
                yield queue.get_nowait()
            if not pending:
                break
            getter = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait(pending | {getter}, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                yield getter.result()
            else:
                getter.cancel()
            pending -= done
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
    for task in tasks:
        yield task.result()


async def _run_one_tool(
    call: ToolCall,
    tool: AgentTool | None,
    tools_by_name: dict[str, AgentTool],
    signal: asyncio.Event | None,
    events: asyncio.Queue[AgentEvent],
) -> ToolResultMessage:
    await events.put(
        ToolExecutionStartEvent(tool_call_id=call.id, tool_name=call.name, args=call.arguments)
    )
    # Each execution in its own lane: a tool that asks the model itself (a sub-agent) makes
    # its calls there, so replay matches them whatever order concurrent tools run in.
    with lane(lane_segment(call.id)):
        result = await _execute(call, tool, tools_by_name, signal, events)
    await events.put(
        ToolExecutionEndEvent(
            tool_call_id=call.id, tool_name=call.name, result=result, is_error=result.is_error
        )
    )
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=result.content,
        details=result.details,
        is_error=result.is_error,
    )


async def _execute(
    call: ToolCall,
    tool: AgentTool | None,
    tools_by_name: dict[str, AgentTool],
    signal: asyncio.Event | None,
    events: asyncio.Queue[AgentEvent],
) -> AgentToolResult:
    if tool is None:
        available = ", ".join(sorted(tools_by_name)) or "none"
        return AgentToolResult.text(
            f"Tool '{call.name}' not found. Available tools: {available}.", is_error=True
        )
    problem = validate_arguments(tool, call.arguments)
    if problem is not None:
        return AgentToolResult.text(problem, is_error=True)

    def on_update(partial: AgentToolResult) -> None:
        events.put_nowait(
            ToolExecutionUpdateEvent(
                tool_call_id=call.id, tool_name=call.name, partial_result=partial
            )
        )

    try:
        result = await tool.execute(call.id, call.arguments, signal, on_update)
    except asyncio.CancelledError:
        raise
    except Exception as error:  # noqa: BLE001 - a tool's failure is reported to the model
        detail = str(error).strip()
        return AgentToolResult.text(
            f"Tool '{call.name}' failed: {type(error).__name__}{': ' + detail if detail else ''}",
            is_error=True,
        )
    if not isinstance(result, AgentToolResult):
        return AgentToolResult.text(
            f"Tool '{call.name}' returned {type(result).__name__}, not AgentToolResult",
            is_error=True,
        )
    return result


_validators: dict[int, tuple[dict[str, Any], Validator]] = {}


def validate_arguments(tool: AgentTool, arguments: dict[str, Any]) -> str | None:
    """A message the model can act on when ``arguments`` break the tool's schema, else None."""
    # Keyed by the schema object, which the cache keeps alive, so an id is never reused.
    cached = _validators.get(id(tool.parameters))
    if cached is None or cached[0] is not tool.parameters:
        validator_class = jsonschema.validators.validator_for(tool.parameters)
        cached = (tool.parameters, validator_class(tool.parameters))
        _validators[id(tool.parameters)] = cached
    errors = sorted(cached[1].iter_errors(arguments), key=lambda e: list(e.path))
    if not errors:
        return None
    lines = []
    for error in errors[:5]:
        where = "/".join(str(part) for part in error.path) or "(root)"
        lines.append(f"- {where}: {error.message}")
    return (
        f"Invalid arguments for tool '{tool.name}':\n"
        + "\n".join(lines)
        + "\nCall the tool again with arguments that match its parameters schema."
    )
