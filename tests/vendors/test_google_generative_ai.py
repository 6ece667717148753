"""The google-generative-ai provider's wire-specific cases (retries, the SAFETY stop, the request
the SDK writes, Gemini 3 thinking), against a local server speaking Gemini's SSE format through
the real ``google-genai`` SDK. What every vendor shares (text, thinking, tool calls, usage,
errors, aborts, keys, the agent loop) is in :mod:`tests.vendors.test_vendor_contract`."""

from __future__ import annotations

import base64

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
from openprogram.providers.vendors.google_generative_ai import GoogleGenerativeAIProvider
from tests.event_checks import assert_well_formed, final_message
from tests.transcripts import google_streams as t
from tests.transcripts.event_summary import collect, summarize
from tests.vendor_server import ScriptedResponse
from tests.vendors.test_vendor_contract import GOOGLE as CASE

KEY = CASE.key
JSON = {"content-type": "application/json"}


@pytest.fixture
def model(server) -> Model:
    return CASE.model(server.url)


@pytest.fixture
def provider() -> GoogleGenerativeAIProvider:
    return CASE.provider()


def hello() -> Context:
    return Context(messages=[UserMessage(content="Hello", timestamp=1)])


def options(**fields) -> StreamOptions:
    return StreamOptions(api_key=KEY, **fields)


async def run(provider, model, context=None, opts=None) -> list:
    events = await collect(provider.stream(model, context or hello(), opts or options()))
    assert_well_formed(events)
    return events


# ----------------------------------------------------------------------------- streams and failures


async def test_retryable_status_is_retried_and_others_are_not(server, model):
    retrying = GoogleGenerativeAIProvider(max_retries=1, retry_initial_delay=0.0)
    server.queue(
        ScriptedResponse(
            status=503, headers=JSON, chunks=[t.error_body(503, "UNAVAILABLE", "overloaded")]
        ),
        ScriptedResponse(chunks=t.PLAIN_TEXT),
        ScriptedResponse(
            status=400, headers=JSON, chunks=[t.error_body(400, "INVALID_ARGUMENT", "bad")]
        ),
    )
    events = await run(retrying, model)
    assert events[-1].type == "done" and len(server.requests) == 2
    events = await run(retrying, model)
    assert len(server.requests) == 3
    assert final_message(events).error_message == "google: HTTP 400: bad"


async def test_safety_finish_reason_is_an_error(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.SAFETY_STOP))
    events = await run(provider, model)
    rows = summarize(events)
    assert rows[-2:] == [
        ("text_end", 0, "Some"),
        ("error", "error", "google: generation stopped with finish reason SAFETY"),
    ]


# ----------------------------------------------------------------------------- request


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


