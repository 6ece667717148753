"""The behaviours every vendor provider shares, run once per vendor against a local server
(127.0.0.1, started by the test) that speaks that vendor's real wire format to its real SDK.

A :class:`VendorCase` says how to reach one vendor (its provider, model, key, request path and
auth header) and how its wire frames a text answer, a tool call, thinking, usage, an HTTP
error, a stream cut short, a malformed frame and an in-stream error, with what the vendor must
turn each into. Each test below states one behaviour for all four; what only one vendor's wire
can express stays in that vendor's own test module.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from openprogram.providers.scoped import use_recording
from openprogram.providers.types import (
    Context,
    Model,
    ModelCost,
    ServerToolContent,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    UserMessage,
)
from openprogram.providers.vendors import builtin
from openprogram.providers.vendors.anthropic_messages import AnthropicMessagesProvider
from openprogram.providers.vendors.google_generative_ai import GoogleGenerativeAIProvider
from openprogram.providers.vendors.openai_completions import OpenAICompletionsProvider
from openprogram.providers.vendors.openai_responses import OpenAIResponsesProvider
from tests.event_checks import final_message
from tests.openai_support import (
    TIMESTAMP,
    abort_on_first_delta,
    abort_while_waiting,
    closed_port_url,
    error_response,
    outline,
)
from tests.transcripts import anthropic_streams as anthropic_t
from tests.transcripts import google_streams as google_t
from tests.transcripts import openai_completions_streams as completions_t
from tests.transcripts import openai_responses_streams as responses_t
from tests.transcripts.agent_session import run_echo_session
from tests.transcripts.event_summary import collect, summarize
from tests.vendor_server import ScriptedResponse, VendorServer

HELLO = Context(messages=[UserMessage(content="Say hello", timestamp=1)])


@dataclass(frozen=True)
class Scenario:
    """One answer in the vendor's wire format and what it must become: the event outline
    (error messages apart), and optionally the final content, token counts
    ``(input, output, cache_read, cache_write, total)``, the tool arguments parsed after each
    ``toolcall_delta`` and a vendor-specific check of the final message."""

    chunks: list[bytes]
    rows: list[tuple]
    content: list | None = None
    counts: tuple[int, int, int, int, int] | None = None
    partial_arguments: list[dict] | None = None
    check: Callable[[Any], None] | None = None


@dataclass(frozen=True)
class Failure:
    """A stream that fails part-way: the chunks (cut after ``break_after`` when given), the
    event outline, the content kept, and the error message (``exact``) or its start and
    fragments it must contain."""

    chunks: list[bytes]
    rows: list[tuple]
    content: list
    exact: str | None = None
    starts: str = ""
    contains: tuple[str, ...] = ()
    break_after: int | None = None

    def check_message(self, message: str) -> None:
        if self.exact is not None:
            assert message == self.exact
        assert message.startswith(self.starts), message
        for fragment in self.contains:
            assert fragment in message, message


@dataclass(frozen=True)
class VendorCase:
    """Everything the shared tests need to know about one vendor."""

    api: str
    label: str  # the provider name that starts this vendor's error messages
    key: str
    key_env: str
    make_provider: Callable[..., Any]
    model_fields: dict[str, Any]
    base_path: str  # appended to the server URL to make ``model.base_url``
    remote_base_url: str  # a non-local host: a key is required there
    path: str  # where the stream request goes
    auth: Callable[[str], tuple[str, str]]  # key -> (header, value)
    http_error: Callable[[int, str], ScriptedResponse]
    http_message: Callable[[int, str], str]
    plain: Scenario
    scenarios: dict[str, Scenario]
    hold_after: int  # a chunk position in ``plain`` after its second text delta
    text_before_hold: str
    refused_starts: str
    break_off: Failure
    cut_off: Failure
    malformed: Failure
    stream_error: Failure | None
    replace_hook: Callable[[dict], dict]
    replaced: dict[str, Any]  # what the replaced body sends (top-level keys of the wire body)
    # what on_payload saw, given the wire body (None: the hook sees the SDK's own shape)
    hook_view: Callable[[dict], dict] | None
    agent_turns: tuple[list[bytes], list[bytes]]
    agent_call_id: str
    agent_answer: list
    agent_follow_up: Callable[[dict], Any]  # picks the echoed call and result from request 2
    agent_follow_up_expected: Any

    def model(self, server_url: str, **overrides: Any) -> Model:
        return Model(**{**self.model_fields, "base_url": server_url + self.base_path, **overrides})

    def provider(self, **kwargs: Any) -> Any:
        return self.make_provider(timestamp=TIMESTAMP, **kwargs)

    def options(self, **fields: Any) -> StreamOptions:
        return StreamOptions(api_key=self.key, **fields)


def server_tool(api: str, kind: str, payload: dict, text: str | None) -> ServerToolContent:
    """A server tool block as the provider of ``api`` makes it (the vendor is the model's
    provider: these tests use the vendors' own)."""
    return ServerToolContent(
        vendor=builtin.vendor(api).sdk, api=api, kind=kind, payload=payload, text=text
    )


def block_rows(kind: str, index: int, *deltas: str, end: Any = None) -> list[tuple]:
    """The outline of one content block: start, deltas, and an end showing the joined deltas
    (or ``end``)."""
    return [
        (f"{kind}_start", index),
        *[(f"{kind}_delta", index, d) for d in deltas],
        (f"{kind}_end", index, "".join(deltas) if end is None else end),
    ]


def text_rows(index: int, *deltas: str) -> list[tuple]:
    return block_rows("text", index, *deltas)


def thinking_rows(index: int, *deltas: str) -> list[tuple]:
    return block_rows("thinking", index, *deltas)


def tool_rows(index: int, call: tuple, *deltas: str) -> list[tuple]:
    """``call`` is ``(id, name, arguments)``."""
    return block_rows("toolcall", index, *deltas, end=call)


def answer(*rows: tuple | list, reason: str = "stop") -> list[tuple]:
    flat: list[tuple] = [("start",)]
    for row in rows:
        flat.extend(row if isinstance(row, list) else [row])
    return [*flat, ("done", reason)]


def interrupted(*rows: tuple | list, reason: str = "error") -> list[tuple]:
    return [*answer(*rows)[:-1], ("error", reason)]


def open_text(*deltas: str) -> tuple[list[tuple], list]:
    """The outline and content of a stream that failed inside its first text block."""
    return interrupted(("text_start", 0), *[("text_delta", 0, d) for d in deltas]), [
        TextContent(text="".join(deltas))
    ]


def plain_text(
    chunks: list[bytes], deltas: list[str], counts: tuple, signature: str | None = None
) -> Scenario:
    """A plain text answer in one block."""
    content = [TextContent(text="".join(deltas), text_signature=signature)]
    return Scenario(chunks, answer(text_rows(0, *deltas)), content, counts)


#: The partial arguments of ``{"city":"Paris","unit":"c"}`` streamed in these pieces.
OPENAI_PIECES = ['{"', "city", '":"', "Par", 'is",', '"unit', '":"c"}']
OPENAI_PARTIALS = [
    {},
    {},
    {"city": ""},
    {"city": "Par"},
    {"city": "Paris"},
    {"city": "Paris"},
    {"city": "Paris", "unit": "c"},
]


def openai_one_tool_call(chunks: list[bytes], call_id: str) -> Scenario:
    """``get_weather`` for Paris in Celsius, its arguments streamed in :data:`OPENAI_PIECES`."""
    call = ToolCall(id=call_id, name="get_weather", arguments={"city": "Paris", "unit": "c"})
    return Scenario(
        chunks,
        answer(
            tool_rows(0, (call.id, call.name, call.arguments), *OPENAI_PIECES), reason="toolUse"
        ),
        content=[call],
        counts=(80, 20, 0, 0, 100),
        partial_arguments=OPENAI_PARTIALS,
    )


def openai_several_tool_calls(
    chunks: list[bytes], first: list[tuple], paris: str, rome: str
) -> Scenario:
    """A first block, then the weather in Paris and in Rome, each call's arguments in two pieces."""
    return Scenario(
        chunks,
        answer(
            first,
            tool_rows(1, (paris, "get_weather", {"city": "Paris"}), '{"city": ', '"Paris"}'),
            tool_rows(2, (rome, "get_weather", {"city": "Rome"}), '{"ci', 'ty": "Rome"}'),
            reason="toolUse",
        ),
        counts=(90, 40, 0, 0, 130),
    )


#: What the two vendors reached through the ``openai`` SDK have in common.
OPENAI_SDK: dict[str, Any] = dict(
    label="openai",
    key_env="OPENAI_API_KEY",
    base_path="/v1",
    remote_base_url="http://vendor.invalid/v1",
    auth=lambda key: ("authorization", f"Bearer {key}"),
    http_error=error_response,
    http_message=lambda status, text: f"openai: HTTP {status}: {text}",
    refused_starts="openai: connection failed (",
)


# --------------------------------------------------------------------------- openai-completions

c = completions_t


def _completions_thinking(field_name: str) -> Scenario:
    # the field name is the signature, so the next turn sends the reasoning back in it
    return Scenario(
        c.thinking_then_text(field_name),
        answer(thinking_rows(0, "The user", " greets me."), text_rows(1, "Hi there.")),
        content=[
            ThinkingContent(thinking="The user greets me.", thinking_signature=field_name),
            TextContent(text="Hi there."),
        ],
        counts=(9, 7, 0, 0, 16),
    )


COMPLETIONS = VendorCase(
    **OPENAI_SDK,
    api="openai-completions",
    key="sk-test-completions-0123456789",
    make_provider=OpenAICompletionsProvider,
    model_fields=dict(
        id="gpt-4o-mini",
        api="openai-completions",
        provider="openai",
        input=["text", "image"],
        cost=ModelCost(input=0.15, output=0.6, cache_read=0.075),
    ),
    path="/v1/chat/completions",
    # prompt_tokens 19 include 6 cached ones, which are priced apart
    plain=plain_text(c.PLAIN_TEXT, ["Hello", " world", "!"], (13, 10, 6, 0, 29)),
    scenarios={
        # Interleaved reasoning (as DeepSeek and Kimi stream it between answers) makes several blocks.
        "several_text_blocks": Scenario(
            c.SEVERAL_TEXT_BLOCKS,
            answer(
                text_rows(0, "First part."),
                thinking_rows(1, "Now the second."),
                text_rows(2, "Second", " part."),
            ),
            content=[
                TextContent(text="First part."),
                ThinkingContent(thinking="Now the second.", thinking_signature="reasoning_content"),
                TextContent(text="Second part."),
            ],
            counts=(12, 8, 0, 0, 20),
        ),
        "thinking": _completions_thinking("reasoning_content"),
        "thinking_in_the_reasoning_field": _completions_thinking("reasoning"),
        "one_tool_call": openai_one_tool_call(c.ONE_TOOL_CALL, "call_DdmO9pD3xa9XTPNJ32zg2hcA"),
        "several_tool_calls": openai_several_tool_calls(
            c.SEVERAL_TOOL_CALLS, text_rows(0, "Checking both."), "call_paris", "call_rome"
        ),
        # [DONE] without any finish_reason is a normal end
        "no_finish_reason": Scenario(
            c.NO_FINISH_REASON_TEXT,
            answer(text_rows(0, "Hello", " there")),
            content=[TextContent(text="Hello there")],
            counts=(11, 2, 0, 0, 13),
        ),
        "no_finish_reason_tool_call": Scenario(
            c.NO_FINISH_REASON_TOOL,
            answer(
                tool_rows(0, ("call_nf", "get_weather", {"city": "Oslo"}), '{"city":', '"Oslo"}'),
                reason="toolUse",
            ),
            counts=(40, 9, 0, 0, 49),
        ),
        # reasoning_details wins over the plain field beside it; every item is kept
        "reasoning_details": Scenario(
            c.REASONING_DETAILS,
            answer(thinking_rows(0, "The user", " greets me."), text_rows(1, "Hi there.")),
            content=[
                ThinkingContent(
                    thinking="The user greets me.",
                    thinking_signature="reasoning_details:"
                    + json.dumps(
                        [
                            {
                                "type": "reasoning.text",
                                "text": "The user greets me.",
                                "format": "anthropic-claude-v1",
                                "index": 0,
                                "signature": "sig-0",
                            },
                            {
                                "type": "reasoning.encrypted",
                                "data": c.ENCRYPTED_DETAIL,
                                "format": "anthropic-claude-v1",
                                "index": 1,
                            },
                        ],
                        separators=(",", ":"),
                    ),
                ),
                TextContent(text="Hi there."),
            ],
        ),
        "list_typed_content": Scenario(
            c.MISTRAL_LIST_CONTENT,
            answer(thinking_rows(0, "Two plus", " two."), text_rows(1, "It is 4.")),
            content=[ThinkingContent(thinking="Two plus two."), TextContent(text="It is 4.")],
            counts=(10, 6, 0, 0, 16),
        ),
        "groq_executed_tools": Scenario(
            c.GROQ_EXECUTED_TOOLS,
            answer(text_rows(0, "It is 4 C in Oslo.")),
            content=[
                TextContent(text="It is 4 C in Oslo."),
                server_tool(
                    "openai-completions",
                    "executed_tools",
                    {
                        "index": 0,
                        "type": "search",
                        "arguments": '{"query": "Oslo weather"}',
                        "output": "Title: Oslo forecast\nURL: https://weather.example/oslo\nContent: 4 C, rain",
                    },
                    "Title: Oslo forecast\nURL: https://weather.example/oslo\nContent: 4 C, rain",
                ),
            ],
            counts=(120, 8, 0, 0, 128),
        ),
        "openrouter_annotations": Scenario(
            c.OPENROUTER_ANNOTATIONS,
            answer(text_rows(0, "Rain in Oslo.")),
            content=[
                TextContent(text="Rain in Oslo."),
                server_tool(
                    "openai-completions",
                    "annotations",
                    {
                        "type": "url_citation",
                        "url_citation": {
                            "url": "https://weather.example/oslo",
                            "title": "Oslo forecast",
                            "content": "4 C, rain",
                            "start_index": 0,
                            "end_index": 13,
                        },
                    },
                    "Oslo forecast https://weather.example/oslo",
                ),
            ],
        ),
        # the usage arrives in a chunk of its own after the finish reason, and emits nothing
        "usage_only_final": Scenario(
            c.sse_frames(
                c.ROLE,
                c.chunk('{"content":"ok"}'),
                c.chunk("{}", '"length"'),
                c.usage_chunk(1000, 500, cached=400),
                done=True,
            ),
            answer(text_rows(0, "ok"), reason="length"),
            counts=(600, 500, 400, 0, 1500),
        ),
    },
    hold_after=3,
    text_before_hold="Hello world",
    break_off=Failure(
        c.PLAIN_TEXT,
        *open_text("Hello", " world"),
        starts="openai: connection failed (",
        contains=("Connection error",),
        break_after=3,
    ),
    # neither a finish_reason nor [DONE]: the message says what was missing
    cut_off=Failure(
        c.NO_FINISH_REASON_CUT,
        *open_text("Hel"),
        exact=(
            "openai: OpenAIStreamError: the stream ended without a finish_reason and before "
            "data: [DONE]; the answer is incomplete"
        ),
    ),
    malformed=Failure(
        c.sse_frames(
            c.ROLE,
            c.chunk('{"content":"Hi"}'),
            '{"id":"chatcmpl-B9M","choices":[{"index":0,"delta":{"content":',
            done=True,
        ),
        *open_text("Hi"),
        starts="openai: JSONDecodeError: ",
    ),
    stream_error=Failure(
        c.sse_frames(
            c.ROLE,
            c.chunk('{"content":"Hi"}'),
            '{"error":{"message":"The server is overloaded.","type":"server_error","param":null,"code":null}}',
        ),
        *open_text("Hi"),
        exact="openai: APIError: The server is overloaded.",
    ),
    replace_hook=lambda body: {
        **body,
        "messages": [{"role": "user", "content": "replaced"}],
        "seed": 7,
    },
    replaced={"messages": [{"role": "user", "content": "replaced"}], "seed": 7},
    hook_view=lambda body: body,
    agent_turns=(c.AGENT_TOOL_TURN, c.AGENT_TEXT_TURN),
    agent_call_id="call_echo",
    agent_answer=[TextContent(text="It said hi.")],
    agent_follow_up=lambda body: (
        body["messages"][-2]["tool_calls"][0]["function"],
        body["messages"][-1],
    ),
    agent_follow_up_expected=(
        {"name": "echo", "arguments": '{"value":"hi"}'},
        {"role": "tool", "tool_call_id": "call_echo", "content": "echo:hi"},
    ),
)


# --------------------------------------------------------------------------- openai-responses


def _server_kinds(message: Any, kinds: list[str], texts: list[str | None]) -> None:
    """The content is these server tool kinds (or ``"text"`` blocks) with these readable texts."""
    assert [getattr(b, "kind", b.type) for b in message.content] == kinds
    assert [b.text if isinstance(b, ServerToolContent) else None for b in message.content] == texts


r = responses_t


def _reasoning_item_kept(message: Any) -> None:
    # the reasoning item is kept whole as the signature, to go back on the next turn
    thinking = message.content[0]
    assert isinstance(thinking, ThinkingContent)
    assert json.loads(thinking.thinking_signature) == r.Transcript.reasoning_item(
        "rs_01", r.SUMMARY_PARTS, r.ENCRYPTED
    )


def _responses_stream_error() -> list[bytes]:
    transcript = r.Transcript().message("msg_01", "Hi")
    transcript.events.pop()  # the message never completes
    transcript.add(
        "error",
        code="server_error",
        message="The server had an error while processing your request.",
        param=None,
    )
    return transcript.frames()


RESPONSES = VendorCase(
    **OPENAI_SDK,
    api="openai-responses",
    key="sk-test-responses-0123456789",
    make_provider=OpenAIResponsesProvider,
    model_fields=dict(
        id="gpt-5-mini",
        api="openai-responses",
        provider="openai",
        reasoning=True,
        input=["text", "image"],
        cost=ModelCost(input=0.25, output=2.0, cache_read=0.025),
    ),
    path="/v1/responses",
    # 37 input tokens include 5 cached ones, priced apart
    plain=plain_text(r.PLAIN_TEXT, ["Hi", " there", "!"], (32, 11, 5, 0, 48), signature="msg_01"),
    scenarios={
        "several_text_blocks": Scenario(
            r.SEVERAL_TEXT_BLOCKS,
            answer(text_rows(0, "Looking it up."), text_rows(1, "Found", " it.")),
            content=[
                TextContent(text="Looking it up.", text_signature="msg_01"),
                TextContent(text="Found it.", text_signature="msg_02"),
            ],
            counts=(20, 9, 0, 0, 29),
        ),
        # summary parts are joined by a blank line
        "thinking": Scenario(
            r.THINKING_THEN_TEXT,
            answer(
                thinking_rows(0, "The user ", "says hi.", "\n\n", "Answer ", "briefly."),
                text_rows(1, "Hello!"),
            ),
            counts=(30, 120, 0, 0, 150),
            check=_reasoning_item_kept,
        ),
        "one_tool_call": openai_one_tool_call(r.ONE_TOOL_CALL, "call_weather1|fc_01"),
        "several_tool_calls": openai_several_tool_calls(
            r.SEVERAL_TOOL_CALLS,
            thinking_rows(0, "Two cities."),
            "call_paris|fc_01",
            "call_rome|fc_02",
        ),
        # a built-in tool's item is kept whole; a message's annotations follow its text
        "web_search": Scenario(
            r.WEB_SEARCH,
            answer(text_rows(1, "Rain in Oslo.")),
            content=[
                server_tool(
                    "openai-responses",
                    "web_search_call",
                    r.WEB_SEARCH_ITEM,
                    "Oslo weather",
                ),
                TextContent(text="Rain in Oslo.", text_signature="msg_01"),
                server_tool(
                    "openai-responses",
                    "annotations",
                    {"annotations": [r.URL_CITATION]},
                    "Oslo forecast https://weather.example/oslo",
                ),
            ],
            counts=(300, 20, 0, 0, 320),
        ),
        "code_interpreter_file_search_mcp": Scenario(
            r.OTHER_TOOLS,
            answer(text_rows(3, "Done.")),
            check=lambda message: _server_kinds(
                message,
                ["code_interpreter_call", "file_search_call", "mcp_call", "text"],
                ["print(2 + 2)\n4\n", "deep research", 'roll({"dice":"2d6"})\n7', None],
            ),
        ),
        # max_output_tokens: response.incomplete
        "length": Scenario(
            r.INCOMPLETE,
            answer(text_rows(0, "It was a dark"), reason="length"),
            counts=(10, 4, 0, 0, 14),
        ),
        # parallel calls whose argument deltas interleave
        "parallel_tool_calls": Scenario(
            r.PARALLEL_TOOL_CALLS,
            [
                ("start",),
                ("toolcall_start", 0),
                ("toolcall_start", 1),
                ("toolcall_delta", 0, '{"city": '),
                ("toolcall_delta", 1, '{"city": '),
                ("toolcall_delta", 1, '"Rome"}'),
                ("toolcall_delta", 0, '"Paris"}'),
                ("toolcall_end", 0, ("call_paris|fc_01", "get_weather", {"city": "Paris"})),
                ("toolcall_end", 1, ("call_rome|fc_02", "get_weather", {"city": "Rome"})),
                ("done", "toolUse"),
            ],
            counts=(90, 40, 0, 0, 130),
        ),
    },
    hold_after=6,  # created, in_progress, item added, part added, two deltas
    text_before_hold="Hi there",
    break_off=Failure(
        r.PLAIN_TEXT,
        *open_text("Hi", " there"),
        starts="openai: connection failed (",
        break_after=6,
    ),
    cut_off=Failure(
        r.PLAIN_TEXT[:-1],  # everything but response.completed
        interrupted(text_rows(0, "Hi", " there", "!")),
        [TextContent(text="Hi there!", text_signature="msg_01")],
        starts="openai: ",
        contains=("ended before the response was complete",),
    ),
    malformed=Failure(
        [*r.PLAIN_TEXT[:5], b'event: response.output_text.delta\ndata: {"type":"response.out\n\n'],
        *open_text("Hi"),
        starts="openai: JSONDecodeError: ",
    ),
    stream_error=Failure(
        _responses_stream_error(),
        *open_text("Hi"),
        exact="openai: OpenAIStreamError: The server had an error while processing your request. (code server_error)",
    ),
    replace_hook=lambda body: {
        **body,
        "input": [{"role": "user", "content": "replaced"}],
        "service_tier": "flex",
    },
    replaced={"input": [{"role": "user", "content": "replaced"}], "service_tier": "flex"},
    hook_view=lambda body: body,
    agent_turns=(r.AGENT_TOOL_TURN, r.AGENT_TEXT_TURN),
    agent_call_id="call_echo|fc_01",
    agent_answer=[TextContent(text="It said hi.", text_signature="msg_02")],
    # the reasoning item and the call it led to go back together, then the output
    agent_follow_up=lambda body: body["input"][-3:],
    agent_follow_up_expected=[
        {
            "id": "rs_01",
            "type": "reasoning",
            "encrypted_content": r.ENCRYPTED,
            "summary": [{"type": "summary_text", "text": "Use echo."}],
        },
        {
            "type": "function_call",
            "call_id": "call_echo",
            "name": "echo",
            "arguments": '{"value":"hi"}',
            "id": "fc_01",
        },
        {"type": "function_call_output", "call_id": "call_echo", "output": "echo:hi"},
    ],
)


# --------------------------------------------------------------------------- anthropic-messages

a = anthropic_t

ANTHROPIC_KINDS = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
}
NO_RETRY = {"content-type": "application/json", "x-should-retry": "false"}  # Anthropic's own header

