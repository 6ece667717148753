"""The faux provider streams complete, well-formed, deterministic event sequences."""

from __future__ import annotations

import asyncio

import pytest

from openprogram.providers.faux import (
    FauxProvider,
    FauxResponse,
    FauxText,
    chunk_text,
    echo_response,
    faux_error,
    faux_text,
    faux_thinking,
    faux_tool_call,
    faux_tool_calls,
)
from openprogram.providers.types import (
    Context,
    Model,
    SimpleStreamOptions,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from tests.event_checks import assert_well_formed, final_message

MODEL = Model(id="scripted", api="faux", provider="faux")
CONTEXT = Context(messages=[UserMessage(content="hi", timestamp=1)])


async def collect(provider, context=CONTEXT, options=None, model=MODEL):
    return [event async for event in provider.stream_simple(model, context, options)]


async def test_text_response_is_well_formed_and_chunked_by_words():
    events = await collect(FauxProvider([faux_text("one two three")]))
    assert_well_formed(events)
    assert [e.type for e in events] == [
        "start",
        "text_start",
        "text_delta",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]
    assert [e.delta for e in events if e.type == "text_delta"] == ["one ", "two ", "three"]
    assert final_message(events).content == [TextContent(text="one two three")]
    assert events[-1].reason == "stop"


async def test_thinking_then_text_keeps_the_signature():
    events = await collect(FauxProvider([faux_thinking("let me see", "ok", signature="sig-1")]))
    assert_well_formed(events)
    message = final_message(events)
    assert message.content[0].thinking == "let me see"
    assert message.content[0].thinking_signature == "sig-1"
    assert message.content[1].text == "ok"
    assert [e.content_index for e in events if e.type.endswith("_end")] == [0, 1]


async def test_tool_calls_stream_arguments_and_parse_them_at_the_end():
    arguments = {"path": "a/b.txt", "nested": {"n": [1, 2, 3]}, "flag": True}
    provider = FauxProvider(
        [faux_tool_calls(("read", arguments), ("calc", {"e": "1+1"}), text="calling")]
    )
    events = await collect(provider)
    assert_well_formed(events)
    deltas = [e.delta for e in events if e.type == "toolcall_delta" and e.content_index == 1]
    assert len(deltas) > 3  # the arguments really arrive in pieces
    ends = [e for e in events if e.type == "toolcall_end"]
    assert [e.tool_call.arguments for e in ends] == [arguments, {"e": "1+1"}]
    assert ends[0].tool_call.id != ends[1].tool_call.id
    assert events[-1].reason == "toolUse"
    # partial arguments grow monotonically while streaming
    partial_args = [
        e.partial.content[1].arguments
        for e in events
        if e.type == "toolcall_delta" and e.content_index == 1
    ]
    assert partial_args[-1] == arguments


async def test_scripted_error_keeps_partial_text():
    events = await collect(FauxProvider([faux_error("rate limited", partial_text="so far")]))
    assert_well_formed(events)
    assert events[-1].type == "error" and events[-1].reason == "error"
    assert events[-1].error.error_message == "rate limited"
    assert events[-1].error.content[0].text == "so far"


async def test_empty_queue_gives_an_error_event():
    events = await collect(FauxProvider())
    assert [e.type for e in events] == ["start", "error"]
    assert "no scripted response" in events[-1].error.error_message


async def test_responder_function_sees_the_request():
    seen = []

    def responder(model, context, options):
        seen.append((model.id, context.messages[-1].content, options.temperature))
        return faux_text("from function")

    events = await collect(FauxProvider([responder]), options=SimpleStreamOptions(temperature=0.3))
    assert seen == [("scripted", "hi", 0.3)]
    assert final_message(events).content[0].text == "from function"


async def test_abort_between_chunks_ends_with_aborted_and_partial_content():
    signal = asyncio.Event()
    provider = FauxProvider([faux_text("a b c d e f g h")])
    events = []
    async for event in provider.stream_simple(MODEL, CONTEXT, SimpleStreamOptions(signal=signal)):
        events.append(event)
        if event.type == "text_delta" and len(events) == 4:
            signal.set()
    assert_well_formed(events)
    assert events[-1].reason == "aborted"
    assert events[-1].error.content[0].text == "a b "


async def test_abort_while_the_provider_waits_is_prompt():
    """The signal fires while the producer is parked: the guard must interrupt the wait."""
    signal = asyncio.Event()
    parked = asyncio.Event()

    class Parking(FauxProvider):
        async def _pause(self) -> None:
            parked.set()
            await asyncio.Event().wait()  # would wait forever without the abort

    async def fire():
        await parked.wait()
        signal.set()

    provider = Parking([faux_text("x y")])
    firing = asyncio.ensure_future(fire())
    events = await asyncio.wait_for(
        collect(provider, options=SimpleStreamOptions(signal=signal)), timeout=10
    )
    await firing
    assert_well_formed(events)
    assert events[-1].reason == "aborted"


async def test_consumer_task_cancellation_still_propagates():
    """Only the abort signal becomes an event; cancelling the consumer must cancel it."""
    parked = asyncio.Event()

    class Parking(FauxProvider):
        async def _pause(self) -> None:
            parked.set()
            await asyncio.Event().wait()

    task = asyncio.ensure_future(
        collect(Parking([faux_text("x")]), options=SimpleStreamOptions(signal=asyncio.Event()))
    )
    await parked.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_fixed_timestamp_makes_runs_identical():
    first = await collect(FauxProvider([faux_tool_call("t", {"a": 1}, text="x")], timestamp=5))
    second = await collect(FauxProvider([faux_tool_call("t", {"a": 1}, text="x")], timestamp=5))
    assert [e.model_dump() for e in first] == [e.model_dump() for e in second]


def test_chunk_text_concatenates_back():
    for text in ["", "a", "  lead and trail  ", "multi\nline\n\ntext", "x" * 50]:
        assert "".join(chunk_text(text)) == text


def test_echo_model_echoes_calls_tools_and_reports_results():
    tools = [
        Tool(
            name="calculator",
            parameters={
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        )
    ]
    assert echo_response(Context(messages=[UserMessage(content="hello")])).blocks == (
        FauxText("echo: hello"),
    )
    call = echo_response(
        Context(messages=[UserMessage(content='/calculator 6*7\n/other {"k": 2}')], tools=tools)
    )
    assert [(b.name, b.arguments) for b in call.blocks] == [
        ("calculator", {"expression": "6*7"}),
        ("other", {"k": 2}),
    ]
    after = Context(
        messages=[
            UserMessage(content="/calculator 6*7"),
            ToolResultMessage(
                tool_call_id="c", tool_name="calculator", content=[TextContent(text="42")]
            ),
        ],
        tools=tools,
    )
    assert echo_response(after) == FauxResponse(blocks=(FauxText("calculator returned: 42"),))


async def test_echo_model_answers_without_a_script():
    events = await collect(FauxProvider(), model=Model(id="echo", api="faux", provider="faux"))
    assert_well_formed(events)
    assert final_message(events).content == [TextContent(text="echo: hi")]


async def test_tool_call_ids_are_deterministic_per_conversation():
    tools = [Tool(name="t", parameters={})]
    context = Context(messages=[UserMessage(content="/t {}")], tools=tools)
    echo = Model(id="echo", api="faux", provider="faux")
    first = final_message(await collect(FauxProvider(), context, model=echo))
    second = final_message(await collect(FauxProvider(), context, model=echo))
    assert isinstance(first.content[0], ToolCall)
    assert first.content[0].id == second.content[0].id
