"""Known secret values leave opaque vendor data too, and a server tool's fetched text is text
(docs/file-format.md, "Redaction").

Opaque data (signatures, encrypted reasoning, image data, ids, the opaque parts of a server
tool's payload) is random bytes: no value shape runs there, so a replay serves it byte for
byte. A known value (a provider key of the environment, the value of a secret-named variable
that reads as a credential, a declared secret) does not occur in random bytes by chance, so
where one stands it was put there, and it goes. Every test records through the real recorder
and scans the written file for every 8-character run of each secret: a check for the whole
secret could not see one written in pieces.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openprogram.providers.assembly import AssistantStreamAssembler
from openprogram.providers.recording import PLACEHOLDER, RecordingProvider
from openprogram.providers.replay import ReplayProvider
from openprogram.providers.types import (
    AssistantMessage,
    Context,
    ServerToolContent,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from openprogram.recordings.redaction import use_declared_secrets
from tests.record_replay.test_recording_support import MODEL, ScriptedProvider, collect, rows_of

ENV_KEY = "oaK7Qm2Zr9Xv4Lp8Wn3Bt6Yc1Hd5Fg0Js2Ty7"  # OPENAI_API_KEY
GITHUB_TOKEN = "ghp_R7t2Kq9Zx4Lm8Vn3Bp6Wc1Hd5Fg0Js2Ty7Ua"  # GITHUB_TOKEN: a secret-named variable
DECLARED = "acme-customer-77f3a9c2"  # use_recording(..., secrets=[...])
SECRETS = {"environment key": ENV_KEY, "ghp_ token": GITHUB_TOKEN, "declared secret": DECLARED}
#: What stands around the secret in an opaque value: vendor bytes that must stay as they are.
BEFORE, AFTER = "EqQBCkgIARABGAIiQ", "Zm9vYmFyYmF6cXV4"


def opaque(secret: str) -> str:
    return BEFORE + secret + AFTER


KEPT = BEFORE + PLACEHOLDER + AFTER


@pytest.fixture
def known(monkeypatch) -> Iterator[None]:
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("GITHUB_TOKEN", GITHUB_TOKEN)
    with use_declared_secrets([DECLARED]):
        yield


def runs_in(secret: str, text: str) -> list[str]:
    """Every 8-character run of ``secret`` found in ``text``."""
    return [secret[i : i + 8] for i in range(len(secret) - 7) if secret[i : i + 8] in text]


def record(
    path: Path,
    events: list[Any],
    context: Context,
    options: StreamOptions | None = None,
    **kwargs: Any,
) -> list[Any]:
    recorder = RecordingProvider(ScriptedProvider(events, **kwargs), path)
    try:
        return asyncio.run(collect(recorder.stream(MODEL, context, options)))
    finally:
        recorder.sink.close()


# ============================================================================ nine opaque places


def server_tools(secret: str) -> list[ServerToolContent]:
    return [
        ServerToolContent(
            vendor="openai", api="openai-responses", kind="compaction",
            payload={"type": "compaction", "id": "cmp_01", "encrypted_content": opaque(secret)},
        ),
        ServerToolContent(
            vendor="anthropic", api="anthropic-messages", kind="mcp_tool_use",
            payload={"type": "mcp_tool_use", "id": "mcptoolu_01", "client_id": opaque(secret), "data": opaque(secret)},
        ),
    ]  # fmt: skip


def answer_with_opaque_values(secret: str) -> list[Any]:
    """An answer whose thinking, text and tool-call signatures and two server tools' opaque
    values (``encrypted_content``, ``client_id``, ``data``) each hold ``secret``."""
    assembler = AssistantStreamAssembler(MODEL, timestamp=5)
    events = [assembler.start()]
    index, event = assembler.begin_thinking()
    events += [event, assembler.append_thinking(index, "Thinking it over. ")]
    assembler.set_thinking_signature(index, opaque(secret))
    events.append(assembler.end_thinking(index))
    index, event = assembler.begin_text()
    events += [event, assembler.append_text(index, "Here it is. ")]
    assembler.set_text_signature(index, opaque(secret))
    events.append(assembler.end_text(index))
    index, event = assembler.begin_tool_call("call_01", "lookup")
    events += [event, assembler.append_tool_arguments(index, '{"q": "weather"}')]
    assembler.set_tool_call_signature(index, opaque(secret))
    events.append(assembler.end_tool_call(index))
    for block in server_tools(secret):
        assembler.add_server_tool(block)
    return events + assembler.finish("toolUse")


def request_with_opaque_values(secret: str) -> tuple[Context, StreamOptions]:
    """A request whose earlier turn holds the same opaque values, whose tool result answers a
    call id holding ``secret``, and whose metadata holds two dicts the caller built that carry
    a content block's ``type``."""
    turn = AssistantMessage(
        content=[
            ThinkingContent(thinking="Earlier thought.", thinking_signature=opaque(secret)),
            TextContent(text="Earlier text.", text_signature=opaque(secret)),
            ToolCall(id="call_00", name="lookup", arguments={"q": "x"}, thought_signature=opaque(secret)),
            *server_tools(secret),
        ],
        api="faux", provider="faux", model="m", stop_reason="toolUse", timestamp=2,
    )  # fmt: skip
    context = Context(
        messages=[
            UserMessage(content="go", timestamp=1),
            turn,
            ToolResultMessage(
                tool_call_id=opaque(secret),
                tool_name="lookup",
                content=[TextContent(text="sunny")],
                timestamp=3,
            ),
        ]
    )
    options = StreamOptions(
        metadata={
            "attachment": {"type": "image", "data": opaque(secret), "mime_type": "image/png"},
            "step": {"type": "toolCall", "id": opaque(secret), "name": "lookup", "arguments": {}},
        }
    )
    return context, options