ANTHROPIC = VendorCase(
    api="anthropic-messages",
    label="anthropic",
    key="sk-ant-test-0123456789abcdef",
    key_env="ANTHROPIC_API_KEY",
    make_provider=AnthropicMessagesProvider,
    model_fields=dict(
        id=a.MODEL_ID,
        api="anthropic-messages",
        provider="anthropic",
        reasoning=True,
        input=["text", "image"],
        cost=ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75),
        max_tokens=64000,
    ),
    base_path="",
    remote_base_url="https://api.anthropic.com",
    path="/v1/messages",
    auth=lambda key: ("authorization", f"Bearer {key}"),  # as this SDK version sends it
    http_error=lambda status, text: ScriptedResponse(
        status=status, headers=NO_RETRY, chunks=[a.error_body(ANTHROPIC_KINDS[status], text)]
    ),
    http_message=lambda status, text: (
        f"anthropic: HTTP {status}: {ANTHROPIC_KINDS[status]}: {text}"
    ),
    plain=plain_text(a.PLAIN_TEXT, ["Hello", ", world", "!"], (25, 15, 100, 40, 180)),
    scenarios={
        "several_text_blocks": Scenario(
            a.SEVERAL_TEXT_BLOCKS,
            answer(
                text_rows(0, "First ", "block."), text_rows(1, "Second ", "block."), reason="length"
            ),
            content=[TextContent(text="First block."), TextContent(text="Second block.")],
        ),
        # a signed thinking block, then a redacted one, whose data is its signature
        "thinking": Scenario(
            a.THINKING_THEN_TEXT,
            answer(
                thinking_rows(0, "Let me think", " about 2+2."),
                thinking_rows(1),
                text_rows(2, "It is ", "4."),
            ),
            content=[
                ThinkingContent(thinking="Let me think about 2+2.", thinking_signature=a.SIGNATURE),
                ThinkingContent(thinking="", thinking_signature=a.REDACTED_DATA, redacted=True),
                TextContent(text="It is 4."),
            ],
        ),
        "one_tool_call": Scenario(
            a.ONE_TOOL_CALL,
            answer(
                text_rows(0, "Checking."),
                tool_rows(
                    1,
                    (
                        "toolu_01A",
                        "get_weather",
                        {"location": "San Francisco, CA", "unit": "celsius"},
                    ),
                    '{"loca',
                    'tion": "San',
                    ' Francisco, CA"',
                    ', "unit": "c',
                    'elsius"}',
                ),
                reason="toolUse",
            ),
            content=[
                TextContent(text="Checking."),
                ToolCall(
                    id="toolu_01A",
                    name="get_weather",
                    arguments={"location": "San Francisco, CA", "unit": "celsius"},
                ),
            ],
            counts=(300, 89, 0, 0, 389),
            partial_arguments=[
                {},
                {"location": "San"},
                {"location": "San Francisco, CA"},
                {"location": "San Francisco, CA", "unit": "c"},
                {"location": "San Francisco, CA", "unit": "celsius"},
            ],
        ),
        "several_tool_calls": Scenario(
            a.SEVERAL_TOOL_CALLS,
            answer(
                tool_rows(
                    0, ("toolu_01A", "get_weather", {"city": "Paris"}), '{"city"', ': "Paris"}'
                ),
                tool_rows(
                    1,
                    ("toolu_01B", "get_time", {"tz": "Europe/Paris"}),
                    '{"tz": ',
                    '"Europe/',
                    'Paris"}',
                ),
                reason="toolUse",
            ),
        ),
        # server tool blocks kept whole; the citations of a text block follow it
        "web_search": Scenario(
            a.WEB_SEARCH,
            answer(text_rows(0, "Let me search."), text_rows(3, "It is 4 C and raining.")),
            content=[
                TextContent(text="Let me search."),
                server_tool(
                    "anthropic-messages",
                    "server_tool_use",
                    {
                        "type": "server_tool_use",
                        "id": a.SEARCH_ID,
                        "name": "web_search",
                        "input": {"query": "Oslo weather"},
                    },
                    'web_search({"query":"Oslo weather"})',
                ),
                server_tool(
                    "anthropic-messages",
                    "web_search_tool_result",
                    {
                        "type": "web_search_tool_result",
                        "tool_use_id": a.SEARCH_ID,
                        "content": [a.SEARCH_RESULT],
                    },
                    "Oslo forecast https://weather.example/oslo",
                ),
                TextContent(text="It is 4 C and raining."),
                server_tool(
                    "anthropic-messages",
                    "citations",
                    {"citations": [a.CITATION]},
                    "Oslo forecast https://weather.example/oslo",
                ),
            ],
            counts=(2100, 60, 0, 0, 2160),
        ),
        "code_execution": Scenario(
            a.CODE_EXECUTION,
            answer(text_rows(2, "It prints 4.")),
            check=lambda message: _server_kinds(
                message,
                ["server_tool_use", "code_execution_tool_result", "text"],
                ['code_execution({"code":"print(2 + 2)"})', "4\n", None],
            ),
        ),
        "mcp": Scenario(
            a.MCP,
            answer(text_rows(2, "The server said hi.")),
            check=lambda message: _server_kinds(
                message,
                ["mcp_tool_use", "mcp_tool_result", "text"],
                ['echo({"text":"hi"})', "hi", None],
            ),
        ),
        # pause_turn leaves a marker block (the agent loop continues the turn)
        "pause_turn": Scenario(
            a.PAUSED,
            answer(),
            check=lambda message: _server_kinds(
                message,
                ["server_tool_use", "pause_turn"],
                [
                    'web_search({"query":"Oslo weather"})',
                    "paused by the server; the turn continues",
                ],
            ),
        ),
        # the final message_delta carries the whole usage, cache counts included
        "usage_only_final": Scenario(
            a.USAGE_ONLY_FINAL, answer(text_rows(0, "ok")), counts=(12, 7, 2048, 512, 2579)
        ),
    },
    hold_after=5,  # message_start, block_start, ping, two deltas
    text_before_hold="Hello, world",
    refused_starts="anthropic: connection failed (APIConnectionError)",
    break_off=Failure(
        a.BREAKS_OFF,
        *open_text("Partial "),
        starts="anthropic: ",
        break_after=a.BREAK_AFTER,
    ),
    cut_off=Failure(
        a.PLAIN_TEXT[:-2],  # no message_delta, no message_stop
        interrupted(text_rows(0, "Hello", ", world", "!")),
        [TextContent(text="Hello, world!")],
        starts="anthropic: ",
    ),
    malformed=Failure(
        a.MALFORMED,
        *open_text("Hi"),
        starts="anthropic: JSONDecodeError",
    ),
    stream_error=Failure(
        a.MID_STREAM_ERROR,
        interrupted(text_rows(0, "Hi")),
        [TextContent(text="Hi")],
        exact="anthropic: stream error (overloaded_error): Overloaded",
    ),
    replace_hook=lambda body: {**body, "max_tokens": 77, "metadata": {"user_id": "u-1"}},
    replaced={"max_tokens": 77, "metadata": {"user_id": "u-1"}},
    hook_view=lambda body: {k: v for k, v in body.items() if k != "stream"},  # the SDK adds it
    agent_turns=(a.AGENT_TOOL_TURN, a.AGENT_TEXT_TURN),
    agent_call_id="toolu_echo",
    agent_answer=[TextContent(text="The tool said echo:hi.")],
    agent_follow_up=lambda body: body["messages"][1:3],
    agent_follow_up_expected=[
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_echo", "name": "echo", "input": {"value": "hi"}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_echo",
                    "content": "echo:hi",
                    "is_error": False,
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
    ],
)


