"""The google-generative-ai provider against a local server speaking Gemini's SSE format,
through the real ``google-genai`` SDK."""

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
from openprogram.providers.vendors.google_generative_ai import GoogleGenerativeAIProvider
from tests.event_checks import assert_well_formed, final_message
from tests.transcripts import google_streams as t
from tests.transcripts.event_summary import collect, summarize
from tests.vendor_server import ScriptedResponse, VendorServer

KEY = "AIzaSy-test-0123456789abcdef"
TIMESTAMP = 1_700_000_000_000
JSON = {"content-type": "application/json"}
STREAM_PATH = f"/v1/models/{t.MODEL_ID}:streamGenerateContent?alt=sse"


@pytest.fixture
def server():
    with VendorServer() as running:
        yield running


def make_model(base_url: str, **overrides) -> Model:
    fields = dict(
        id=t.MODEL_ID,
        api="google-generative-ai",
        provider="google",
        base_url=base_url,
        reasoning=True,
        input=["text", "image"],
        cost=ModelCost(input=0.3, output=2.5, cache_read=0.075),
        max_tokens=65536,
    )
    fields.update(overrides)
    return Model(**fields)


@pytest.fixture
def model(server) -> Model:
    return make_model(server.url)


@pytest.fixture
def provider() -> GoogleGenerativeAIProvider:
    # No retries: the SDK's backoff (a second or more, with jitter) has no place in a test.
    return GoogleGenerativeAIProvider(max_retries=0, timestamp=TIMESTAMP)


def hello() -> Context:
    return Context(messages=[UserMessage(content="Hello", timestamp=1)])


def options(**fields) -> StreamOptions:
    return StreamOptions(api_key=KEY, **fields)


async def run(provider, model, context=None, opts=None) -> list:
    events = await collect(provider.stream(model, context or hello(), opts or options()))
    assert_well_formed(events)
    return events


def generated_id(name: str, number: int) -> str:
    return f"{name}_{t.RESPONSE_ID}_{number}"


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
    assert message.timestamp == TIMESTAMP
    usage = message.usage
    # 120 prompt tokens of which 100 came from the cache.
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total_tokens) == (
        20, 4, 100, 0, 124,
    )
    assert usage.cost.total == pytest.approx((20 * 0.3 + 4 * 2.5 + 100 * 0.075) / 1e6)
    assert server.requests[0].path == STREAM_PATH
    assert server.requests[0].headers["x-goog-api-key"] == KEY


async def test_several_text_blocks_around_a_call(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.SEVERAL_TEXT_BLOCKS))
    events = await run(provider, model)
    assert summarize(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Before "),
        ("text_delta", 0, "the call."),
        ("text_end", 0, "Before the call."),
        ("toolcall_start", 1),
        ("toolcall_end", 1, (generated_id("ping", 1), "ping", {})),
        ("text_start", 2),
        ("text_delta", 2, "After the call."),
        ("text_end", 2, "After the call."),
        ("done", "toolUse"),
    ]


async def test_thinking_then_text_keeps_both_signatures(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.THINKING_THEN_TEXT))
    events = await run(provider, model)
    assert summarize(events) == [
        ("start",),
        ("thinking_start", 0),
        ("thinking_delta", 0, "Considering"),
        ("thinking_delta", 0, " the sum."),
        ("thinking_end", 0, "Considering the sum."),
        ("text_start", 1),
        ("text_delta", 1, "It is "),
        ("text_delta", 1, "4."),
        ("text_end", 1, "It is 4."),
        ("done", "stop"),
    ]
    message = final_message(events)
    assert message.content == [
        ThinkingContent(thinking="Considering the sum.", thinking_signature=t.THOUGHT_SIGNATURE),
        TextContent(text="It is 4.", text_signature=t.TEXT_SIGNATURE),
    ]
    # Thought tokens are output tokens.
    assert (message.usage.input, message.usage.output) == (30, 23)


