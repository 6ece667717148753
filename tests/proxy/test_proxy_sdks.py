"""``openprogram proxy`` with the vendors' real SDKs as its clients (docs/proxy.md).

Each vendor's byte-exact transcripts (the ones the vendor contract tests serve) come from a
scripted server on 127.0.0.1. A call is made three ways: by the SDK straight to that server
(what the vendor itself would give the client), through a proxy recording against it, and,
with the server stopped, through a proxy replaying the recording. The SDK objects of the replay
must equal those of the recording run field for field (a proxy's answers carry no clock), and
what the client reads in them (text, thinking and its signature, tool calls with ids and
arguments, usage, stop reason) must equal what the vendor's own stream gave it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from openprogram.providers.vendors.builtin import VENDOR_APIS
from openprogram.proxy import ProxySettings, start_proxy
from tests.transcripts import anthropic_streams as a
from tests.transcripts import google_streams as g
from tests.transcripts import openai_completions_streams as c
from tests.transcripts import openai_responses_streams as r
from tests.vendor_server import ScriptedResponse, VendorServer

PROMPT = "What is the weather in Paris?"

# --------------------------------------------------------------------------- the SDK calls
#
# Each returns ``(objects, facts)``: every SDK object the call produced (dumped), and what a
# client reads in them, in one shape for a stream and for a whole answer.


def _openai_client(url: str, key: str, asynchronous: bool) -> Any:
    import openai

    kind = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    return kind(base_url=url, api_key=key, max_retries=0)


def _completion_facts(completion: dict[str, Any]) -> dict[str, Any]:
    choice = completion["choices"][0]
    message = choice["message"]
    return {
        "text": message.get("content") or "",
        "thinking": message.get("reasoning_content") or message.get("reasoning") or "",
        "tool_calls": [
            (call["id"], call["function"]["name"], json.loads(call["function"]["arguments"]))
            for call in message.get("tool_calls") or []
        ],
        "usage": completion["usage"]
        and {
            key: completion["usage"][key]
            for key in ("prompt_tokens", "completion_tokens", "total_tokens")
        }
        | {
            "cached": (completion["usage"].get("prompt_tokens_details") or {}).get("cached_tokens")
            or 0
        },
        "stop": choice["finish_reason"],
    }


def _chunks_as_completion(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The completion a client assembles from Chat Completions chunks."""
    message: dict[str, Any] = {"content": "", "reasoning_content": "", "tool_calls": []}
    calls: dict[int, dict[str, Any]] = {}
    finish, usage = None, None
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk["choices"]:
            delta = choice["delta"]
            content = delta.get("content") or ""
            if isinstance(content, list):  # Mistral's typed parts: text, and thinking holding text
                for part in content:
                    inner = part.get("thinking") if part.get("type") == "thinking" else None
                    message["reasoning_content"] += "".join(
                        p.get("text") or "" for p in inner or []
                    )
                    message["content"] += (
                        part.get("text") or "" if part.get("type") == "text" else ""
                    )
            else:
                message["content"] += content
            message["reasoning_content"] += (
                delta.get("reasoning_content") or delta.get("reasoning") or ""
            )
            for call in delta.get("tool_calls") or []:
                kept = calls.setdefault(
                    call["index"], {"id": None, "function": {"name": "", "arguments": ""}}
                )
                kept["id"] = call.get("id") or kept["id"]
                function = call.get("function") or {}
                kept["function"]["name"] += function.get("name") or ""
                kept["function"]["arguments"] += function.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    message["tool_calls"] = [calls[index] for index in sorted(calls)]
    return {"choices": [{"message": message, "finish_reason": finish}], "usage": usage}


async def _completions(
    url: str, key: str, streaming: bool, asynchronous: bool, prompt: str
) -> tuple[Any, Any]:
    client = _openai_client(url, key, asynchronous)
    request: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 50,
    }
    if streaming:
        request |= {"stream": True, "stream_options": {"include_usage": True}}
    answer = client.chat.completions.create(**request)
    answer = await answer if asynchronous else answer
    if not streaming:
        dumped = answer.model_dump()
        return dumped, _completion_facts(dumped)
    chunks = (
        [chunk.model_dump() async for chunk in answer]
        if asynchronous
        else [chunk.model_dump() for chunk in answer]
    )
    return chunks, _completion_facts(_chunks_as_completion(chunks))