# --------------------------------------------------------------------------- google-generative-ai

g = google_t
GOOGLE_CODES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
}


def generated_id(name: str, number: int) -> str:
    """Gemini sends no call ids; the provider makes one from the name, response id and count."""
    return f"{name}_{g.RESPONSE_ID}_{number}"


GOOGLE = VendorCase(
    api="google-generative-ai",
    label="google",
    key="AIzaSy-test-0123456789abcdef",
    key_env="GEMINI_API_KEY",
    # No retries: the SDK's backoff (a second or more, with jitter) has no place in a test.
    make_provider=lambda **kwargs: GoogleGenerativeAIProvider(**{"max_retries": 0, **kwargs}),
    model_fields=dict(
        id=g.MODEL_ID,
        api="google-generative-ai",
        provider="google",
        reasoning=True,
        input=["text", "image"],
        cost=ModelCost(input=0.3, output=2.5, cache_read=0.075),
        max_tokens=65536,
    ),
    base_path="",
    remote_base_url="https://generativelanguage.googleapis.com",
    path=f"/v1/models/{g.MODEL_ID}:streamGenerateContent?alt=sse",
    auth=lambda key: ("x-goog-api-key", key),
    http_error=lambda status, text: ScriptedResponse(
        status=status,
        headers={"content-type": "application/json"},
        chunks=[g.error_body(status, GOOGLE_CODES[status], text)],
    ),
    http_message=lambda status, text: f"google: HTTP {status}: {text}",
    # 120 prompt tokens of which 100 came from the cache
    plain=plain_text(g.PLAIN_TEXT, ["Hello", ", world", "!"], (20, 4, 100, 0, 124)),
    scenarios={
        # a function call separates two text blocks
        "several_text_blocks": Scenario(
            g.SEVERAL_TEXT_BLOCKS,
            answer(
                text_rows(0, "Before ", "the call."),
                tool_rows(1, (generated_id("ping", 1), "ping", {})),
                text_rows(2, "After the call."),
                reason="toolUse",
            ),
        ),
        # thought tokens are output tokens
        "thinking": Scenario(
            g.THINKING_THEN_TEXT,
            answer(thinking_rows(0, "Considering", " the sum."), text_rows(1, "It is ", "4.")),
            content=[
                ThinkingContent(
                    thinking="Considering the sum.", thinking_signature=g.THOUGHT_SIGNATURE
                ),
                TextContent(text="It is 4.", text_signature=g.TEXT_SIGNATURE),
            ],
            counts=(30, 23, 0, 0, 53),
        ),
        # a function call arrives whole: no deltas; its signature is kept on the call
        "one_tool_call": Scenario(
            g.ONE_TOOL_CALL,
            answer(
                tool_rows(
                    0,
                    (
                        generated_id("get_weather", 1),
                        "get_weather",
                        {"location": "San Francisco, CA", "unit": "celsius"},
                    ),
                ),
                reason="toolUse",
            ),
            content=[
                ToolCall(
                    id=generated_id("get_weather", 1),
                    name="get_weather",
                    arguments={"location": "San Francisco, CA", "unit": "celsius"},
                    thought_signature=g.CALL_SIGNATURE,
                )
            ],
            counts=(300, 12, 0, 0, 312),
        ),
        "several_tool_calls": Scenario(
            g.SEVERAL_TOOL_CALLS,
            answer(
                text_rows(0, "Checking both."),
                tool_rows(1, (generated_id("get_weather", 1), "get_weather", {"city": "Paris"})),
                tool_rows(2, (generated_id("get_weather", 2), "get_weather", {"city": "Rome"})),
                tool_rows(3, (generated_id("get_time", 3), "get_time", {"tz": "Europe/Rome"})),
                reason="toolUse",
            ),
            counts=(310, 40, 0, 0, 350),
        ),
        # code execution parts become server tool blocks between the text blocks, each the
        # whole part (its signature in Gemini's own base64 alphabet)
        "code_execution": Scenario(
            g.CODE_EXECUTION,
            answer(text_rows(0, "Let me compute."), text_rows(3, "It is 4.")),
            content=[
                TextContent(text="Let me compute."),
                server_tool(
                    "google-generative-ai",
                    "executable_code",
                    {
                        "executableCode": {"code": "print(2 + 2)\n", "language": "PYTHON"},
                        "thoughtSignature": g.CODE_SIGNATURE,
                    },
                    "print(2 + 2)\n",
                ),
                server_tool(
                    "google-generative-ai",
                    "code_execution_result",
                    {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "4\n"}},
                    "4\n",
                ),
                TextContent(text="It is 4."),
            ],
            counts=(40, 30, 0, 0, 70),
        ),
        # tokens of server-side tools are input, priced as input: 32 + 4610; the URLs fetched
        # follow the answer as a citations block
        "tool_use_prompt_tokens": Scenario(
            g.TOOL_USE_PROMPT,
            answer(text_rows(0, "The page says hi.")),
            content=[
                TextContent(text="The page says hi."),
                server_tool(
                    "google-generative-ai",
                    "url_context_metadata",
                    {"urlContextMetadata": g.URL_CONTEXT_METADATA},
                    "https://example.com/hello URL_RETRIEVAL_STATUS_SUCCESS",
                ),
            ],
            counts=(4642, 62, 0, 0, 4704),
        ),
        # Gemini 3's own Google Search: the signed toolCall part and the toolResponse part
        # kept whole, then the answer and its grounding (the sources it cites)
        "google_search": Scenario(
            g.GOOGLE_SEARCH,
            answer(text_rows(2, "It is 4 C in Oslo.")),
            content=[
                server_tool(
                    "google-generative-ai",
                    "tool_call",
                    g.SEARCH_CALL_PART,
                    'GOOGLE_SEARCH_WEB({"queries":["Oslo weather"]})',
                ),
                server_tool(
                    "google-generative-ai",
                    "tool_response",
                    g.SEARCH_RESPONSE_PART,
                    '{"results":[{"title":"Oslo forecast","url":"https://weather.example/oslo"}]}',
                ),
                TextContent(text="It is 4 C in Oslo."),
                server_tool(
                    "google-generative-ai",
                    "grounding_metadata",
                    {"groundingMetadata": g.GROUNDING_METADATA},
                    "Oslo weather\nOslo forecast https://weather.example/oslo",
                ),
            ],
            counts=(40, 12, 0, 0, 52),
        ),
        "length": Scenario(
            g.MAX_TOKENS,
            answer(text_rows(0, "It was a dark"), reason="length"),
            counts=(8, 4, 0, 0, 12),
        ),
        "usage_only_final": Scenario(
            g.USAGE_ONLY_FINAL,
            answer(text_rows(0, "ok"), reason="length"),
            counts=(30, 1, 20, 0, 51),
        ),
    },
    hold_after=2,
    text_before_hold="Hello, world",
    # google-genai's async client is aiohttp's when aiohttp is installed (litellm brings it), else httpx's
    refused_starts="google: connection failed (",
    break_off=Failure(
        g.BREAKS_OFF,
        *open_text("Partial "),
        starts="google: ",
        break_after=g.BREAK_AFTER,
    ),
    cut_off=Failure(
        g.NO_FINISH_REASON,
        *open_text("Cut"),
        exact="google: connection failed (ConnectionError): the stream ended without a finish reason",
    ),
    malformed=Failure(
        g.MALFORMED,
        *open_text("Hi"),
        starts="google: ",
    ),
    stream_error=None,  # Gemini has no error frame inside a stream; see the SAFETY stop instead
    replace_hook=lambda request: {
        **request,
        "config": {**request["config"], "temperature": 0.25, "stop_sequences": ["END"]},
    },
    replaced={"generationConfig": {"temperature": 0.25, "stopSequences": ["END"]}},
    hook_view=None,  # it sees the SDK's request shape, which the SDK then converts
    agent_turns=(g.AGENT_TOOL_TURN, g.AGENT_TEXT_TURN),
    agent_call_id=generated_id("echo", 1),
    agent_answer=[TextContent(text="The tool said echo:hi.")],
    agent_follow_up=lambda body: body["contents"][1:],
    agent_follow_up_expected=[
        {"role": "model", "parts": [{"functionCall": {"args": {"value": "hi"}, "name": "echo"}}]},
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "echo", "response": {"output": "echo:hi"}}}],
        },
    ],
)

