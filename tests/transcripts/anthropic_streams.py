"""Byte-exact Anthropic Messages SSE transcripts, written from the documented stream format
(https://docs.anthropic.com/en/docs/build-with-claude/streaming): every event is an ``event:``
line naming its type and a ``data:`` line with the JSON, separated by a blank line; ``ping``
events may appear anywhere; usage comes in ``message_start`` and (cumulatively) in
``message_delta``."""

from __future__ import annotations

import json

MODEL_ID = "claude-haiku-4-5"


def frame(payload: dict) -> bytes:
    """One SSE event, as Anthropic writes it."""
    return (
        f"event: {payload['type']}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()
    )


def message_start(
    input_tokens: int = 25, cache_read: int = 0, cache_write: int = 0, model: str = MODEL_ID
) -> bytes:
    return frame(
        {
            "type": "message_start",
            "message": {
                "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": model,
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": input_tokens,
                    "cache_creation_input_tokens": cache_write,
                    "cache_read_input_tokens": cache_read,
                    "output_tokens": 1,
                },
            },
        }
    )


PING = frame({"type": "ping"})


def block_start(index: int, block: dict) -> bytes:
    return frame({"type": "content_block_start", "index": index, "content_block": block})


def delta(index: int, body: dict) -> bytes:
    return frame({"type": "content_block_delta", "index": index, "delta": body})


def text_delta(index: int, text: str) -> bytes:
    return delta(index, {"type": "text_delta", "text": text})


def block_stop(index: int) -> bytes:
    return frame({"type": "content_block_stop", "index": index})


def message_delta(stop_reason: str, output_tokens: int, **usage: int) -> bytes:
    return frame(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens, **usage},
        }
    )


MESSAGE_STOP = frame({"type": "message_stop"})


def text_block(index: int, *pieces: str) -> list[bytes]:
    return [
        block_start(index, {"type": "text", "text": ""}),
        *(text_delta(index, piece) for piece in pieces),
        block_stop(index),
    ]


def tool_block(index: int, call_id: str, name: str, *json_pieces: str) -> list[bytes]:
    return [
        block_start(index, {"type": "tool_use", "id": call_id, "name": name, "input": {}}),
        delta(index, {"type": "input_json_delta", "partial_json": ""}),
        *(
            delta(index, {"type": "input_json_delta", "partial_json": piece})
            for piece in json_pieces
        ),
        block_stop(index),
    ]


PLAIN_TEXT = [
    message_start(input_tokens=25, cache_read=100, cache_write=40),
    block_start(0, {"type": "text", "text": ""}),
    PING,
    text_delta(0, "Hello"),
    text_delta(0, ", world"),
    text_delta(0, "!"),
    block_stop(0),
    message_delta("end_turn", 15),
    MESSAGE_STOP,
]

SEVERAL_TEXT_BLOCKS = [
    message_start(),
    *text_block(0, "First ", "block."),
    *text_block(1, "Second ", "block."),
    message_delta("max_tokens", 9),
    MESSAGE_STOP,
]

SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
REDACTED_DATA = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"

THINKING_THEN_TEXT = [
    message_start(input_tokens=40),
    block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
    delta(0, {"type": "thinking_delta", "thinking": "Let me think"}),
    delta(0, {"type": "thinking_delta", "thinking": " about 2+2."}),
    delta(0, {"type": "signature_delta", "signature": SIGNATURE[:20]}),
    delta(0, {"type": "signature_delta", "signature": SIGNATURE[20:]}),
    block_stop(0),
    block_start(1, {"type": "redacted_thinking", "data": REDACTED_DATA}),
    block_stop(1),
    *text_block(2, "It is ", "4."),
    message_delta("end_turn", 30),
    MESSAGE_STOP,
]

ONE_TOOL_CALL = [
    message_start(input_tokens=300),
    *text_block(0, "Checking."),
    *tool_block(
        1,
        "toolu_01A",
        "get_weather",
        '{"loca',
        'tion": "San',
        ' Francisco, CA"',
        ', "unit": "c',
        'elsius"}',
    ),
    message_delta("tool_use", 89),
    MESSAGE_STOP,
]

SEVERAL_TOOL_CALLS = [
    message_start(input_tokens=310),
    *tool_block(0, "toolu_01A", "get_weather", '{"city"', ': "Paris"}'),
    *tool_block(1, "toolu_01B", "get_time", '{"tz": ', '"Europe/', 'Paris"}'),
    message_delta("tool_use", 60),
    MESSAGE_STOP,
]

# The final message_delta carries the whole usage, cache counts included (newer API versions
# repeat the input counts there); the message_start had only partial numbers.
USAGE_ONLY_FINAL = [
    message_start(input_tokens=0),
    *text_block(0, "ok"),
    message_delta(
        "end_turn",
        7,
        input_tokens=12,
        cache_read_input_tokens=2048,
        cache_creation_input_tokens=512,
    ),
    MESSAGE_STOP,
]

