"""The anthropic-messages provider against a local server speaking Anthropic's SSE format,
through the real ``anthropic`` SDK."""

from __future__ import annotations

import asyncio
import socket

import pytest

from openprogram.providers.types import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    ModelCost,
    SimpleStreamOptions,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from openprogram.providers.vendors.anthropic_messages import AnthropicMessagesProvider
from tests.event_checks import assert_well_formed, final_message
from tests.transcripts import anthropic_streams as t
from tests.transcripts.event_summary import collect, summarize
from tests.vendor_server import ScriptedResponse, VendorServer

KEY = "sk-ant-test-0123456789abcdef"
TIMESTAMP = 1_700_000_000_000
NO_RETRY = {"content-type": "application/json", "x-should-retry": "false"}


@pytest.fixture
def server():
    with VendorServer() as running:
        yield running


def make_model(base_url: str, **overrides) -> Model:
    fields = dict(
        id=t.MODEL_ID,
        api="anthropic-messages",
        provider="anthropic",
        base_url=base_url,
        reasoning=True,
        input=["text", "image"],
        cost=ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75),
        max_tokens=64000,
    )
    fields.update(overrides)
    return Model(**fields)


@pytest.fixture
def model(server) -> Model:
    return make_model(server.url)


@pytest.fixture
def provider() -> AnthropicMessagesProvider:
    return AnthropicMessagesProvider(timestamp=TIMESTAMP)


def hello() -> Context:
    return Context(messages=[UserMessage(content="Hello", timestamp=1)])


def options(**fields) -> StreamOptions:
    return StreamOptions(api_key=KEY, **fields)


async def run(provider, model, context=None, opts=None) -> list:
    events = await collect(provider.stream(model, context or hello(), opts or options()))
    assert_well_formed(events)
    return events


# ----------------------------------------------------------------------------- streams


async def test_plain_text_events_usage_and_cost(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.PLAIN_TEXT))
    events = await run(provider, model)
    assert summarize(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Hello"),
        ("text_delta", 0, ", world"),
        ("text_delta", 0, "!"),
        ("text_end", 0, "Hello, world!"),
        ("done", "stop"),
    ]
    message = final_message(events)
    assert message.content == [TextContent(text="Hello, world!")]
    assert message.stop_reason == "stop"
    assert message.timestamp == TIMESTAMP
    usage = message.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total_tokens) == (
        25, 15, 100, 40, 180,
    )
    assert usage.cost.input == pytest.approx(25 * 3 / 1e6)
    assert usage.cost.cache_write == pytest.approx(40 * 3.75 / 1e6)
    assert usage.cost.total == pytest.approx((25 * 3 + 15 * 15 + 100 * 0.3 + 40 * 3.75) / 1e6)
    # The partial grows with every delta.
    assert [e.partial.content[0].text for e in events if e.type == "text_delta"] == [
        "Hello", "Hello, world", "Hello, world!",
    ]


async def test_several_text_blocks_and_max_tokens(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.SEVERAL_TEXT_BLOCKS))
    events = await run(provider, model)
    assert summarize(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "First "),
        ("text_delta", 0, "block."),
        ("text_end", 0, "First block."),
        ("text_start", 1),
        ("text_delta", 1, "Second "),
        ("text_delta", 1, "block."),
        ("text_end", 1, "Second block."),
        ("done", "length"),
    ]
    assert final_message(events).content == [TextContent(text="First block."), TextContent(text="Second block.")]


async def test_thinking_with_signature_and_redacted_thinking(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.THINKING_THEN_TEXT))
    events = await run(provider, model)
    assert summarize(events) == [
        ("start",),
        ("thinking_start", 0),
        ("thinking_delta", 0, "Let me think"),
        ("thinking_delta", 0, " about 2+2."),
        ("thinking_end", 0, "Let me think about 2+2."),
        ("thinking_start", 1),
        ("thinking_end", 1, ""),
        ("text_start", 2),
        ("text_delta", 2, "It is "),
        ("text_delta", 2, "4."),
        ("text_end", 2, "It is 4."),
        ("done", "stop"),
    ]
    assert final_message(events).content == [
        ThinkingContent(thinking="Let me think about 2+2.", thinking_signature=t.SIGNATURE),
        ThinkingContent(thinking="", thinking_signature=t.REDACTED_DATA, redacted=True),
        TextContent(text="It is 4."),
    ]


