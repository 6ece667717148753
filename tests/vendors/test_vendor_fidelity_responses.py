"""OpenAI Responses items kept and sent back exactly (issue #22): items whose final form only
``response.completed`` holds, server-executed tool search, the ``compaction`` item, and a
client-executed tool search that openprogram cannot run. Each shape is served byte for byte
from 127.0.0.1 to the real ``openai`` SDK, recorded and replayed, sent back on the next turn to
the same api (asserted on the wire body) and skipped by the other vendors."""

from __future__ import annotations

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
from tests.openai_support import outline
from tests.transcripts import openai_responses_streams as r
from tests.transcripts.event_summary import collect
from tests.vendor_server import ScriptedResponse, VendorServer
from tests.vendors.test_vendor_contract import ANTHROPIC, COMPLETIONS, GOOGLE, RESPONSES, VendorCase

HELLO = Context(messages=[UserMessage(content="Use the tools", timestamp=1)])
THEN = UserMessage(content="Thanks", timestamp=3)


async def events_of(server: VendorServer, chunks: list[bytes], model: Model | None = None) -> list:
    server.queue(ScriptedResponse(chunks=chunks))
    return await collect(
        RESPONSES.provider().stream(
            model or RESPONSES.model(server.url), HELLO, RESPONSES.options()
        )
    )


async def answer(server: VendorServer, chunks: list[bytes]) -> AssistantMessage:
    events = await events_of(server, chunks)
    assert events[-1].type == "done"
    return events[-1].message


async def follow_up(
    server: VendorServer, case: VendorCase, model: Model, first: AssistantMessage
) -> dict[str, Any]:
    """The wire body of the next turn, sent to ``case``'s vendor, after ``first``."""
    messages: list[Any] = [*HELLO.messages, first]
    messages += [
        ToolResultMessage(
            tool_call_id=b.id, tool_name=b.name, content=[TextContent(text="4 C")], timestamp=2
        )
        for b in first.content
        if isinstance(b, ToolCall)
    ]
    server.queue(ScriptedResponse(chunks=case.plain.chunks))
    events = await collect(
        case.provider().stream(model, Context(messages=[*messages, THEN]), case.options())
    )
    assert events[-1].type == "done"
    return server.requests[-1].json


def server_block(kind: str, payload: dict[str, Any], text: str | None) -> ServerToolContent:
    return ServerToolContent(
        vendor="openai", api=RESPONSES.api, kind=kind, payload=payload, text=text
    )


# --------------------------------------------------------------------------- kept

LATE_CONTENT = [
    server_block("mcp_list_tools", r.DICE_FINAL, "dice: roll, flip"),
    server_block("mcp_list_tools", r.CLOCK_FINAL, "clock: now"),
    server_block("mcp_list_tools", r.MAPS_FINAL, "maps: route, geocode"),
    TextContent(text="Ready.", text_signature="msg_01"),
]


async def test_items_completed_only_in_the_completed_response_take_its_final_form(server):
    """Two of three MCP listings never get output_item.done, and the first one's form changes
    after it: each ends as response.completed lists it, in the output's order."""
    events = await events_of(server, r.MCP_LIST_TOOLS_LATE)
    assert outline(events) == [
        ("start",),
        ("text_start", 3),
        ("text_delta", 3, "Ready."),
        ("text_end", 3, "Ready."),
        ("done", "stop"),
    ]
    assert events[-1].message.content == LATE_CONTENT
    # until then the listings were in the content in the form the stream had given them
    assert [b.payload["tools"] for b in events[1].partial.content[:3]] == [
        r.DICE_LISTED["tools"],
        [],
        [],
    ]


async def test_a_message_and_a_call_finished_only_by_the_completed_response(server):
    events = await events_of(server, r.COMPLETED_LATE)
    assert outline(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Hi"),
        ("text_delta", 0, " there"),
        ("text_delta", 0, "!"),  # the text the deltas had not brought
        ("text_end", 0, "Hi there!"),
        ("toolcall_start", 1),
        ("toolcall_delta", 1, '{"city":"Oslo"}'),
        ("toolcall_end", 1, ("call_late|fc_01", "get_weather", {"city": "Oslo"})),
        ("done", "toolUse"),
    ]
    assert events[-1].message.content[0] == TextContent(text="Hi there!", text_signature="msg_01")


