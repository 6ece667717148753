"""``openprogram proxy`` under the client libraries people build agents with: LangChain (OpenAI
and Anthropic), pydantic-ai, the OpenAI Agents SDK and litellm, each on real vendor traffic
(``tests/fixtures/vendor_traffic``, see tests/proxy/test_proxy_vendor_traffic.py).

Each conversation runs three times: straight to a loopback server answering with the traffic,
through a proxy recording it, and through a proxy replaying the recording with the server
stopped and no key. What the library hands the application (text, tool calls and their ids,
finish reason, every usage number it exposes, the response id, the model version) must be the
same all three times. A library that is not installed skips its test, saying so (they come
with the ``clients`` extra, which ``dev`` includes).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from openprogram.proxy import ProxySettings, start_proxy
from tests.proxy.test_proxy_vendor_traffic import answers
from tests.vendor_server import VendorServer

KEY = "sk-test-clients-0123456789abcdef"
GEMINI_KEY = "AIzaSy-test-clients-0123456789abcdef"
UK_PROMPT = "What is the capital of the UK? Use the tool, then answer."


def three_ways(
    api: str, name: str, converse: Callable[[str], Any], path: Path
) -> tuple[Any, Any, Any]:
    """``converse(server_url)`` straight to the traffic, through a recording proxy, and through a
    replaying one (the server stopped)."""
    with VendorServer() as server:
        server.queue(*answers(name))
        direct = converse(server.url)
        server.queue(*answers(name))
        with start_proxy(
            ProxySettings(upstreams={api: server.url + _suffix(api)}, recording=path, mode="record")
        ) as proxy:
            live = converse(proxy.url)
    with start_proxy(ProxySettings(recording=path, mode="replay")) as proxy:
        replayed = converse(proxy.url)
        assert proxy.scope is not None
        proxy.scope.assert_consumed()
    return direct, live, replayed


def _suffix(api: str) -> str:
    return "/v1" if api.startswith("openai") else ""


def _without(value: Any, names: set[str]) -> Any:
    """``value`` without the fields ``names`` at any depth (what a library makes up per run)."""
    if isinstance(value, dict):
        return {key: _without(item, names) for key, item in value.items() if key not in names}
    if isinstance(value, list):
        return [_without(item, names) for item in value]
    return value


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch):
    for variable in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(variable, raising=False)


def test_langchain_openai_tool_loop(tmp_path):
    pytest.importorskip(
        "langchain_openai",
        reason="langchain-openai is not installed (pip install 'openprogram[clients]')",
    )
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def get_capital(country: str) -> str:
        """Get the capital of a country."""
        return "London"

    def converse(url: str) -> Any:
        llm = ChatOpenAI(
            model="gpt-4o-mini", base_url=url + "/v1", api_key=KEY, max_retries=0, stream_usage=True
        )
        llm = llm.bind_tools([get_capital])
        messages: list[Any] = [HumanMessage(UK_PROMPT)]
        chunks = list(llm.stream(messages))
        first = chunks[0]
        for chunk in chunks[1:]:
            first = first + chunk
        messages += [first, ToolMessage("London", tool_call_id=first.tool_calls[0]["id"])]
        second = list(llm.stream(messages))
        return _without(
            [c.model_dump() for c in chunks + second], {"id"}
        )  # langchain's own run ids

    direct, live, replayed = three_ways(
        "openai-completions", "completions_tool_loop_stream", converse, tmp_path / "lc.jsonl"
    )
    assert live == direct and replayed == live
    assert any(chunk["tool_call_chunks"] for chunk in live)
    assert [
        chunk["usage_metadata"]["input_tokens"] for chunk in live if chunk["usage_metadata"]
    ] == [53, 78]


def test_langchain_anthropic_thinking(tmp_path):
    pytest.importorskip(
        "langchain_anthropic",
        reason="langchain-anthropic is not installed (pip install 'openprogram[clients]')",
    )
    from langchain_anthropic import ChatAnthropic

    def converse(url: str) -> Any:
        llm = ChatAnthropic(
            model="claude-sonnet-4-0",
            base_url=url,
            api_key=KEY,
            max_retries=0,
            max_tokens=4096,
            thinking={"type": "enabled", "budget_tokens": 1024},
        )
        return _without(
            [chunk.model_dump() for chunk in llm.stream("How do I cross the street?")], {"id"}
        )

    direct, live, replayed = three_ways(
        "anthropic-messages", "anthropic_thinking_stream", converse, tmp_path / "lca.jsonl"
    )
    assert live == direct and replayed == live
    thinking = [
        block
        for chunk in live
        if isinstance(chunk["content"], list)
        for block in chunk["content"]
        if block.get("type") == "thinking"
    ]
    assert len(thinking) > 1  # the thinking arrives in the vendor's deltas


def test_pydantic_ai_agent_tool_loop(tmp_path):
    pytest.importorskip(
        "pydantic_ai", reason="pydantic-ai is not installed (pip install 'openprogram[clients]')"
    )
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    def converse(url: str) -> Any:
        model = OpenAIChatModel(
            "gpt-4o-mini", provider=OpenAIProvider(base_url=url + "/v1", api_key=KEY)
        )
        agent = Agent(model)

        @agent.tool_plain
        def get_capital(country: str) -> str:
            """Get the capital of a country."""
            return "London"

        async def run() -> Any:
            async with agent.run_stream(UK_PROMPT) as result:
                text = [piece async for piece in result.stream_text(delta=True)]
                usage = result.usage
                messages = result.all_messages()
            return text, usage, messages

        text, usage, messages = asyncio.run(run())
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        dumped = ModelMessagesTypeAdapter.dump_python(messages, mode="json")
        # pydantic-ai stamps its clock, run and conversation ids and the server address on each message
        return (
            text,
            (usage.input_tokens, usage.output_tokens, usage.requests),
            _without(dumped, {"timestamp", "run_id", "conversation_id", "provider_url"}),
        )

    direct, live, replayed = three_ways(
        "openai-completions", "completions_tool_loop_stream", converse, tmp_path / "pai.jsonl"
    )
    assert live == direct and replayed == live
    text, usage, messages = live
    assert "".join(text) and usage[2] == 2
    responses = [m for m in messages if m["kind"] == "response"]
    assert [r["provider_response_id"] for r in responses] == [
        r["provider_response_id"] for r in direct[2] if r["kind"] == "response"
    ]
    assert all(r["model_name"] == "gpt-4o-mini-2024-07-18" for r in responses)


def test_openai_agents_sdk_tool_loop(tmp_path):
    pytest.importorskip(
        "agents", reason="openai-agents is not installed (pip install 'openprogram[clients]')"
    )
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)

    @function_tool
    def get_capital(country: str) -> str:
        """Get the capital of a country."""
        return "Paris"

    def converse(url: str) -> Any:
        client = AsyncOpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0)
        agent = Agent(
            name="helper",
            instructions="",
            tools=[get_capital],
            model=OpenAIResponsesModel("gpt-4o", client),
        )

        async def run() -> Any:
            result = Runner.run_streamed(agent, "What is the capital of France?")
            kinds = [event.type async for event in result.stream_events()]
            responses = [
                (r.response_id, r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens)
                for r in result.raw_responses
            ]
            return result.final_output, responses, kinds

        return asyncio.run(run())

    direct, live, replayed = three_ways(
        "openai-responses", "responses_tool_loop_stream", converse, tmp_path / "agents.jsonl"
    )
    assert live == direct and replayed == live
    assert "Paris" in live[0] and len(live[1]) == 2


def test_litellm_gemini_tool_loop_with_thought_signatures(tmp_path, monkeypatch):
    """litellm sends a tool call back as ``function_call`` beside ``thoughtSignature`` (both
    spellings Gemini accepts): the proxy reads either, so the loop records and replays
    (before, the proxy refused the second request with a 400)."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of a price list
    litellm = pytest.importorskip(
        "litellm", reason="litellm is not installed (pip install 'openprogram[clients]')"
    )
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_country",
                "description": "",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]

    def converse(url: str) -> Any:
        messages: list[Any] = [
            {"role": "user", "content": "What is the capital of the user country? Call the tool"}
        ]
        first = litellm.completion(
            model="gemini/gemini-3-pro-preview",
            api_base=url + "/v1beta",
            api_key=GEMINI_KEY,
            messages=messages,
            tools=tools,
            stream=True,
        )
        chunks = list(first)
        assembled = litellm.stream_chunk_builder(chunks, messages=messages)
        call = assembled.choices[0].message.tool_calls[0]
        messages += [
            assembled.choices[0].message.model_dump(),
            {"role": "tool", "tool_call_id": call.id, "content": "Mexico"},
        ]
        second = list(
            litellm.completion(
                model="gemini/gemini-3-pro-preview",
                api_base=url + "/v1beta",
                api_key=GEMINI_KEY,
                messages=messages,
                tools=tools,
                stream=True,
            )
        )
        texts = [chunk.choices[0].delta.content for chunk in second if chunk.choices]
        return (call.function.name, call.function.arguments, texts, assembled.usage.model_dump())

    direct, live, replayed = three_ways(
        "google-generative-ai",
        "gemini_tool_loop_signatures_stream",
        converse,
        tmp_path / "litellm.jsonl",
    )
    assert live == direct and replayed == live
    assert live[0] == "get_country" and "".join(t for t in live[2] if t)


if os.environ.get("OPENPROGRAM_CLIENTS_REQUIRED"):  # CI of the clients extra: none may skip

    def test_every_client_library_is_installed():
        import importlib.util

        missing = [
            name
            for name in (
                "langchain_openai",
                "langchain_anthropic",
                "pydantic_ai",
                "agents",
                "litellm",
            )
            if importlib.util.find_spec(name) is None
        ]
        assert missing == []
