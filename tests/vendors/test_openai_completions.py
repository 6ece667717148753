"""The ``openai-completions`` provider's wire-specific cases, against the real ``openai`` SDK and a
local server that replays Chat Completions SSE transcripts (:mod:`tests.transcripts.openai_completions_streams`)
byte for byte. What every vendor shares (text, thinking, tool calls, usage, errors, aborts, keys,
the agent loop) is in :mod:`tests.vendors.test_vendor_contract`.
"""

from __future__ import annotations

import pytest

from openprogram.providers.types import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    SimpleStreamOptions,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from openprogram.providers.vendors.openai_completions import OpenAICompletionsProvider
from tests.openai_support import WEATHER_SCHEMA, collect, outline
from tests.transcripts.openai_completions_streams import (
    PLAIN_TEXT,
    ROLE,
    STOP,
    chunk,
    sse_frames,
    usage_chunk,
)
from tests.vendor_server import ScriptedResponse, VendorServer
from tests.vendors.test_vendor_contract import COMPLETIONS as CASE

API = "openai-completions"
KEY = CASE.key


def gpt(server: VendorServer, **overrides) -> Model:
    return CASE.model(server.url, **overrides)


def provider(**kwargs) -> OpenAICompletionsProvider:
    return CASE.provider(**kwargs)


HELLO = Context(messages=[UserMessage(content="Say hello", timestamp=1)])


async def stream(
    server: VendorServer,
    transcript: list[bytes],
    model: Model,
    context: Context = HELLO,
    options=None,
):
    server.queue(ScriptedResponse(chunks=transcript))
    return await collect(provider().stream(model, context, options or StreamOptions(api_key=KEY)))


# ------------------------------------------------------------------------------- streams


async def test_tool_calls_without_index_are_told_apart_by_id(server):
    # Some compatible servers omit "index" and repeat the id on every chunk.
    transcript = sse_frames(
        chunk(
            '{"role":"assistant","tool_calls":[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\\"city\\":"}}]}'
        ),
        chunk(
            '{"tool_calls":[{"id":"call_a","type":"function","function":{"arguments":"\\"Oslo\\"}"}}]}'
        ),
        chunk(
            '{"tool_calls":[{"id":"call_b","type":"function","function":{"name":"get_weather","arguments":"{\\"city\\":\\"Bergen\\"}"}}]}'
        ),
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


async def test_content_filter_stop_is_an_error(server):
    transcript = sse_frames(
        ROLE,
        chunk('{"content":"I"}'),
        chunk("{}", '"content_filter"'),
        usage_chunk(5, 1),
        done=True,
    )
    events = await stream(server, transcript, gpt(server))
    assert outline(events)[-1] == ("error", "error")
    assert "content_filter" in events[-1].error.error_message


# -------------------------------------------------------------------------------- request

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg=="


def rich_context(model: Model) -> Context:
    """System prompt, an image, reasoning, text and two tool calls, tool results (one with an
    image), and a turn from another vendor whose id needs normalising."""
    return Context(
        system_prompt="You are terse.",
        messages=[
            UserMessage(
                content=[
                    TextContent(text="Weather where this photo was taken?"),
                    ImageContent(data=PNG, mime_type="image/png"),
                ],
                timestamp=1,
            ),
            AssistantMessage(
                api=API,
                provider=model.provider,
                model=model.id,
                content=[
                    ThinkingContent(
                        thinking="Looks like Paris.", thinking_signature="reasoning_content"
                    ),
                    TextContent(text="Checking."),
                    ToolCall(id="call_paris", name="get_weather", arguments={"city": "Paris"}),
                    ToolCall(
                        id="call_cam|fc_0123456789abcdef0123456789", name="camera", arguments={}
                    ),
                ],
                stop_reason="toolUse",
                timestamp=2,
            ),
            ToolResultMessage(
                tool_call_id="call_paris",
                tool_name="get_weather",
                content=[TextContent(text="18C, sunny")],
                timestamp=3,
            ),
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
                content=[
                    ThinkingContent(thinking="Summarise.", thinking_signature="EqQBCkgIAhABGAIiQL"),
                    TextContent(text="18C and sunny."),
                ],
                timestamp=5,
            ),
            UserMessage(content="Thanks", timestamp=6),
        ],
        tools=[
            Tool(
                name="get_weather",
                description="Current weather for a city",
                parameters=WEATHER_SCHEMA,
            ),
            Tool(
                name="camera",
                description="Take a photo",
                parameters={"type": "object", "properties": {}},
            ),
        ],
    )


