"""``openprogram proxy`` on real vendor traffic, with the vendors' own SDKs as clients.

The answers come from public VCR cassettes of real vendor calls (``tests/fixtures/vendor_traffic``,
each file naming its origin and licence): reasoning tokens and a four-part reasoning summary
(Responses, o3-mini), Chat Completions reasoning tokens, a Chat Completions and a Responses tool
loop, Anthropic extended thinking, Gemini thoughts with thought signatures in a tool loop. A
loopback server answers with them, in the pieces a vendor streams (one server-sent event a
write). Each conversation is made three times by the SDK: straight to that server, through a
proxy recording it, and through a proxy replaying the recording with the server stopped and no
key; every object the SDK hands the client must be the same all three times, field for field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from openprogram.providers.replay import read_recording_file
from openprogram.proxy import ProxySettings, start_proxy
from tests.vendor_server import ScriptedResponse, VendorServer

TRAFFIC_DIR = Path(__file__).parents[1] / "fixtures" / "vendor_traffic"
KEYS = {
    "openai-completions": "sk-test-traffic-completions-0123456789",
    "openai-responses": "sk-test-traffic-responses-0123456789",
    "anthropic-messages": "sk-ant-test-traffic-0123456789abcdef",
    "google-generative-ai": "AIzaSy-test-traffic-0123456789abcdef",
}
SUFFIX = {
    "openai-completions": "/v1",
    "openai-responses": "/v1",
    "anthropic-messages": "",
    "google-generative-ai": "",
}


def traffic(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((TRAFFIC_DIR / f"{name}.json").read_text())
    return document


def pieces(body: str) -> list[bytes]:
    """A body in the pieces its vendor wrote it in: one server-sent event a piece."""
    data = body.encode()
    separator = b"\r\n\r\n" if b"\r\n\r\n" in data else b"\n\n"
    parts = data.split(separator)
    chunks = [part + separator for part in parts[:-1]]
    if parts[-1]:
        chunks.append(parts[-1])
    return chunks


def answers(name: str) -> list[ScriptedResponse]:
    return [
        ScriptedResponse(
            status=interaction["status"],
            chunks=pieces(interaction["body"]),
            headers={"content-type": interaction["content_type"]},
        )
        for interaction in traffic(name)["interactions"]
    ]


# --------------------------------------------------------------------------- the conversations


def _openai(api: str, name: str, base_url: str) -> list[Any]:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key=KEYS[api], max_retries=0)
    dumps = []
    for interaction in traffic(name)["interactions"]:
        request = interaction["request"]
        create = (
            client.chat.completions.create
            if api == "openai-completions"
            else client.responses.create
        )
        answer = create(**request)
        dumps.append(
            [item.model_dump() for item in answer] if request.get("stream") else answer.model_dump()
        )
    return dumps


def _anthropic(api: str, name: str, base_url: str) -> list[Any]:
    import anthropic

    client = anthropic.Anthropic(base_url=base_url, api_key=KEYS[api], max_retries=0)
    dumps = []
    for interaction in traffic(name)["interactions"]:
        with client.messages.stream(
            **{k: v for k, v in interaction["request"].items() if k != "stream"}
        ) as stream:
            events = [event.model_dump() for event in stream]
            dumps.append({"events": events, "final": stream.get_final_message().model_dump()})
    return dumps


def _gemini(api: str, name: str, base_url: str) -> list[Any]:
    """The conversation as an application writes it: the tool's call from the first answer
    goes back with the tool's result (thought signature and all) in the second request."""
    from google import genai
    from google.genai import types

    client = genai.Client(
        api_key=KEYS[api], http_options={"base_url": base_url, "retry_options": {"attempts": 1}}
    )
    interactions = traffic(name)["interactions"]
    first = interactions[0]["request"]
    prompt = types.Content(
        role="user", parts=[types.Part(text=first["contents"][0]["parts"][0]["text"])]
    )
    tools = [
        types.Tool(
            function_declarations=[
                types.FunctionDeclaration(
                    name=d["name"],
                    description=d["description"],
                    parameters_json_schema=d["parameters_json_schema"],
                )
                for d in tool["functionDeclarations"]
            ]
        )
        for tool in first.get("tools") or []
    ]
    config = types.GenerateContentConfig(tools=tools or None)

    def dump(response: Any) -> dict[str, Any]:
        return response.model_dump(exclude={"sdk_http_response"}, exclude_none=True)

    contents: list[Any] = [prompt]
    dumps = []
    for _ in interactions:
        chunks = list(
            client.models.generate_content_stream(
                model=_gemini_model(first, interactions), contents=contents, config=config
            )
        )
        dumps.append([dump(chunk) for chunk in chunks])
        calls = [
            part
            for chunk in chunks
            for part in chunk.candidates[0].content.parts or []
            if part.function_call
        ]
        if calls:
            contents.append(types.Content(role="model", parts=calls))
            contents.append(
                types.Content(
                    role="user",
                    parts=[
                        types.Part.from_function_response(
                            name=part.function_call.name, response={"return_value": "Mexico"}
                        )
                        for part in calls
                    ],
                )
            )
    return dumps