CASES = [COMPLETIONS, RESPONSES, ANTHROPIC, GOOGLE]
every_vendor = pytest.mark.parametrize("case", CASES, ids=lambda case: case.api)


# --------------------------------------------------------------------------- helpers


async def stream(
    case: VendorCase,
    server: VendorServer,
    response: ScriptedResponse,
    model: Model | None = None,
    **options: Any,
) -> list:
    server.queue(response)
    return await collect(
        case.provider().stream(model or case.model(server.url), HELLO, case.options(**options))
    )


def priced(model: Model, counts: tuple[int, int, int, int, int]) -> Usage:
    """The usage a provider must report for these counts, the cost worked out here on its own."""
    prices = model.cost
    tokens = counts[:4]
    parts = [
        n * p / 1e6
        for n, p in zip(
            tokens,
            (prices.input, prices.output, prices.cache_read, prices.cache_write),
            strict=True,
        )
    ]
    cost = {
        "input": parts[0],
        "output": parts[1],
        "cache_read": parts[2],
        "cache_write": parts[3],
        "total": sum(parts),
    }
    return Usage(
        input=counts[0],
        output=counts[1],
        cache_read=counts[2],
        cache_write=counts[3],
        total_tokens=counts[4],
        cost=cost,
    )


def assert_usage(message: Any, model: Model, counts: tuple[int, int, int, int, int]) -> None:
    usage, expected = message.usage, priced(model, counts)
    assert (
        usage.input,
        usage.output,
        usage.cache_read,
        usage.cache_write,
        usage.total_tokens,
    ) == counts
    for part in ("input", "output", "cache_read", "cache_write", "total"):
        assert getattr(usage.cost, part) == pytest.approx(getattr(expected.cost, part)), part


