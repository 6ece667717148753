"""The typed vocabulary every provider, the agent loop and record/replay share.

Everything here is a pydantic v2 model so that a request or an event can be dumped to JSON
(``model_dump(mode="json")``) and validated back into an equal object: that round trip is what
recording and replay stand on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


def now_ms() -> int:
    """Wall-clock Unix time in milliseconds, the unit of every ``timestamp`` field."""
    return int(time.time() * 1000)


class _Model(BaseModel):
    # Unknown keys are ignored so that a recording written by a newer version still loads.
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class _Value(_Model):
    """An immutable value: content blocks and usage. Snapshots of a streaming message share
    the blocks that did not change instead of copying them (a change replaces the block), so
    a snapshot costs one new message and no block is ever a shared *mutable* object."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


# --------------------------------------------------------------------------- models


class ModelCost(_Model):
    """Prices in dollars per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


InputKind: TypeAlias = Literal["text", "image"]


def _text_input() -> list[InputKind]:
    return ["text"]


class Model(_Model):
    """A model as the providers see it: which API speaks to it, where, and what it costs."""

    id: str
    name: str = ""
    api: str
    provider: str
    base_url: str = ""
    reasoning: bool = False
    input: list[InputKind] = Field(default_factory=_text_input)
    cost: ModelCost = Field(default_factory=ModelCost)
    context_window: int = 128000
    max_tokens: int = 8192
    headers: dict[str, str] | None = None
    compat: dict[str, Any] | None = None

    def model_post_init(self, __context: Any) -> None:
        if not self.name:
            self.name = self.id


# --------------------------------------------------------------------------- content


class TextContent(_Value):
    type: Literal["text"] = "text"
    text: str
    text_signature: str | None = None


class ThinkingContent(_Value):
    type: Literal["thinking"] = "thinking"
    thinking: str
    thinking_signature: str | None = None
    redacted: bool = False


class ImageContent(_Value):
    type: Literal["image"] = "image"
    data: str  # base64
    mime_type: str


class ToolCall(_Value):
    """A call of one of the caller's tools. ``thought_signature`` is the vendor's opaque
    signature of the call (Gemini's ``thoughtSignature`` on a ``functionCall`` part), kept as
    the vendor sent it and sent back only to a model of the same ``api``: Gemini 3 rejects a
    function call sent back without its signature. Other vendors ignore it."""

    type: Literal["toolCall"] = "toolCall"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    thought_signature: str | None = None


class ServerToolContent(_Value):
    """Activity of a tool the vendor ran itself (web search, code execution, MCP calls, their
    results and citations), kept opaque: ``payload`` is the vendor's own block or item, so the
    provider of the same ``api`` can send it back on the next turn as the vendor requires;
    other vendors skip it. ``text`` is a readable rendering where the vendor gives one.
    ``kind`` is the vendor's type name (``web_search_tool_result``, ``web_search_call``,
    ``executable_code`` ...). See docs/vendors.md."""

    type: Literal["serverTool"] = "serverTool"
    vendor: str
    api: str
    kind: str
    payload: dict[str, Any] = Field(default_factory=dict)
    text: str | None = None


class RawContent(_Value):
    """A part of a request that openprogram's types cannot hold, kept as the JSON the client
    sent it in (``payload``, in the wire of ``api``): an image by URL or file id, a document,
    audio or a file part; with ``message``, a whole message or input item instead (a system
    message in the middle of a conversation, a Responses ``item_reference``), standing alone in
    a user message. ``openprogram proxy`` reads a client's request this way rather than refuse
    it: a replay compares the JSON as it is, and a provider of the same ``api`` sends it back as
    it is (any other leaves it out, as it does another vendor's server tool blocks)."""

    type: Literal["raw"] = "raw"
    api: str
    payload: dict[str, Any] = Field(default_factory=dict)
    message: bool = False


AssistantContent: TypeAlias = Annotated[
    TextContent | ThinkingContent | ToolCall | ServerToolContent, Field(discriminator="type")
]
UserContent: TypeAlias = Annotated[
    TextContent | ImageContent | RawContent, Field(discriminator="type")
]

StopReason: TypeAlias = Literal["stop", "length", "toolUse", "error", "aborted"]


# --------------------------------------------------------------------------- usage


class UsageCost(_Value):
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0


class Usage(_Value):
    """Token counts of one call; ``input`` excludes cached tokens, which are counted apart.
    ``reasoning`` is the part of ``output`` the vendor reports as reasoning or thinking: it is
    inside ``output``, never added to it again, so ``total_tokens`` and the cost stay what they
    were (docs/vendors.md, "Usage that adds up")."""

    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: UsageCost = Field(default_factory=UsageCost)


# --------------------------------------------------------------------------- messages


class UserMessage(_Model):
    role: Literal["user"] = "user"
    content: str | list[UserContent]
    timestamp: int = Field(default_factory=now_ms)


class AssistantMessage(_Model):
    """One answer. ``model`` is the model that was asked; ``response_model`` the version that
    answered, as the vendor names it (``gpt-4o-mini-2024-07-18``), and ``response_id`` the
    vendor's id of the answer (``chatcmpl-...``, ``resp_...``, ``msg_...``), None where the
    vendor gave none. Both are recorded and never compared on replay: they are answers, not
    part of any request (docs/file-format.md, "What a replay compares")."""

    role: Literal["assistant"] = "assistant"
    content: list[AssistantContent] = Field(default_factory=list)
    api: str
    provider: str
    model: str
    usage: Usage = Field(default_factory=Usage)
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    response_id: str | None = None
    response_model: str | None = None
    timestamp: int = Field(default_factory=now_ms)


#: What an assistant message says about the answer rather than to the next model: the vendor's
#: id of it, the model version that answered and the reasoning count. A message sent back in a
#: later request carries them, but no vendor is sent them, so a request as recorded and compared
#: leaves them out (the ``exclude`` of ``model_dump``; docs/file-format.md, "What a replay
#: compares").
ANSWER_ONLY_FIELDS: dict[str, Any] = {
    "response_id": True,
    "response_model": True,
    "usage": {"reasoning": True},
}


class ToolResultMessage(_Model):
    role: Literal["toolResult"] = "toolResult"
    tool_call_id: str
    tool_name: str
    content: list[UserContent] = Field(default_factory=list)
    details: Any = None
    is_error: bool = False
    timestamp: int = Field(default_factory=now_ms)


Message: TypeAlias = Annotated[
    UserMessage | AssistantMessage | ToolResultMessage, Field(discriminator="role")
]


class Tool(_Model):
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class Context(_Model):
    system_prompt: str | None = None
    messages: list[Message] = Field(default_factory=list)
    tools: list[Tool] | None = None


# --------------------------------------------------------------------------- options

CacheRetention: TypeAlias = Literal["none", "short", "long"]
ReasoningLevel: TypeAlias = Literal["minimal", "low", "medium", "high", "xhigh"]
PayloadHook: TypeAlias = Callable[[Any], Any]


class StreamOptions(_Model):
    """Per-call options. ``signal`` and ``on_payload`` exist only at run time: they are
    excluded from dumps, so they are never recorded and never compared on replay.

    ``extra_body`` holds wire-body fields that have no typed option (``seed``, ``logprobs``,
    ``response_format``, vendor-specific knobs). Every vendor provider merges them into its
    request body last, so they also override what the typed options wrote; unlike the two
    runtime hooks they are recorded and compared. See docs/vendors.md for the merge rule."""

    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True)

    temperature: float | None = None
    max_tokens: int | None = None
    api_key: str | None = None
    headers: dict[str, str] | None = None
    session_id: str | None = None
    metadata: dict[str, Any] | None = None
    cache_retention: CacheRetention = "short"
    max_retry_delay_ms: int = 60000
    tool_choice: str | dict[str, Any] | None = None
    extra_body: dict[str, Any] | None = None
    signal: asyncio.Event | None = Field(default=None, exclude=True)
    on_payload: PayloadHook | None = Field(default=None, exclude=True)


