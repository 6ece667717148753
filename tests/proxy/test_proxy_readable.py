"""What a person reads of a session recorded through ``openprogram proxy``: the conversation a
client carried on reads as one (``show --conversation``, ``view``), and a replay mismatch names
the message by the client's own index in its request body as well as by ours.

Each client here speaks a vendor's wire format by hand, as an SDK would: it sends a
conversation, appends the answer exactly as it came back (plus a tool result), and sends it
again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from openprogram.proxy import ProxySettings, start_proxy
from tests.proxy.test_proxy_sdks import TRANSCRIPTS, VENDORS, whole_answer
from tests.vendor_server import ScriptedResponse, VendorServer


@dataclass(frozen=True)
class Client:
    """One wire format's client: where it posts, its first body, and the next body built from
    the answer (the answer resent as the client got it, then the tool's result)."""

    path: str
    first: Callable[[str], dict[str, Any]]
    then: Callable[[dict[str, Any], dict[str, Any], str], dict[str, Any]]


def _completions_then(body: dict[str, Any], answer: dict[str, Any], result: str) -> dict[str, Any]:
    message = answer["choices"][0]["message"]
    results = [
        {"role": "tool", "tool_call_id": call["id"], "content": result}
        for call in message.get("tool_calls") or []
    ]
    return {**body, "messages": [*body["messages"], message, *results]}


def _anthropic_then(body: dict[str, Any], answer: dict[str, Any], result: str) -> dict[str, Any]:
    results = [
        {"type": "tool_result", "tool_use_id": block["id"], "content": result}
        for block in answer["content"]
        if block["type"] == "tool_use"
    ]
    resent = {"role": "assistant", "content": answer["content"]}
    return {**body, "messages": [*body["messages"], resent, {"role": "user", "content": results}]}


def _responses_then(body: dict[str, Any], answer: dict[str, Any], result: str) -> dict[str, Any]:
    results = [
        {"type": "function_call_output", "call_id": item["call_id"], "output": result}
        for item in answer["output"]
        if item["type"] == "function_call"
    ]
    return {**body, "input": [*body["input"], *answer["output"], *results]}


def _gemini_then(body: dict[str, Any], answer: dict[str, Any], result: str) -> dict[str, Any]:
    content = answer["candidates"][0]["content"]
    results = [
        {"functionResponse": {"name": part["functionCall"]["name"], "response": {"result": result}}}
        for part in content["parts"]
        if "functionCall" in part
    ]
    return {**body, "contents": [*body["contents"], content, {"role": "user", "parts": results}]}


CLIENTS = {
    "openai-completions": Client(
        "/v1/chat/completions",
        lambda prompt: {
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": prompt},
            ],
        },
        _completions_then,
    ),
    "openai-responses": Client(
        "/v1/responses",
        lambda prompt: {
            "model": "gpt-4o-mini",
            "instructions": "be brief",
            "input": [{"role": "user", "content": prompt}],
        },
        _responses_then,
    ),
    "anthropic-messages": Client(
        "/v1/messages",
        lambda prompt: {
            "model": "claude-haiku-4-5",
            "max_tokens": 256,
            "system": "be brief",
            "messages": [{"role": "user", "content": prompt}],
        },
        _anthropic_then,
    ),
    "google-generative-ai": Client(
        "/v1beta/models/gemini-2.5-flash:generateContent",
        lambda prompt: {
            "systemInstruction": {"parts": [{"text": "be brief"}]},
            "contents": [{"role": "user", "parts": [{"text": prompt}]}],
        },
        _gemini_then,
    ),
}


def _post(url: str, api: str, body: dict[str, Any]) -> httpx.Response:
    key = VENDORS[api].key
    headers = {
        "authorization": f"Bearer {key}",
        "x-api-key": key,
        "x-goog-api-key": key,
        "anthropic-version": "2023-06-01",
    }
    return httpx.post(url + CLIENTS[api].path, json=body, headers=headers, timeout=30)


def record_two_turns(api: str, path: Path) -> list[dict[str, Any]]:
    """A tool call, then the answer after its result, recorded through a proxy: the bodies the
    client sent."""
    client = CLIENTS[api]
    bodies = [client.first("What is the weather in Paris?")]
    with VendorServer() as server:
        # the client does not stream, so the vendor answers each call with one JSON body
        server.queue(*(_whole(api, name) for name in ("one_tool_call", "plain")))
        settings = ProxySettings(
            upstreams={api: server.url + VENDORS[api].suffix}, recording=path, mode="record"
        )
        with start_proxy(settings) as proxy:
            answer = _post(proxy.url, api, bodies[0])
            assert answer.status_code == 200, answer.text
            bodies.append(client.then(bodies[0], answer.json(), "22 degrees"))
            assert _post(proxy.url, api, bodies[1]).status_code == 200
    return bodies


def _whole(api: str, transcript: str) -> ScriptedResponse:
    body = whole_answer(api, TRANSCRIPTS[(api, transcript)])
    assert body is not None
    return ScriptedResponse(chunks=[body], headers={"content-type": "application/json"})


@pytest.mark.parametrize("api", sorted(CLIENTS))
def test_a_proxy_session_reads_as_one_conversation(api, tmp_path):
    from openprogram.recordings.views.conversation import render_conversation
    from openprogram.recordings.views.inspection import read_recording
    from openprogram.recordings.views.view import render_recording_page

    path = tmp_path / "session.jsonl"
    record_two_turns(api, path)
    recording = read_recording(path)
    assert len(recording.calls) == 2
    text = render_conversation(recording)
    assert "new conversation" not in text, text
    assert text.count("What is the weather in Paris?") == 1 and text.count("22 degrees") == 1
    assert render_recording_page(recording).count('class="newconv"') == 1  # the first call's


#: Where the tool's result (openprogram's context.messages[2]) is in each client's second body.
RESULT_IN_THE_BODY = {
    "openai-completions": "messages[3]",  # the system prompt is messages[0]
    "openai-responses": "input[2]",  # the user turn, the function call, its output
    "anthropic-messages": "messages[2]",
    "google-generative-ai": "contents[2]",
}


@pytest.mark.parametrize("api", sorted(CLIENTS))
def test_a_proxy_mismatch_names_the_message_by_the_clients_index_too(api, tmp_path):
    path = tmp_path / "session.jsonl"
    bodies = record_two_turns(api, path)
    drifted = CLIENTS[api].then(
        bodies[0], _first_answer(api, path), "23 degrees"
    )  # the tool said otherwise
    with start_proxy(ProxySettings(recording=path, mode="replay")) as proxy:
        assert _post(proxy.url, api, bodies[0]).status_code == 200
        refused = _post(proxy.url, api, drifted)
    assert refused.status_code == 400
    lines = _error_message(refused.json()).splitlines()
    assert lines[0].startswith("openprogram proxy: replay mismatch at call 1 (lane ")
    assert lines[0].endswith("field context.messages[2].content[0].text:")
    assert lines[1] == f"(context.messages[2] is {RESULT_IN_THE_BODY[api]} of the request body)"
    assert "23 degrees" in lines[2]


def _error_message(answer: dict[str, Any]) -> str:
    """The message of a vendor's error body (``{"error": {"message": ...}}`` in each format)."""
    return str(answer["error"]["message"])


def _first_answer(api: str, path: Path) -> dict[str, Any]:
    """The first call's answer as the client gets it, from a replaying proxy."""
    with start_proxy(ProxySettings(recording=path, mode="replay")) as proxy:
        return _post(proxy.url, api, CLIENTS[api].first("What is the weather in Paris?")).json()