def scenario_params() -> list:
    return [
        pytest.param(case, name, id=f"{case.api}-{name}")
        for case in CASES
        for name in ["plain", *case.scenarios]
    ]


# --------------------------------------------------------------------------- streams


@pytest.mark.parametrize(("case", "name"), scenario_params())
async def test_answer_streams_as_the_full_event_sequence(server, case, name):
    """Text, thinking and tool calls: every event in order, the final message, usage priced
    from the model's prices, and tool arguments parsed as they stream."""
    scenario = case.plain if name == "plain" else case.scenarios[name]
    model = case.model(server.url)
    events = await stream(case, server, ScriptedResponse(chunks=scenario.chunks), model)
    assert outline(events) == scenario.rows
    message = final_message(events)
    assert (message.api, message.provider, message.model, message.timestamp) == (
        case.api,
        model.provider,
        model.id,
        TIMESTAMP,
    )
    assert message.error_message is None
    if scenario.content is not None:
        assert message.content == scenario.content
    if scenario.counts is not None:
        assert_usage(message, model, scenario.counts)
    if scenario.partial_arguments is not None:
        calls = [
            e.partial.content[e.content_index].arguments
            for e in events
            if e.type == "toolcall_delta"
        ]
        assert calls == scenario.partial_arguments
    if scenario.check is not None:
        scenario.check(message)