async def test_request_body(server):
    model = gpt(server)
    options = StreamOptions(api_key=KEY, max_tokens=256, temperature=0.2)
    events = await stream(server, PLAIN_TEXT, model, rich_context(model), options)
    assert outline(events)[-1] == ("done", "stop")
    request = server.requests[0]
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
            {
                "role": "user",
                "content": [{"type": "text", "text": "Weather where this photo was taken?"}, image],
            },
            {
                "role": "assistant",
                "content": "Checking.",
                "reasoning_content": "Looks like Paris.",
                "tool_calls": [
                    {
                        "id": "call_paris",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    },
                    {
                        "id": camera_id,
                        "type": "function",
                        "function": {"name": "camera", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_paris", "content": "18C, sunny"},
            {"role": "tool", "tool_call_id": camera_id, "content": "(see attached image)"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "Attached image(s) from tool result:"}, image],
            },
            # another vendor's thinking arrives as text, its signature dropped
            {"role": "assistant", "content": "Summarise.18C and sunny."},
            {"role": "user", "content": "Thanks"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather for a city",
                    "parameters": WEATHER_SCHEMA,
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "camera",
                    "description": "Take a photo",
                    "parameters": {"type": "object", "properties": {}},
                },
            },
        ],
    }
    assert request.json == expected
    # the id with a "|" was normalised to what Chat Completions accepts, the same for call and result
    assert len(camera_id) <= 40 and set(camera_id) <= set(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
    )


@pytest.mark.parametrize(
    ("reasoning_model", "level", "expected"),
    [
        (True, "xhigh", "high"),
        (True, "minimal", "minimal"),
        (True, None, None),
        (False, "high", None),
    ],
)
async def test_reasoning_level_maps_to_reasoning_effort(server, reasoning_model, level, expected):
    model = gpt(server, id="o4-mini", reasoning=reasoning_model)
    server.queue(ScriptedResponse(chunks=PLAIN_TEXT))
    options = SimpleStreamOptions(api_key=KEY, reasoning=level)
    await collect(
        provider().stream_simple(
            model, Context(system_prompt="Be brief.", messages=HELLO.messages), options
        )
    )
    body = server.requests[0].json
    assert body.get("reasoning_effort") == expected
    # OpenAI reasoning models take the system prompt in the developer role
    assert body["messages"][0] == {
        "role": "developer" if reasoning_model else "system",
        "content": "Be brief.",
    }


async def test_compatible_server_gets_max_tokens_and_no_developer_role(server):
    model = gpt(server, provider="vllm", id="Qwen/Qwen3-8B", reasoning=True)
    server.queue(ScriptedResponse(chunks=PLAIN_TEXT))
    await collect(
        provider().stream(
            model, Context(system_prompt="s", messages=HELLO.messages), StreamOptions(max_tokens=64)
        )
    )
    body = server.requests[0].json
    assert body["max_tokens"] == 64 and "max_completion_tokens" not in body
    assert body["messages"][0]["role"] == "system"


# ------------------------------------------------------------------------------- compatible servers


async def test_reasoning_details_go_back_whole_on_the_next_turn(server):
    """OpenRouter asks for reasoning_details to be sent back unchanged (encrypted items
    included); another model gets the thinking as text, never the details."""
    from tests.transcripts import openai_completions_streams as c

    model = gpt(server, provider="openrouter")
    first = (await stream(server, c.REASONING_DETAILS, model))[-1].message
    context = Context(messages=[*HELLO.messages, first, UserMessage(content="And?", timestamp=2)])
    await stream(server, c.PLAIN_TEXT, model, context)
    sent = server.requests[1].json["messages"][1]
    assert sent["content"] == "Hi there."
    assert [item["type"] for item in sent["reasoning_details"]] == [
        "reasoning.text",
        "reasoning.encrypted",
    ]
    assert sent["reasoning_details"][0]["text"] == "The user greets me."
    assert sent["reasoning_details"][1]["data"] == c.ENCRYPTED_DETAIL
    await stream(
        server, c.PLAIN_TEXT, gpt(server, id="other-model", provider="openrouter"), context
    )
    assert "reasoning_details" not in server.requests[2].json["messages"][1]


async def test_server_tool_blocks_are_not_sent_back_by_chat_completions(server):
    """Chat Completions has no input form for executed tools or annotations: they stay in the
    history (and the recording) but the request carries only the text."""
    from tests.transcripts import openai_completions_streams as c

    model = gpt(server)
    first = (await stream(server, c.GROQ_EXECUTED_TOOLS, model))[-1].message
    assert first.content[-1].type == "serverTool"
    context = Context(messages=[*HELLO.messages, first, UserMessage(content="And?", timestamp=2)])
    await stream(server, c.PLAIN_TEXT, model, context)
    assert server.requests[1].json["messages"][1] == {
        "role": "assistant",
        "content": "It is 4 C in Oslo.",
    }