async def test_one_tool_call_with_split_arguments(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.ONE_TOOL_CALL))
    events = await run(provider, model)
    arguments = {"location": "San Francisco, CA", "unit": "celsius"}
    assert summarize(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Checking."),
        ("text_end", 0, "Checking."),
        ("toolcall_start", 1),
        ("toolcall_delta", 1, '{"loca'),
        ("toolcall_delta", 1, 'tion": "San'),
        ("toolcall_delta", 1, ' Francisco, CA"'),
        ("toolcall_delta", 1, ', "unit": "c'),
        ("toolcall_delta", 1, 'elsius"}'),
        ("toolcall_end", 1, ("toolu_01A", "get_weather", arguments)),
        ("done", "toolUse"),
    ]
    # Partial arguments are parsed as they stream.
    partial_args = [e.partial.content[1].arguments for e in events if e.type == "toolcall_delta"]
    assert partial_args[1] == {"location": "San"}
    assert partial_args[-1] == arguments
    message = final_message(events)
    assert message.content[1] == ToolCall(id="toolu_01A", name="get_weather", arguments=arguments)
    assert message.usage.output == 89


async def test_several_tool_calls(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.SEVERAL_TOOL_CALLS))
    events = await run(provider, model)
    ends = [row for row in summarize(events) if row[0] in ("toolcall_start", "toolcall_end", "done")]
    assert ends == [
        ("toolcall_start", 0),
        ("toolcall_end", 0, ("toolu_01A", "get_weather", {"city": "Paris"})),
        ("toolcall_start", 1),
        ("toolcall_end", 1, ("toolu_01B", "get_time", {"tz": "Europe/Paris"})),
        ("done", "toolUse"),
    ]
    assert [e.delta for e in events if e.type == "toolcall_delta" and e.content_index == 1] == [
        '{"tz": ', '"Europe/', 'Paris"}',
    ]


async def test_usage_from_the_final_message_delta(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.USAGE_ONLY_FINAL))
    events = await run(provider, model)
    assert summarize(events)[-1] == ("done", "stop")
    usage = final_message(events).usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total_tokens) == (
        12, 7, 2048, 512, 2579,
    )


# ----------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("status", "kind", "text"),
    [
        (401, "authentication_error", "invalid x-api-key"),
        (404, "not_found_error", "model: claude-nope"),
        (429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
        (500, "api_error", "Internal server error"),
    ],
)
async def test_http_error_before_the_stream(server, model, provider, status, kind, text):
    # x-should-retry: false is Anthropic's own "do not retry" header, which the SDK obeys.
    server.queue(ScriptedResponse(status=status, headers=NO_RETRY, chunks=[t.error_body(kind, text)]))
    events = await run(provider, model)
    assert summarize(events) == [("error", "error", f"anthropic: HTTP {status}: {kind}: {text}")]
    assert len(server.requests) == 1


async def test_error_message_never_contains_the_key(server, model, provider):
    server.queue(ScriptedResponse(status=401, headers=NO_RETRY, chunks=[t.error_body("authentication_error", f"bad key {KEY}")]))
    events = await run(provider, model)
    message = final_message(events).error_message
    assert KEY not in message
    assert message == "anthropic: HTTP 401: authentication_error: bad key [secret removed]"


async def test_stream_that_breaks_off_keeps_partial_text(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.BREAKS_OFF, break_after=t.BREAK_AFTER))
    events = await run(provider, model)
    rows = summarize(events)
    assert rows[:3] == [("start",), ("text_start", 0), ("text_delta", 0, "Partial ")]
    assert len(rows) == 4 and rows[3][:2] == ("error", "error")
    assert rows[3][2].startswith("anthropic: ")
    message = final_message(events)
    assert message.content == [TextContent(text="Partial ")]
    assert message.stop_reason == "error"