async def test_server_executed_tool_search_is_server_activity(server):
    message = await answer(server, r.TOOL_SEARCH_SERVER)
    assert message.content == [
        server_block("tool_search_call", r.SEARCH_CALL, 'tool_search({"query":"weather"})'),
        server_block("tool_search_output", r.SEARCH_OUTPUT, "get_weather"),
        ToolCall(id="call_weather|fc_01", name="get_weather", arguments={"city": "Oslo"}),
    ]
    assert message.stop_reason == "toolUse"


async def test_any_item_marked_execution_server_is_kept(server):
    future = {
        "id": "fx_01",
        "type": "future_tool_call",
        "execution": "server",
        "status": "completed",
    }
    chunks = r.tool_search_items(r.Transcript(), future).completed(input_tokens=5, output_tokens=1)
    message = await answer(server, chunks)
    assert message.content == [server_block("future_tool_call", future, None)]


async def test_compaction_item_is_kept(server):
    message = await answer(server, r.COMPACTION)
    assert message.content[0] == server_block(
        "compaction", r.COMPACTION_ITEM, "the conversation so far, compacted (encrypted)"
    )


async def test_client_executed_tool_search_is_an_error_not_an_empty_stop(server):
    events = await events_of(server, r.TOOL_SEARCH_CLIENT)
    assert outline(events) == [("start",), ("error", "error")]
    error = events[-1].error
    assert error.content == [] and error.stop_reason == "error"
    assert error.error_message == (
        "openai: OpenAIStreamError: the response asks the client to execute a tool_search_call "
        'item (execution "client"), which openprogram does not support; use the tool with '
        '"execution": "server"'
    )


async def test_client_executed_item_known_only_from_the_completed_response_is_an_error(server):
    chunks = (
        r.Transcript()
        .message("msg_01", "Searching.")
        .completed(output=[r.CLIENT_SEARCH_CALL], input_tokens=5, output_tokens=2)
    )
    events = await events_of(server, chunks)
    assert outline(events)[-1] == ("error", "error")
    assert "tool_search_call" in events[-1].error.error_message


#: Items of client-run tools that have no home in openprogram, shaped as the SDK's types.
UNSUPPORTED_CLIENT_ITEMS = [
    {
        "type": "custom_tool_call",
        "id": "ctc_01",
        "call_id": "call_c",
        "name": "sql",
        "input": "SELECT 1",
        "status": "completed",
    },
    {
        "type": "shell_call",
        "id": "sh_01",
        "call_id": "call_s",
        "action": {"commands": ["ls"]},
        "status": "completed",
    },
    {
        "type": "local_shell_call",
        "id": "lsh_01",
        "call_id": "call_l",
        "action": {"type": "exec", "command": ["ls"], "env": {}},
        "status": "completed",
    },
    {
        "type": "apply_patch_call",
        "id": "ap_01",
        "call_id": "call_p",
        "operation": {"type": "create_file", "path": "a.txt", "diff": "+hi"},
        "status": "completed",
    },
    {
        "type": "computer_call",
        "id": "cu_01",
        "call_id": "call_u",
        "action": {"type": "screenshot"},
        "pending_safety_checks": [],
        "status": "completed",
    },
]


@pytest.mark.parametrize("item", UNSUPPORTED_CLIENT_ITEMS, ids=lambda item: item["type"])
async def test_a_client_run_item_openprogram_cannot_run_is_an_error_naming_it(server, item):
    events = await events_of(
        server, r.tool_search_items(r.Transcript(), item).completed(input_tokens=5, output_tokens=1)
    )
    assert outline(events) == [("start",), ("error", "error")]
    assert events[-1].error.error_message == (
        f"openai: OpenAIStreamError: the response asks the client to run a {item['type']} item, which "
        "openprogram does not support (it runs function tools only); offer the model a function tool instead"
    )


async def test_a_shell_call_the_server_runs_is_server_activity(server):
    item = {**UNSUPPORTED_CLIENT_ITEMS[1], "execution": "server"}
    message = await answer(
        server, r.tool_search_items(r.Transcript(), item).completed(input_tokens=5, output_tokens=1)
    )
    assert [block.kind for block in message.content] == ["shell_call"]