@pytest.mark.parametrize("name", list(SECRETS))
def test_a_known_value_leaves_every_opaque_place_and_nothing_else_changes(tmp_path, known, name):
    secret = SECRETS[name]
    path = tmp_path / "rec.jsonl"
    context, options = request_with_opaque_values(secret)
    live = record(path, answer_with_opaque_values(secret), context, options)
    text = path.read_text()
    assert runs_in(secret, text) == []
    # The vendor bytes around the secret are stored as they came: 9 places in the request, 6
    # in the final message (and more in the snapshots before it).
    (request,) = [row for row in rows_of(path) if row["type"] == "request"]
    assert str(request).count(KEPT) == 9
    final = rows_of(path)[-2]["event"]["message"]
    assert str(final).count(KEPT) == 6
    # The replay serves the stored values, and the same request (secret and all) matches.
    replayed = asyncio.run(collect(ReplayProvider(path).stream(MODEL, context, options)))
    message = replayed[-1].message
    thinking, answer, call, compaction, mcp = message.content
    assert thinking.thinking_signature == answer.text_signature == call.thought_signature == KEPT
    assert compaction.payload["encrypted_content"] == KEPT
    assert mcp.payload["client_id"] == mcp.payload["data"] == KEPT
    assert mcp.payload["id"] == "mcptoolu_01"
    assert [event.type for event in replayed] == [event.type for event in live]