async def test_error_event_inside_the_stream(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.MID_STREAM_ERROR))
    events = await run(provider, model)
    assert summarize(events)[-1] == ("error", "error", "anthropic: stream error (overloaded_error): Overloaded")
    assert final_message(events).content == [TextContent(text="Hi")]


async def test_malformed_chunk_becomes_an_error_event(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.MALFORMED))
    events = await run(provider, model)
    last = summarize(events)[-1]
    assert last[:2] == ("error", "error")
    assert last[2].startswith("anthropic: JSONDecodeError")
    assert final_message(events).content == [TextContent(text="Hi")]


async def test_abort_mid_stream_keeps_partial_text(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.PLAIN_TEXT, hold_after=4))  # ... up to the first delta
    signal = asyncio.Event()
    events = []
    async for event in provider.stream(model, hello(), options(signal=signal)):
        events.append(event)
        if event.type == "text_delta":
            signal.set()
    server.release.set()
    assert_well_formed(events)
    assert summarize(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Hello"),
        ("error", "aborted", "Request was aborted"),
    ]
    assert final_message(events).content == [TextContent(text="Hello")]
    assert final_message(events).stop_reason == "aborted"
    assert not server.hold_timed_out


async def test_connection_failure(provider):
    with socket.socket() as probe:  # a port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    quick = AnthropicMessagesProvider(max_retries=0)
    events = await run(quick, make_model(f"http://127.0.0.1:{port}"))
    message = final_message(events).error_message
    assert message.startswith("anthropic: connection failed (APIConnectionError)")


async def test_missing_key_names_the_environment_variable(provider):
    remote = make_model("https://api.anthropic.com")
    events = await run(provider, remote, opts=StreamOptions())
    assert len(events) == 1 and events[0].type == "error"
    assert "ANTHROPIC_API_KEY" in events[0].error.error_message
    assert events[0].error.error_message.startswith("anthropic: ")


# ----------------------------------------------------------------------------- request


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def rich_context() -> Context:
    return Context(
        system_prompt="You are terse.",
        tools=[
            Tool(
                name="get_weather",
                description="Weather for a city",
                parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            )
        ],
        messages=[
            UserMessage(content=[TextContent(text="What is this?"), ImageContent(data=PNG, mime_type="image/png")]),
            AssistantMessage(
                api="anthropic-messages",
                provider="anthropic",
                model=t.MODEL_ID,
                stop_reason="toolUse",
                content=[
                    ThinkingContent(thinking="Need weather.", thinking_signature="sig-1"),
                    ThinkingContent(thinking="", thinking_signature="opaque", redacted=True),
                    TextContent(text="Let me check."),
                    ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Paris"}),
                    ToolCall(id="call|2", name="get_weather", arguments={"city": "Rome"}),
                ],
            ),
            ToolResultMessage(tool_call_id="toolu_1", tool_name="get_weather", content=[TextContent(text="18C")]),
            ToolResultMessage(
                tool_call_id="call|2",
                tool_name="get_weather",
                content=[ImageContent(data=PNG, mime_type="image/png")],
                is_error=True,
            ),
            UserMessage(content="Thanks"),
        ],
    )


EXPECTED_BODY = {
    "model": t.MODEL_ID,
    "max_tokens": 1000,
    "stream": True,
    "temperature": 0.5,
    "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
    "tools": [
        {
            "name": "get_weather",
            "description": "Weather for a city",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        }
    ],
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Need weather.", "signature": "sig-1"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {"city": "Rome"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C", "is_error": False},
                {
                    "type": "tool_result",
                    "tool_use_id": "call_2",
                    "content": [
                        {"type": "text", "text": "(see attached image)"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                    ],
                    "is_error": True,
                },
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "Thanks", "cache_control": {"type": "ephemeral"}}]},
    ],
}


