"""Gemini's opaque parts, kept and sent back exactly (issue #22): a function call's
``thoughtSignature``, code execution and Gemini 3 server tool parts kept whole with their
signatures, grounding kept as citations and never sent back. Each shape is served byte for
byte from 127.0.0.1 to the real ``google-genai`` SDK, recorded and replayed, sent back on the
next turn to the same api (asserted on the wire body) and skipped by the other vendors."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from openprogram.providers.scoped import use_recording
from openprogram.providers.stream import complete
from openprogram.providers.types import (
    AssistantMessage,
    Context,
    Model,
    ServerToolContent,
    StreamOptions,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from tests.transcripts import google_streams as g
from tests.transcripts.agent_session import run_echo_session
from tests.transcripts.event_summary import collect
from tests.vendor_server import ScriptedResponse, VendorServer
from tests.vendors.test_vendor_contract import ANTHROPIC, COMPLETIONS, GOOGLE, RESPONSES, VendorCase

HELLO = Context(messages=[UserMessage(content="Weather in Oslo?", timestamp=1)])
THEN = UserMessage(content="Thanks", timestamp=3)


def sdk_base64(signature: str) -> str:
    """A signature as the SDK writes it on the wire: the same bytes, URL-safe base64."""
    return base64.urlsafe_b64encode(base64.b64decode(signature)).decode()


async def answer(server: VendorServer, chunks: list[bytes], model: Model) -> AssistantMessage:
    server.queue(ScriptedResponse(chunks=chunks))
    events = await collect(GOOGLE.provider().stream(model, HELLO, GOOGLE.options()))
    assert events[-1].type == "done"
    return events[-1].message


async def follow_up(
    server: VendorServer, case: VendorCase, model: Model, first: AssistantMessage
) -> dict[str, Any]:
    """The wire body of the next turn, sent to ``case``'s vendor, after ``first``."""
    messages: list[Any] = [*HELLO.messages, first]
    messages += [
        ToolResultMessage(tool_call_id=b.id, tool_name=b.name, content=[], timestamp=2)
        for b in first.content
        if isinstance(b, ToolCall)
    ]
    server.queue(ScriptedResponse(chunks=case.plain.chunks))
    events = await collect(
        case.provider().stream(model, Context(messages=[*messages, THEN]), case.options())
    )
    assert events[-1].type == "done"
    return server.requests[-1].json


