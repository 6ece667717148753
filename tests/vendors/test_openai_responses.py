"""The ``openai-responses`` provider's wire-specific cases, against the real ``openai`` SDK and a
local server that replays Responses API SSE transcripts (:mod:`tests.transcripts.openai_responses_streams`)
byte for byte. What every vendor shares (text, thinking, tool calls, usage, errors, aborts, keys,
the agent loop) is in :mod:`tests.vendors.test_vendor_contract`.
"""

from __future__ import annotations

import json

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
from openprogram.providers.vendors.openai_responses import OpenAIResponsesProvider
from tests.openai_support import WEATHER_SCHEMA, collect, outline
from tests.transcripts.openai_responses_streams import (
    ENCRYPTED,
    PLAIN_TEXT,
    SUMMARY_PARTS,
    THINKING_THEN_TEXT,
    Transcript,
    response_body,
    usage,
)
from tests.vendor_server import ScriptedResponse, VendorServer
from tests.vendors.test_vendor_contract import RESPONSES as CASE

API = "openai-responses"
KEY = CASE.key


def gpt5(server: VendorServer, **overrides) -> Model:
    return CASE.model(server.url, **overrides)


def provider(**kwargs) -> OpenAIResponsesProvider:
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


def counts(message: AssistantMessage) -> tuple[int, int, int, int, int]:
    u = message.usage
    return u.input, u.output, u.cache_read, u.cache_write, u.total_tokens


# ------------------------------------------------------------------------------- streams


async def test_reasoning_item_is_sent_back_on_the_next_turn(server):
    model = gpt5(server)
    first = await stream(server, THINKING_THEN_TEXT, model)
    follow_up = Context(
        messages=[*HELLO.messages, first[-1].message, UserMessage(content="Again", timestamp=3)]
    )
    await stream(server, PLAIN_TEXT, model, follow_up)
    sent = server.requests[1].json["input"]
    assert sent[1:] == [
        Transcript.reasoning_item("rs_01", SUMMARY_PARTS, ENCRYPTED),
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_02",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hello!", "annotations": []}],
        },
        {"role": "user", "content": [{"type": "input_text", "text": "Again"}]},
    ]


async def test_incomplete_response_stops_for_length(server):
    transcript = (
        Transcript()
        .message("msg_01", "Once upon")
        .completed("incomplete", input_tokens=10, output_tokens=16)
    )
    events = await stream(server, transcript, gpt5(server))
    assert outline(events)[-1] == ("done", "length")
    assert events[-1].message.content == [TextContent(text="Once upon", text_signature="msg_01")]
    assert counts(events[-1].message) == (10, 16, 0, 0, 26)


# -------------------------------------------------------------------------------- failures


async def test_failed_response_is_an_error_with_the_vendor_message(server):
    transcript = Transcript()
    transcript.add(
        "response.failed",
        response=response_body(
            "failed", usage(5, 0), {"code": "rate_limit_exceeded", "message": "Slow down."}
        ),
    )
    server.queue(ScriptedResponse(chunks=transcript.frames()))
    events = await collect(provider().stream(gpt5(server), HELLO, StreamOptions(api_key=KEY)))
    assert outline(events) == [("start",), ("error", "error")]
    assert (
        events[-1].error.error_message
        == "openai: OpenAIStreamError: Slow down. (code rate_limit_exceeded)"
    )


# -------------------------------------------------------------------------------- request

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg=="
REASONING_ITEM = {
    "id": "rs_01",
    "type": "reasoning",
    "encrypted_content": "gAAAAB",
    "summary": [{"type": "summary_text", "text": "Paris?"}],
}