def test_the_recorder_says_which_opaque_fields_lost_a_known_value(tmp_path, known, caplog):
    path = tmp_path / "rec.jsonl"
    with caplog.at_level(logging.WARNING, logger="openprogram.recordings"):
        record(
            path,
            answer_with_opaque_values(ENV_KEY),
            Context(messages=[UserMessage(content="go", timestamp=1)]),
        )
    (end,) = [row for row in rows_of(path) if row["type"] == "call_end"]
    paths = {item["path"]: item["rules"] for item in end["redactions"]}
    assert paths == {
        "content[0].thinking_signature": ["known-value"],
        "content[1].text_signature": ["known-value"],
        "content[2].thought_signature": ["known-value"],
        "content[3].payload.encrypted_content": ["known-value"],
        "content[4].payload.client_id": ["known-value"],
        "content[4].payload.data": ["known-value"],
    }
    (warning,) = [
        record.getMessage() for record in caplog.records if record.name == "openprogram.recordings"
    ]
    assert "content[0].thinking_signature (rule: known-value)" in warning
    assert runs_in(ENV_KEY, warning) == []


def test_value_shapes_stay_off_opaque_data(tmp_path, known):
    """A shape inside random bytes is chance: an unknown token-shaped run in a signature, at the
    start of an image or an encrypted blob, is stored as it came."""
    shaped = "ghp_" + "Zx4Lm8Vn3Bp6Wc1Hd5Fg0Js2Ty7UaR7t2Kq9"  # not a known value
    assembler = AssistantStreamAssembler(MODEL, timestamp=5)
    events = [assembler.start()]
    index, event = assembler.begin_thinking()
    events += [event, assembler.append_thinking(index, "Hmm. ")]
    assembler.set_thinking_signature(index, shaped)
    events.append(assembler.end_thinking(index))
    assembler.add_server_tool(
        ServerToolContent(
            vendor="openai",
            api="openai-responses",
            kind="reasoning",
            payload={"encrypted_content": shaped},
        )
    )
    events += assembler.finish()
    path = tmp_path / "rec.jsonl"
    record(path, events, Context(messages=[UserMessage(content="go", timestamp=1)]))
    message = ReplayProvider(path)
    replayed = asyncio.run(
        collect(message.stream(MODEL, Context(messages=[UserMessage(content="go", timestamp=1)])))
    )
    thinking, server = replayed[-1].message.content
    assert thinking.thinking_signature == shaped
    assert server.payload["encrypted_content"] == shaped


def test_a_dict_the_caller_built_is_the_caller_s_whatever_type_it_names(tmp_path, known):
    """``options.metadata`` is not content: a dict there that carries ``"type": "image"`` gets
    every rule (value shapes, field names), not the opaque treatment of an image block."""
    shaped = "ghp_" + "Zx4Lm8Vn3Bp6Wc1Hd5Fg0Js2Ty7UaR7t2Kq9"  # not a known value
    options = StreamOptions(
        metadata={
            "attachment": {"type": "image", "data": shaped, "mime_type": "image/png"},
            "step": {"type": "toolCall", "id": shaped, "name": "lookup", "arguments": {}},
        }
    )
    path = tmp_path / "rec.jsonl"
    record(
        path,
        answer_with_opaque_values("nothing-secret"),
        Context(messages=[UserMessage(content="go", timestamp=1)]),
        options,
    )
    assert runs_in(shaped[4:], path.read_text()) == []
    (request,) = [row for row in rows_of(path) if row["type"] == "request"]
    metadata = request["options"]["metadata"]
    assert metadata["attachment"] == {
        "type": "image",
        "data": PLACEHOLDER,
        "mime_type": "image/png",
    }
    assert metadata["step"]["id"] == PLACEHOLDER and metadata["step"]["name"] == "lookup"


# ============================================================================ fetched text


UNKNOWN_TOKEN = "ghp_" + "Wc1Hd5Fg0Js2Ty7UaR7t2Kq9Zx4Lm8Vn3Bp6"  # a value shape, not a known value
UNKNOWN_KEY = "sk-proj-" + "Lp8Wn3Bt6Yc1Hd5Fg0Js2Ty7oaK7Qm2Zr9Xv4"
PROSE = "The rest of the page is ordinary prose about deployment."


def fetched_page() -> str:
    return f"Config dump\nOPENAI_API_KEY={ENV_KEY}\ngithub: {UNKNOWN_TOKEN}\n{PROSE}"