@every_vendor
async def test_text_partial_grows_with_every_delta(server, case):
    events = await stream(case, server, ScriptedResponse(chunks=case.plain.chunks))
    deltas = [e.delta for e in events if e.type == "text_delta"]
    grown = ["".join(deltas[: n + 1]) for n in range(len(deltas))]
    assert [e.partial.content[0].text for e in events if e.type == "text_delta"] == grown
    assert len(grown) == 3


@every_vendor
async def test_request_goes_to_the_vendor_path_with_key_and_headers(server, case):
    model = case.model(server.url, headers={"x-model-header": "m", "x-shared": "model"})
    seen = []
    options = {"headers": {"x-call-header": "c", "x-shared": "call"}, "on_payload": seen.append}
    events = await stream(
        case, server, ScriptedResponse(chunks=case.plain.chunks), model, **options
    )
    assert events[-1].type == "done"
    request = server.requests[0]
    assert (request.method, request.path) == ("POST", case.path)
    header, value = case.auth(case.key)
    assert request.headers[header] == value
    # headers from the model and from the call both go out; the call's win
    assert (
        request.headers["x-model-header"],
        request.headers["x-call-header"],
        request.headers["x-shared"],
    ) == ("m", "c", "call")
    assert len(seen) == 1
    if case.hook_view is not None:
        assert seen[0] == case.hook_view(request.json)  # on_payload saw the body that was sent
    else:
        assert seen[0]["model"] == model.id
        assert seen[0]["contents"] == [{"role": "user", "parts": [{"text": "Say hello"}]}]


