"""The agent loop over the faux provider: several turns, two tools, every tool failure mode,
parallel calls, provider errors and the turn limit."""

from __future__ import annotations

import asyncio

import pytest

from openprogram.agent import AgentContext, AgentLoopConfig, AgentTool, AgentToolResult, agent_loop
from openprogram.providers.api_registry import register_api_provider
from openprogram.providers.faux import (
    FauxProvider,
    faux_error,
    faux_text,
    faux_tool_call,
    faux_tool_calls,
)
from openprogram.providers.types import Model, TextContent, ToolResultMessage, UserMessage

SCHEMA = {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}


def setup_provider(api: str, *responses) -> tuple[FauxProvider, Model]:
    provider = FauxProvider(responses)
    register_api_provider(api, provider)
    return provider, Model(id="scripted", api=api, provider="faux")


def make_tool(name: str, execute) -> AgentTool:
    return AgentTool(name=name, description=f"{name} tool", parameters=SCHEMA, execute=execute)


async def echo(tool_call_id, args, signal, on_update):
    return AgentToolResult(content=[TextContent(text=f"echo:{args['value']}")])


async def shout(tool_call_id, args, signal, on_update):
    on_update(AgentToolResult.text("working"))
    return AgentToolResult(
        content=[TextContent(text=args["value"].upper())], details={"len": len(args["value"])}
    )


async def explode(tool_call_id, args, signal, on_update):
    raise OSError("disk on fire")


async def run(prompt: str, context: AgentContext, model: Model, **config) -> list:
    return [
        event
        async for event in agent_loop(
            [UserMessage(content=prompt)], context, AgentLoopConfig(model=model, **config)
        )
    ]


def results_of(events) -> list[ToolResultMessage]:
    return [m for e in events if e.type == "turn_end" for m in e.tool_results]


async def test_two_tools_over_several_turns():
    provider, model = setup_provider(
        "loop-multi",
        faux_tool_call("echo", {"value": "hi"}),
        faux_tool_call("shout", {"value": "hey"}),
        faux_text("all done"),
    )
    context = AgentContext(
        system_prompt="terse", tools=[make_tool("echo", echo), make_tool("shout", shout)]
    )
    events = await run("go", context, model)

    kinds = [e.type for e in events if e.type != "message_update"]
    assert kinds[0] == "agent_start" and kinds[-1] == "agent_end"
    assert kinds.count("turn_start") == 3 and kinds.count("turn_end") == 3
    assert [r.content[0].text for r in results_of(events)] == ["echo:hi", "HEY"]
    assert any(
        e.type == "tool_execution_update" and e.partial_result.content[0].text == "working"
        for e in events
    )
    # the model saw each tool result on the next turn, and the system prompt every time
    second_call_context = provider.calls[1][1]
    assert second_call_context.system_prompt == "terse"
    assert second_call_context.messages[-1].content[0].text == "echo:hi"
    assert [t.name for t in second_call_context.tools] == ["echo", "shout"]
    # agent_end lists every message the run added, and the context holds them too
    added = events[-1].messages
    assert [m.role for m in added] == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "toolResult",
        "assistant",
    ]
    assert context.messages == added
    assert added[-1].content[0].text == "all done"


async def test_unknown_tool_invalid_arguments_and_raising_tool_become_error_results():
    provider, model = setup_provider(
        "loop-errors",
        faux_tool_calls(
            ("missing", {"value": "x"}), ("echo", {"value": 5}), ("explode", {"value": "x"})
        ),
        faux_text("recovered"),
    )
    context = AgentContext(tools=[make_tool("echo", echo), make_tool("explode", explode)])
    events = await run("go", context, model)
    results = results_of(events)
    assert [r.is_error for r in results] == [True, True, True]
    texts = [r.content[0].text for r in results]
    assert "Tool 'missing' not found" in texts[0] and "echo, explode" in texts[0]
    assert (
        "Invalid arguments for tool 'echo'" in texts[1]
        and "value" in texts[1]
        and "is not of type 'string'" in texts[1]
    )
    assert texts[2] == "Tool 'explode' failed: OSError: disk on fire"
    ends = [e for e in events if e.type == "tool_execution_end"]
    assert all(e.is_error for e in ends)
    assert events[-1].messages[-1].content[0].text == "recovered"


async def test_parallel_calls_run_concurrently_and_keep_the_model_order():
    both_started = asyncio.Event()
    second_finished = asyncio.Event()
    started: list[str] = []
    finished: list[str] = []

    async def rendezvous(tool_call_id, args, signal, on_update):
        started.append(args["value"])
        if len(started) == 2:
            both_started.set()
        # each call waits until the other has started: sequential execution would deadlock
        await asyncio.wait_for(both_started.wait(), timeout=10)
        if args["value"] == "first":
            await asyncio.wait_for(second_finished.wait(), timeout=10)  # finish out of order
        finished.append(args["value"])
        if args["value"] == "second":
            second_finished.set()
        return AgentToolResult.text(args["value"])

    provider, model = setup_provider(
        "loop-parallel",
        faux_tool_calls(("meet", {"value": "first"}), ("meet", {"value": "second"})),
        faux_text("ok"),
    )
    events = await run("go", AgentContext(tools=[make_tool("meet", rendezvous)]), model)
    assert sorted(started) == ["first", "second"]
    assert finished == ["second", "first"]
    assert [r.content[0].text for r in results_of(events)] == ["first", "second"]
    assert [m.tool_call_id for m in events[-1].messages if m.role == "toolResult"] == [
        e.tool_call_id for e in events if e.type == "tool_execution_start"
    ]


async def test_provider_error_ends_the_run_after_turn_end_and_agent_end():
    provider, model = setup_provider(
        "loop-fail", faux_tool_call("echo", {"value": "a"}), faux_error("overloaded")
    )
    events = await run("go", AgentContext(tools=[make_tool("echo", echo)]), model)
    kinds = [e.type for e in events if e.type != "message_update"]
    assert kinds[-2:] == ["turn_end", "agent_end"]
    final = events[-1].messages[-1]
    assert final.stop_reason == "error" and final.error_message == "overloaded"
    assert provider.pending == 0


async def test_max_turns_stops_a_model_that_never_stops_calling_tools():
    provider, model = setup_provider(
        "loop-limit", *[faux_tool_call("echo", {"value": str(i)}) for i in range(5)]
    )
    events = await run("go", AgentContext(tools=[make_tool("echo", echo)]), model, max_turns=2)
    assert [e.type for e in events].count("turn_start") == 2
    assert len(provider.calls) == 2


async def test_message_updates_carry_every_provider_event():
    provider, model = setup_provider("loop-updates", faux_text("a b c"))
    events = await run("go", AgentContext(), model)
    inner = [e.assistant_message_event.type for e in events if e.type == "message_update"]
    assert inner == [
        "start",
        "text_start",
        "text_delta",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]


async def test_signal_aborts_the_run():
    signal = asyncio.Event()
    provider, model = setup_provider("loop-abort", faux_text("one two three four"))
    events = []
    async for event in agent_loop(
        [UserMessage(content="go")], AgentContext(), AgentLoopConfig(model=model), signal
    ):
        events.append(event)
        if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
            signal.set()
    assert events[-1].messages[-1].stop_reason == "aborted"


def test_config_rejects_zero_turns():
    with pytest.raises(ValueError):
        AgentLoopConfig(model=Model(id="m", api="faux", provider="faux"), max_turns=0)
