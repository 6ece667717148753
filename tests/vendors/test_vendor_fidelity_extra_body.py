"""``StreamOptions.extra_body`` (issue #22): wire-body fields with no typed option reach every
vendor's wire body, merged last, so they override what a typed option wrote; objects merge
key by key. Served from 127.0.0.1 to each vendor's real SDK; the option is recorded and
compared on replay like every other option."""

from __future__ import annotations

from typing import Any

import pytest

from openprogram.providers.replay import ReplayMismatch
from openprogram.providers.scoped import use_recording
from openprogram.providers.stream import complete, complete_simple
from openprogram.providers.types import Context, SimpleStreamOptions, StreamOptions, UserMessage
from tests.transcripts.agent_session import run_echo_session
from tests.transcripts.event_summary import collect
from tests.vendor_server import ScriptedResponse
from tests.vendors.test_vendor_contract import ANTHROPIC, COMPLETIONS, GOOGLE, RESPONSES, VendorCase

HELLO = Context(messages=[UserMessage(content="Say hello", timestamp=1)])


#: Per vendor: the typed options, the extra body, and what the wire body must then hold (top
#: level keys). Each overrides a typed field, adds an untyped one, and merges into an object
#: a typed option wrote.
EXTRA_BODIES: list[tuple[VendorCase, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    (
        COMPLETIONS,
        {"temperature": 0.5},
        {"temperature": 0.9, "seed": 7, "stream_options": {"include_obfuscation": False}},
        {
            "temperature": 0.9,
            "seed": 7,
            "stream_options": {"include_usage": True, "include_obfuscation": False},
        },
    ),
    (
        RESPONSES,
        {"max_tokens": 512, "reasoning": "low"},
        {
            "max_output_tokens": 99,
            "parallel_tool_calls": False,
            "reasoning": {"summary": "detailed"},
        },
        {
            "max_output_tokens": 99,
            "parallel_tool_calls": False,
            "reasoning": {"effort": "low", "summary": "detailed"},
        },
    ),
    (
        ANTHROPIC,
        {"max_tokens": 1000, "metadata": {"user_id": "u-1"}},
        {"max_tokens": 77, "top_k": 5, "metadata": {"user_id": "u-9"}},
        {"max_tokens": 77, "top_k": 5, "metadata": {"user_id": "u-9"}},
    ),
    (
        # wire fields in Gemini's own names, merged into what the SDK wrote
        GOOGLE,
        {"temperature": 0.5, "max_tokens": 300},
        {
            "generationConfig": {"temperature": 0.9, "seed": 7},
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        },
        {
            "generationConfig": {"temperature": 0.9, "maxOutputTokens": 300, "seed": 7},
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        },
    ),
]
every_vendor = pytest.mark.parametrize(
    ("case", "typed", "extra", "wire"), EXTRA_BODIES, ids=[row[0].api for row in EXTRA_BODIES]
)


@every_vendor
async def test_extra_body_reaches_the_wire_and_overrides_a_typed_field(
    server, case, typed, extra, wire
):
    server.queue(ScriptedResponse(chunks=case.plain.chunks))
    options = SimpleStreamOptions(api_key=case.key, extra_body=extra, **typed)
    events = await collect(case.provider().stream_simple(case.model(server.url), HELLO, options))
    assert events[-1].type == "done"
    sent = server.requests[0].json
    assert {key: sent.get(key) for key in wire} == wire
    assert options.extra_body == extra  # the merge copied; the caller's dict is untouched


@every_vendor
async def test_without_extra_body_the_typed_fields_stand(server, case, typed, extra, wire):
    server.queue(ScriptedResponse(chunks=case.plain.chunks))
    options = SimpleStreamOptions(api_key=case.key, **typed)
    await collect(case.provider().stream_simple(case.model(server.url), HELLO, options))
    sent = server.requests[0].json
    assert all(sent.get(key) != value for key, value in wire.items())


@pytest.mark.parametrize("case", [COMPLETIONS, RESPONSES, ANTHROPIC], ids=lambda case: case.api)
async def test_on_payload_sees_the_merged_body(server, case):
    seen: list[dict[str, Any]] = []
    server.queue(ScriptedResponse(chunks=case.plain.chunks))
    options = case.options(extra_body={"seed": 11}, on_payload=seen.append)
    await collect(case.provider().stream(case.model(server.url), HELLO, options))
    assert seen[0]["seed"] == 11 and server.requests[0].json["seed"] == 11


async def test_the_agent_loop_passes_extra_body_on_every_turn(server, fresh_registry):
    """``AgentLoopConfig`` is a ``SimpleStreamOptions``: its ``extra_body`` goes with each call."""
    case = COMPLETIONS
    fresh_registry.register_api_provider(case.api, case.provider())
    server.queue(*(ScriptedResponse(chunks=turn) for turn in case.agent_turns))
    events, received = await run_echo_session(
        case.model(server.url), case.key, extra_body={"seed": 3}
    )
    assert received == [{"value": "hi"}] and events[-1].type == "agent_end"
    assert [request.json["seed"] for request in server.requests] == [3, 3]


async def test_extra_body_is_recorded_and_compared_on_replay(server, fresh_registry, tmp_path):
    case = RESPONSES
    fresh_registry.register_api_provider(case.api, case.provider())
    server.queue(ScriptedResponse(chunks=case.plain.chunks))
    model = case.model(server.url)
    path = tmp_path / "extra.jsonl"
    with use_recording(path, "record"):
        recorded = await complete(model, HELLO, case.options(extra_body={"seed": 7}))
    assert '"extra_body":{"seed":7}' in path.read_text(encoding="utf-8").replace(" ", "")
    with use_recording(path, "replay") as scope:
        replayed = await complete_simple(model, HELLO, SimpleStreamOptions(extra_body={"seed": 7}))
    scope.assert_consumed()
    assert replayed.content == recorded.content
    with use_recording(path, "replay"), pytest.raises(ReplayMismatch) as caught:
        await complete(model, HELLO, StreamOptions(extra_body={"seed": 8}))
    assert caught.value.field_path == "options.extra_body.seed"
    assert len(server.requests) == 1
