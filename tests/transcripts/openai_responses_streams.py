"""Byte-exact Responses API SSE transcripts, written from the documented semantic event stream:
each frame names its event (``event: response.output_text.delta``) and carries the same ``type``
in its JSON with an increasing ``sequence_number``; output items open with
``response.output_item.added`` and close with ``response.output_item.done`` (the complete item,
reasoning ``encrypted_content`` included); the stream ends with ``response.completed`` /
``response.incomplete`` / ``response.failed`` and has no ``[DONE]`` sentinel."""

from __future__ import annotations

import json
from typing import Any

from tests.vendor_server import sse

RESP_ID = "resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654"
ENCRYPTED = "gAAAAABoISJ1c2VkIHRvIGJlIGVuY3J5cHRlZA=="


def response_body(
    status: str, usage: dict | None = None, error: dict | None = None, output: list | None = None
) -> dict:
    return {
        "id": RESP_ID,
        "object": "response",
        "created_at": 1741290958,
        "status": status,
        "error": error,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": None,
        "max_output_tokens": None,
        "model": "gpt-5-mini-2025-08-07",
        "output": output or [],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }


def usage(input_tokens: int, output_tokens: int, cached: int = 0, reasoning: int = 0) -> dict:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


class Transcript:
    """Builds one stream: each event is serialised once, compactly, with its name and
    sequence number, and the frames are then served byte for byte."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.output_index = -1
        self.add("response.created", response=response_body("in_progress"))
        self.add("response.in_progress", response=response_body("in_progress"))

    def add(self, kind: str, **fields: Any) -> Transcript:
        self.events.append({"type": kind, "sequence_number": len(self.events), **fields})
        return self

    def frames(self) -> list[bytes]:
        payloads = [json.dumps(event, separators=(",", ":")) for event in self.events]
        return sse(*payloads, event_names=[event["type"] for event in self.events])

    # ---------------------------------------------------------------- items

    def message(self, item_id: str, *deltas: str) -> Transcript:
        self.output_index += 1
        at = {"item_id": item_id, "output_index": self.output_index, "content_index": 0}
        text = "".join(deltas)
        self.add(
            "response.output_item.added",
            output_index=self.output_index,
            item={
                "id": item_id,
                "type": "message",
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            },
        )
        self.add(
            "response.content_part.added",
            **at,
            part={"type": "output_text", "text": "", "annotations": []},
        )
        for delta in deltas:
            self.add("response.output_text.delta", **at, delta=delta, logprobs=[])
        self.add("response.output_text.done", **at, text=text, logprobs=[])
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        self.add("response.content_part.done", **at, part=part)
        return self.add(
            "response.output_item.done",
            output_index=self.output_index,
            item={
                "id": item_id,
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [part],
            },
        )

    def reasoning(self, item_id: str, *parts: list[str], encrypted: str = ENCRYPTED) -> Transcript:
        self.output_index += 1
        self.add(
            "response.output_item.added",
            output_index=self.output_index,
            item={"id": item_id, "type": "reasoning", "summary": []},
        )
        for number, deltas in enumerate(parts):
            at = {"item_id": item_id, "output_index": self.output_index, "summary_index": number}
            text = "".join(deltas)
            self.add(
                "response.reasoning_summary_part.added",
                **at,
                part={"type": "summary_text", "text": ""},
            )
            for delta in deltas:
                self.add("response.reasoning_summary_text.delta", **at, delta=delta)
            self.add("response.reasoning_summary_text.done", **at, text=text)
            self.add(
                "response.reasoning_summary_part.done",
                **at,
                part={"type": "summary_text", "text": text},
            )
        return self.add(
            "response.output_item.done",
            output_index=self.output_index,
            item=self.reasoning_item(item_id, parts, encrypted),
        )

    @staticmethod
    def reasoning_item(item_id: str, parts, encrypted: str) -> dict:
        summary = [{"type": "summary_text", "text": "".join(deltas)} for deltas in parts]
        return {
            "id": item_id,
            "type": "reasoning",
            "encrypted_content": encrypted,
            "summary": summary,
        }

    def function_call(self, item_id: str, call_id: str, name: str, *deltas: str) -> Transcript:
        self.output_index += 1
        item = {
            "id": item_id,
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": call_id,
            "name": name,
        }
        self.add("response.output_item.added", output_index=self.output_index, item=item)
        for delta in deltas:
            self.add(
                "response.function_call_arguments.delta",
                item_id=item_id,
                output_index=self.output_index,
                delta=delta,
            )
        arguments = "".join(deltas)
        self.add(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=self.output_index,
            arguments=arguments,
        )
        return self.add(
            "response.output_item.done",
            output_index=self.output_index,
            item={**item, "status": "completed", "arguments": arguments},
        )

    def completed(
        self, status: str = "completed", output: list | None = None, **usage_fields: int
    ) -> list[bytes]:
        """The terminal event; ``output`` is the completed response's list of items."""
        self.add(
            f"response.{status}",
            response=response_body(status, usage(**usage_fields), output=output),
        )
        return self.frames()