class SimpleStreamOptions(StreamOptions):
    reasoning: ReasoningLevel | None = None
    thinking_budgets: dict[str, int] | None = None


# --------------------------------------------------------------------------- events


class EventStart(_Model):
    type: Literal["start"] = "start"
    partial: AssistantMessage


class EventTextStart(_Model):
    type: Literal["text_start"] = "text_start"
    content_index: int
    partial: AssistantMessage


class EventTextDelta(_Model):
    type: Literal["text_delta"] = "text_delta"
    content_index: int
    delta: str
    partial: AssistantMessage


class EventTextEnd(_Model):
    type: Literal["text_end"] = "text_end"
    content_index: int
    content: str
    partial: AssistantMessage


class EventThinkingStart(_Model):
    type: Literal["thinking_start"] = "thinking_start"
    content_index: int
    partial: AssistantMessage


class EventThinkingDelta(_Model):
    type: Literal["thinking_delta"] = "thinking_delta"
    content_index: int
    delta: str
    partial: AssistantMessage


class EventThinkingEnd(_Model):
    type: Literal["thinking_end"] = "thinking_end"
    content_index: int
    content: str
    partial: AssistantMessage


class EventToolCallStart(_Model):
    type: Literal["toolcall_start"] = "toolcall_start"
    content_index: int
    partial: AssistantMessage