def model_turn(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The parts of the (one) model turn in a Gemini wire body."""
    (turn,) = [content for content in body["contents"] if content["role"] == "model"]
    return turn["parts"]


# --------------------------------------------------------------------------- kept


async def test_function_call_signature_is_kept_byte_for_byte(server):
    message = await answer(server, g.PARALLEL_FIRST_SIGNED, GOOGLE.model(server.url))
    calls = [b for b in message.content if isinstance(b, ToolCall)]
    # Gemini signs the first of parallel calls only; the text kept is the one Gemini sent
    assert [(c.arguments, c.thought_signature) for c in calls] == [
        ({"city": "Paris"}, g.CALL_SIGNATURE),
        ({"city": "Rome"}, None),
    ]


async def test_gemini_3_search_parts_keep_their_signature_in_gemini_s_alphabet(server):
    message = await answer(server, g.GOOGLE_SEARCH, GOOGLE.model(server.url, id=g.GEMINI_3_ID))
    call = message.content[0]
    assert isinstance(call, ServerToolContent)
    # "+" and "/" as Gemini sent them, not the SDK's URL-safe rendering of the same bytes
    assert call.payload["thoughtSignature"] == g.SEARCH_SIGNATURE
    assert "+" in g.SEARCH_SIGNATURE and "/" in g.SEARCH_SIGNATURE


# --------------------------------------------------------------------------- recorded


@pytest.mark.parametrize(
    ("chunks", "kinds"),
    [
        (g.ONE_TOOL_CALL, ["toolCall"]),
        (g.CODE_EXECUTION, ["text", "executable_code", "code_execution_result", "text"]),
        (g.GOOGLE_SEARCH, ["tool_call", "tool_response", "text", "grounding_metadata"]),
        (g.TOOL_USE_PROMPT, ["text", "url_context_metadata"]),
    ],
    ids=["function_call", "code_execution", "google_search", "url_context"],
)
async def test_kept_parts_survive_record_then_replay(
    server, fresh_registry, tmp_path, chunks, kinds
):
    """Recorded through the wire, replayed offline: the same blocks come back, and every
    signature is in the file as Gemini sent it."""
    fresh_registry.register_api_provider(GOOGLE.api, GOOGLE.provider())
    server.queue(ScriptedResponse(chunks=chunks))
    model = GOOGLE.model(server.url, id=g.GEMINI_3_ID)
    path = tmp_path / "gemini.jsonl"
    with use_recording(path, "record"):
        recorded = await complete(model, HELLO, GOOGLE.options())
    with use_recording(path, "replay") as scope:
        replayed = await complete(model, HELLO, StreamOptions())
    scope.assert_consumed()
    assert len(server.requests) == 1
    assert [getattr(b, "kind", b.type) for b in recorded.content] == kinds
    assert replayed.content == recorded.content
    text = path.read_text(encoding="utf-8")
    for signature in (g.CALL_SIGNATURE, g.CODE_SIGNATURE, g.SEARCH_SIGNATURE):
        if signature.encode() in b"".join(chunks):
            assert signature in text


# --------------------------------------------------------------------------- sent back


async def test_each_function_call_goes_back_with_its_own_signature_and_no_placeholder(server):
    """Gemini 3: the signed first call goes back signed, the unsigned parallel call as it
    came; the placeholder is only for calls that never had a signature."""
    model = GOOGLE.model(server.url, id=g.GEMINI_3_ID)
    first = await answer(server, g.PARALLEL_FIRST_SIGNED, model)
    parts = model_turn(await follow_up(server, GOOGLE, model, first))
    assert parts == [
        {
            "functionCall": {"args": {"city": "Paris"}, "name": "get_weather"},
            "thoughtSignature": sdk_base64(g.CALL_SIGNATURE),
        },
        {"functionCall": {"args": {"city": "Rome"}, "name": "get_weather"}},
    ]


async def test_gemini_s_own_call_ids_go_back_on_the_call_and_its_response(server):
    """Gemini 3 names each function call (``functionCall.id``): the call goes back with its id
    and its result names it (``functionResponse.id``); made-up ids of calls that came without
    one are never sent."""
    model = GOOGLE.model(server.url, id=g.GEMINI_3_ID)
    chunks = [
        g.chunk(
            {
                "functionCall": {"id": "fc_7k2q", "name": "get_weather", "args": {"city": "Paris"}},
                "thoughtSignature": g.CALL_SIGNATURE,
            },
            g.call("get_weather", {"city": "Rome"}),
            finish="STOP",
            usage=g.usage(60, 10),
        )
    ]
    first = await answer(server, chunks, model)
    assert [b.id for b in first.content if isinstance(b, ToolCall)][0] == "fc_7k2q"
    body = await follow_up(server, GOOGLE, model, first)
    assert [part["functionCall"].get("id") for part in model_turn(body)] == ["fc_7k2q", None]
    (results,) = [
        c["parts"]
        for c in body["contents"]
        if c["role"] == "user" and "functionResponse" in c["parts"][0]
    ]
    assert [part["functionResponse"].get("id") for part in results] == ["fc_7k2q", None]


async def test_a_call_that_never_had_a_signature_gets_the_placeholder_on_gemini_3(server):
    """The same turn recorded from Gemini 2.5 without signatures: Gemini 3 is sent the
    documented placeholder, Gemini 2.5 nothing."""
    unsigned = AssistantMessage(
        api=GOOGLE.api,
        provider="google",
        model=g.MODEL_ID,
        stop_reason="toolUse",
        content=[ToolCall(id="c1", name="get_weather", arguments={"city": "Oslo"})],
    )
    signatures = []
    for model_id in (g.GEMINI_3_ID, g.MODEL_ID):
        parts = model_turn(
            await follow_up(server, GOOGLE, GOOGLE.model(server.url, id=model_id), unsigned)
        )
        signatures.append(parts[0].get("thoughtSignature"))
    assert signatures == ["skip_thought_signature_validator", None]


async def test_gemini_3_search_parts_go_back_whole_and_grounding_does_not(server):
    model = GOOGLE.model(server.url, id=g.GEMINI_3_ID)
    first = await answer(server, g.GOOGLE_SEARCH, model)
    parts = model_turn(await follow_up(server, GOOGLE, model, first))
    # the SDK writes the nested field names in snake_case, which Gemini accepts
    assert parts == [
        {
            "toolCall": {
                "id": "srch_1",
                "tool_type": "GOOGLE_SEARCH_WEB",
                "args": {"queries": ["Oslo weather"]},
            },
            "thoughtSignature": sdk_base64(g.SEARCH_SIGNATURE),
        },
        {
            "toolResponse": {
                "id": "srch_1",
                "tool_type": "GOOGLE_SEARCH_WEB",
                "response": g.SEARCH_RESPONSE_PART["toolResponse"]["response"],
            }
        },
        {"text": "It is 4 C in Oslo."},
    ]


async def test_url_context_metadata_is_not_sent_back(server):
    model = GOOGLE.model(server.url)
    first = await answer(server, g.TOOL_USE_PROMPT, model)
    assert first.content[-1].kind == "url_context_metadata"
    body = await follow_up(server, GOOGLE, model, first)
    assert model_turn(body) == [{"text": "The page says hi."}]
    assert "retrievedUrl" not in json.dumps(body) and "retrieved_url" not in json.dumps(body)


@pytest.mark.parametrize("case", [COMPLETIONS, RESPONSES, ANTHROPIC], ids=lambda case: case.api)
@pytest.mark.parametrize(
    "chunks",
    [g.PARALLEL_FIRST_SIGNED, g.GOOGLE_SEARCH, g.CODE_EXECUTION],
    ids=["calls", "search", "code"],
)
async def test_other_vendors_skip_gemini_signatures_and_parts(server, case, chunks):
    first = await answer(server, chunks, GOOGLE.model(server.url, id=g.GEMINI_3_ID))
    sent = json.dumps(await follow_up(server, case, case.model(server.url), first))
    for signature in (g.CALL_SIGNATURE, g.CODE_SIGNATURE, g.SEARCH_SIGNATURE):
        assert signature not in sent and sdk_base64(signature) not in sent
    for field in ("toolCall", "toolResponse", "executableCode", "groundingMetadata", "srch_1"):
        assert field not in sent
    # the calls themselves still go, in the other vendor's own shape
    assert ("get_weather" in sent) == (chunks is g.PARALLEL_FIRST_SIGNED)


async def test_gemini_sends_no_other_vendor_s_signatures(server):
    """A Responses turn: its message id (``text_signature``, which reads as URL-safe base64)
    and a signature on its call are not Gemini's, so no part carries them."""
    foreign = AssistantMessage(
        api=RESPONSES.api,
        provider="openai",
        model="gpt-5-mini",
        stop_reason="toolUse",
        content=[
            TextContent(text="Checking.", text_signature="msg_abcd"),
            ToolCall(
                id="call_1|fc_1",
                name="get_weather",
                arguments={"city": "Oslo"},
                thought_signature="c2ln",
            ),
        ],
    )
    parts = model_turn(await follow_up(server, GOOGLE, GOOGLE.model(server.url), foreign))
    assert parts == [
        {"text": "Checking."},
        {"functionCall": {"args": {"city": "Oslo"}, "name": "get_weather"}},
    ]


# --------------------------------------------------------------------------- agent loop


async def test_two_turn_gemini_3_tool_session_sends_each_call_its_own_signature(
    server, fresh_registry
):
    fresh_registry.register_api_provider(GOOGLE.api, GOOGLE.provider())
    server.queue(
        ScriptedResponse(chunks=g.AGENT_SIGNED_TOOL_TURN),
        ScriptedResponse(chunks=g.AGENT_SIGNED_TEXT_TURN),
    )
    events, received = await run_echo_session(
        GOOGLE.model(server.url, id=g.GEMINI_3_ID), GOOGLE.key
    )
    assert received == [{"value": "hi"}, {"value": "ho"}]
    assert events[-1].messages[-1].stop_reason == "stop"
    body = server.requests[1].json
    assert model_turn(body) == [
        {
            "functionCall": {"args": {"value": value}, "name": "echo"},
            "thoughtSignature": sdk_base64(signature),
        }
        for value, signature in zip(("hi", "ho"), g.ECHO_SIGNATURES, strict=True)
    ]
    assert "skip_thought_signature_validator" not in json.dumps(body)
    assert body["contents"][-1]["parts"] == [
        {"functionResponse": {"name": "echo", "response": {"output": f"echo:{value}"}}}
        for value in ("hi", "ho")
    ]