def _response_facts(response: dict[str, Any]) -> dict[str, Any]:
    facts: dict[str, Any] = {"text": "", "reasoning": [], "tool_calls": []}
    for item in response["output"]:
        if item["type"] == "message":
            facts["text"] += "".join(part.get("text") or "" for part in item["content"])
            facts["message_id"] = item["id"]
        elif item["type"] == "reasoning":
            facts["reasoning"].append(
                (
                    item["id"],
                    item.get("encrypted_content"),
                    [s["text"] for s in item.get("summary") or []],
                )
            )
        elif item["type"] == "function_call":
            facts["tool_calls"].append(
                (item["call_id"], item["id"], item["name"], json.loads(item["arguments"]))
            )
    usage = response["usage"]
    facts["usage"] = (
        usage["input_tokens"],
        usage["output_tokens"],
        usage["total_tokens"],
        usage["input_tokens_details"]["cached_tokens"],
    )
    facts["status"] = response["status"]
    return facts


async def _responses(
    url: str, key: str, streaming: bool, asynchronous: bool, prompt: str
) -> tuple[Any, Any]:
    client = _openai_client(url, key, asynchronous)
    request = {"model": "gpt-5-mini", "input": prompt}
    if not streaming:
        answer = client.responses.create(**request)
        dumped = (await answer if asynchronous else answer).model_dump()
        return dumped, _response_facts(dumped)
    # the SDK's stream helper: it checks every item's identity and assembles the response
    if asynchronous:
        async with client.responses.stream(**request) as stream:
            events = [event.model_dump() async for event in stream]
    else:
        with client.responses.stream(**request) as stream:
            events = [event.model_dump() for event in stream]
    final = next(
        e["response"]
        for e in reversed(events)
        if e["type"] in ("response.completed", "response.incomplete")
    )
    # the items as each output_item.done gave them (a transcript's completed response may
    # list none), with the usage and status of the completed response
    done = {
        event["output_index"]: event["item"]
        for event in events
        if event["type"] == "response.output_item.done"
    }
    return {"events": events, "final": final}, _response_facts(
        {**final, "output": [done[i] for i in sorted(done)]}
    )


def _message_facts(message: dict[str, Any]) -> dict[str, Any]:
    usage = message["usage"]
    return {
        "content": [
            {
                key: value
                for key, value in block.items()
                if key in ("type", "text", "thinking", "signature", "data", "id", "name", "input")
            }
            for block in message["content"]
        ],
        "usage": {
            key: usage.get(key) or 0
            for key in (
                "input_tokens",
                "output_tokens",
                "cache_read_input_tokens",
                "cache_creation_input_tokens",
            )
        },
        "stop": message["stop_reason"],
    }


async def _anthropic(
    url: str, key: str, streaming: bool, asynchronous: bool, prompt: str
) -> tuple[Any, Any]:
    import anthropic

    client = (anthropic.AsyncAnthropic if asynchronous else anthropic.Anthropic)(
        base_url=url, api_key=key, max_retries=0
    )
    request = {
        "model": a.MODEL_ID,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": prompt}],
    }
    if not streaming:
        answer = client.messages.create(**request)
        dumped = (await answer if asynchronous else answer).model_dump()
        return dumped, _message_facts(dumped)
    if asynchronous:
        async with client.messages.stream(**request) as stream:
            events = [event.model_dump() async for event in stream]
            final = (await stream.get_final_message()).model_dump()
    else:
        with client.messages.stream(**request) as stream:
            events = [event.model_dump() for event in stream]
            final = stream.get_final_message().model_dump()
    return {"events": events, "final": final}, _message_facts(final)


def _gemini_facts(responses: list[dict[str, Any]]) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "text": "",
        "thought": "",
        "signatures": [],
        "calls": [],
        "usage": None,
        "finish": None,
    }
    for response in responses:
        for candidate in response.get("candidates") or []:
            for part in (candidate.get("content") or {}).get("parts") or []:
                if part.get("thought_signature"):
                    facts["signatures"].append(part["thought_signature"])
                if part.get("function_call"):
                    facts["calls"].append(
                        (part["function_call"]["name"], part["function_call"]["args"])
                    )
                elif part.get("thought"):
                    facts["thought"] += part.get("text") or ""
                else:
                    facts["text"] += part.get("text") or ""
            facts["finish"] = candidate.get("finish_reason") or facts["finish"]
        usage = response.get("usage_metadata")
        if usage:
            facts["usage"] = (
                usage.get("prompt_token_count"),
                usage.get("cached_content_token_count"),
                usage.get("total_token_count"),
            )
    return facts