# --------------------------------------------------------------------------- recorded


@pytest.mark.parametrize(
    ("chunks", "kinds"),
    [
        (r.MCP_LIST_TOOLS_LATE, ["mcp_list_tools"] * 3 + ["text"]),
        (r.TOOL_SEARCH_SERVER, ["tool_search_call", "tool_search_output", "toolCall"]),
        (r.COMPACTION, ["compaction", "text"]),
        (r.COMPLETED_LATE, ["text", "toolCall"]),
    ],
    ids=["mcp_list_tools_late", "tool_search", "compaction", "completed_late"],
)
async def test_kept_items_survive_record_then_replay(
    server, fresh_registry, tmp_path, chunks, kinds
):
    fresh_registry.register_api_provider(RESPONSES.api, RESPONSES.provider())
    server.queue(ScriptedResponse(chunks=chunks))
    model = RESPONSES.model(server.url)
    path = tmp_path / "responses.jsonl"
    with use_recording(path, "record"):
        recorded = await complete(model, HELLO, RESPONSES.options())
    with use_recording(path, "replay") as scope:
        replayed = await complete(model, HELLO, StreamOptions())
    scope.assert_consumed()
    assert len(server.requests) == 1
    assert [getattr(b, "kind", b.type) for b in recorded.content] == kinds
    assert replayed.content == recorded.content
    if chunks is r.COMPACTION:
        assert r.COMPACTED in path.read_text(encoding="utf-8")  # encrypted content kept as it is


# --------------------------------------------------------------------------- sent back


async def test_final_forms_go_back_in_the_output_order(server):
    model = RESPONSES.model(server.url)
    first = await answer(server, r.MCP_LIST_TOOLS_LATE)
    sent = (await follow_up(server, RESPONSES, model, first))["input"]
    assert sent[1:4] == [r.DICE_FINAL, r.CLOCK_FINAL, r.MAPS_FINAL]
    assert sent[4]["id"] == "msg_01"


async def test_tool_search_items_go_back_before_the_call_they_led_to(server):
    model = RESPONSES.model(server.url)
    first = await answer(server, r.TOOL_SEARCH_SERVER)
    sent = (await follow_up(server, RESPONSES, model, first))["input"]
    assert sent[1:5] == [
        r.SEARCH_CALL,
        r.SEARCH_OUTPUT,
        {
            "type": "function_call",
            "call_id": "call_weather",
            "name": "get_weather",
            "arguments": '{"city":"Oslo"}',
            "id": "fc_01",
        },
        {"type": "function_call_output", "call_id": "call_weather", "output": "4 C"},
    ]


async def test_compaction_goes_back_on_the_next_stateless_turn_to_its_own_model(server):
    first = await answer(server, r.COMPACTION)
    own = (await follow_up(server, RESPONSES, RESPONSES.model(server.url), first))["input"]
    assert own[1] == r.COMPACTION_ITEM
    # another model of the same api cannot read it, and still has the whole conversation
    other = (await follow_up(server, RESPONSES, RESPONSES.model(server.url, id="gpt-5"), first))[
        "input"
    ]
    assert r.COMPACTED not in json.dumps(other)
    assert other[1] == {"role": "assistant", "content": "Go on."}


@pytest.mark.parametrize("case", [COMPLETIONS, ANTHROPIC, GOOGLE], ids=lambda case: case.api)
@pytest.mark.parametrize(
    "chunks",
    [r.MCP_LIST_TOOLS_LATE, r.TOOL_SEARCH_SERVER, r.COMPACTION],
    ids=["mcp", "tool_search", "compaction"],
)
async def test_other_vendors_skip_responses_items(server, case, chunks):
    first = await answer(server, chunks)
    sent = json.dumps(await follow_up(server, case, case.model(server.url), first))
    for marker in (
        "mcpl_0",
        "tsc_01",
        "tso_01",
        "cmp_01",
        r.COMPACTED,
        "mcp_list_tools",
        "tool_search",
    ):
        assert marker not in sent
    # what the other vendor can take still goes: the text, or the call in its own shape
    assert ("get_weather" in sent) == (chunks is r.TOOL_SEARCH_SERVER)