async def test_one_function_call_arrives_whole(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.ONE_TOOL_CALL))
    events = await run(provider, model)
    arguments = {"location": "San Francisco, CA", "unit": "celsius"}
    call_id = generated_id("get_weather", 1)
    assert summarize(events) == [
        ("start",),
        ("toolcall_start", 0),
        ("toolcall_end", 0, (call_id, "get_weather", arguments)),
        ("done", "toolUse"),
    ]
    assert final_message(events).content == [ToolCall(id=call_id, name="get_weather", arguments=arguments)]


async def test_several_function_calls_across_chunks(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.SEVERAL_TOOL_CALLS))
    events = await run(provider, model)
    assert summarize(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Checking both."),
        ("text_end", 0, "Checking both."),
        ("toolcall_start", 1),
        ("toolcall_end", 1, (generated_id("get_weather", 1), "get_weather", {"city": "Paris"})),
        ("toolcall_start", 2),
        ("toolcall_end", 2, (generated_id("get_weather", 2), "get_weather", {"city": "Rome"})),
        ("toolcall_start", 3),
        ("toolcall_end", 3, (generated_id("get_time", 3), "get_time", {"tz": "Europe/Rome"})),
        ("done", "toolUse"),
    ]
    assert final_message(events).usage.output == 40


async def test_usage_only_final_chunk(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.USAGE_ONLY_FINAL))
    events = await run(provider, model)
    assert summarize(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "ok"),
        ("text_end", 0, "ok"),
        ("done", "length"),
    ]
    usage = final_message(events).usage
    assert (usage.input, usage.output, usage.cache_read, usage.total_tokens) == (30, 1, 20, 51)


# ----------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("status", "code", "text"),
    [
        (401, "UNAUTHENTICATED", "Request had invalid authentication credentials."),
        (404, "NOT_FOUND", "models/gemini-nope is not found for API version v1beta"),
        (429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
        (500, "INTERNAL", "An internal error has occurred."),
    ],
)
async def test_http_error_before_the_stream(server, model, provider, status, code, text):
    server.queue(ScriptedResponse(status=status, headers=JSON, chunks=[t.error_body(status, code, text)]))
    events = await run(provider, model)
    assert summarize(events) == [("error", "error", f"google: HTTP {status}: {text}")]
    assert len(server.requests) == 1


async def test_error_message_never_contains_the_key(server, model, provider):
    body = t.error_body(400, "INVALID_ARGUMENT", f"API key not valid: {KEY}")
    server.queue(ScriptedResponse(status=400, headers=JSON, chunks=[body]))
    events = await run(provider, model)
    assert final_message(events).error_message == "google: HTTP 400: API key not valid: [secret removed]"


async def test_retryable_status_is_retried_and_others_are_not(server, model):
    retrying = GoogleGenerativeAIProvider(max_retries=1, retry_initial_delay=0.0)
    server.queue(
        ScriptedResponse(status=503, headers=JSON, chunks=[t.error_body(503, "UNAVAILABLE", "overloaded")]),
        ScriptedResponse(chunks=t.PLAIN_TEXT),
        ScriptedResponse(status=400, headers=JSON, chunks=[t.error_body(400, "INVALID_ARGUMENT", "bad")]),
    )
    events = await run(retrying, model)
    assert events[-1].type == "done" and len(server.requests) == 2
    events = await run(retrying, model)
    assert len(server.requests) == 3
    assert final_message(events).error_message == "google: HTTP 400: bad"


async def test_stream_that_breaks_off_keeps_partial_text(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.BREAKS_OFF, break_after=t.BREAK_AFTER))
    events = await run(provider, model)
    rows = summarize(events)
    assert rows[:3] == [("start",), ("text_start", 0), ("text_delta", 0, "Partial ")]
    assert len(rows) == 4 and rows[3][:2] == ("error", "error")
    assert rows[3][2].startswith("google: ")
    assert final_message(events).content == [TextContent(text="Partial ")]


