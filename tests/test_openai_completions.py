"""The ``openai-completions`` provider against the real ``openai`` SDK and a local server that
replays Chat Completions SSE transcripts byte for byte.

The transcripts follow the documented stream format: ``chat.completion.chunk`` objects whose
single choice carries a ``delta``, ``finish_reason`` on the last choice chunk, then (with
``stream_options.include_usage``) a chunk with empty ``choices`` and the ``usage``, then
``data: [DONE]``. Every chunk carries ``"usage":null`` until then, as OpenAI sends it.
"""

from __future__ import annotations

import pytest

from openprogram.providers.api_registry import register_api_provider
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
    Usage,
    UsageCost,
    UserMessage,
)
from openprogram.providers.vendors.openai_completions import OpenAICompletionsProvider
from tests.openai_support import (
    TIMESTAMP,
    WEATHER_SCHEMA,
    abort_on_first_delta,
    abort_while_waiting,
    closed_port_url,
    collect,
    error_response,
    outline,
    run_agent,
    sse_frames,
)
from tests.vendor_server import ScriptedResponse, VendorServer

API = "openai-completions"
KEY = "sk-test-completions-0123456789"

# --------------------------------------------------------------------------- transcripts

_HEAD = (
    '{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk",'
    '"created":1741570283,"model":"gpt-4o-mini-2024-07-18","service_tier":"default",'
    '"system_fingerprint":"fp_06737a9306",'
)


def chunk(delta: str, finish: str = "null") -> str:
    """One choice chunk; ``delta`` and ``finish`` are JSON text, written as they are."""
    return (
        f'{_HEAD}"choices":[{{"index":0,"delta":{delta},"logprobs":null,'
        f'"finish_reason":{finish}}}],"usage":null}}'
    )


def usage_chunk(prompt: int, completion: int, cached: int = 0) -> str:
    return (
        f'{_HEAD}"choices":[],"usage":{{"prompt_tokens":{prompt},"completion_tokens":{completion},'
        f'"total_tokens":{prompt + completion},"prompt_tokens_details":{{"cached_tokens":{cached},'
        f'"audio_tokens":0}},"completion_tokens_details":{{"reasoning_tokens":0,"audio_tokens":0,'
        f'"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}}}}'
    )


ROLE = chunk('{"role":"assistant","content":"","refusal":null}')
STOP = chunk("{}", '"stop"')
TOOL_STOP = chunk("{}", '"tool_calls"')

PLAIN_TEXT = sse_frames(
    ROLE,
    chunk('{"content":"Hello"}'),
    chunk('{"content":" world"}'),
    chunk('{"content":"!"}'),
    STOP,
    usage_chunk(19, 10, cached=6),
    done=True,
)

# Interleaved reasoning (as DeepSeek and Kimi stream it between answers) makes several text blocks.
SEVERAL_TEXT_BLOCKS = sse_frames(
    ROLE,
    chunk('{"content":"First part."}'),
    chunk('{"reasoning_content":"Now the second."}'),
    chunk('{"content":"Second"}'),
    chunk('{"content":" part."}'),
    STOP,
    usage_chunk(12, 8),
    done=True,
)


def thinking_then_text(field: str) -> list[bytes]:
    return sse_frames(
        chunk(f'{{"role":"assistant","content":null,"{field}":""}}'),
        chunk(f'{{"content":null,"{field}":"The user"}}'),
        chunk(f'{{"content":null,"{field}":" greets me."}}'),
        chunk('{"content":"Hi there."}'),
        STOP,
        usage_chunk(9, 7),
        done=True,
    )


ONE_TOOL_CALL = sse_frames(
    chunk(
        '{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA",'
        '"type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null}'
    ),
    *[
        chunk(f'{{"tool_calls":[{{"index":0,"function":{{"arguments":{piece}}}}}]}}')
        for piece in ['"{\\""', '"city"', '"\\":\\""', '"Par"', '"is\\","', '"\\"unit"', '"\\":\\"c\\"}"']
    ],
    TOOL_STOP,
    usage_chunk(80, 20),
    done=True,
)