async def _google(
    url: str, key: str, streaming: bool, asynchronous: bool, prompt: str
) -> tuple[Any, Any]:
    from google import genai

    client = genai.Client(
        api_key=key, http_options={"base_url": url, "retry_options": {"attempts": 1}}
    )
    models = client.aio.models if asynchronous else client.models

    def dump(response: Any) -> dict[str, Any]:
        return response.model_dump(exclude={"sdk_http_response"}, exclude_none=True)

    if not streaming:
        answer = models.generate_content(model=g.MODEL_ID, contents=prompt)
        dumped = [dump(await answer if asynchronous else answer)]
        return dumped, _gemini_facts(dumped)
    if asynchronous:
        chunks = [
            dump(chunk)
            async for chunk in await models.generate_content_stream(
                model=g.MODEL_ID, contents=prompt
            )
        ]
    else:
        chunks = [
            dump(chunk)
            for chunk in models.generate_content_stream(model=g.MODEL_ID, contents=prompt)
        ]
    # the thought token count of the vendor's usage is in the output; totals compare below
    return chunks, _gemini_facts(chunks)


@dataclass(frozen=True)
class Vendor:
    api: str
    key: str
    suffix: str  # what follows a server's address in the SDK's base URL
    call: Callable[..., Any]
    scenarios: dict[str, list[bytes]]


VENDORS = {
    "openai-completions": Vendor(
        "openai-completions",
        "sk-test-proxy-completions-0123456789",
        "/v1",
        _completions,
        {
            "plain": c.PLAIN_TEXT,
            "thinking": c.thinking_then_text("reasoning_content"),
            "one_tool_call": c.ONE_TOOL_CALL,
            "several_tool_calls": c.SEVERAL_TOOL_CALLS,
        },
    ),
    "openai-responses": Vendor(
        "openai-responses",
        "sk-test-proxy-responses-0123456789",
        "/v1",
        _responses,
        {
            "plain": r.PLAIN_TEXT,
            "thinking": r.THINKING_THEN_TEXT,
            "one_tool_call": r.ONE_TOOL_CALL,
            "several_tool_calls": r.SEVERAL_TOOL_CALLS,
        },
    ),
    "anthropic-messages": Vendor(
        "anthropic-messages",
        "sk-ant-test-proxy-0123456789abcdef",
        "",
        _anthropic,
        {
            "plain": a.PLAIN_TEXT,
            "thinking": a.THINKING_THEN_TEXT,
            "one_tool_call": a.ONE_TOOL_CALL,
            "several_tool_calls": a.SEVERAL_TOOL_CALLS,
        },
    ),
    "google-generative-ai": Vendor(
        "google-generative-ai",
        "AIzaSy-test-proxy-0123456789abcdef",
        "",
        _google,
        {
            "plain": g.PLAIN_TEXT,
            "thinking": g.THINKING_THEN_TEXT,
            "one_tool_call": g.ONE_TOOL_CALL,
            "several_tool_calls": g.SEVERAL_TOOL_CALLS,
        },
    ),
}


def call(
    vendor: Vendor,
    url: str,
    *,
    streaming: bool,
    asynchronous: bool = False,
    prompt: str = PROMPT,
    key: str | None = None,
) -> tuple[Any, Any]:
    return asyncio.run(
        vendor.call(url + vendor.suffix, key or vendor.key, streaming, asynchronous, prompt)
    )


def whole_answer(api: str, chunks: list[bytes]) -> bytes | None:
    """The JSON body a vendor answers a call that does not stream with, for the answer a
    transcript streams (the transcripts are streams; their whole form is written by the vendor
    module's own ``response_body``), or None when the transcript holds no whole answer."""
    import importlib

    from openprogram.providers.assembly import AssistantStreamAssembler
    from openprogram.providers.types import Model
    from openprogram.providers.vendors.wire import SseDecoder
    from openprogram.proxy.formats import FORMATS

    module = importlib.import_module(f"openprogram.providers.vendors.{FORMATS[api].module}")
    model = Model(id="m", api=api, provider="p")
    reader = module.AnswerReader(AssistantStreamAssembler(model, timestamp=0))
    decoder = SseDecoder()
    events = []
    try:
        for chunk in chunks:
            for kind, data in decoder.feed(chunk):
                events += reader.sse(kind, data)
        events += [e for kind, data in decoder.flush() for e in reader.sse(kind, data)]
        if not any(event.type in ("done", "error") for event in events):
            events += reader.end()
    except Exception:  # noqa: BLE001 - a transcript that breaks or errs has no whole form
        return None
    done = [event for event in events if event.type == "done"]
    if not done:
        return None
    request = {
        "model": {"openai-completions": "gpt-4o-mini", "openai-responses": "gpt-5-mini"}.get(
            api, a.MODEL_ID
        )
    }
    return json.dumps(module.response_body(done[0].message, request)).encode()