def server_tools_with_fetched_text() -> list[ServerToolContent]:
    """An Anthropic ``web_fetch`` result (the page under ``source.data``), a search result
    whose ``content`` is the page, and a result whose ``data`` says nothing of its kind but is
    plainly text."""
    web_fetch = {
        "type": "web_fetch_tool_result",
        "tool_use_id": "srvtoolu_01A2B3",
        "content": {
            "type": "web_fetch_result",
            "url": "https://docs.example.com/config",
            "content": {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": fetched_page()},
                "title": "Configuration",
            },
            "retrieved_at": "2025-09-01T10:00:00Z",
        },
    }
    search = {
        "type": "web_search_call",
        "id": "ws_01",
        "results": [
            {
                "url": "https://forum.example.com/t/1",
                "content": f"{PROSE} Try {UNKNOWN_KEY} as the key.",
            }
        ],
    }
    unlabelled = {
        "type": "tool_result",
        "tool_use_id": "srvtoolu_02",
        "data": f"{PROSE} {UNKNOWN_TOKEN} {ENV_KEY}",
    }
    return [
        ServerToolContent(
            vendor="anthropic",
            api="anthropic-messages",
            kind="web_fetch_tool_result",
            payload=web_fetch,
        ),
        ServerToolContent(
            vendor="openai", api="openai-responses", kind="web_search_call", payload=search
        ),
        ServerToolContent(
            vendor="anthropic", api="anthropic-messages", kind="tool_result", payload=unlabelled
        ),
    ]


def test_a_fetched_page_holding_the_users_key_leaves_no_piece_of_it(tmp_path, known):
    assembler = AssistantStreamAssembler(MODEL, timestamp=5)
    events = [assembler.start()]
    for block in server_tools_with_fetched_text():
        assembler.add_server_tool(block)
    index, event = assembler.begin_text()
    events += [event, assembler.append_text(index, "I read the page."), assembler.end_text(index)]
    events += assembler.finish()
    # The next turn sends the page back in the request, as an agent does.
    turn = AssistantMessage(
        content=server_tools_with_fetched_text(),
        api="faux",
        provider="faux",
        model="m",
        timestamp=2,
    )
    context = Context(messages=[UserMessage(content="read the config page", timestamp=1), turn])
    path = tmp_path / "rec.jsonl"
    record(path, events, context)
    text = path.read_text()
    assert runs_in(ENV_KEY, text) == []
    assert runs_in(UNKNOWN_TOKEN[4:], text) == []
    assert runs_in(UNKNOWN_KEY[8:], text) == []
    assert (
        text.count(PROSE) >= 6
    )  # three places, in the request and in the answer (and its snapshots)
    (end,) = [row for row in rows_of(path) if row["type"] == "call_end"]
    assert {item["path"] for item in end["redactions"]} == {
        "content[0].payload.content.content.source.data",
        "content[1].payload.results[0].content",
        "content[2].payload.data",
    }
    replayed = asyncio.run(collect(ReplayProvider(path).stream(MODEL, context)))
    page = replayed[-1].message.content[0].payload["content"]["content"]["source"]["data"]
    assert page == f"Config dump\nOPENAI_API_KEY={PLACEHOLDER}\ngithub: {PLACEHOLDER}\n{PROSE}"