PLAIN_TEXT = (
    Transcript()
    .message("msg_01", "Hi", " there", "!")
    .completed(input_tokens=37, output_tokens=11, cached=5)
)

SEVERAL_TEXT_BLOCKS = (
    Transcript()
    .message("msg_01", "Looking it up.")
    .message("msg_02", "Found", " it.")
    .completed(input_tokens=20, output_tokens=9)
)

SUMMARY_PARTS = (["The user ", "says hi."], ["Answer ", "briefly."])
THINKING_THEN_TEXT = (
    Transcript()
    .reasoning("rs_01", *SUMMARY_PARTS)
    .message("msg_02", "Hello!")
    .completed(input_tokens=30, output_tokens=120, reasoning=100)
)

ARGUMENT_PIECES = ['{"', "city", '":"', "Par", 'is",', '"unit', '":"c"}']
ONE_TOOL_CALL = (
    Transcript()
    .function_call("fc_01", "call_weather1", "get_weather", *ARGUMENT_PIECES)
    .completed(input_tokens=80, output_tokens=20)
)

SEVERAL_TOOL_CALLS = (
    Transcript()
    .reasoning("rs_01", ["Two cities."])
    .function_call("fc_01", "call_paris", "get_weather", '{"city": ', '"Paris"}')
    .function_call("fc_02", "call_rome", "get_weather", '{"ci', 'ty": "Rome"}')
    .completed(input_tokens=90, output_tokens=40)
)

AGENT_TOOL_TURN = (
    Transcript()
    .reasoning("rs_01", ["Use echo."])
    .function_call("fc_01", "call_echo", "echo", '{"value":', '"hi"}')
    .completed(input_tokens=30, output_tokens=10)
)
AGENT_TEXT_TURN = (
    Transcript().message("msg_02", "It said hi.").completed(input_tokens=50, output_tokens=5)
)


# --------------------------------------------------------------------------- server tools, length
# Written from the Responses API reference (built-in tools, streaming events).


def server_item(transcript: Transcript, item: dict, progress: tuple[str, ...]) -> Transcript:
    """A built-in tool's output item: added, its progress events, done (the whole item)."""
    transcript.output_index += 1
    at = {"output_index": transcript.output_index, "item_id": item["id"]}
    kind = item["type"]
    transcript.add(
        "response.output_item.added",
        output_index=transcript.output_index,
        item={**item, "status": "in_progress"},
    )
    for step in progress:
        transcript.add(f"response.{kind}.{step}", **at)
    return transcript.add(
        "response.output_item.done", output_index=transcript.output_index, item=item
    )


WEB_SEARCH_ITEM = {
    "id": "ws_01",
    "type": "web_search_call",
    "status": "completed",
    "action": {"type": "search", "query": "Oslo weather"},
}
URL_CITATION = {
    "type": "url_citation",
    "start_index": 0,
    "end_index": 13,
    "url": "https://weather.example/oslo",
    "title": "Oslo forecast",
}


def _cited_message(transcript: Transcript, item_id: str, text: str) -> Transcript:
    transcript.message(item_id, text)
    done = transcript.events[-1]
    done["item"]["content"][0]["annotations"] = [URL_CITATION]
    return transcript


