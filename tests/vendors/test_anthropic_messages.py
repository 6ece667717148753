"""The anthropic-messages provider's wire-specific cases (the request body, cache control,
thinking budgets), against a local server speaking Anthropic's SSE format through the real
``anthropic`` SDK. What every vendor shares (text, thinking, tool calls, usage, errors, aborts,
keys, the agent loop) is in :mod:`tests.vendors.test_vendor_contract`."""

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
from openprogram.providers.vendors.anthropic_messages import AnthropicMessagesProvider
from tests.transcripts import anthropic_streams as t
from tests.transcripts.event_summary import collect
from tests.vendor_server import ScriptedResponse
from tests.vendors.test_vendor_contract import ANTHROPIC as CASE

KEY = CASE.key


@pytest.fixture
def model(server) -> Model:
    return CASE.model(server.url)


@pytest.fixture
def provider() -> AnthropicMessagesProvider:
    return CASE.provider()


def hello() -> Context:
    return Context(messages=[UserMessage(content="Hello", timestamp=1)])


def options(**fields) -> StreamOptions:
    return StreamOptions(api_key=KEY, **fields)


async def run(provider, model, context=None, opts=None) -> list:
    return await collect(provider.stream(model, context or hello(), opts or options()))


# ----------------------------------------------------------------------------- request


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def rich_context() -> Context:
    return Context(
        system_prompt="You are terse.",
        tools=[
            Tool(
                name="get_weather",
                description="Weather for a city",
                parameters={
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            )
        ],
        messages=[
            UserMessage(
                content=[
                    TextContent(text="What is this?"),
                    ImageContent(data=PNG, mime_type="image/png"),
                ]
            ),
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
            ToolResultMessage(
                tool_call_id="toolu_1", tool_name="get_weather", content=[TextContent(text="18C")]
            ),
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
            "input_schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        }
    ],
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Need weather.", "signature": "sig-1"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Let me check."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
                {
                    "type": "tool_use",
                    "id": "call_2",
                    "name": "get_weather",
                    "input": {"city": "Rome"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "18C",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "call_2",
                    "content": [
                        {"type": "text", "text": "(see attached image)"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                        },
                    ],
                    "is_error": True,
                },
            ],
        },
        {
            "role": "user",
            "content": [{"type": "text", "text": "Thanks", "cache_control": {"type": "ephemeral"}}],
        },
    ],
}


async def test_exact_request_body(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.PLAIN_TEXT))
    await run(provider, model, rich_context(), options(temperature=0.5, max_tokens=1000))
    assert server.requests[0].json == EXPECTED_BODY


async def test_cache_retention_none_sends_no_cache_control(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.PLAIN_TEXT))
    context = Context(system_prompt="sys", messages=[UserMessage(content="Hi")])
    await run(provider, model, context, options(cache_retention="none"))
    body = server.requests[0].json
    assert body["system"] == [{"type": "text", "text": "sys"}]
    assert body["messages"] == [{"role": "user", "content": "Hi"}]


@pytest.mark.parametrize(
    ("level", "budgets", "max_tokens", "budget"),
    [("low", None, 2000 + 2048, 2048), ("high", {"high": 5000}, 2000 + 5000, 5000)],
)
async def test_reasoning_maps_to_a_thinking_budget(
    server, model, provider, level, budgets, max_tokens, budget
):
    server.queue(ScriptedResponse(chunks=t.THINKING_THEN_TEXT))
    opts = SimpleStreamOptions(
        api_key=KEY, max_tokens=2000, reasoning=level, thinking_budgets=budgets
    )
    events = await collect(provider.stream_simple(model, hello(), opts))
    assert events[-1].type == "done"
    body = server.requests[0].json
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] == max_tokens


async def test_adaptive_thinking_for_models_that_use_it(server, provider):
    model = CASE.model(server.url, id="claude-opus-4-6")
    server.queue(ScriptedResponse(chunks=t.PLAIN_TEXT))
    await collect(
        provider.stream_simple(model, hello(), SimpleStreamOptions(api_key=KEY, reasoning="medium"))
    )
    body = server.requests[0].json
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"] == {"effort": "medium"}
    assert "budget_tokens" not in str(body)


async def test_no_thinking_without_a_reasoning_level(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.PLAIN_TEXT))
    await collect(provider.stream_simple(model, hello(), SimpleStreamOptions(api_key=KEY)))
    assert "thinking" not in server.requests[0].json


# --------------------------------------------------------------------------- server tools


async def test_server_tool_blocks_go_back_on_the_next_turn(server, model, provider):
    """The server tool call, its result and the citations of the text go back as Anthropic
    sent them; a Gemini model's server tool block is skipped."""
    server.queue(ScriptedResponse(chunks=t.WEB_SEARCH), ScriptedResponse(chunks=t.PLAIN_TEXT))
    first = (await run(provider, model))[-1].message
    foreign = first.content[1].model_copy(update={"api": "google-generative-ai"})
    other = AssistantMessage(
        content=[foreign, TextContent(text="Elsewhere.")],
        api="google-generative-ai",
        provider="google",
        model="g",
    )
    context = hello()
    context.messages += [first, other, UserMessage(content="Thanks", timestamp=2)]
    await run(provider, model, context, options(cache_retention="none"))
    sent = server.requests[1].json["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me search."},
            {
                "type": "server_tool_use",
                "id": t.SEARCH_ID,
                "name": "web_search",
                "input": {"query": "Oslo weather"},
            },
            {
                "type": "web_search_tool_result",
                "tool_use_id": t.SEARCH_ID,
                "content": [t.SEARCH_RESULT],
            },
            {"type": "text", "text": "It is 4 C and raining.", "citations": [t.CITATION]},
        ],
    }
    assert sent[2] == {"role": "assistant", "content": [{"type": "text", "text": "Elsewhere."}]}


async def test_pause_turn_continues_the_turn_in_the_agent_loop(server, model, fresh_registry):
    """The paused message goes back as it is (without our marker) and the loop goes on until
    the vendor ends the turn."""
    from openprogram.agent import AgentContext, AgentLoopConfig, agent_loop

    fresh_registry.register_api_provider(model.api, CASE.provider())
    server.queue(ScriptedResponse(chunks=t.PAUSED), ScriptedResponse(chunks=t.RESUMED))
    context = AgentContext(system_prompt=None, messages=[], tools=[])
    config = AgentLoopConfig(model=model, api_key=KEY)
    events = [
        e async for e in agent_loop([UserMessage(content="Weather in Oslo?")], context, config)
    ]
    end = events[-1]
    assert [m.role for m in end.messages] == ["user", "assistant", "assistant"]
    assert end.messages[-1].content[-1] == TextContent(text="It is 4 C.")
    assert len(server.requests) == 2
    assert server.requests[1].json["messages"][-1] == {
        "role": "assistant",
        "content": [
            {
                "type": "server_tool_use",
                "id": t.SEARCH_ID,
                "name": "web_search",
                "input": {"query": "Oslo weather"},
            }
        ],
    }


async def test_max_tokens_is_length(server, model, provider):
    server.queue(ScriptedResponse(chunks=t.SEVERAL_TEXT_BLOCKS))
    done = (await run(provider, model))[-1]
    assert (done.type, done.reason, done.message.stop_reason) == ("done", "length", "length")