async def test_stream_without_finish_reason_is_an_error(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.NO_FINISH_REASON))
    events = await run(provider, model)
    assert summarize(events)[-1] == (
        "error",
        "error",
        "google: connection failed (ConnectionError): the stream ended without a finish reason",
    )
    assert final_message(events).content == [TextContent(text="Cut")]


async def test_safety_finish_reason_is_an_error(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.SAFETY_STOP))
    events = await run(provider, model)
    rows = summarize(events)
    assert rows[-2:] == [
        ("text_end", 0, "Some"),
        ("error", "error", "google: generation stopped with finish reason SAFETY"),
    ]


async def test_malformed_chunk_becomes_an_error_event(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.MALFORMED))
    events = await run(provider, model)
    last = summarize(events)[-1]
    assert last[:2] == ("error", "error")
    assert last[2].startswith("google: ")
    assert final_message(events).content == [TextContent(text="Hi")]


async def test_abort_mid_stream_keeps_partial_text(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.PLAIN_TEXT, hold_after=1))
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
    assert not server.hold_timed_out


async def test_connection_failure(provider):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    events = await run(provider, make_model(f"http://127.0.0.1:{port}"))
    assert final_message(events).error_message.startswith("google: connection failed (ConnectError)")


async def test_missing_key_names_the_environment_variable(provider):
    events = await run(provider, make_model("https://generativelanguage.googleapis.com"), opts=StreamOptions())
    assert len(events) == 1
    message = events[0].error.error_message
    assert message.startswith("google: ") and "GEMINI_API_KEY" in message


# ----------------------------------------------------------------------------- request


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def rich_context(model_id: str = t.MODEL_ID) -> Context:
    return Context(
        system_prompt="You are terse.",
        tools=[Tool(name="get_weather", description="Weather for a city", parameters=WEATHER_SCHEMA)],
        messages=[
            UserMessage(content=[TextContent(text="What is this?"), ImageContent(data=PNG, mime_type="image/png")]),
            AssistantMessage(
                api="google-generative-ai",
                provider="google",
                model=model_id,
                stop_reason="toolUse",
                content=[
                    ThinkingContent(thinking="Need weather.", thinking_signature=t.THOUGHT_SIGNATURE),
                    TextContent(text="Let me check.", text_signature=t.TEXT_SIGNATURE),
                    ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"}),
                    ToolCall(id="c2", name="get_weather", arguments={"city": "Rome"}),
                ],
            ),
            ToolResultMessage(tool_call_id="c1", tool_name="get_weather", content=[TextContent(text="18C")]),
            ToolResultMessage(
                tool_call_id="c2",
                tool_name="get_weather",
                content=[ImageContent(data=PNG, mime_type="image/png")],
                is_error=True,
            ),
            UserMessage(content="Thanks"),
        ],
    )


# What the SDK puts on the wire (it keeps snake_case inside some nested objects; Gemini's JSON
# parser accepts both spellings of a field).
EXPECTED_BODY = {
    "contents": [
        {
            "role": "user",
            "parts": [{"text": "What is this?"}, {"inlineData": {"data": PNG, "mime_type": "image/png"}}],
        },
        {
            "role": "model",
            "parts": [
                {"text": "Need weather.", "thought": True, "thoughtSignature": t.THOUGHT_SIGNATURE},
                {"text": "Let me check.", "thoughtSignature": t.TEXT_SIGNATURE},
                {"functionCall": {"args": {"city": "Paris"}, "name": "get_weather"}},
                {"functionCall": {"args": {"city": "Rome"}, "name": "get_weather"}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "18C"}}},
                {"functionResponse": {"name": "get_weather", "response": {"error": "(see attached image)"}}},
                {"inlineData": {"data": PNG, "mime_type": "image/png"}},
            ],
        },
        {"role": "user", "parts": [{"text": "Thanks"}]},
    ],
    "systemInstruction": {"parts": [{"text": "You are terse."}], "role": "user"},
    "tools": [
        {
            "functionDeclarations": [
                {"description": "Weather for a city", "name": "get_weather", "parameters_json_schema": WEATHER_SCHEMA}
            ]
        }
    ],
    "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
    "generationConfig": {
        "temperature": 0.5,
        "maxOutputTokens": 1000,
        "thinkingConfig": {"include_thoughts": True, "thinking_budget": 2048},
    },
}