class EventToolCallDelta(_Model):
    type: Literal["toolcall_delta"] = "toolcall_delta"
    content_index: int
    delta: str
    partial: AssistantMessage


class EventToolCallEnd(_Model):
    type: Literal["toolcall_end"] = "toolcall_end"
    content_index: int
    tool_call: ToolCall
    partial: AssistantMessage


class EventDone(_Model):
    type: Literal["done"] = "done"
    reason: Literal["stop", "length", "toolUse"]
    message: AssistantMessage


class EventError(_Model):
    type: Literal["error"] = "error"
    reason: Literal["error", "aborted"]
    error: AssistantMessage


AssistantMessageEvent: TypeAlias = Annotated[
    EventStart
    | EventTextStart
    | EventTextDelta
    | EventTextEnd
    | EventThinkingStart
    | EventThinkingDelta
    | EventThinkingEnd
    | EventToolCallStart
    | EventToolCallDelta
    | EventToolCallEnd
    | EventDone
    | EventError,
    Field(discriminator="type"),
]

EVENT_ADAPTER: TypeAdapter[AssistantMessageEvent] = TypeAdapter(AssistantMessageEvent)

#: Every event class by its ``type`` value.
EVENT_CLASSES: dict[str, type[BaseModel]] = {
    cls.model_fields["type"].default: cls
    for cls in (
        EventStart,
        EventTextStart,
        EventTextDelta,
        EventTextEnd,
        EventThinkingStart,
        EventThinkingDelta,
        EventThinkingEnd,
        EventToolCallStart,
        EventToolCallDelta,
        EventToolCallEnd,
        EventDone,
        EventError,
    )
}
MESSAGE_ADAPTER: TypeAdapter[Message] = TypeAdapter(Message)

TERMINAL_EVENT_TYPES = frozenset({"done", "error"})

__all__ = [
    "ANSWER_ONLY_FIELDS",
    "AssistantContent",
    "AssistantMessage",
    "AssistantMessageEvent",
    "CacheRetention",
    "Context",
    "EVENT_ADAPTER",
    "EVENT_CLASSES",
    "EventDone",
    "EventError",
    "EventStart",
    "EventTextDelta",
    "EventTextEnd",
    "EventTextStart",
    "EventThinkingDelta",
    "EventThinkingEnd",
    "EventThinkingStart",
    "EventToolCallDelta",
    "EventToolCallEnd",
    "EventToolCallStart",
    "ImageContent",
    "MESSAGE_ADAPTER",
    "Message",
    "Model",
    "ModelCost",
    "RawContent",
    "ReasoningLevel",
    "ServerToolContent",
    "SimpleStreamOptions",
    "StopReason",
    "StreamOptions",
    "TERMINAL_EVENT_TYPES",
    "TextContent",
    "ThinkingContent",
    "Tool",
    "ToolCall",
    "ToolResultMessage",
    "Usage",
    "UsageCost",
    "UserContent",
    "UserMessage",
    "now_ms",
]