def _gemini_model(first: dict[str, Any], interactions: list[dict[str, Any]]) -> str:
    return interactions[0]["path"].split("/models/", 1)[1].split(":", 1)[0]


CONVERSE = {
    "openai-completions": _openai,
    "openai-responses": _openai,
    "anthropic-messages": _anthropic,
    "google-generative-ai": _gemini,
}

CASES = [
    ("openai-responses", "responses_reasoning_summary_stream"),
    ("openai-responses", "responses_tool_loop_stream"),
    ("openai-completions", "completions_tool_loop_stream"),
    ("openai-completions", "completions_reasoning_json"),
    ("anthropic-messages", "anthropic_thinking_stream"),
    ("google-generative-ai", "gemini_tool_loop_signatures_stream"),
    ("google-generative-ai", "gemini_thoughts_usage_stream"),
]


def three_ways(
    api: str, name: str, path: Path
) -> tuple[list[Any], list[Any], list[Any], VendorServer]:
    """The conversation straight to the vendor's traffic, recorded through a proxy, and replayed
    through one with the server stopped and no key."""
    converse = CONVERSE[api]
    with VendorServer() as server:
        server.queue(*answers(name))
        direct = converse(api, name, server.url + SUFFIX[api])
        server.queue(*answers(name))
        settings = ProxySettings(
            upstreams={api: server.url + SUFFIX[api]}, recording=path, mode="record"
        )
        with start_proxy(settings) as proxy:
            live = converse(api, name, proxy.url + SUFFIX[api])
    with start_proxy(ProxySettings(recording=path, mode="replay")) as proxy:
        replayed = converse(api, name, proxy.url + SUFFIX[api])
        assert proxy.scope is not None
        proxy.scope.assert_consumed()
    return direct, live, replayed, server


@pytest.mark.parametrize(("api", "name"), CASES, ids=[name for _, name in CASES])
def test_the_sdk_gets_what_the_vendor_sent_recorded_and_replayed(api, name, tmp_path, monkeypatch):
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    path = tmp_path / f"{name}.jsonl"
    direct, live, replayed, server = three_ways(api, name, path)
    assert live == direct  # text, tool calls, finish reason, usage, ids, model version, created ...
    assert replayed == live
    recorded = read_recording_file(path).calls
    assert [call.vendor_answer is not None for call in recorded] == [True] * len(recorded)
    assert all(call.event_count > 1 for call in recorded)  # the events, parsed from the same bytes
    text = path.read_text(encoding="utf-8")
    assert KEYS[api] not in text
    assert len(server.requests) == 2 * len(recorded)
    if name == "completions_tool_loop_stream":  # a catalog model: its calls have their cost
        final = recorded[-1].last_event_dump()
        assert final is not None and final["message"]["usage"]["cost"]["total"] > 0


def test_the_answer_s_own_fields_reach_the_client(tmp_path):
    """Responses: four reasoning summary parts stay four, reasoning tokens keep their count and
    text arrives delta by delta; Chat Completions: reasoning tokens, the model version, ``created``
    and ``system_fingerprint`` as the vendor sent them; Gemini: thought tokens apart from the
    candidates' (before, the proxy re-encoded them from its events and lost or changed each)."""
    _, live, _, _ = three_ways(
        "openai-responses", "responses_reasoning_summary_stream", tmp_path / "r.jsonl"
    )
    (events,) = live
    assert sum(event["type"] == "response.reasoning_summary_part.added" for event in events) == 4
    completed = next(event["response"] for event in events if event["type"] == "response.completed")
    assert completed["usage"]["output_tokens_details"]["reasoning_tokens"] > 0
    body = traffic("responses_reasoning_summary_stream")["interactions"][0]["body"]
    assert sum(event["type"] == "response.output_text.delta" for event in events) == body.count(
        "response.output_text.delta\n"
    )

    _, live, _, _ = three_ways(
        "openai-completions", "completions_reasoning_json", tmp_path / "c.jsonl"
    )
    (completion,) = live
    sent = json.loads(traffic("completions_reasoning_json")["interactions"][0]["body"])
    assert completion["usage"]["completion_tokens_details"]["reasoning_tokens"] == 64
    for field in ("id", "model", "created", "system_fingerprint", "service_tier"):
        assert completion[field] == sent[field]

    _, live, _, _ = three_ways(
        "google-generative-ai", "gemini_tool_loop_signatures_stream", tmp_path / "g.jsonl"
    )
    usage = live[0][0]["usage_metadata"]
    assert (usage["candidates_token_count"], usage["thoughts_token_count"]) == (10, 202)
    assert live[0][0]["candidates"][0]["content"]["parts"][0]["thought_signature"]