SEVERAL_TOOL_CALLS = sse_frames(
    chunk('{"role":"assistant","content":"Checking both."}'),
    chunk(
        '{"tool_calls":[{"index":0,"id":"call_paris","type":"function",'
        '"function":{"name":"get_weather","arguments":""}}]}'
    ),
    chunk('{"tool_calls":[{"index":0,"function":{"arguments":"{\\"city\\": "}}]}'),
    chunk('{"tool_calls":[{"index":0,"function":{"arguments":"\\"Paris\\"}"}}]}'),
    chunk(
        '{"tool_calls":[{"index":1,"id":"call_rome","type":"function",'
        '"function":{"name":"get_weather","arguments":""}}]}'
    ),
    chunk('{"tool_calls":[{"index":1,"function":{"arguments":"{\\"ci"}}]}'),
    chunk('{"tool_calls":[{"index":1,"function":{"arguments":"ty\\": \\"Rome\\"}"}}]}'),
    TOOL_STOP,
    usage_chunk(90, 40),
    done=True,
)

# ---------------------------------------------------------------------------- fixtures


@pytest.fixture
def server():
    with VendorServer() as running:
        yield running


def gpt(server: VendorServer, **overrides) -> Model:
    fields = dict(
        id="gpt-4o-mini",
        api=API,
        provider="openai",
        base_url=f"{server.url}/v1",
        input=["text", "image"],
        cost=ModelCost(input=0.15, output=0.6, cache_read=0.075),
    )
    fields.update(overrides)
    return Model(**fields)


def provider(**kwargs) -> OpenAICompletionsProvider:
    return OpenAICompletionsProvider(timestamp=TIMESTAMP, **kwargs)


HELLO = Context(messages=[UserMessage(content="Say hello", timestamp=1)])


def assistant(model: Model, content: list, usage: Usage, stop_reason: str = "stop") -> AssistantMessage:
    return AssistantMessage(
        content=content,
        api=API,
        provider=model.provider,
        model=model.id,
        usage=usage,
        stop_reason=stop_reason,
        timestamp=TIMESTAMP,
    )


def priced(model: Model, *, input: int, output: int, cache_read: int = 0) -> Usage:
    """The usage the provider must report, with the cost worked out here independently."""
    prices = model.cost
    parts = (input * prices.input / 1e6, output * prices.output / 1e6, cache_read * prices.cache_read / 1e6)
    cost = UsageCost(input=parts[0], output=parts[1], cache_read=parts[2], total=parts[0] + parts[1] + parts[2])
    return Usage(input=input, output=output, cache_read=cache_read, total_tokens=input + output + cache_read, cost=cost)


async def stream(server: VendorServer, transcript: list[bytes], model: Model, context: Context = HELLO, options=None):
    server.queue(ScriptedResponse(chunks=transcript))
    return await collect(provider().stream(model, context, options or StreamOptions(api_key=KEY)))


# ------------------------------------------------------------------------------- streams


async def test_plain_text(server):
    model = gpt(server)
    events = await stream(server, PLAIN_TEXT, model)
    assert outline(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Hello"),
        ("text_delta", 0, " world"),
        ("text_delta", 0, "!"),
        ("text_end", 0, "Hello world!"),
        ("done", "stop"),
    ]
    # prompt_tokens 19 include 6 cached ones, which are priced apart
    usage = priced(model, input=13, output=10, cache_read=6)
    assert events[-1].message == assistant(model, [TextContent(text="Hello world!")], usage)
    assert events[-1].message.usage.cost.total == pytest.approx((13 * 0.15 + 10 * 0.6 + 6 * 0.075) / 1e6)
    assert [e.partial.content[0].text for e in events if e.type == "text_delta"] == ["Hello", "Hello world", "Hello world!"]


async def test_several_text_blocks(server):
    model = gpt(server)
    events = await stream(server, SEVERAL_TEXT_BLOCKS, model)
    assert outline(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "First part."),
        ("text_end", 0, "First part."),
        ("thinking_start", 1),
        ("thinking_delta", 1, "Now the second."),
        ("thinking_end", 1, "Now the second."),
        ("text_start", 2),
        ("text_delta", 2, "Second"),
        ("text_delta", 2, " part."),
        ("text_end", 2, "Second part."),
        ("done", "stop"),
    ]
    assert events[-1].message.content == [
        TextContent(text="First part."),
        ThinkingContent(thinking="Now the second.", thinking_signature="reasoning_content"),
        TextContent(text="Second part."),
    ]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_thinking_then_text_from_either_reasoning_field(server, field):
    model = gpt(server, provider="ollama", id="qwen3", cost=ModelCost())
    events = await stream(server, thinking_then_text(field), model, options=StreamOptions())
    assert outline(events) == [
        ("start",),
        ("thinking_start", 0),
        ("thinking_delta", 0, "The user"),
        ("thinking_delta", 0, " greets me."),
        ("thinking_end", 0, "The user greets me."),
        ("text_start", 1),
        ("text_delta", 1, "Hi there."),
        ("text_end", 1, "Hi there."),
        ("done", "stop"),
    ]
    # the field name is the signature, so the next turn sends the reasoning back in it
    assert events[-1].message == assistant(
        model,
        [ThinkingContent(thinking="The user greets me.", thinking_signature=field), TextContent(text="Hi there.")],
        priced(model, input=9, output=7),
    )


