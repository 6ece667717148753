"""The ``openai-responses`` provider against the real ``openai`` SDK and a local server that
replays Responses API SSE transcripts byte for byte.

The transcripts follow the documented semantic event stream: each frame names its event
(``event: response.output_text.delta``) and carries the same ``type`` in its JSON with an
increasing ``sequence_number``; output items open with ``response.output_item.added`` and close
with ``response.output_item.done`` (the complete item, reasoning ``encrypted_content``
included); the stream ends with ``response.completed`` / ``response.incomplete`` /
``response.failed`` and has no ``[DONE]`` sentinel.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from openprogram.providers.api_registry import register_api_provider
from openprogram.providers.types import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    ModelCost,
    SimpleStreamOptions,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from openprogram.providers.vendors.openai_responses import OpenAIResponsesProvider
from tests.openai_support import (
    TIMESTAMP,
    WEATHER_SCHEMA,
    abort_on_first_delta,
    abort_while_waiting,
    closed_port_url,
    collect,
    error_response,
    outline,
    run_agent,
    sse_frames,
)
from tests.vendor_server import ScriptedResponse, VendorServer

API = "openai-responses"
KEY = "sk-test-responses-0123456789"
RESP_ID = "resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654"

# --------------------------------------------------------------------------- transcripts


def _response(status: str, usage: dict | None = None, error: dict | None = None) -> dict:
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
        "output": [],
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
        self.add("response.created", response=_response("in_progress"))
        self.add("response.in_progress", response=_response("in_progress"))

    def add(self, kind: str, **fields: Any) -> Transcript:
        self.events.append({"type": kind, "sequence_number": len(self.events), **fields})
        return self

    def frames(self) -> list[bytes]:
        payloads = [json.dumps(event, separators=(",", ":")) for event in self.events]
        return sse_frames(*payloads, names=[event["type"] for event in self.events])

    # ---------------------------------------------------------------- items

    def message(self, item_id: str, *deltas: str) -> Transcript:
        self.output_index += 1
        at = {"item_id": item_id, "output_index": self.output_index, "content_index": 0}
        text = "".join(deltas)
        self.add("response.output_item.added", output_index=self.output_index,
                 item={"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []})
        self.add("response.content_part.added", **at, part={"type": "output_text", "text": "", "annotations": []})
        for delta in deltas:
            self.add("response.output_text.delta", **at, delta=delta, logprobs=[])
        self.add("response.output_text.done", **at, text=text, logprobs=[])
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        self.add("response.content_part.done", **at, part=part)
        return self.add("response.output_item.done", output_index=self.output_index,
                        item={"id": item_id, "type": "message", "status": "completed", "role": "assistant", "content": [part]})

    def reasoning(self, item_id: str, *parts: list[str], encrypted: str = "gAAAAABoISJ1c2VkIHRvIGJlIGVuY3J5cHRlZA==") -> Transcript:
        self.output_index += 1
        self.add("response.output_item.added", output_index=self.output_index,
                 item={"id": item_id, "type": "reasoning", "summary": []})
        for number, deltas in enumerate(parts):
            at = {"item_id": item_id, "output_index": self.output_index, "summary_index": number}
            text = "".join(deltas)
            self.add("response.reasoning_summary_part.added", **at, part={"type": "summary_text", "text": ""})
            for delta in deltas:
                self.add("response.reasoning_summary_text.delta", **at, delta=delta)
            self.add("response.reasoning_summary_text.done", **at, text=text)
            self.add("response.reasoning_summary_part.done", **at, part={"type": "summary_text", "text": text})
        return self.add("response.output_item.done", output_index=self.output_index, item=self.reasoning_item(item_id, parts, encrypted))

    @staticmethod
    def reasoning_item(item_id: str, parts, encrypted: str) -> dict:
        summary = [{"type": "summary_text", "text": "".join(deltas)} for deltas in parts]
        return {"id": item_id, "type": "reasoning", "encrypted_content": encrypted, "summary": summary}

    def function_call(self, item_id: str, call_id: str, name: str, *deltas: str) -> Transcript:
        self.output_index += 1
        item = {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": call_id, "name": name}
        self.add("response.output_item.added", output_index=self.output_index, item=item)
        for delta in deltas:
            self.add("response.function_call_arguments.delta", item_id=item_id, output_index=self.output_index, delta=delta)
        arguments = "".join(deltas)
        self.add("response.function_call_arguments.done", item_id=item_id, output_index=self.output_index, arguments=arguments)
        return self.add("response.output_item.done", output_index=self.output_index,
                        item={**item, "status": "completed", "arguments": arguments})

    def completed(self, status: str = "completed", **usage_fields: int) -> list[bytes]:
        self.add(f"response.{status}", response=_response(status, usage(**usage_fields)))
        return self.frames()


PLAIN_TEXT = Transcript().message("msg_01", "Hi", " there", "!").completed(input_tokens=37, output_tokens=11, cached=5)

SEVERAL_TEXT_BLOCKS = (
    Transcript().message("msg_01", "Looking it up.").message("msg_02", "Found", " it.").completed(input_tokens=20, output_tokens=9)
)

SUMMARY_PARTS = (["The user ", "says hi."], ["Answer ", "briefly."])
THINKING_THEN_TEXT = (
    Transcript().reasoning("rs_01", *SUMMARY_PARTS).message("msg_02", "Hello!")
    .completed(input_tokens=30, output_tokens=120, reasoning=100)
)

ARGUMENT_PIECES = ['{"', "city", '":"', "Par", 'is",', '"unit', '":"c"}']
ONE_TOOL_CALL = (
    Transcript().function_call("fc_01", "call_weather1", "get_weather", *ARGUMENT_PIECES)
    .completed(input_tokens=80, output_tokens=20)
)

SEVERAL_TOOL_CALLS = (
    Transcript()
    .reasoning("rs_01", ["Two cities."])
    .function_call("fc_01", "call_paris", "get_weather", '{"city": ', '"Paris"}')
    .function_call("fc_02", "call_rome", "get_weather", '{"ci', 'ty": "Rome"}')
    .completed(input_tokens=90, output_tokens=40)
)

# ---------------------------------------------------------------------------- fixtures


@pytest.fixture
def server():
    with VendorServer() as running:
        yield running


def gpt5(server: VendorServer, **overrides) -> Model:
    fields = dict(
        id="gpt-5-mini",
        api=API,
        provider="openai",
        base_url=f"{server.url}/v1",
        reasoning=True,
        input=["text", "image"],
        cost=ModelCost(input=0.25, output=2.0, cache_read=0.025),
    )
    fields.update(overrides)
    return Model(**fields)


def provider(**kwargs) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(timestamp=TIMESTAMP, **kwargs)


HELLO = Context(messages=[UserMessage(content="Say hello", timestamp=1)])


async def stream(server: VendorServer, transcript: list[bytes], model: Model, context: Context = HELLO, options=None):
    server.queue(ScriptedResponse(chunks=transcript))
    return await collect(provider().stream(model, context, options or StreamOptions(api_key=KEY)))


def counts(message: AssistantMessage) -> tuple[int, int, int, int, int]:
    u = message.usage
    return u.input, u.output, u.cache_read, u.cache_write, u.total_tokens


# ------------------------------------------------------------------------------- streams


async def test_plain_text(server):
    model = gpt5(server)
    events = await stream(server, PLAIN_TEXT, model)
    assert outline(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Hi"),
        ("text_delta", 0, " there"),
        ("text_delta", 0, "!"),
        ("text_end", 0, "Hi there!"),
        ("done", "stop"),
    ]
    message = events[-1].message
    assert message.content == [TextContent(text="Hi there!", text_signature="msg_01")]
    assert (message.api, message.provider, message.model, message.timestamp) == (API, "openai", "gpt-5-mini", TIMESTAMP)
    # 37 input tokens include 5 cached ones, priced apart
    assert counts(message) == (32, 11, 5, 0, 48)
    assert message.usage.cost.total == pytest.approx((32 * 0.25 + 11 * 2.0 + 5 * 0.025) / 1e6)
    assert message.stop_reason == "stop" and message.error_message is None


async def test_several_text_blocks(server):
    events = await stream(server, SEVERAL_TEXT_BLOCKS, gpt5(server))
    assert outline(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Looking it up."),
        ("text_end", 0, "Looking it up."),
        ("text_start", 1),
        ("text_delta", 1, "Found"),
        ("text_delta", 1, " it."),
        ("text_end", 1, "Found it."),
        ("done", "stop"),
    ]
    assert events[-1].message.content == [
        TextContent(text="Looking it up.", text_signature="msg_01"),
        TextContent(text="Found it.", text_signature="msg_02"),
    ]


async def test_thinking_then_text_keeps_the_reasoning_item_as_signature(server):
    events = await stream(server, THINKING_THEN_TEXT, gpt5(server))
    assert outline(events) == [
        ("start",),
        ("thinking_start", 0),
        ("thinking_delta", 0, "The user "),
        ("thinking_delta", 0, "says hi."),
        ("thinking_delta", 0, "\n\n"),
        ("thinking_delta", 0, "Answer "),
        ("thinking_delta", 0, "briefly."),
        ("thinking_end", 0, "The user says hi.\n\nAnswer briefly."),
        ("text_start", 1),
        ("text_delta", 1, "Hello!"),
        ("text_end", 1, "Hello!"),
        ("done", "stop"),
    ]
    thinking = events[-1].message.content[0]
    assert isinstance(thinking, ThinkingContent)
    expected_item = Transcript.reasoning_item("rs_01", SUMMARY_PARTS, "gAAAAABoISJ1c2VkIHRvIGJlIGVuY3J5cHRlZA==")
    assert json.loads(thinking.thinking_signature) == expected_item
    assert counts(events[-1].message) == (30, 120, 0, 0, 150)


async def test_reasoning_item_is_sent_back_on_the_next_turn(server):
    model = gpt5(server)
    first = await stream(server, THINKING_THEN_TEXT, model)
    follow_up = Context(messages=[*HELLO.messages, first[-1].message, UserMessage(content="Again", timestamp=3)])
    await stream(server, PLAIN_TEXT, model, follow_up)
    sent = server.requests[1].json["input"]
    assert sent[1:] == [
        Transcript.reasoning_item("rs_01", SUMMARY_PARTS, "gAAAAABoISJ1c2VkIHRvIGJlIGVuY3J5cHRlZA=="),
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_02",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hello!", "annotations": []}],
        },
        {"role": "user", "content": [{"type": "input_text", "text": "Again"}]},
    ]


async def test_one_tool_call_with_arguments_split_across_deltas(server):
    model = gpt5(server)
    events = await stream(server, ONE_TOOL_CALL, model)
    call = ToolCall(id="call_weather1|fc_01", name="get_weather", arguments={"city": "Paris", "unit": "c"})
    assert outline(events) == [
        ("start",),
        ("toolcall_start", 0),
        *[("toolcall_delta", 0, piece) for piece in ARGUMENT_PIECES],
        ("toolcall_end", 0, (call.id, call.name, call.arguments)),
        ("done", "toolUse"),
    ]
    assert [e.partial.content[0].arguments for e in events if e.type == "toolcall_delta"] == [
        {},
        {},
        {"city": ""},
        {"city": "Par"},
        {"city": "Paris"},
        {"city": "Paris"},
        {"city": "Paris", "unit": "c"},
    ]
    assert events[-1].message.content == [call]
    assert events[-1].message.stop_reason == "toolUse"


async def test_several_tool_calls_after_reasoning(server):
    events = await stream(server, SEVERAL_TOOL_CALLS, gpt5(server))
    assert outline(events) == [
        ("start",),
        ("thinking_start", 0),
        ("thinking_delta", 0, "Two cities."),
        ("thinking_end", 0, "Two cities."),
        ("toolcall_start", 1),
        ("toolcall_delta", 1, '{"city": '),
        ("toolcall_delta", 1, '"Paris"}'),
        ("toolcall_end", 1, ("call_paris|fc_01", "get_weather", {"city": "Paris"})),
        ("toolcall_start", 2),
        ("toolcall_delta", 2, '{"ci'),
        ("toolcall_delta", 2, 'ty": "Rome"}'),
        ("toolcall_end", 2, ("call_rome|fc_02", "get_weather", {"city": "Rome"})),
        ("done", "toolUse"),
    ]
    assert counts(events[-1].message) == (90, 40, 0, 0, 130)


async def test_incomplete_response_stops_for_length(server):
    transcript = Transcript().message("msg_01", "Once upon").completed("incomplete", input_tokens=10, output_tokens=16)
    events = await stream(server, transcript, gpt5(server))
    assert outline(events)[-1] == ("done", "length")
    assert events[-1].message.content == [TextContent(text="Once upon", text_signature="msg_01")]
    assert counts(events[-1].message) == (10, 16, 0, 0, 26)


# -------------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (401, "Incorrect API key provided: sk-test-***6789."),
        (404, "The model `gpt-nope` does not exist or you do not have access to it."),
        (429, "Rate limit reached for gpt-5-mini in organization org-x on tokens per min."),
        (500, "The server had an error while processing your request."),
    ],
)
async def test_http_error_before_the_stream(server, status, message):
    server.queue(error_response(status, message))
    events = await collect(provider().stream(gpt5(server), HELLO, StreamOptions(api_key=KEY)))
    assert outline(events) == [("error", "error")]
    assert events[0].error.error_message == f"openai: HTTP {status}: {message}"
    assert len(server.requests) == 1


async def test_key_echoed_in_an_error_is_scrubbed(server):
    server.queue(error_response(401, f"Incorrect API key provided: {KEY}."))
    events = await collect(provider().stream(gpt5(server), HELLO, StreamOptions(api_key=KEY)))
    assert events[0].error.error_message == "openai: HTTP 401: Incorrect API key provided: [secret removed]."


async def test_stream_that_breaks_off_keeps_the_partial_text(server):
    # created, in_progress, item added, part added, two deltas, then the connection drops
    server.queue(ScriptedResponse(chunks=PLAIN_TEXT, break_after=6))
    events = await collect(provider().stream(gpt5(server), HELLO, StreamOptions(api_key=KEY)))
    assert outline(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Hi"),
        ("text_delta", 0, " there"),
        ("error", "error"),
    ]
    assert events[-1].error.content == [TextContent(text="Hi there")]
    assert events[-1].error.error_message.startswith("openai: connection failed (")


async def test_stream_that_ends_before_completion_is_an_error(server):
    server.queue(ScriptedResponse(chunks=PLAIN_TEXT[:-1]))  # everything but response.completed
    events = await collect(provider().stream(gpt5(server), HELLO, StreamOptions(api_key=KEY)))
    assert outline(events)[-1] == ("error", "error")
    assert events[-1].error.content == [TextContent(text="Hi there!", text_signature="msg_01")]
    assert "ended before the response was complete" in events[-1].error.error_message


async def test_malformed_event_is_an_error_event(server):
    server.queue(ScriptedResponse(chunks=[*PLAIN_TEXT[:5], b'event: response.output_text.delta\ndata: {"type":"response.out\n\n']))
    events = await collect(provider().stream(gpt5(server), HELLO, StreamOptions(api_key=KEY)))
    assert outline(events) == [("start",), ("text_start", 0), ("text_delta", 0, "Hi"), ("error", "error")]
    assert events[-1].error.error_message.startswith("openai: JSONDecodeError: ")


async def test_error_event_in_the_stream(server):
    transcript = Transcript().message("msg_01", "Hi")
    transcript.events.pop()  # the message never completes
    transcript.add("error", code="server_error", message="The server had an error while processing your request.", param=None)
    server.queue(ScriptedResponse(chunks=transcript.frames()))
    events = await collect(provider().stream(gpt5(server), HELLO, StreamOptions(api_key=KEY)))
    assert outline(events)[-1] == ("error", "error")
    assert events[-1].error.content == [TextContent(text="Hi")]
    assert events[-1].error.error_message == (
        "openai: OpenAIStreamError: The server had an error while processing your request. (code server_error)"
    )


async def test_failed_response_is_an_error_with_the_vendor_message(server):
    transcript = Transcript()
    transcript.add("response.failed", response=_response("failed", usage(5, 0), {"code": "rate_limit_exceeded", "message": "Slow down."}))
    server.queue(ScriptedResponse(chunks=transcript.frames()))
    events = await collect(provider().stream(gpt5(server), HELLO, StreamOptions(api_key=KEY)))
    assert outline(events) == [("start",), ("error", "error")]
    assert events[-1].error.error_message == "openai: OpenAIStreamError: Slow down. (code rate_limit_exceeded)"


async def test_connection_refused_is_an_error_event():
    model = Model(id="gpt-oss", api=API, provider="vllm", base_url=closed_port_url())
    events = await collect(provider(max_retries=0).stream(model, HELLO))
    assert outline(events) == [("error", "error")]
    assert events[0].error.error_message.startswith("vllm: connection failed (")


async def test_abort_on_first_delta_keeps_partial_text(server):
    server.queue(ScriptedResponse(chunks=PLAIN_TEXT, hold_after=6))
    events = await abort_on_first_delta(provider(), gpt5(server, provider="local"), HELLO, server)
    assert outline(events) == [("start",), ("text_start", 0), ("text_delta", 0, "Hi"), ("error", "aborted")]
    assert events[-1].error.content == [TextContent(text="Hi")]
    assert events[-1].error.stop_reason == "aborted"
    assert not server.hold_timed_out


async def test_abort_interrupts_a_read_waiting_on_the_network(server):
    server.queue(ScriptedResponse(chunks=PLAIN_TEXT, hold_after=6))
    events = await abort_while_waiting(provider(), gpt5(server, provider="local"), HELLO, server, "Hi there")
    assert outline(events)[-1] == ("error", "aborted")
    assert events[-1].error.content == [TextContent(text="Hi there")]
    assert not server.hold_timed_out


# ----------------------------------------------------------------------------- credentials


async def test_keyless_local_server(server):
    model = Model(id="gpt-oss:20b", api=API, provider="ollama", base_url=f"{server.url}/v1")
    events = await stream(server, PLAIN_TEXT, model, options=StreamOptions())
    assert outline(events)[-1] == ("done", "stop")
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"
    assert server.requests[0].path == "/v1/responses"


async def test_missing_key_names_the_environment_variable():
    model = Model(id="gpt-5-mini", api=API, provider="openai", base_url="http://vendor.invalid/v1")
    events = await collect(provider().stream(model, HELLO))
    assert outline(events) == [("error", "error")]
    assert "OPENAI_API_KEY" in events[0].error.error_message
    assert events[0].error.error_message.startswith("openai: no API key for provider 'openai'")


# -------------------------------------------------------------------------------- request

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg=="
REASONING_ITEM = {"id": "rs_01", "type": "reasoning", "encrypted_content": "gAAAAB", "summary": [{"type": "summary_text", "text": "Paris?"}]}


def rich_context(model: Model) -> Context:
    """System prompt, an image, our own reasoning, text and tool calls, tool results (one with
    an image), and a turn from another vendor whose private parts must not be sent."""
    return Context(
        system_prompt="You are terse.",
        messages=[
            UserMessage(
                content=[TextContent(text="Weather where this photo was taken?"), ImageContent(data=PNG, mime_type="image/png")],
                timestamp=1,
            ),
            AssistantMessage(
                api=API,
                provider=model.provider,
                model=model.id,
                content=[
                    ThinkingContent(thinking="Paris?", thinking_signature=json.dumps(REASONING_ITEM)),
                    TextContent(text="Checking.", text_signature="msg_01"),
                    ToolCall(id="call_paris|fc_01", name="get_weather", arguments={"city": "Paris"}),
                    ToolCall(id="call_cam|fc_02", name="camera", arguments={}),
                ],
                stop_reason="toolUse",
                timestamp=2,
            ),
            ToolResultMessage(tool_call_id="call_paris|fc_01", tool_name="get_weather", content=[TextContent(text="18C, sunny")], timestamp=3),
            ToolResultMessage(
                tool_call_id="call_cam|fc_02",
                tool_name="camera",
                content=[TextContent(text="photo"), ImageContent(data=PNG, mime_type="image/png")],
                timestamp=4,
            ),
            AssistantMessage(
                api="anthropic-messages",
                provider="anthropic",
                model="claude-sonnet-4-5",
                content=[
                    ThinkingContent(thinking="Check Rome too.", thinking_signature="EqQBCkgIAhAB"),
                    TextContent(text="And Rome:"),
                    ToolCall(id="toolu_01A09q90qw90lq917835lq9", name="get_weather", arguments={"city": "Rome"}),
                ],
                stop_reason="toolUse",
                timestamp=5,
            ),
            ToolResultMessage(tool_call_id="toolu_01A09q90qw90lq917835lq9", tool_name="get_weather", content=[TextContent(text="21C")], timestamp=6),
            UserMessage(content="Thanks", timestamp=7),
        ],
        tools=[
            Tool(name="get_weather", description="Current weather for a city", parameters=WEATHER_SCHEMA),
            Tool(name="camera", description="Take a photo", parameters={"type": "object", "properties": {}}),
        ],
    )


async def test_request_body_and_headers(server):
    model = gpt5(server, headers={"X-Model-Header": "m"})
    seen = []
    options = SimpleStreamOptions(
        api_key=KEY,
        max_tokens=512,
        temperature=0.5,
        headers={"X-Call-Header": "c"},
        session_id="session-42",
        reasoning="xhigh",
        on_payload=seen.append,
    )
    server.queue(ScriptedResponse(chunks=PLAIN_TEXT))
    events = await collect(provider().stream_simple(model, rich_context(model), options))
    assert outline(events)[-1] == ("done", "stop")
    request = server.requests[0]
    assert request.method == "POST" and request.path == "/v1/responses"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["x-model-header"] == "m" and request.headers["x-call-header"] == "c"
    image = {"type": "input_image", "detail": "auto", "image_url": f"data:image/png;base64,{PNG}"}
    expected = {
        "model": "gpt-5-mini",
        "stream": True,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "reasoning": {"effort": "high", "summary": "auto"},  # xhigh is not supported here
        "max_output_tokens": 512,
        "temperature": 0.5,
        "prompt_cache_key": "session-42",
        "input": [
            {"role": "developer", "content": "You are terse."},
            {"role": "user", "content": [{"type": "input_text", "text": "Weather where this photo was taken?"}, image]},
            REASONING_ITEM,
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_01",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
            },
            {"type": "function_call", "call_id": "call_paris", "name": "get_weather", "arguments": '{"city":"Paris"}', "id": "fc_01"},
            {"type": "function_call", "call_id": "call_cam", "name": "camera", "arguments": "{}", "id": "fc_02"},
            {"type": "function_call_output", "call_id": "call_paris", "output": "18C, sunny"},
            {"type": "function_call_output", "call_id": "call_cam", "output": [{"type": "input_text", "text": "photo"}, image]},
            # another vendor's turn: thinking as plain text, no item ids, no signatures
            {"role": "assistant", "content": "Check Rome too."},
            {"role": "assistant", "content": "And Rome:"},
            {"type": "function_call", "call_id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "arguments": '{"city":"Rome"}'},
            {"type": "function_call_output", "call_id": "toolu_01A09q90qw90lq917835lq9", "output": "21C"},
            {"role": "user", "content": [{"type": "input_text", "text": "Thanks"}]},
        ],
        "tools": [
            {"type": "function", "name": "get_weather", "description": "Current weather for a city", "parameters": WEATHER_SCHEMA, "strict": False},
            {"type": "function", "name": "camera", "description": "Take a photo", "parameters": {"type": "object", "properties": {}}, "strict": False},
        ],
    }
    assert request.json == expected
    assert seen == [expected]


async def test_on_payload_can_replace_the_body(server):
    def replace(body):
        return {**body, "input": [{"role": "user", "content": "replaced"}], "service_tier": "flex"}

    await stream(server, PLAIN_TEXT, gpt5(server), options=StreamOptions(api_key=KEY, on_payload=replace))
    sent = server.requests[0].json
    assert sent["input"] == [{"role": "user", "content": "replaced"}] and sent["service_tier"] == "flex"


async def test_non_reasoning_model_gets_no_reasoning_fields(server):
    model = gpt5(server, id="gpt-4.1-mini", reasoning=False)
    server.queue(ScriptedResponse(chunks=PLAIN_TEXT))
    context = Context(system_prompt="Be brief.", messages=HELLO.messages)
    await collect(provider().stream_simple(model, context, SimpleStreamOptions(api_key=KEY, reasoning="high")))
    body = server.requests[0].json
    assert "reasoning" not in body and "include" not in body
    assert body["input"][0] == {"role": "system", "content": "Be brief."}


# ------------------------------------------------------------------------------ agent loop


async def test_two_turn_tool_session_through_the_agent_loop(server, fresh_registry):
    register_api_provider(API, provider())
    model = gpt5(server, provider="local")
    server.queue(
        ScriptedResponse(
            chunks=Transcript()
            .reasoning("rs_01", ["Use echo."])
            .function_call("fc_01", "call_echo", "echo", '{"value":', '"hi"}')
            .completed(input_tokens=30, output_tokens=10)
        ),
        ScriptedResponse(chunks=Transcript().message("msg_02", "It said hi.").completed(input_tokens=50, output_tokens=5)),
    )
    events = await run_agent(model)
    ends = [e for e in events if e.type == "tool_execution_end"]
    assert [(e.tool_call_id, e.result.content[0].text, e.is_error) for e in ends] == [("call_echo|fc_01", "echo:hi", False)]
    added = events[-1].messages
    assert [m.role for m in added] == ["user", "assistant", "toolResult", "assistant"]
    assert added[-1].content == [TextContent(text="It said hi.", text_signature="msg_02")]
    second = server.requests[1].json["input"]
    # the reasoning item and the call it led to go back together, then the output
    assert [item.get("type") for item in second[-3:]] == ["reasoning", "function_call", "function_call_output"]
    assert second[-2] == {"type": "function_call", "call_id": "call_echo", "name": "echo", "arguments": '{"value":"hi"}', "id": "fc_01"}
    assert second[-1] == {"type": "function_call_output", "call_id": "call_echo", "output": "echo:hi"}