BREAKS_OFF = [
    message_start(),
    block_start(0, {"type": "text", "text": ""}),
    text_delta(0, "Partial "),
    text_delta(0, "answer"),
    text_delta(0, " never finished"),
    block_stop(0),
    message_delta("end_turn", 5),
    MESSAGE_STOP,
]
BREAK_AFTER = 3  # message_start, block_start, first delta

MID_STREAM_ERROR = [
    message_start(),
    *text_block(0, "Hi"),
    b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n',
]

MALFORMED = [
    message_start(),
    block_start(0, {"type": "text", "text": ""}),
    text_delta(0, "Hi"),
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{\n\n',
]


def error_body(kind: str, message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


AGENT_TOOL_TURN = [
    message_start(input_tokens=50),
    *tool_block(0, "toolu_echo", "echo", '{"val', 'ue": "hi"}'),
    message_delta("tool_use", 12),
    MESSAGE_STOP,
]
AGENT_TEXT_TURN = [
    message_start(input_tokens=80),
    *text_block(0, "The tool said ", "echo:hi."),
    message_delta("end_turn", 8),
    MESSAGE_STOP,
]


# --------------------------------------------------------------------------- server tools
# Written from Anthropic's web search, code execution and MCP connector documentation.

SEARCH_ID = "srvtoolu_014hJH82Qum7Td6UV8gDXThB"
SEARCH_RESULT = {
    "type": "web_search_result",
    "title": "Oslo forecast",
    "url": "https://weather.example/oslo",
    "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y2E",
    "page_age": "April 30, 2025",
}
CITATION = {
    "type": "web_search_result_location",
    "cited_text": "4 C and rain",
    "url": "https://weather.example/oslo",
    "title": "Oslo forecast",
    "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm",
}
WEB_SEARCH = [
    message_start(input_tokens=2100),
    *text_block(0, "Let me search."),
    block_start(1, {"type": "server_tool_use", "id": SEARCH_ID, "name": "web_search", "input": {}}),
    delta(1, {"type": "input_json_delta", "partial_json": ""}),
    delta(1, {"type": "input_json_delta", "partial_json": '{"query": "Oslo'}),
    delta(1, {"type": "input_json_delta", "partial_json": ' weather"}'}),
    block_stop(1),
    block_start(
        2, {"type": "web_search_tool_result", "tool_use_id": SEARCH_ID, "content": [SEARCH_RESULT]}
    ),
    block_stop(2),
    block_start(3, {"type": "text", "text": "", "citations": []}),
    delta(3, {"type": "citations_delta", "citation": CITATION}),
    text_delta(3, "It is 4 C and raining."),
    block_stop(3),
    message_delta("end_turn", 60, server_tool_use={"web_search_requests": 1}),
    MESSAGE_STOP,
]

EXEC_ID = "srvtoolu_01Exec"
CODE_EXECUTION = [
    message_start(input_tokens=900),
    block_start(
        0, {"type": "server_tool_use", "id": EXEC_ID, "name": "code_execution", "input": {}}
    ),
    delta(0, {"type": "input_json_delta", "partial_json": '{"code": "print(2 + 2)"}'}),
    block_stop(0),
    block_start(
        1,
        {
            "type": "code_execution_tool_result",
            "tool_use_id": EXEC_ID,
            "content": {
                "type": "code_execution_result",
                "stdout": "4\n",
                "stderr": "",
                "return_code": 0,
            },
        },
    ),
    block_stop(1),
    *text_block(2, "It prints 4."),
    message_delta("end_turn", 20),
    MESSAGE_STOP,
]

MCP_ID = "mcptoolu_01Mcp"
MCP = [
    message_start(input_tokens=500),
    block_start(
        0,
        {
            "type": "mcp_tool_use",
            "id": MCP_ID,
            "name": "echo",
            "server_name": "example",
            "input": {},
        },
    ),
    delta(0, {"type": "input_json_delta", "partial_json": '{"text": "hi"}'}),
    block_stop(0),
    block_start(
        1,
        {
            "type": "mcp_tool_result",
            "tool_use_id": MCP_ID,
            "is_error": False,
            "content": [{"type": "text", "text": "hi"}],
        },
    ),
    block_stop(1),
    *text_block(2, "The server said hi."),
    message_delta("end_turn", 12),
    MESSAGE_STOP,
]

#: A long server tool turn paused by the API: the client sends the message back to continue.
PAUSED = [
    message_start(input_tokens=2100),
    block_start(0, {"type": "server_tool_use", "id": SEARCH_ID, "name": "web_search", "input": {}}),
    delta(0, {"type": "input_json_delta", "partial_json": '{"query": "Oslo weather"}'}),
    block_stop(0),
    message_delta("pause_turn", 30),
    MESSAGE_STOP,
]
RESUMED = [
    message_start(input_tokens=2200),
    block_start(
        0, {"type": "web_search_tool_result", "tool_use_id": SEARCH_ID, "content": [SEARCH_RESULT]}
    ),
    block_stop(0),
    *text_block(1, "It is 4 C."),
    message_delta("end_turn", 10),
    MESSAGE_STOP,
]