async def test_one_tool_call_with_arguments_split_across_chunks(server):
    model = gpt(server)
    events = await stream(server, ONE_TOOL_CALL, model)
    pieces = ['{"', "city", '":"', "Par", 'is",', '"unit', '":"c"}']
    call = ToolCall(id="call_DdmO9pD3xa9XTPNJ32zg2hcA", name="get_weather", arguments={"city": "Paris", "unit": "c"})
    assert outline(events) == [
        ("start",),
        ("toolcall_start", 0),
        *[("toolcall_delta", 0, piece) for piece in pieces],
        ("toolcall_end", 0, (call.id, call.name, call.arguments)),
        ("done", "toolUse"),
    ]
    # best-effort partial JSON while the arguments stream in
    assert [e.partial.content[0].arguments for e in events if e.type == "toolcall_delta"] == [
        {},
        {},
        {"city": ""},
        {"city": "Par"},
        {"city": "Paris"},
        {"city": "Paris"},
        {"city": "Paris", "unit": "c"},
    ]
    assert events[-1].message == assistant(model, [call], priced(model, input=80, output=20), "toolUse")


async def test_several_tool_calls_after_text(server):
    model = gpt(server)
    events = await stream(server, SEVERAL_TOOL_CALLS, model)
    assert outline(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Checking both."),
        ("text_end", 0, "Checking both."),
        ("toolcall_start", 1),
        ("toolcall_delta", 1, '{"city": '),
        ("toolcall_delta", 1, '"Paris"}'),
        ("toolcall_end", 1, ("call_paris", "get_weather", {"city": "Paris"})),
        ("toolcall_start", 2),
        ("toolcall_delta", 2, '{"ci'),
        ("toolcall_delta", 2, 'ty": "Rome"}'),
        ("toolcall_end", 2, ("call_rome", "get_weather", {"city": "Rome"})),
        ("done", "toolUse"),
    ]
    assert events[-1].message.usage == priced(model, input=90, output=40)


async def test_tool_calls_without_index_are_told_apart_by_id(server):
    # Some compatible servers omit "index" and repeat the id on every chunk.
    transcript = sse_frames(
        chunk('{"role":"assistant","tool_calls":[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\\"city\\":"}}]}'),
        chunk('{"tool_calls":[{"id":"call_a","type":"function","function":{"arguments":"\\"Oslo\\"}"}}]}'),
        chunk('{"tool_calls":[{"id":"call_b","type":"function","function":{"name":"get_weather","arguments":"{\\"city\\":\\"Bergen\\"}"}}]}'),
        STOP,
        done=True,
    )
    events = await stream(server, transcript, gpt(server))
    assert outline(events) == [
        ("start",),
        ("toolcall_start", 0),
        ("toolcall_delta", 0, '{"city":'),
        ("toolcall_delta", 0, '"Oslo"}'),
        ("toolcall_end", 0, ("call_a", "get_weather", {"city": "Oslo"})),
        ("toolcall_start", 1),
        ("toolcall_delta", 1, '{"city":"Bergen"}'),
        ("toolcall_end", 1, ("call_b", "get_weather", {"city": "Bergen"})),
        ("done", "toolUse"),  # "stop" after tool calls still means the model wants them run
    ]


async def test_usage_only_final_chunk_sets_usage_after_finish_reason(server):
    model = gpt(server, cost=ModelCost(input=1.0, output=2.0, cache_read=0.5))
    transcript = sse_frames(ROLE, chunk('{"content":"ok"}'), chunk("{}", '"length"'), usage_chunk(1000, 500, cached=400), done=True)
    events = await stream(server, transcript, model)
    assert outline(events)[-1] == ("done", "length")
    usage = events[-1].message.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total_tokens) == (600, 500, 400, 0, 1500)
    assert usage.cost.total == pytest.approx((600 * 1.0 + 500 * 2.0 + 400 * 0.5) / 1e6)
    # nothing emitted for the usage chunk itself: the text block closed before done
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "text_end", "done"]