def record_and_replay(
    vendor: Vendor, chunks: list[bytes], path: Path, **options: Any
) -> tuple[tuple[Any, Any], tuple[Any, Any], tuple[Any, Any], VendorServer]:
    """The call straight to the vendor's answer, through a recording proxy, and through a
    replaying one once the vendor server has stopped. A call that does not stream is answered
    with the transcript's whole form (:func:`whole_answer`), as a vendor answers one."""
    streaming = options.get("streaming", True)
    answer = ScriptedResponse(chunks=chunks)
    if not streaming:
        body = whole_answer(vendor.api, chunks)
        assert body is not None
        answer = ScriptedResponse(chunks=[body], headers={"content-type": "application/json"})
    with VendorServer() as server:
        server.queue(answer, answer)
        direct = call(
            vendor, server.url, streaming=streaming, asynchronous=options.get("asynchronous", False)
        )
        settings = ProxySettings(
            upstreams={vendor.api: server.url + vendor.suffix}, recording=path, mode="record"
        )
        with start_proxy(settings) as proxy:
            live = call(vendor, proxy.url, **options)
    with start_proxy(ProxySettings(recording=path, mode="replay")) as proxy:
        replayed = call(vendor, proxy.url, **options)
        assert proxy.scope is not None
        proxy.scope.assert_consumed()
    return direct, live, replayed, server


def _transcripts() -> dict[tuple[str, str], list[bytes]]:
    """Every answer transcript of the vendor contract tests (tests/vendors/test_vendor_contract.py)."""
    from tests.vendors.test_vendor_contract import CASES

    return {
        (case.api, name): scenario.chunks
        for case in CASES
        for name, scenario in [("plain", case.plain), *case.scenarios.items()]
    }


TRANSCRIPTS = _transcripts()

SCENARIOS = [
    pytest.param(api, name, streaming, id=f"{api}-{name}-{'stream' if streaming else 'json'}")
    for api, name in TRANSCRIPTS
    for streaming in (True, False)
    if streaming or whole_answer(api, TRANSCRIPTS[api, name]) is not None
]


def test_every_vendor_of_the_list_has_its_sdk_here():
    assert list(VENDORS) == list(VENDOR_APIS)


@pytest.mark.parametrize(("api", "name", "streaming"), SCENARIOS)
def test_the_sdk_gets_through_the_proxy_what_it_gets_from_the_vendor_recorded_and_replayed(
    api, name, streaming, tmp_path
):
    """The proxy hands the client the vendor's own answer, in record and in replay: every SDK
    object equals the one the vendor gave it directly, field for field (before, the proxy
    re-encoded the answer from its events, and a transcript's signature split over two deltas,
    an MCP block's input, Groq's usage or a server tool's prompt tokens reached the client
    changed)."""
    vendor = VENDORS[api]
    path = tmp_path / "proxy.jsonl"
    direct, live, replayed, server = record_and_replay(
        vendor, TRANSCRIPTS[api, name], path, streaming=streaming
    )
    assert live[0] == direct[0]  # every SDK object, field for field
    assert replayed[0] == live[0]
    assert live[1] == direct[1]
    # the client's key reached the vendor and never the file
    assert (
        vendor.key in json.dumps(server.requests[-1].headers)
        or f"key={vendor.key}" in server.requests[-1].path
    )
    assert vendor.key not in path.read_text(encoding="utf-8")


@pytest.mark.parametrize("api", list(VENDORS))
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "json"])
def test_async_clients_replay_too(api, streaming, tmp_path):
    vendor = VENDORS[api]
    direct, live, replayed, _ = record_and_replay(
        vendor,
        vendor.scenarios["one_tool_call"],
        tmp_path / "async.jsonl",
        streaming=streaming,
        asynchronous=True,
    )
    assert replayed[0] == live[0] == direct[0]
    assert live[1] == direct[1]


def _error_text(error: BaseException) -> str:
    return (
        str(error)
        + " "
        + json.dumps(getattr(error, "body", None) or getattr(error, "details", None), default=str)
    )