async def test_exact_request_body_and_headers(server, provider):
    model = make_model(server.url, headers={"x-model-header": "m", "x-shared": "model"})
    server.queue(ScriptedResponse(chunks=t.PLAIN_TEXT))
    opts = options(temperature=0.5, max_tokens=1000, headers={"x-call-header": "c", "x-shared": "call"})
    await run(provider, model, rich_context(), opts)
    request = server.requests[0]
    assert request.method == "POST" and request.path == "/v1/messages"
    assert request.json == EXPECTED_BODY
    assert request.headers["x-model-header"] == "m"
    assert request.headers["x-call-header"] == "c"
    assert request.headers["x-shared"] == "call"


async def test_cache_retention_none_sends_no_cache_control(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.PLAIN_TEXT))
    context = Context(system_prompt="sys", messages=[UserMessage(content="Hi")])
    await run(provider, model, context, options(cache_retention="none"))
    body = server.requests[0].json
    assert body["system"] == [{"type": "text", "text": "sys"}]
    assert body["messages"] == [{"role": "user", "content": "Hi"}]


async def test_on_payload_can_inspect_and_replace_the_body(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.PLAIN_TEXT))
    seen = []

    def hook(body):
        seen.append(body)
        return {**body, "max_tokens": 77, "metadata": {"user_id": "u-1"}}

    await run(provider, model, hello(), options(on_payload=hook))
    assert seen[0]["messages"][0]["content"][0]["text"] == "Hello"
    sent = server.requests[0].json
    assert sent["max_tokens"] == 77
    assert sent["metadata"] == {"user_id": "u-1"}


@pytest.mark.parametrize(
    ("level", "budgets", "max_tokens", "budget"),
    [("low", None, 2000 + 2048, 2048), ("high", {"high": 5000}, 2000 + 5000, 5000)],
)
async def test_reasoning_maps_to_a_thinking_budget(server, model, provider, level, budgets, max_tokens, budget):
    server.queue(ScriptedResponse(chunks=t.THINKING_THEN_TEXT))
    opts = SimpleStreamOptions(api_key=KEY, max_tokens=2000, reasoning=level, thinking_budgets=budgets)
    events = await collect(provider.stream_simple(model, hello(), opts))
    assert events[-1].type == "done"
    body = server.requests[0].json
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] == max_tokens


async def test_adaptive_thinking_for_models_that_use_it(server, provider):
    model = make_model(server.url, id="claude-opus-4-6")
    server.queue(ScriptedResponse(chunks=t.PLAIN_TEXT))
    await collect(provider.stream_simple(model, hello(), SimpleStreamOptions(api_key=KEY, reasoning="medium")))
    body = server.requests[0].json
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"] == {"effort": "medium"}
    assert "budget_tokens" not in str(body)


async def test_no_thinking_without_a_reasoning_level(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.PLAIN_TEXT))
    await collect(provider.stream_simple(model, hello(), SimpleStreamOptions(api_key=KEY)))
    assert "thinking" not in server.requests[0].json


# ----------------------------------------------------------------------------- agent loop


async def test_two_turn_tool_session_through_the_agent_loop(server, model, fresh_registry):
    from tests.transcripts.agent_session import run_echo_session

    fresh_registry.register_api_provider("anthropic-messages", AnthropicMessagesProvider())
    server.queue(ScriptedResponse(chunks=t.AGENT_TOOL_TURN), ScriptedResponse(chunks=t.AGENT_TEXT_TURN))
    events, received = await run_echo_session(model, KEY)
    assert received == [{"value": "hi"}]
    end = events[-1]
    assert end.type == "agent_end"
    assert [m.role for m in end.messages] == ["user", "assistant", "toolResult", "assistant"]
    assert end.messages[-1].content == [TextContent(text="The tool said echo:hi.")]
    assert [e.type for e in events if e.type in ("turn_start", "tool_execution_end", "turn_end")] == [
        "turn_start", "tool_execution_end", "turn_end", "turn_start", "turn_end",
    ]
    second = server.requests[1].json["messages"]
    assert second[1] == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_echo", "name": "echo", "input": {"value": "hi"}}],
    }
    assert second[2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_echo",
                "content": "echo:hi",
                "is_error": False,
                "cache_control": {"type": "ephemeral"},
            }
        ],
    }