# -------------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (401, "Incorrect API key provided: sk-test-***6789."),
        (404, "The model `gpt-nope` does not exist or you do not have access to it."),
        (429, "Rate limit reached for gpt-4o-mini in organization org-x on tokens per min."),
        (500, "The server had an error while processing your request."),
    ],
)
async def test_http_error_before_the_stream(server, status, message):
    server.queue(error_response(status, message))
    events = await collect(provider().stream(gpt(server), HELLO, StreamOptions(api_key=KEY)))
    assert outline(events) == [("error", "error")]
    error = events[0].error
    assert error.error_message == f"openai: HTTP {status}: {message}"
    assert error.stop_reason == "error" and error.content == []
    assert len(server.requests) == 1  # x-should-retry: false was obeyed


async def test_stream_that_breaks_off_keeps_the_partial_text(server):
    server.queue(ScriptedResponse(chunks=PLAIN_TEXT, break_after=3))
    events = await collect(provider().stream(gpt(server), HELLO, StreamOptions(api_key=KEY)))
    assert outline(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Hello"),
        ("text_delta", 0, " world"),
        ("error", "error"),
    ]
    error = events[-1].error
    assert error.content == [TextContent(text="Hello world")]
    assert error.error_message.startswith("openai: connection failed (")
    assert "Connection error" in error.error_message


async def test_stream_that_ends_without_finish_reason_is_an_error(server):
    server.queue(ScriptedResponse(chunks=sse_frames(ROLE, chunk('{"content":"Hel"}'), done=True)))
    events = await collect(provider().stream(gpt(server), HELLO, StreamOptions(api_key=KEY)))
    assert outline(events)[-1] == ("error", "error")
    assert events[-1].error.content == [TextContent(text="Hel")]
    assert "finish_reason" in events[-1].error.error_message


async def test_malformed_chunk_is_an_error_event(server):
    transcript = sse_frames(ROLE, chunk('{"content":"Hi"}'), '{"id":"chatcmpl-B9M","choices":[{"index":0,"delta":{"content":', done=True)
    server.queue(ScriptedResponse(chunks=transcript))
    events = await collect(provider().stream(gpt(server), HELLO, StreamOptions(api_key=KEY)))
    assert outline(events) == [("start",), ("text_start", 0), ("text_delta", 0, "Hi"), ("error", "error")]
    assert events[-1].error.error_message.startswith("openai: JSONDecodeError: ")


async def test_error_object_inside_the_stream(server):
    transcript = sse_frames(
        ROLE,
        chunk('{"content":"Hi"}'),
        '{"error":{"message":"The server is overloaded.","type":"server_error","param":null,"code":null}}',
    )
    server.queue(ScriptedResponse(chunks=transcript))
    events = await collect(provider().stream(gpt(server), HELLO, StreamOptions(api_key=KEY)))
    assert outline(events)[-1] == ("error", "error")
    assert events[-1].error.error_message == "openai: APIError: The server is overloaded."


async def test_content_filter_stop_is_an_error(server):
    transcript = sse_frames(ROLE, chunk('{"content":"I"}'), chunk("{}", '"content_filter"'), usage_chunk(5, 1), done=True)
    events = await stream(server, transcript, gpt(server))
    assert outline(events)[-1] == ("error", "error")
    assert "content_filter" in events[-1].error.error_message


async def test_connection_refused_is_an_error_event():
    model = Model(id="m", api=API, provider="ollama", base_url=closed_port_url())
    events = await collect(provider(max_retries=0).stream(model, HELLO))
    assert outline(events) == [("error", "error")]
    assert events[0].error.error_message.startswith("ollama: connection failed (")


async def test_abort_on_first_delta_keeps_partial_text(server):
    server.queue(ScriptedResponse(chunks=PLAIN_TEXT, hold_after=3))
    events = await abort_on_first_delta(provider(), gpt(server, provider="local"), HELLO, server)
    assert outline(events) == [("start",), ("text_start", 0), ("text_delta", 0, "Hello"), ("error", "aborted")]
    assert events[-1].error.content == [TextContent(text="Hello")]
    assert events[-1].error.stop_reason == "aborted"
    assert not server.hold_timed_out