WEB_SEARCH = _cited_message(
    server_item(Transcript(), WEB_SEARCH_ITEM, ("in_progress", "searching", "completed")),
    "msg_01",
    "Rain in Oslo.",
).completed(input_tokens=300, output_tokens=20)

CODE_INTERPRETER_ITEM = {
    "id": "ci_01",
    "type": "code_interpreter_call",
    "status": "completed",
    "code": "print(2 + 2)",
    "container_id": "cntr_01",
    "outputs": [{"type": "logs", "logs": "4\n"}],
}
FILE_SEARCH_ITEM = {
    "id": "fs_01",
    "type": "file_search_call",
    "status": "completed",
    "queries": ["deep research"],
    "results": None,
}
MCP_ITEM = {
    "id": "mcp_01",
    "type": "mcp_call",
    "name": "roll",
    "server_label": "dice",
    "arguments": '{"dice":"2d6"}',
    "output": "7",
    "error": None,
}
OTHER_TOOLS = (
    server_item(
        server_item(
            server_item(
                Transcript(), CODE_INTERPRETER_ITEM, ("in_progress", "interpreting", "completed")
            ),
            FILE_SEARCH_ITEM,
            ("in_progress", "searching", "completed"),
        ),
        MCP_ITEM,
        ("in_progress", "completed"),
    )
    .message("msg_01", "Done.")
    .completed(input_tokens=400, output_tokens=30)
)

#: max_output_tokens reached: the stream ends with response.incomplete.
INCOMPLETE = (
    Transcript()
    .message("msg_01", "It was a dark")
    .completed("incomplete", input_tokens=10, output_tokens=4)
)


def parallel_tool_calls() -> list[bytes]:
    """Two function calls whose argument deltas interleave, as parallel calls may."""
    transcript = Transcript()
    items = {}
    for position, (item_id, call_id) in enumerate(
        (("fc_01", "call_paris"), ("fc_02", "call_rome"))
    ):
        items[item_id] = {
            "id": item_id,
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": call_id,
            "name": "get_weather",
        }
        transcript.add("response.output_item.added", output_index=position, item=items[item_id])
    pieces = [
        ("fc_01", 0, '{"city": '),
        ("fc_02", 1, '{"city": '),
        ("fc_02", 1, '"Rome"}'),
        ("fc_01", 0, '"Paris"}'),
    ]
    for item_id, position, piece in pieces:
        transcript.add(
            "response.function_call_arguments.delta",
            item_id=item_id,
            output_index=position,
            delta=piece,
        )
    for position, (item_id, city) in enumerate((("fc_01", "Paris"), ("fc_02", "Rome"))):
        arguments = f'{{"city": "{city}"}}'
        transcript.add(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=position,
            arguments=arguments,
        )
        transcript.add(
            "response.output_item.done",
            output_index=position,
            item={**items[item_id], "status": "completed", "arguments": arguments},
        )
    return transcript.completed(input_tokens=90, output_tokens=40)


PARALLEL_TOOL_CALLS = parallel_tool_calls()


# --------------------------------------------------------------------------- round two
# Written from the openai SDK's types (openai/types/responses/): McpListTools,
# ResponseToolSearchCall / ResponseToolSearchOutputItem (``execution``), ResponseCompactionItem,
# ResponseCompactionCompactingEvent, and Response.output in response.completed.


def mcp_list(item_id: str, label: str, *tools: str) -> dict:
    schema = {"type": "object", "properties": {}}
    return {
        "id": item_id,
        "type": "mcp_list_tools",
        "server_label": label,
        "tools": [{"name": name, "input_schema": schema} for name in tools],
    }


def added(transcript: Transcript, item: dict) -> Transcript:
    transcript.output_index += 1
    return transcript.add(
        "response.output_item.added", output_index=transcript.output_index, item=item
    )


def listing(transcript: Transcript, item_id: str) -> Transcript:
    """The list-tools progress events of the item most recently added."""
    at = {"output_index": transcript.output_index, "item_id": item_id}
    transcript.add("response.mcp_list_tools.in_progress", **at)
    return transcript.add("response.mcp_list_tools.completed", **at)