@every_vendor
async def test_on_payload_can_replace_the_body(server, case):
    await stream(
        case, server, ScriptedResponse(chunks=case.plain.chunks), on_payload=case.replace_hook
    )
    sent = server.requests[0].json
    assert {key: sent.get(key) for key in case.replaced} == case.replaced


# --------------------------------------------------------------------------- failures

HTTP_ERRORS = [
    (401, "Invalid authentication credentials."),
    (404, "The model `nope` does not exist or you do not have access to it."),
    (429, "Rate limit reached on tokens per min."),
    (500, "The server had an error while processing your request."),
]


@every_vendor
@pytest.mark.parametrize(
    ("status", "text"), HTTP_ERRORS, ids=[str(status) for status, _ in HTTP_ERRORS]
)
async def test_http_error_before_the_stream_is_one_error_event(server, case, status, text):
    events = await stream(case, server, case.http_error(status, text))
    assert outline(events) == [("error", "error")]
    error = events[0].error
    assert error.error_message == case.http_message(status, text)
    assert error.stop_reason == "error" and error.content == []
    assert len(server.requests) == 1  # the vendor's "do not retry" was obeyed


@every_vendor
async def test_key_echoed_in_an_error_is_removed(server, case):
    events = await stream(case, server, case.http_error(401, f"bad key {case.key}."))
    message = events[0].error.error_message
    assert message == case.http_message(401, "bad key [secret removed].")
    assert case.key[-10:] not in message


@pytest.mark.parametrize(
    ("case", "kind"),
    [
        pytest.param(case, kind, id=f"{case.api}-{kind}")
        for case in CASES
        for kind in ("break_off", "cut_off", "malformed", "stream_error")
        if getattr(case, kind) is not None
    ],
)
async def test_stream_that_fails_part_way_is_an_error_keeping_the_partial(server, case, kind):
    """A connection dropped mid-stream, a stream that ends without its end marker, a frame that
    is not JSON and the vendor's own error frame: each ends in one ``error`` event that keeps
    what had arrived."""
    failure = getattr(case, kind)
    events = await stream(
        case, server, ScriptedResponse(chunks=failure.chunks, break_after=failure.break_after)
    )
    assert outline(events) == failure.rows
    error = final_message(events)
    assert error.content == failure.content and error.stop_reason == "error"
    failure.check_message(error.error_message)


@every_vendor
async def test_connection_refused_is_an_error_event(case):
    model = Model(**{**case.model_fields, "base_url": closed_port_url()})
    events = await collect(case.provider(max_retries=0).stream(model, HELLO, case.options()))
    assert outline(events) == [("error", "error")]
    assert events[0].error.error_message.startswith(case.refused_starts)


@every_vendor
async def test_missing_key_names_the_environment_variable(case):
    # a non-local host, so a key is required; nothing is sent anywhere
    model = Model(**{**case.model_fields, "base_url": case.remote_base_url})
    events = await collect(case.provider().stream(model, HELLO, StreamOptions()))
    assert outline(events) == [("error", "error")]
    message = events[0].error.error_message
    assert message.startswith(f"{case.label}: no API key for provider '{model.provider}'")
    assert case.key_env in message


@every_vendor
async def test_abort_on_first_delta_keeps_partial_text(server, case):
    server.queue(ScriptedResponse(chunks=case.plain.chunks, hold_after=case.hold_after))
    events = await abort_on_first_delta(
        case.provider(), case.model(server.url), HELLO, server, case.key
    )
    first = case.plain.rows[2][2]
    assert summarize(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, first),
        ("error", "aborted", "Request was aborted"),
    ]
    assert events[-1].error.content == [TextContent(text=first)]
    assert not server.hold_timed_out


@every_vendor
async def test_abort_interrupts_a_read_waiting_on_the_network(server, case):
    server.queue(ScriptedResponse(chunks=case.plain.chunks, hold_after=case.hold_after))
    events = await abort_while_waiting(
        case.provider(), case.model(server.url), HELLO, server, case.text_before_hold, case.key
    )
    assert outline(events) == [*case.plain.rows[:4], ("error", "aborted")]
    assert events[-1].error.content == [TextContent(text=case.text_before_hold)]
    assert not server.hold_timed_out


# --------------------------------------------------------------------------- agent loop