@pytest.mark.parametrize("api", list(VENDORS))
def test_a_changed_prompt_is_a_mismatch_naming_the_field_and_the_proxy_keeps_serving(api, tmp_path):
    vendor = VENDORS[api]
    path = tmp_path / "drift.jsonl"
    _, live, _, _ = record_and_replay(vendor, vendor.scenarios["plain"], path, streaming=True)
    with start_proxy(ProxySettings(recording=path, mode="replay")) as proxy:
        for streaming in (True, False):
            with pytest.raises(Exception) as raised:
                call(vendor, proxy.url, streaming=streaming, prompt=PROMPT + " And in Rome?")
            text = _error_text(raised.value)
            assert "replay mismatch at call 0" in text and "field context.messages[0]" in text, text
            assert getattr(raised.value, "status_code", getattr(raised.value, "code", None)) == 400
        # the same proxy still serves the recorded call
        assert call(vendor, proxy.url, streaming=True)[0] == live[0]


def test_a_vendor_error_reaches_the_client_with_its_status_and_the_proxy_keeps_serving(tmp_path):
    import openai

    from tests.openai_support import error_response

    vendor = VENDORS["openai-completions"]
    with VendorServer() as server:
        server.queue(
            error_response(401, "Incorrect API key provided"), ScriptedResponse(chunks=c.PLAIN_TEXT)
        )
        settings = ProxySettings(
            upstreams={vendor.api: server.url + "/v1"},
            recording=tmp_path / "e.jsonl",
            mode="record",
        )
        with start_proxy(settings) as proxy:
            with pytest.raises(openai.AuthenticationError) as raised:
                call(vendor, proxy.url, streaming=True)
            # the vendor's own error body, as it sent it
            assert raised.value.body["message"] == "Incorrect API key provided"
            assert call(vendor, proxy.url, streaming=True)[1]["text"] == "Hello world!"


def test_requests_the_proxy_cannot_read_are_answered_in_the_vendor_shape(tmp_path):
    """(An image by URL or a document is no longer refused: it travels as the client sent it,
    tests/proxy/test_proxy_vendor_answer.py.)"""
    import httpx
    import openai

    with start_proxy(ProxySettings(recording=tmp_path / "none.jsonl", mode="record")) as proxy:
        client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-x", max_retries=0)
        # a body that is not JSON, and a path the proxy does not serve
        broken = httpx.post(
            proxy.url + "/v1/chat/completions",
            content=b"{not json",
            headers={"content-type": "application/json"},
        )
        assert broken.status_code == 400 and "not JSON" in broken.json()["error"]["message"]
        unknown = httpx.post(proxy.url + "/v1/embeddings", json={})
        assert (
            unknown.status_code == 404
            and "no route for POST /v1/embeddings" in unknown.json()["error"]["message"]
        )
        gemini = httpx.post(proxy.url + "/v1beta/models/gemini-2.5-flash:countTokens", json={})
        assert gemini.status_code == 404 and gemini.json()["error"]["status"] == "NOT_FOUND"
        # and it goes on serving
        assert [m.id for m in client.models.list()]
    assert (
        not (tmp_path / "none.jsonl").exists()
        or "request" not in (tmp_path / "none.jsonl").read_text()
    )


def test_models_are_listed_in_the_shape_of_the_sdk_that_asks():
    import anthropic
    import openai

    with start_proxy() as proxy:
        openai_ids = [
            m.id for m in openai.OpenAI(base_url=proxy.url + "/v1", api_key="x").models.list()
        ]
        anthropic_ids = [
            m.id for m in anthropic.Anthropic(base_url=proxy.url, api_key="x").models.list()
        ]
    assert openai_ids and anthropic_ids
    assert set(anthropic_ids) < set(openai_ids)
    assert all("claude" in model_id for model_id in anthropic_ids)


def test_a_lane_named_by_the_client_is_the_recorded_lane(tmp_path):
    import openai

    path = tmp_path / "lane.jsonl"
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=c.PLAIN_TEXT), ScriptedResponse(chunks=c.PLAIN_TEXT))
        settings = ProxySettings(
            upstreams={"openai-completions": server.url + "/v1"}, recording=path, mode="record"
        )
        with start_proxy(settings) as proxy:
            client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-x", max_retries=0)
            for headers in ({"X-OpenProgram-Lane": "planner/step-1"}, {}):
                client.chat.completions.create(
                    model="gpt-4o-mini",
                    messages=[{"role": "user", "content": "hi"}],
                    extra_headers=headers,
                )
    lanes = [
        json.loads(line).get("lane")
        for line in path.read_text().splitlines()
        if '"request"' in line[:20]
    ]
    assert lanes[0] == "planner/step-1"
    assert lanes[1].startswith("conversation-") and len(lanes[1]) == len("conversation-") + 16