async def test_abort_interrupts_a_read_waiting_on_the_network(server):
    server.queue(ScriptedResponse(chunks=PLAIN_TEXT, hold_after=3))
    events = await abort_while_waiting(provider(), gpt(server, provider="local"), HELLO, server, "Hello world")
    assert outline(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Hello"),
        ("text_delta", 0, " world"),
        ("error", "aborted"),
    ]
    assert events[-1].error.content == [TextContent(text="Hello world")]
    assert not server.hold_timed_out


# ----------------------------------------------------------------------------- credentials


async def test_keyless_local_server(server):
    model = Model(id="llama3.2", api=API, provider="ollama", base_url=f"{server.url}/v1")
    events = await stream(server, PLAIN_TEXT, model, options=StreamOptions())
    assert outline(events)[-1] == ("done", "stop")
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"


async def test_missing_key_names_the_environment_variable():
    # a non-local host, so a key is required; nothing is sent anywhere
    model = Model(id="gpt-4o-mini", api=API, provider="openai", base_url="http://vendor.invalid/v1")
    events = await collect(provider().stream(model, HELLO))
    assert outline(events) == [("error", "error")]
    message = events[0].error.error_message
    assert message.startswith("openai: no API key for provider 'openai'")
    assert "OPENAI_API_KEY" in message


# -------------------------------------------------------------------------------- request

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg=="


def rich_context(model: Model) -> Context:
    """System prompt, an image, reasoning, text and two tool calls, tool results (one with an
    image), and a turn from another vendor whose id needs normalising."""
    return Context(
        system_prompt="You are terse.",
        messages=[
            UserMessage(
                content=[TextContent(text="Weather where this photo was taken?"), ImageContent(data=PNG, mime_type="image/png")],
                timestamp=1,
            ),
            AssistantMessage(
                api=API,
                provider=model.provider,
                model=model.id,
                content=[
                    ThinkingContent(thinking="Looks like Paris.", thinking_signature="reasoning_content"),
                    TextContent(text="Checking."),
                    ToolCall(id="call_paris", name="get_weather", arguments={"city": "Paris"}),
                    ToolCall(id="call_cam|fc_0123456789abcdef0123456789", name="camera", arguments={}),
                ],
                stop_reason="toolUse",
                timestamp=2,
            ),
            ToolResultMessage(tool_call_id="call_paris", tool_name="get_weather", content=[TextContent(text="18C, sunny")], timestamp=3),
            ToolResultMessage(
                tool_call_id="call_cam|fc_0123456789abcdef0123456789",
                tool_name="camera",
                content=[ImageContent(data=PNG, mime_type="image/png")],
                timestamp=4,
            ),
            AssistantMessage(
                api="anthropic-messages",
                provider="anthropic",
                model="claude-sonnet-4-5",
                content=[ThinkingContent(thinking="Summarise.", thinking_signature="EqQBCkgIAhABGAIiQL"), TextContent(text="18C and sunny.")],
                timestamp=5,
            ),
            UserMessage(content="Thanks", timestamp=6),
        ],
        tools=[
            Tool(name="get_weather", description="Current weather for a city", parameters=WEATHER_SCHEMA),
            Tool(name="camera", description="Take a photo", parameters={"type": "object", "properties": {}}),
        ],
    )