@every_vendor
async def test_two_turn_tool_session_through_the_agent_loop(server, case, fresh_registry):
    fresh_registry.register_api_provider(case.api, case.provider())
    server.queue(*(ScriptedResponse(chunks=turn) for turn in case.agent_turns))
    events, received = await run_echo_session(case.model(server.url), case.key)
    assert received == [{"value": "hi"}]
    ends = [e for e in events if e.type == "tool_execution_end"]
    assert [(e.tool_call_id, e.result.content[0].text, e.is_error) for e in ends] == [
        (case.agent_call_id, "echo:hi", False)
    ]
    assert [
        e.type for e in events if e.type in ("turn_start", "tool_execution_end", "turn_end")
    ] == [
        "turn_start",
        "tool_execution_end",
        "turn_end",
        "turn_start",
        "turn_end",
    ]
    end = events[-1]
    assert end.type == "agent_end"
    assert [m.role for m in end.messages] == ["user", "assistant", "toolResult", "assistant"]
    assert end.messages[-1].content == case.agent_answer and end.messages[-1].stop_reason == "stop"
    # the second request carries the call and its result in the vendor's wire format
    assert case.agent_follow_up(server.requests[1].json) == case.agent_follow_up_expected


def test_compatible_servers_claimed_are_covered_by_tests_and_documented():
    """What ``models list`` and docs/vendors.md claim is what these tests serve."""
    from pathlib import Path

    from openprogram.providers.vendors.compatible import COMPATIBLE_SERVERS

    tests = set(COMPLETIONS.scenarios) | {"plain"} | set(globals())
    docs = (Path(__file__).parents[2] / "docs" / "vendors.md").read_text(encoding="utf-8")
    for server in COMPATIBLE_SERVERS:
        assert set(server.covered_by) <= tests, server.name
        assert f"| {server.name} |" in docs, server.name


def test_models_list_names_the_compatible_servers_and_their_quirks(capsys, isolated_home):
    from openprogram.cli.main import main

    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "OpenAI-compatible servers covered by tests (api openai-completions):" in out
    assert "  OpenRouter: no finish_reason from some hosts: [DONE] ends the answer;" in out
    assert "  Mistral: list-typed delta.content" in out


def test_every_vendor_is_covered():
    from openprogram.providers.vendors import (
        anthropic_messages,
        google_generative_ai,
        openai_completions,
        openai_responses,
    )

    modules = [openai_completions, openai_responses, anthropic_messages, google_generative_ai]
    # the shared vocabulary: one body builder and one stream translator per vendor
    assert all(
        callable(m.build_request_body) and isinstance(m.StreamTranslator, type) for m in modules
    )
    assert sorted(case.api for case in CASES) == sorted(
        m.__name__.rpartition(".")[2].replace("_", "-") for m in modules
    )


@pytest.mark.parametrize("case", [COMPLETIONS, RESPONSES], ids=lambda case: case.api)
async def test_openai_sdk_vendors_need_no_key_on_a_local_server(server, case):
    """Ollama, vLLM and the like take any key: without one the SDK gets a placeholder."""
    model = Model(**{**case.model_fields, "provider": "ollama", "base_url": f"{server.url}/v1"})
    server.queue(ScriptedResponse(chunks=case.plain.chunks))
    events = await collect(case.provider().stream(model, HELLO, StreamOptions()))
    assert outline(events)[-1] == ("done", "stop")
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"
    assert server.requests[0].path == case.path


@every_vendor
async def test_session_recorded_against_the_vendor_replays_offline(
    server, case, fresh_registry, tmp_path
):
    """Record the two-turn session through the vendor's wire, then replay it with no server
    traffic and no key: the same assistant turns come back, and the key is not in the file."""
    fresh_registry.register_api_provider(case.api, case.provider())
    server.queue(*(ScriptedResponse(chunks=turn) for turn in case.agent_turns))
    path = tmp_path / "session.jsonl"
    model = case.model(server.url)
    with use_recording(path, "record"):
        recorded, _ = await run_echo_session(model, case.key)
    text = path.read_text(encoding="utf-8")
    assert case.key[-10:] not in text
    with use_recording(path, "replay") as scope:
        replayed, received = await run_echo_session(model, None)
    scope.assert_consumed()
    assert received == [{"value": "hi"}]
    assert len(server.requests) == 2  # both from the recording run
    turns = [
        [m for m in events[-1].messages if m.role == "assistant"] for events in (recorded, replayed)
    ]
    assert len(turns[0]) == 2 and turns[0][-1].content == case.agent_answer
    assert turns[1] == turns[0]


# --------------------------------------------------------------------------- server-side tools


async def test_server_tool_blocks_survive_record_replay_and_show(
    server, fresh_registry, tmp_path, capsys
):
    """An Anthropic web search paused and resumed through the agent loop: recorded through the
    wire, replayed offline into equal messages (server tool blocks through the recording's
    general paths), and printed readably by ``show --conversation``."""
    from openprogram.agent import AgentContext, AgentLoopConfig, agent_loop
    from openprogram.cli.main import main

    case = ANTHROPIC
    fresh_registry.register_api_provider(case.api, case.provider())
    server.queue(ScriptedResponse(chunks=a.PAUSED), ScriptedResponse(chunks=a.WEB_SEARCH))
    model = case.model(server.url)
    path = tmp_path / "search.jsonl"

    async def session(key: str | None) -> list:
        context = AgentContext(system_prompt=None, messages=[], tools=[])
        config = AgentLoopConfig(model=model, api_key=key)
        prompt = [UserMessage(content="Weather in Oslo?", timestamp=1)]
        return [e async for e in agent_loop(prompt, context, config)][-1].messages

    with use_recording(path, "record"):
        recorded = await session(case.key)
    with use_recording(path, "replay") as scope:
        replayed = await session(None)
    scope.assert_consumed()
    assert len(server.requests) == 2
    assert replayed == recorded
    kinds = [b.kind for m in replayed[1:] for b in m.content if isinstance(b, ServerToolContent)]
    assert kinds == [
        "server_tool_use",
        "pause_turn",
        "server_tool_use",
        "web_search_tool_result",
        "citations",
    ]
    assert main(["recordings", "show", str(path), "--conversation"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "  [server tool anthropic web_search_tool_result]" in out
    assert "    Oslo forecast https://weather.example/oslo" in out
    assert '    web_search({"query":"Oslo weather"})' in out


async def test_a_secret_inside_a_server_tool_result_never_reaches_the_recording(
    server, fresh_registry, tmp_path
):
    """A search result quoting a key: the block's payload and readable text are redacted in
    the file like any other content (they do not stream as deltas)."""
    from openprogram.providers.stream import complete

    secret = "sk-ant-api03-" + "Qv7" * 20
    title = a.SEARCH_RESULT["title"].encode()
    chunks = [chunk.replace(title, f"leaked {secret}".encode()) for chunk in a.WEB_SEARCH]
    fresh_registry.register_api_provider(ANTHROPIC.api, ANTHROPIC.provider())
    server.queue(ScriptedResponse(chunks=chunks))
    path = tmp_path / "secret.jsonl"
    with use_recording(path, "record"):
        message = await complete(ANTHROPIC.model(server.url), HELLO, ANTHROPIC.options())
    assert secret in message.content[2].text  # the live message is the vendor's own
    text = path.read_text(encoding="utf-8")
    assert "web_search_tool_result" in text and "Qv7Qv7" not in text