def rich_context(model_id: str = t.MODEL_ID) -> Context:
    return Context(
        system_prompt="You are terse.",
        tools=[
            Tool(name="get_weather", description="Weather for a city", parameters=WEATHER_SCHEMA)
        ],
        messages=[
            UserMessage(
                content=[
                    TextContent(text="What is this?"),
                    ImageContent(data=PNG, mime_type="image/png"),
                ]
            ),
            AssistantMessage(
                api="google-generative-ai",
                provider="google",
                model=model_id,
                stop_reason="toolUse",
                content=[
                    ThinkingContent(
                        thinking="Need weather.", thinking_signature=t.THOUGHT_SIGNATURE
                    ),
                    TextContent(text="Let me check.", text_signature=t.TEXT_SIGNATURE),
                    ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"}),
                    ToolCall(id="c2", name="get_weather", arguments={"city": "Rome"}),
                ],
            ),
            ToolResultMessage(
                tool_call_id="c1", tool_name="get_weather", content=[TextContent(text="18C")]
            ),
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
            "parts": [
                {"text": "What is this?"},
                {"inlineData": {"data": PNG, "mime_type": "image/png"}},
            ],
        },
        {
            "role": "model",
            "parts": [
                {"text": "Need weather.", "thought": True, "thoughtSignature": t.THOUGHT_SIGNATURE},
                {"text": "Let me check.", "thoughtSignature": t.TEXT_SIGNATURE},
                # The calls' own ids (a Gemini turn's: Gemini 3 names its calls) go back, and
                # each result names its call.
                {"functionCall": {"args": {"city": "Paris"}, "id": "c1", "name": "get_weather"}},
                {"functionCall": {"args": {"city": "Rome"}, "id": "c2", "name": "get_weather"}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "c1",
                        "name": "get_weather",
                        "response": {"output": "18C"},
                    }
                },
                {
                    "functionResponse": {
                        "id": "c2",
                        "name": "get_weather",
                        "response": {"error": "(see attached image)"},
                    }
                },
                {"inlineData": {"data": PNG, "mime_type": "image/png"}},
            ],
        },
        {"role": "user", "parts": [{"text": "Thanks"}]},
    ],
    "systemInstruction": {"parts": [{"text": "You are terse."}], "role": "user"},
    "tools": [
        {
            "functionDeclarations": [
                {
                    "description": "Weather for a city",
                    "name": "get_weather",
                    "parameters_json_schema": WEATHER_SCHEMA,
                }
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


async def test_exact_request_body(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.PLAIN_TEXT))
    opts = SimpleStreamOptions(
        api_key=KEY, temperature=0.5, max_tokens=1000, reasoning="low", tool_choice="any"
    )
    events = await collect(provider.stream_simple(model, rich_context(), opts))
    assert events[-1].type == "done"
    assert server.requests[0].json == EXPECTED_BODY


async def test_gemini_3_thinking_level_and_function_call_signature(server, provider):
    model = CASE.model(server.url, id="gemini-3-pro-preview")
    server.queue(ScriptedResponse(chunks=t.PLAIN_TEXT))
    opts = SimpleStreamOptions(api_key=KEY, reasoning="medium")
    await collect(provider.stream_simple(model, rich_context(model.id), opts))
    body = server.requests[0].json
    assert body["generationConfig"]["thinkingConfig"] == {
        "include_thoughts": True,
        "thinking_level": "HIGH",
    }
    calls = [part for part in body["contents"][1]["parts"] if "functionCall" in part]
    # The SDK writes bytes in URL-safe base64, so the documented placeholder appears verbatim.
    assert [part["thoughtSignature"] for part in calls] == ["skip_thought_signature_validator"] * 2


# --------------------------------------------------------------------------- server tools


def sdk_base64(signature: str) -> str:
    """A signature as the SDK writes it on the wire: the same bytes, URL-safe base64."""
    return base64.urlsafe_b64encode(base64.b64decode(signature)).decode()


async def test_code_execution_parts_go_back_on_the_next_turn(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.CODE_EXECUTION), ScriptedResponse(chunks=t.PLAIN_TEXT))
    first = (await run(provider, model))[-1].message
    context = hello()
    context.messages += [first, UserMessage(content="Thanks", timestamp=2)]
    await run(provider, model, context)
    # each part as it came, the code's signature with it
    assert server.requests[1].json["contents"][1] == {
        "role": "model",
        "parts": [
            {"text": "Let me compute."},
            {
                "executableCode": {"code": "print(2 + 2)\n", "language": "PYTHON"},
                "thoughtSignature": sdk_base64(t.CODE_SIGNATURE),
            },
            {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "4\n"}},
            {"text": "It is 4."},
        ],
    }


async def test_code_execution_block_recorded_before_whole_parts_were_kept_still_goes_back(
    server, model, provider
):
    """A recording made when the payload was only the part's inner object replays and goes
    back as the same part."""
    from openprogram.providers.types import ServerToolContent

    legacy = AssistantMessage(
        api="google-generative-ai",
        provider="google",
        model=model.id,
        content=[
            ServerToolContent(
                vendor="google",
                api="google-generative-ai",
                kind="executable_code",
                payload={"code": "print(1)", "language": "PYTHON"},
            )
        ],
    )
    server.queue(ScriptedResponse(chunks=t.PLAIN_TEXT))
    await run(
        provider, model, Context(messages=[*hello().messages, legacy, UserMessage(content="And?")])
    )
    assert server.requests[0].json["contents"][1] == {
        "role": "model",
        "parts": [{"executableCode": {"code": "print(1)", "language": "PYTHON"}}],
    }