def test_encoded_data_in_a_server_tool_stays_opaque(tmp_path, known):
    """Base64 under ``data`` (an image a code-execution tool made, a PDF it fetched) is bytes."""
    shaped = "AKIA" + "Y34FZKBOKMUTVV7A"  # an AWS key id's shape at the start of the data
    payloads = [
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": shaped + "iVBORw0KGgo=",
            },
        },
        {
            "type": "document",
            "source": {
                "type": "base64",
                "media_type": "application/pdf",
                "data": shaped + "JVBERi0xLjQ=",
            },
        },
        {"type": "file", "data": shaped + "UEsDBBQAAAAI"},
    ]
    assembler = AssistantStreamAssembler(MODEL, timestamp=5)
    events = [assembler.start()]
    for payload in payloads:
        assembler.add_server_tool(
            ServerToolContent(
                vendor="anthropic", api="anthropic-messages", kind="x", payload=payload
            )
        )
    events += assembler.finish()
    path = tmp_path / "rec.jsonl"
    context = Context(messages=[UserMessage(content="go", timestamp=1)])
    record(path, events, context)
    replayed = asyncio.run(collect(ReplayProvider(path).stream(MODEL, context)))
    assert [block.payload for block in replayed[-1].message.content] == payloads


# ============================================================================ opaque values that grow


def growing_signature(secret: str, split: int) -> tuple[list[Any], int]:
    """A thinking block whose signature arrives in two pieces (Anthropic's ``signature_delta``)
    with a delta between them, the secret split across the pieces; and the position of the
    event whose snapshot holds the first piece only."""
    assembler = AssistantStreamAssembler(MODEL, timestamp=5)
    events = [assembler.start()]
    index, event = assembler.begin_thinking()
    events += [event, assembler.append_thinking(index, "step one ")]
    assembler.set_thinking_signature(index, BEFORE + secret[:split], append=True)
    events.append(assembler.append_thinking(index, "step two "))
    half = len(events) - 1
    assembler.set_thinking_signature(index, secret[split:] + AFTER, append=True)
    events.append(assembler.end_thinking(index))
    return events + assembler.finish(), half


@pytest.mark.parametrize("name", list(SECRETS))
@pytest.mark.parametrize("split", [8, 13, 19])
def test_a_known_value_split_across_a_growing_signature_leaves_no_piece(
    tmp_path, known, name, split
):
    secret = SECRETS[name]
    events, half = growing_signature(secret, split)
    path = tmp_path / "rec.jsonl"
    record(path, events, Context(messages=[UserMessage(content="go", timestamp=1)]))
    assert runs_in(secret, path.read_text()) == []
    replayed = asyncio.run(
        collect(
            ReplayProvider(path).stream(
                MODEL, Context(messages=[UserMessage(content="go", timestamp=1)])
            )
        )
    )
    assert replayed[-1].message.content[0].thinking_signature == KEPT
    assert replayed[half].partial.content[0].thinking_signature == BEFORE + PLACEHOLDER


@pytest.mark.parametrize("name", list(SECRETS))
def test_a_stream_cut_between_the_pieces_of_a_signature_leaves_no_piece(tmp_path, known, name):
    secret = SECRETS[name]
    events, half = growing_signature(secret, 12)
    path = tmp_path / "rec.jsonl"
    with pytest.raises(RuntimeError, match="provider exploded"):
        record(
            path,
            events,
            Context(messages=[UserMessage(content="go", timestamp=1)]),
            raise_after=half + 1,
        )
    assert runs_in(secret, path.read_text()) == []


def test_a_signature_that_only_shares_a_short_start_with_a_key_is_kept(tmp_path, known):
    """Fewer than 8 characters of a known value's start at the end of a signature are no
    evidence of it: stored as they came."""
    signature = BEFORE + ENV_KEY[:7]
    assembler = AssistantStreamAssembler(MODEL, timestamp=5)
    events = [assembler.start()]
    index, event = assembler.begin_thinking()
    events += [event, assembler.append_thinking(index, "ok ")]
    assembler.set_thinking_signature(index, signature)
    events += [assembler.end_thinking(index), *assembler.finish()]
    path = tmp_path / "rec.jsonl"
    context = Context(messages=[UserMessage(content="go", timestamp=1)])
    record(path, events, context)
    replayed = asyncio.run(collect(ReplayProvider(path).stream(MODEL, context)))
    assert replayed[-1].message.content[0].thinking_signature == signature