async def test_exact_request_body_and_headers(server, provider):
    model = make_model(server.url, headers={"x-model-header": "m", "x-shared": "model"})
    server.queue(ScriptedResponse(chunks=t.PLAIN_TEXT))
    opts = SimpleStreamOptions(
        api_key=KEY,
        temperature=0.5,
        max_tokens=1000,
        reasoning="low",
        tool_choice="any",
        headers={"x-call-header": "c", "x-shared": "call"},
    )
    events = await collect(provider.stream_simple(model, rich_context(), opts))
    assert events[-1].type == "done"
    request = server.requests[0]
    assert request.method == "POST" and request.path == STREAM_PATH
    assert request.json == EXPECTED_BODY
    assert request.headers["x-model-header"] == "m"
    assert request.headers["x-call-header"] == "c"
    assert request.headers["x-shared"] == "call"


async def test_gemini_3_thinking_level_and_function_call_signature(server, provider):
    model = make_model(server.url, id="gemini-3-pro-preview")
    server.queue(ScriptedResponse(chunks=t.PLAIN_TEXT))
    opts = SimpleStreamOptions(api_key=KEY, reasoning="medium")
    await collect(provider.stream_simple(model, rich_context(model.id), opts))
    body = server.requests[0].json
    assert body["generationConfig"]["thinkingConfig"] == {"include_thoughts": True, "thinking_level": "HIGH"}
    calls = [part for part in body["contents"][1]["parts"] if "functionCall" in part]
    # The SDK writes bytes in URL-safe base64, so the documented placeholder appears verbatim.
    assert [part["thoughtSignature"] for part in calls] == ["skip_thought_signature_validator"] * 2


async def test_on_payload_can_inspect_and_replace_the_request(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.PLAIN_TEXT))
    seen = []

    def hook(request):
        seen.append(request)
        return {**request, "config": {**request["config"], "temperature": 0.25, "stop_sequences": ["END"]}}

    await run(provider, model, hello(), options(on_payload=hook))
    assert seen[0]["model"] == t.MODEL_ID
    assert seen[0]["contents"] == [{"role": "user", "parts": [{"text": "Hello"}]}]
    config = server.requests[0].json["generationConfig"]
    assert config == {"temperature": 0.25, "stopSequences": ["END"]}


# ----------------------------------------------------------------------------- agent loop


async def test_two_turn_tool_session_through_the_agent_loop(server, model, fresh_registry):
    from tests.transcripts.agent_session import run_echo_session

    fresh_registry.register_api_provider("google-generative-ai", GoogleGenerativeAIProvider(max_retries=0))
    server.queue(ScriptedResponse(chunks=t.AGENT_TOOL_TURN), ScriptedResponse(chunks=t.AGENT_TEXT_TURN))
    events, received = await run_echo_session(model, KEY)
    assert received == [{"value": "hi"}]
    end = events[-1]
    assert end.type == "agent_end"
    assert [m.role for m in end.messages] == ["user", "assistant", "toolResult", "assistant"]
    assert end.messages[-1].content == [TextContent(text="The tool said echo:hi.")]
    contents = server.requests[1].json["contents"]
    assert contents[1:] == [
        {"role": "model", "parts": [{"functionCall": {"args": {"value": "hi"}, "name": "echo"}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "echo", "response": {"output": "echo:hi"}}}]},
    ]