DICE_LISTED = mcp_list("mcpl_01", "dice", "roll")
DICE_FINAL = mcp_list("mcpl_01", "dice", "roll", "flip")  # its form changed after output_item.done
CLOCK_FINAL = mcp_list("mcpl_02", "clock", "now")
MAPS_FINAL = mcp_list("mcpl_03", "maps", "route", "geocode")


def mcp_list_tools_completed_late() -> list[bytes]:
    """Three MCP servers listed: only the first item gets output_item.done (and its final
    form differs again in the completed response); the other two complete only there."""
    transcript = Transcript()
    added(transcript, mcp_list("mcpl_01", "dice"))
    listing(transcript, "mcpl_01")
    transcript.add("response.output_item.done", output_index=0, item=DICE_LISTED)
    for item in (CLOCK_FINAL, MAPS_FINAL):
        added(transcript, {**item, "tools": []})
        listing(transcript, item["id"])
    transcript.message("msg_01", "Ready.")
    message = transcript.events[-1]["item"]
    return transcript.completed(
        output=[DICE_FINAL, CLOCK_FINAL, MAPS_FINAL, message], input_tokens=60, output_tokens=5
    )


MCP_LIST_TOOLS_LATE = mcp_list_tools_completed_late()

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
    "strict": True,
}
SEARCH_CALL = {
    "id": "tsc_01",
    "type": "tool_search_call",
    "execution": "server",
    "call_id": None,
    "status": "completed",
    "arguments": {"query": "weather"},
}
SEARCH_OUTPUT = {
    "id": "tso_01",
    "type": "tool_search_output",
    "execution": "server",
    "call_id": None,
    "status": "completed",
    "tools": [WEATHER_TOOL],
}


def tool_search_items(transcript: Transcript, *items: dict) -> Transcript:
    for item in items:
        added(transcript, {**item, "status": "in_progress"})
        transcript.add("response.output_item.done", output_index=transcript.output_index, item=item)
    return transcript


#: The hosted tool search loads a deferred tool, which the model then calls.
TOOL_SEARCH_SERVER = (
    tool_search_items(Transcript(), SEARCH_CALL, SEARCH_OUTPUT)
    .function_call("fc_01", "call_weather", "get_weather", '{"city":"Oslo"}')
    .completed(input_tokens=70, output_tokens=12)
)

#: A tool search the client was meant to run.
CLIENT_SEARCH_CALL = {
    **SEARCH_CALL,
    "id": "tsc_02",
    "execution": "client",
    "call_id": "call_search",
}
TOOL_SEARCH_CLIENT = tool_search_items(Transcript(), CLIENT_SEARCH_CALL).completed(
    input_tokens=40, output_tokens=6
)

COMPACTED = "gAAAAABpCompactedConversation+/=="
COMPACTION_ITEM = {"id": "cmp_01", "type": "compaction", "encrypted_content": COMPACTED}


def compaction() -> list[bytes]:
    transcript = added(Transcript(), {**COMPACTION_ITEM, "encrypted_content": ""})
    transcript.add("response.compaction.compacting", output_index=0, item_id="cmp_01")
    transcript.add("response.output_item.done", output_index=0, item=COMPACTION_ITEM)
    return transcript.message("msg_01", "Go on.").completed(input_tokens=900, output_tokens=4)


COMPACTION = compaction()


def message_and_call_completed_late() -> list[bytes]:
    """A message whose last delta and output_item.done never came, and a function call that
    appears only in the completed response."""
    transcript = Transcript().message("msg_01", "Hi", " there")
    done = transcript.events.pop()  # no output_item.done
    transcript.events[-2:] = []  # nor the text and part done events
    final = {**done["item"], "content": [{**done["item"]["content"][0], "text": "Hi there!"}]}
    call = {
        "id": "fc_01",
        "type": "function_call",
        "status": "completed",
        "arguments": '{"city":"Oslo"}',
        "call_id": "call_late",
        "name": "get_weather",
    }
    return transcript.completed(output=[final, call], input_tokens=20, output_tokens=9)


COMPLETED_LATE = message_and_call_completed_late()