async def test_request_body_and_headers(server):
    model = gpt(server, headers={"X-Model-Header": "m"})
    seen = []
    options = StreamOptions(
        api_key=KEY, max_tokens=256, temperature=0.2, headers={"X-Call-Header": "c"}, on_payload=seen.append
    )
    events = await stream(server, PLAIN_TEXT, model, rich_context(model), options)
    assert outline(events)[-1] == ("done", "stop")
    request = server.requests[0]
    assert request.method == "POST" and request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["x-model-header"] == "m" and request.headers["x-call-header"] == "c"
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    camera_id = request.json["messages"][2]["tool_calls"][1]["id"]
    expected = {
        "model": "gpt-4o-mini",
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_completion_tokens": 256,
        "temperature": 0.2,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": [{"type": "text", "text": "Weather where this photo was taken?"}, image]},
            {
                "role": "assistant",
                "content": "Checking.",
                "reasoning_content": "Looks like Paris.",
                "tool_calls": [
                    {"id": "call_paris", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
                    {"id": camera_id, "type": "function", "function": {"name": "camera", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "call_paris", "content": "18C, sunny"},
            {"role": "tool", "tool_call_id": camera_id, "content": "(see attached image)"},
            {"role": "user", "content": [{"type": "text", "text": "Attached image(s) from tool result:"}, image]},
            # another vendor's thinking arrives as text, its signature dropped
            {"role": "assistant", "content": "Summarise.18C and sunny."},
            {"role": "user", "content": "Thanks"},
        ],
        "tools": [
            {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city", "parameters": WEATHER_SCHEMA}},
            {"type": "function", "function": {"name": "camera", "description": "Take a photo", "parameters": {"type": "object", "properties": {}}}},
        ],
    }
    assert request.json == expected
    # the id with a "|" was normalised to what Chat Completions accepts, the same for call and result
    assert len(camera_id) <= 40 and set(camera_id) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
    assert seen == [expected]  # on_payload saw exactly the body that was sent


async def test_on_payload_can_replace_the_body(server):
    def replace(body):
        return {**body, "messages": [{"role": "user", "content": "replaced"}], "seed": 7}

    model = gpt(server)
    await stream(server, PLAIN_TEXT, model, options=StreamOptions(api_key=KEY, on_payload=replace))
    sent = server.requests[0].json
    assert sent["messages"] == [{"role": "user", "content": "replaced"}] and sent["seed"] == 7


@pytest.mark.parametrize(
    ("reasoning_model", "level", "expected"),
    [(True, "xhigh", "high"), (True, "minimal", "minimal"), (True, None, None), (False, "high", None)],
)
async def test_reasoning_level_maps_to_reasoning_effort(server, reasoning_model, level, expected):
    model = gpt(server, id="o4-mini", reasoning=reasoning_model)
    server.queue(ScriptedResponse(chunks=PLAIN_TEXT))
    options = SimpleStreamOptions(api_key=KEY, reasoning=level)
    await collect(provider().stream_simple(model, Context(system_prompt="Be brief.", messages=HELLO.messages), options))
    body = server.requests[0].json
    assert body.get("reasoning_effort") == expected
    # OpenAI reasoning models take the system prompt in the developer role
    assert body["messages"][0] == {"role": "developer" if reasoning_model else "system", "content": "Be brief."}


async def test_compatible_server_gets_max_tokens_and_no_developer_role(server):
    model = gpt(server, provider="vllm", id="Qwen/Qwen3-8B", reasoning=True)
    server.queue(ScriptedResponse(chunks=PLAIN_TEXT))
    await collect(provider().stream(model, Context(system_prompt="s", messages=HELLO.messages), StreamOptions(max_tokens=64)))
    body = server.requests[0].json
    assert body["max_tokens"] == 64 and "max_completion_tokens" not in body
    assert body["messages"][0]["role"] == "system"


# ------------------------------------------------------------------------------ agent loop


async def test_two_turn_tool_session_through_the_agent_loop(server, fresh_registry):
    register_api_provider(API, provider())
    model = Model(id="llama3.2", api=API, provider="ollama", base_url=f"{server.url}/v1")
    server.queue(
        ScriptedResponse(
            chunks=sse_frames(
                chunk('{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_echo","type":"function","function":{"name":"echo","arguments":""}}]}'),
                chunk('{"tool_calls":[{"index":0,"function":{"arguments":"{\\"value\\":"}}]}'),
                chunk('{"tool_calls":[{"index":0,"function":{"arguments":"\\"hi\\"}"}}]}'),
                TOOL_STOP,
                usage_chunk(30, 10),
                done=True,
            )
        ),
        ScriptedResponse(chunks=sse_frames(ROLE, chunk('{"content":"It said hi."}'), STOP, usage_chunk(50, 5), done=True)),
    )
    events = await run_agent(model)
    ends = [e for e in events if e.type == "tool_execution_end"]
    assert [(e.tool_call_id, e.result.content[0].text, e.is_error) for e in ends] == [("call_echo", "echo:hi", False)]
    added = events[-1].messages
    assert [m.role for m in added] == ["user", "assistant", "toolResult", "assistant"]
    assert added[-1].content == [TextContent(text="It said hi.")] and added[-1].stop_reason == "stop"
    second = server.requests[1].json["messages"]
    assert second[-2]["tool_calls"][0]["function"] == {"name": "echo", "arguments": '{"value":"hi"}'}
    assert second[-1] == {"role": "tool", "tool_call_id": "call_echo", "content": "echo:hi"}