def rich_context(model: Model) -> Context:
    """System prompt, an image, our own reasoning, text and tool calls, tool results (one with
    an image), and a turn from another vendor whose private parts must not be sent."""
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
                        thinking="Paris?", thinking_signature=json.dumps(REASONING_ITEM)
                    ),
                    TextContent(text="Checking.", text_signature="msg_01"),
                    ToolCall(
                        id="call_paris|fc_01", name="get_weather", arguments={"city": "Paris"}
                    ),
                    ToolCall(id="call_cam|fc_02", name="camera", arguments={}),
                ],
                stop_reason="toolUse",
                timestamp=2,
            ),
            ToolResultMessage(
                tool_call_id="call_paris|fc_01",
                tool_name="get_weather",
                content=[TextContent(text="18C, sunny")],
                timestamp=3,
            ),
            ToolResultMessage(
                tool_call_id="call_cam|fc_02",
                tool_name="camera",
                content=[TextContent(text="photo"), ImageContent(data=PNG, mime_type="image/png")],
                timestamp=4,
            ),
            AssistantMessage(
                api="anthropic-messages",
                provider="anthropic",
                model="claude-sonnet-4-5",
                content=[
                    ThinkingContent(thinking="Check Rome too.", thinking_signature="EqQBCkgIAhAB"),
                    TextContent(text="And Rome:"),
                    ToolCall(
                        id="toolu_01A09q90qw90lq917835lq9",
                        name="get_weather",
                        arguments={"city": "Rome"},
                    ),
                ],
                stop_reason="toolUse",
                timestamp=5,
            ),
            ToolResultMessage(
                tool_call_id="toolu_01A09q90qw90lq917835lq9",
                tool_name="get_weather",
                content=[TextContent(text="21C")],
                timestamp=6,
            ),
            UserMessage(content="Thanks", timestamp=7),
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
    model = gpt5(server)
    options = SimpleStreamOptions(
        api_key=KEY,
        max_tokens=512,
        temperature=0.5,
        session_id="session-42",
        reasoning="xhigh",
    )
    server.queue(ScriptedResponse(chunks=PLAIN_TEXT))
    events = await collect(provider().stream_simple(model, rich_context(model), options))
    assert outline(events)[-1] == ("done", "stop")
    request = server.requests[0]
    image = {"type": "input_image", "detail": "auto", "image_url": f"data:image/png;base64,{PNG}"}
    expected = {
        "model": "gpt-5-mini",
        "stream": True,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "reasoning": {"effort": "high", "summary": "auto"},  # xhigh is not supported here
        "max_output_tokens": 512,
        "temperature": 0.5,
        "prompt_cache_key": "session-42",
        "input": [
            {"role": "developer", "content": "You are terse."},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Weather where this photo was taken?"},
                    image,
                ],
            },
            REASONING_ITEM,
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_01",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
            },
            {
                "type": "function_call",
                "call_id": "call_paris",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
                "id": "fc_01",
            },
            {
                "type": "function_call",
                "call_id": "call_cam",
                "name": "camera",
                "arguments": "{}",
                "id": "fc_02",
            },
            {"type": "function_call_output", "call_id": "call_paris", "output": "18C, sunny"},
            {
                "type": "function_call_output",
                "call_id": "call_cam",
                "output": [{"type": "input_text", "text": "photo"}, image],
            },
            # another vendor's turn: thinking as plain text, no item ids, no signatures
            {"role": "assistant", "content": "Check Rome too."},
            {"role": "assistant", "content": "And Rome:"},
            {
                "type": "function_call",
                "call_id": "toolu_01A09q90qw90lq917835lq9",
                "name": "get_weather",
                "arguments": '{"city":"Rome"}',
            },
            {
                "type": "function_call_output",
                "call_id": "toolu_01A09q90qw90lq917835lq9",
                "output": "21C",
            },
            {"role": "user", "content": [{"type": "input_text", "text": "Thanks"}]},
        ],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Current weather for a city",
                "parameters": WEATHER_SCHEMA,
                "strict": False,
            },
            {
                "type": "function",
                "name": "camera",
                "description": "Take a photo",
                "parameters": {"type": "object", "properties": {}},
                "strict": False,
            },
        ],
    }
    assert request.json == expected


async def test_non_reasoning_model_gets_no_reasoning_fields(server):
    model = gpt5(server, id="gpt-4.1-mini", reasoning=False)
    server.queue(ScriptedResponse(chunks=PLAIN_TEXT))
    context = Context(system_prompt="Be brief.", messages=HELLO.messages)
    await collect(
        provider().stream_simple(model, context, SimpleStreamOptions(api_key=KEY, reasoning="high"))
    )
    body = server.requests[0].json
    assert "reasoning" not in body and "include" not in body
    assert body["input"][0] == {"role": "system", "content": "Be brief."}


# --------------------------------------------------------------------------- server tools


async def test_server_tool_items_and_annotations_go_back_on_the_next_turn(server):
    """Built-in tool items go back as input items as they came, the annotations on their
    message; a Chat Completions model does not get them."""
    from openprogram.providers.types import AssistantMessage
    from tests.transcripts import openai_responses_streams as r

    model = gpt5(server)
    server.queue(ScriptedResponse(chunks=r.WEB_SEARCH), ScriptedResponse(chunks=r.PLAIN_TEXT))
    first = (await collect(provider().stream(model, HELLO, StreamOptions(api_key=KEY))))[-1].message
    foreign = AssistantMessage(
        content=[first.content[0].model_copy(update={"api": "openai-completions"})],
        api="openai-completions",
        provider="openai",
        model="gpt-4o",
    )
    context = Context(
        messages=[*HELLO.messages, first, foreign, UserMessage(content="And?", timestamp=2)]
    )
    await collect(provider().stream(model, context, StreamOptions(api_key=KEY)))
    sent = server.requests[1].json["input"]
    assert sent[1] == r.WEB_SEARCH_ITEM
    assert sent[2]["id"] == "msg_01"
    assert sent[2]["content"] == [
        {"type": "output_text", "text": "Rain in Oslo.", "annotations": [r.URL_CITATION]}
    ]
    assert sent[3:] == [{"role": "user", "content": [{"type": "input_text", "text": "And?"}]}]
