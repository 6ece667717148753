"""Every message and event class survives dump -> validate unchanged, and runtime-only
options never reach a dump."""

from __future__ import annotations

import asyncio

import pytest

from openprogram.providers.types import (
    EVENT_ADAPTER,
    MESSAGE_ADAPTER,
    AssistantMessage,
    Context,
    EventDone,
    EventError,
    EventStart,
    EventTextDelta,
    EventTextEnd,
    EventTextStart,
    EventThinkingDelta,
    EventThinkingEnd,
    EventThinkingStart,
    EventToolCallDelta,
    EventToolCallEnd,
    EventToolCallStart,
    ImageContent,
    Model,
    SimpleStreamOptions,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UsageCost,
    UserMessage,
)

PARTIAL = AssistantMessage(
    content=[
        ThinkingContent(thinking="hmm", thinking_signature="sig"),
        TextContent(text="hello", text_signature="ts"),
        ToolCall(id="c1", name="echo", arguments={"value": "x", "n": [1, 2.5, None, True]}),
    ],
    api="faux",
    provider="faux",
    model="echo",
    usage=Usage(input=3, output=4, total_tokens=7, cost=UsageCost(input=0.1, total=0.1)),
    timestamp=123,
)
FAILED = PARTIAL.model_copy(update={"stop_reason": "error", "error_message": "boom"})

EVENTS = [
    EventStart(partial=PARTIAL),
    EventTextStart(content_index=1, partial=PARTIAL),
    EventTextDelta(content_index=1, delta="he", partial=PARTIAL),
    EventTextEnd(content_index=1, content="hello", partial=PARTIAL),
    EventThinkingStart(content_index=0, partial=PARTIAL),
    EventThinkingDelta(content_index=0, delta="h", partial=PARTIAL),
    EventThinkingEnd(content_index=0, content="hmm", partial=PARTIAL),
    EventToolCallStart(content_index=2, partial=PARTIAL),
    EventToolCallDelta(content_index=2, delta='{"va', partial=PARTIAL),
    EventToolCallEnd(content_index=2, tool_call=PARTIAL.content[2], partial=PARTIAL),
    EventDone(reason="toolUse", message=PARTIAL),
    EventError(reason="aborted", error=FAILED),
]

MESSAGES = [
    UserMessage(content="plain", timestamp=1),
    UserMessage(
        content=[TextContent(text="look"), ImageContent(data="aGk=", mime_type="image/png")],
        timestamp=2,
    ),
    PARTIAL,
    ToolResultMessage(
        tool_call_id="c1",
        tool_name="echo",
        content=[TextContent(text="x")],
        details={"k": 1},
        is_error=True,
        timestamp=3,
    ),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.type)
def test_every_event_class_round_trips_through_json(event):
    dumped = event.model_dump(mode="json")
    restored = EVENT_ADAPTER.validate_python(dumped)
    assert type(restored) is type(event)
    assert restored == event
    assert EVENT_ADAPTER.validate_json(EVENT_ADAPTER.dump_json(event)) == event


def test_all_twelve_event_types_are_covered():
    assert {e.type for e in EVENTS} == {
        "start",
        "text_start",
        "text_delta",
        "text_end",
        "thinking_start",
        "thinking_delta",
        "thinking_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
        "done",
        "error",
    }


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.role)
def test_every_message_class_round_trips(message):
    restored = MESSAGE_ADAPTER.validate_python(message.model_dump(mode="json"))
    assert type(restored) is type(message)
    assert restored == message


def test_request_payloads_round_trip():
    model = Model(id="m", api="faux", provider="faux", headers={"X-A": "1"})
    context = Context(
        system_prompt="s", messages=MESSAGES, tools=[Tool(name="t", parameters={"type": "object"})]
    )
    options = SimpleStreamOptions(temperature=0.2, reasoning="high", tool_choice={"type": "auto"})
    assert Model.model_validate(model.model_dump(mode="json")) == model
    assert Context.model_validate(context.model_dump(mode="json")) == context
    assert SimpleStreamOptions.model_validate(options.model_dump(mode="json")) == options
    assert model.name == "m"  # name defaults to the id


def test_runtime_only_options_are_excluded_from_dumps():
    options = StreamOptions(api_key="k" * 10, signal=asyncio.Event(), on_payload=lambda body: body)
    dumped = options.model_dump(mode="json")
    assert "signal" not in dumped and "on_payload" not in dumped
    assert dumped["api_key"] == "k" * 10
    assert options.signal is not None and options.on_payload is not None


def test_discriminators_reject_unknown_types():
    with pytest.raises(ValueError):
        EVENT_ADAPTER.validate_python({"type": "nope", "partial": PARTIAL.model_dump()})
    with pytest.raises(ValueError):
        MESSAGE_ADAPTER.validate_python({"role": "system", "content": "x"})
