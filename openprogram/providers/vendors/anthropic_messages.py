"""The ``anthropic-messages`` provider: Anthropic's Messages API, streamed through the official
``anthropic`` SDK.

The SDK is imported inside the call, so importing this module stays cheap. The mapping has two
halves: :func:`build_request_body` turns a :class:`Context` into the Messages body (system blocks
with cache control, consecutive tool results merged into one user turn, images, tools, thinking),
and :class:`StreamTranslator` turns the raw ``message_start`` / ``content_block_*`` /
``message_delta`` / ``message_stop`` events into our events through the shared assembler. The
guard turns every failure (HTTP status, broken stream, abort, missing key) into the one terminal
``error`` event.

Blocks of tools Anthropic runs itself (``server_tool_use``, ``web_search_tool_result``,
code execution, ``mcp_tool_use`` / ``mcp_tool_result`` ...) are kept whole as
:class:`ServerToolContent` and sent back as they came; citations of a text block follow it as a
``citations`` block and go back on that text block. ``pause_turn`` ends the message with a
``pause_turn`` marker block, which tells the agent loop to continue the turn (see
docs/vendors.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

import orjson

from ..assembly import AssistantEvent, AssistantStreamAssembler
from ..base import AssembledProvider
from ..guard import ErrorDescriber
from ..partial_json import parse_streaming_json
from ..types import (
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    EventDone,
    EventError,
    EventTextDelta,
    EventTextEnd,
    EventTextStart,
    EventThinkingDelta,
    EventThinkingEnd,
    EventThinkingStart,
    EventToolCallDelta,
    EventToolCallEnd,
    EventToolCallStart,
    ImageContent,
    Model,
    RawContent,
    ServerToolContent,
    SimpleStreamOptions,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserContent,
    UserMessage,
)
from . import roles, wire
from .common import (
    api_key_for,
    apply_payload_hook,
    as_plain_dict,
    describe_provider_error,
    merge_extra_body,
    normalize_tool_call_id,
    prepare_messages,
    request_headers,
    text_of,
    thinking_budget,
)

ANTHROPIC_API = "anthropic-messages"
LABEL = "anthropic"

#: SDK retries for 408/409/429/5xx and connection failures before the stream starts. The SDK
#: backs off 0.5 s .. 8 s and obeys ``retry-after`` and ``x-should-retry``; two retries is its
#: own default and keeps a transient overload from failing an agent run.
DEFAULT_MAX_RETRIES = 2

#: Models that take ``thinking: {"type": "adaptive"}`` (with an effort level) instead of a
#: token budget. ``model.compat["thinking"]`` set to "adaptive" or "budget" overrides this.
ADAPTIVE_THINKING_MARKERS = (
    "opus-4-6",
    "opus-4.6",
    "sonnet-4-6",
    "sonnet-4.6",
    "opus-4-7",
    "mythos",
)

_EFFORT_BY_LEVEL = {
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "max",
}

_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",  # with a pause_turn marker block: the agent loop continues
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "toolUse",
}
_REFUSAL_STOP_REASONS = frozenset({"refusal", "sensitive"})

#: The kind of the marker block a ``pause_turn`` stop leaves at the end of the message.
PAUSE_TURN = "pause_turn"
#: The kind of the block that holds a text block's citations.
CITATIONS = "citations"


# ----------------------------------------------------------------------------- provider


class AnthropicMessagesProvider(AssembledProvider):
    """Streams Anthropic Messages. One SDK client per call: clients hold a connection pool
    bound to the event loop that created it, and calls may come from different loops."""

    api = ANTHROPIC_API

    def __init__(
        self,
        *,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float | None = None,
        timestamp: int | None = None,
    ) -> None:
        # ``timestamp`` fixes the assistant message timestamp, for deterministic tests.
        self.max_retries = max_retries
        self.timeout = timeout
        self.timestamp = timestamp

    def describe_error(self, model: Model) -> ErrorDescriber:
        return describe_anthropic_error

    async def produce(
        self,
        assembler: AssistantStreamAssembler,
        model: Model,
        context: Context,
        options: StreamOptions | None,
    ) -> AsyncIterator[AssistantEvent]:
        api_key = api_key_for(model, options)
        body = apply_payload_hook(options, build_request_body(model, context, options))

        import anthropic

        client_options: dict[str, Any] = {"max_retries": self.max_retries}
        if self.timeout is not None:
            client_options["timeout"] = self.timeout
        client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=model.base_url or None, **client_options
        )
        try:
            # Required fields by name, the rest through extra_body: the body on_payload returned
            # reaches the wire as it is, including fields this SDK version does not know.
            required = {
                key: body[key] for key in ("model", "max_tokens", "messages") if key in body
            }
            extra = {
                key: value for key, value in body.items() if key not in required and key != "stream"
            }
            response = await client.messages.create(
                **required,
                stream=True,
                extra_body=extra or None,
                extra_headers=request_headers(model, options) or None,
            )
            try:
                # ``start`` once the vendor has accepted the request and named its answer
                # (``message_start``), as every vendor provider does.
                async for event in roles.translated(StreamTranslator(assembler), response):
                    yield event
            finally:
                await response.close()
        finally:
            await client.close()


# ----------------------------------------------------------------------------- errors


def describe_anthropic_error(error: BaseException) -> str:
    """Anthropic's own ``error.type`` and ``error.message`` when the SDK parsed them (an HTTP
    status, or an ``error`` event inside a 200 stream); the shared description otherwise."""
    status = getattr(error, "status_code", None)
    api_message = getattr(error, "api_message", None)
    if isinstance(status, int) and api_message:
        kind = getattr(error, "type", None) or "error"
        text = " ".join(str(api_message).split())
        if status == 200:
            return f"{LABEL}: stream error ({kind}): {text}"
        return f"{LABEL}: HTTP {status}: {kind}: {text}"
    description = describe_provider_error(LABEL)(error)
    cause = error.__cause__
    if cause is not None and "Connection" in type(error).__name__ and str(cause):
        description = f"{description} ({type(cause).__name__}: {cause})"
    return description


# ----------------------------------------------------------------------------- request


def cache_control_for(options: StreamOptions | None) -> dict[str, Any] | None:
    """Anthropic's prompt-cache marker for ``options.cache_retention``: "short" is the default
    five-minute ephemeral cache, "long" asks for the one-hour TTL, "none" sends no marker."""
    retention = options.cache_retention if options is not None else "short"
    if retention == "none":
        return None
    if retention == "long":
        return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral"}


def uses_adaptive_thinking(model: Model) -> bool:
    override: object = (model.compat or {}).get("thinking")
    if override in ("adaptive", "budget"):
        return override == "adaptive"
    model_id = model.id.lower()
    return any(marker in model_id for marker in ADAPTIVE_THINKING_MARKERS)


def default_max_tokens(model: Model, options: StreamOptions | None) -> int:
    """Anthropic requires ``max_tokens``; without one we allow the model's limit, capped so a
    runaway answer stays affordable."""
    if options is not None and options.max_tokens:
        return options.max_tokens
    return min(model.max_tokens, 32000)


def build_request_body(
    model: Model, context: Context, options: StreamOptions | None
) -> dict[str, Any]:
    """The Messages request body (without ``stream``, which the call adds)."""
    cache_control = cache_control_for(options)
    body: dict[str, Any] = {
        "model": model.id,
        "max_tokens": default_max_tokens(model, options),
        "messages": convert_messages(context, model, cache_control),
    }
    if context.system_prompt:
        system_block: dict[str, Any] = {"type": "text", "text": context.system_prompt}
        if cache_control:
            system_block["cache_control"] = dict(cache_control)
        body["system"] = [system_block]
    if context.tools:
        body["tools"] = [convert_tool(tool) for tool in context.tools]
    if options is not None:
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.tool_choice is not None:
            choice = options.tool_choice
            body["tool_choice"] = {"type": choice} if isinstance(choice, str) else choice
        user_id = (options.metadata or {}).get("user_id")
        if user_id:
            body["metadata"] = {"user_id": str(user_id)}
    _add_thinking(body, model, options)
    return merge_extra_body(body, options)


def _add_thinking(body: dict[str, Any], model: Model, options: StreamOptions | None) -> None:
    level = getattr(options, "reasoning", None)
    if not level or not model.reasoning:
        return
    if uses_adaptive_thinking(model):
        body["thinking"] = {"type": "adaptive"}
        body["output_config"] = {"effort": _EFFORT_BY_LEVEL.get(level, "high")}
        return
    budgeted = thinking_budget(model, options)
    if budgeted is None:
        return
    max_tokens, budget = budgeted
    body["max_tokens"] = max_tokens
    body["thinking"] = {"type": "enabled", "budget_tokens": budget}


def convert_tool(tool: Tool) -> dict[str, Any]:
    schema = dict(tool.parameters or {})
    schema.setdefault("type", "object")
    return {"name": tool.name, "description": tool.description, "input_schema": schema}


def _image_block(image: ImageContent) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": image.mime_type, "data": image.data},
    }


def _user_blocks(content: list[Any], model: Model) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for item in content:
        if isinstance(item, TextContent):
            if item.text.strip():
                blocks.append({"type": "text", "text": item.text})
        elif isinstance(item, ImageContent) and "image" in model.input:
            blocks.append(_image_block(item))
        elif isinstance(item, RawContent) and item.api == ANTHROPIC_API and not item.message:
            blocks.append(item.payload)
    return blocks


def _tool_result_block(result: ToolResultMessage, model: Model) -> dict[str, Any]:
    images = [item for item in result.content if isinstance(item, ImageContent)]
    raw = [
        item
        for item in result.content
        if isinstance(item, RawContent) and item.api == ANTHROPIC_API
    ]
    content: str | list[dict[str, Any]]
    if raw:  # blocks kept as the client sent them: the whole content in its order
        content = _user_blocks(result.content, model)
    elif images and "image" in model.input:
        content = _user_blocks(result.content, model)
        if not any(block["type"] == "text" for block in content):
            content.insert(0, {"type": "text", "text": "(see attached image)"})
    else:
        content = text_of(result.content)
    return {
        "type": "tool_result",
        "tool_use_id": normalize_tool_call_id(result.tool_call_id),
        "content": content,
        "is_error": result.is_error,
    }


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            if block.redacted:
                if block.thinking_signature:
                    blocks.append({"type": "redacted_thinking", "data": block.thinking_signature})
            elif not block.thinking.strip():
                continue
            elif block.thinking_signature:
                blocks.append(
                    {
                        "type": "thinking",
                        "thinking": block.thinking,
                        "signature": block.thinking_signature,
                    }
                )
            else:
                # Unsigned thinking (an interrupted stream) is rejected as thinking; keep the words.
                blocks.append({"type": "text", "text": block.thinking})
        elif isinstance(block, ToolCall):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": normalize_tool_call_id(block.id),
                    "name": block.name,
                    "input": block.arguments,
                }
            )
        elif isinstance(block, ServerToolContent) and block.api == ANTHROPIC_API:
            _add_server_block(blocks, block)
    return blocks


def _add_server_block(blocks: list[dict[str, Any]], block: ServerToolContent) -> None:
    """A server tool block goes back as it came; citations go back on their text block; the
    pause marker is ours alone."""
    if block.kind == PAUSE_TURN:
        return
    if block.kind == CITATIONS:
        if blocks and blocks[-1].get("type") == "text":
            blocks[-1]["citations"] = list(block.payload.get("citations") or [])
        return
    blocks.append(dict(block.payload))


def convert_messages(
    context: Context, model: Model, cache_control: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """Our conversation as Messages turns. Consecutive tool results become one user turn (the
    API expects every result of an assistant turn in the next user turn), and the last user turn
    carries the cache marker so the whole prefix is cached."""
    turns: list[dict[str, Any]] = []
    for message in prepare_messages(context.messages, model):
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                if message.content.strip():
                    turns.append({"role": "user", "content": message.content})
                continue
            blocks = _user_blocks(message.content, model)
            if blocks:
                turns.append({"role": "user", "content": blocks})
        elif isinstance(message, AssistantMessage):
            blocks = _assistant_blocks(message)
            if blocks:
                turns.append({"role": "assistant", "content": blocks})
        elif isinstance(message, ToolResultMessage):
            block = _tool_result_block(message, model)
            previous = turns[-1] if turns else None
            if (
                previous is not None
                and previous["role"] == "user"
                and isinstance(previous["content"], list)
                and previous["content"]
                and all(item.get("type") == "tool_result" for item in previous["content"])
            ):
                previous["content"].append(block)
            else:
                turns.append({"role": "user", "content": [block]})
    if cache_control and turns and turns[-1]["role"] == "user":
        last = turns[-1]
        if isinstance(last["content"], str):
            last["content"] = [{"type": "text", "text": last["content"]}]
        last["content"][-1]["cache_control"] = dict(cache_control)
    return turns


# ----------------------------------------------------------------------------- response


class StreamTranslator(roles.StreamTranslator):
    """Turns raw Messages stream events into assembler calls, one ``_on_<type>`` per event
    type. Anthropic numbers content blocks itself (and may send block kinds we do not
    represent, such as server tool results), so its indexes are mapped onto ours.
    ``message_stop`` finishes the message; a stream cut before it is left to the guard."""

    def __init__(self, assembler: AssistantStreamAssembler) -> None:
        super().__init__(assembler)
        self.blocks: dict[int, int] = {}
        self.stop_reason: str | None = None
        self.usage = Usage()
        self.server: dict[
            int, tuple[dict[str, Any], list[str]]
        ] = {}  # their index -> (block, json)
        self.citations: dict[int, list[dict[str, Any]]] = {}  # our text index -> citations

    def identify(self, event: Any) -> None:
        """``message_start`` names the message and the model version that writes it."""
        if getattr(event, "type", None) == "message_start":
            message = event.message
            self.assembler.set_response(
                getattr(message, "id", None), getattr(message, "model", None)
            )

    def _on_message_start(self, event: Any) -> list[AssistantEvent]:
        self._update_usage(event.message.usage)
        return []

    def _on_content_block_start(self, event: Any) -> list[AssistantEvent]:
        block = event.content_block
        assembler = self.assembler
        start: AssistantEvent
        if block.type == "text":
            index, start = assembler.begin_text()
            events: list[AssistantEvent] = [start]
            if block.text:
                events.append(assembler.append_text(index, block.text))
        elif block.type == "thinking":
            index, start = assembler.begin_thinking()
            events = [start]
            if block.thinking:
                events.append(assembler.append_thinking(index, block.thinking))
            if getattr(block, "signature", None):
                assembler.set_thinking_signature(index, block.signature)
        elif block.type == "redacted_thinking":
            index, start = assembler.begin_thinking(redacted=True)
            assembler.set_thinking_signature(index, block.data)
            events = [start]
        elif block.type == "tool_use":
            index, start = assembler.begin_tool_call(block.id, block.name)
            events = [start]
        else:
            # a block of a tool Anthropic runs itself: kept whole once it stops
            self.server[event.index] = (dict(as_plain_dict(block)), [])
            return []
        self.blocks[event.index] = index
        return events

    def _on_content_block_delta(self, event: Any) -> list[AssistantEvent]:
        index = self.blocks.get(event.index)
        delta = event.delta
        if index is None:
            server = self.server.get(event.index)
            if server is not None and delta.type == "input_json_delta" and delta.partial_json:
                server[1].append(delta.partial_json)
            return []
        assembler = self.assembler
        if delta.type == "citations_delta":
            self.citations.setdefault(index, []).append(dict(as_plain_dict(delta.citation)))
            return []
        if delta.type == "text_delta":
            return [assembler.append_text(index, delta.text)] if delta.text else []
        if delta.type == "thinking_delta":
            return [assembler.append_thinking(index, delta.thinking)] if delta.thinking else []
        if delta.type == "signature_delta":
            assembler.set_thinking_signature(index, delta.signature, append=True)
            return []
        if delta.type == "input_json_delta":
            return (
                [assembler.append_tool_arguments(index, delta.partial_json)]
                if delta.partial_json
                else []
            )
        return []

    def _on_content_block_stop(self, event: Any) -> list[AssistantEvent]:
        server = self.server.pop(event.index, None)
        if server is not None:
            self._add_server_block(*server)
            return []
        index = self.blocks.get(event.index)
        if index is None or not self.assembler.is_open(index):
            return []
        ended = _end_block(self.assembler, index)
        citations = self.citations.pop(index, None)
        if citations:
            self._add(CITATIONS, {"citations": citations}, _citations_text(citations))
        return [ended]

    def _add_server_block(self, block: dict[str, Any], json_pieces: list[str]) -> None:
        if json_pieces:
            try:
                block["input"] = orjson.loads("".join(json_pieces))
            except orjson.JSONDecodeError:
                block["input"] = parse_streaming_json("".join(json_pieces))
        self._add(str(block.get("type") or "unknown"), block, _server_block_text(block))

    def _add(self, kind: str, payload: dict[str, Any], text: str | None) -> None:
        self.assembler.add_server_tool(
            ServerToolContent(
                vendor=LABEL, api=ANTHROPIC_API, kind=kind, payload=payload, text=text
            )
        )

    def _on_message_delta(self, event: Any) -> list[AssistantEvent]:
        if event.delta.stop_reason:
            self.stop_reason = event.delta.stop_reason
        self._update_usage(event.usage)
        return []

    def _on_message_stop(self, event: Any) -> list[AssistantEvent]:
        reason = self.stop_reason or "end_turn"
        if reason in _REFUSAL_STOP_REASONS:
            self.assembler.close_open_blocks()
            return [
                self.assembler.fail(f"{LABEL}: the model declined to answer (stop_reason {reason})")
            ]
        events = self.assembler.close_open_blocks()
        if reason == PAUSE_TURN:
            self._add(
                PAUSE_TURN, {"stop_reason": PAUSE_TURN}, "paused by the server; the turn continues"
            )
        return events + self.assembler.finish(_STOP_REASONS.get(reason, "stop"))

    def _update_usage(self, usage: Any) -> None:
        """Anthropic reports input and cache counts at the start and cumulative counts in
        ``message_delta``; a count missing from a later event keeps its earlier value."""
        if usage is None:
            return
        counts = {}
        for ours, theirs in (
            ("input", "input_tokens"),
            ("output", "output_tokens"),
            ("cache_read", "cache_read_input_tokens"),
            ("cache_write", "cache_creation_input_tokens"),
        ):
            value = getattr(usage, theirs, None)
            if value is not None:
                counts[ours] = value
        self.usage = self.usage.model_copy(update=counts)
        self.assembler.set_usage(self.usage.model_copy(update={"total_tokens": 0}))


class AnthropicStreamError(Exception):
    """An ``error`` event inside an otherwise healthy stream (``overloaded_error`` ...)."""


class AnswerReader(roles.AnswerReader):
    """Each ``data:`` of the stream, or the whole message of a call that did not stream (read
    as the events that stream it)."""

    translator_class = StreamTranslator

    def sse(self, event: str | None, data: str) -> list[AssistantEvent]:
        value = orjson.loads(data)
        if not isinstance(value, dict) or self.assembler.finished:
            return []
        if value.get("type") == "error":
            error = value["error"] if isinstance(value.get("error"), dict) else {}
            raise AnthropicStreamError(
                f"{error.get('type') or 'error'}: {error.get('message') or 'the stream reported an error'}"
            )
        return self.translator.handle(wire.JsonView(value))

    def body(self, body: Any) -> list[AssistantEvent]:
        events: list[AssistantEvent] = []
        for value in _message_as_events(body) if isinstance(body, dict) else []:
            events.extend(self.translator.handle(wire.JsonView(value)))
        return events

    def incomplete(self) -> Exception:
        return ConnectionError("the stream ended before message_stop; the answer is incomplete")


def _message_as_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A whole Messages answer as the stream events that would have carried it."""
    head = {
        key: value
        for key, value in message.items()
        if key not in ("content", "stop_reason", "stop_sequence")
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {**head, "content": []}}]
    for index, block in enumerate(message.get("content") or []):
        if not isinstance(block, dict):
            continue
        start = dict(block)
        deltas: list[dict[str, Any]] = []
        if block.get("type") == "tool_use":
            start["input"] = {}
            deltas.append(
                {
                    "type": "input_json_delta",
                    "partial_json": orjson.dumps(block.get("input") or {}).decode(),
                }
            )
        for citation in block.get("citations") or [] if block.get("type") == "text" else []:
            deltas.append({"type": "citations_delta", "citation": citation})
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events.extend(
            {"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas
        )
        events.append({"type": "content_block_stop", "index": index})
    delta = {
        "stop_reason": message.get("stop_reason"),
        "stop_sequence": message.get("stop_sequence"),
    }
    events.append({"type": "message_delta", "delta": delta, "usage": message.get("usage")})
    events.append({"type": "message_stop"})
    return events


def _server_block_text(block: dict[str, Any]) -> str | None:
    """A readable line for a server tool block: the call, or what its result holds."""
    if "input" in block and block.get("name"):
        return f"{block['name']}({orjson.dumps(block['input']).decode()})"
    content = block.get("content")
    if isinstance(content, list):
        lines = [
            " ".join(str(item[key]) for key in ("title", "url", "text") if item.get(key))
            for item in content
            if isinstance(item, dict)
        ]
        return "\n".join(line for line in lines if line) or None
    if isinstance(content, dict):
        output = content.get("stdout") or content.get("stderr") or content.get("content")
        return output if isinstance(output, str) and output else None
    return None


def _citations_text(citations: list[dict[str, Any]]) -> str:
    return "\n".join(
        " ".join(str(c[key]) for key in ("title", "url") if c.get(key))
        or str(c.get("cited_text", ""))
        for c in citations
        if isinstance(c, dict)
    )


def _end_block(assembler: AssistantStreamAssembler, index: int) -> AssistantEvent:
    block = assembler.snapshot().content[index]
    if isinstance(block, TextContent):
        return assembler.end_text(index)
    if isinstance(block, ThinkingContent):
        return assembler.end_thinking(index)
    return assembler.end_tool_call(index)


# ----------------------------------------------------------------------------- inbound: a client's request
#
# The two directions ``openprogram proxy`` adds (docs/proxy.md): a Messages body read into our
# request, and our events written back as Messages stream events or a message.

#: The stop reason a client reads for ours.
_WIRE_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "toolUse": "tool_use"}

#: Anthropic's error type for an HTTP status (its error shape names one).
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}

#: Block types of an assistant turn that are ours to read; any other is a server tool block.
_OWN_BLOCKS = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})


def parse_request_body(body: dict[str, Any], *, model_id: str | None = None) -> wire.ParsedRequest:
    """A Messages request body as ``(Model, Context, SimpleStreamOptions)``, such that
    :func:`build_request_body` gives back every field of ``body`` (``thinking``,
    ``stop_sequences`` and the like through ``extra_body``). Cache markers become
    ``cache_retention`` ("long" for a one-hour TTL, "none" when there is none), and go back
    where openprogram puts them: on the system prompt and the last user turn. Raises
    :class:`~.wire.WireRequestError` for what ours cannot hold."""
    wire.check_depth(body)
    name = model_id or wire.required(body, "model", str, "body")
    messages = wire.required(body, "messages", list, "body")
    model = Model(id=name, api=ANTHROPIC_API, provider=LABEL, input=["text", "image"])
    context = Context(
        system_prompt=_system_text(body.get("system")),
        messages=_parse_messages(messages, model),
        tools=_parse_tools(wire.field(body, "tools", list, "body")),
    )
    metadata = wire.field(body, "metadata", dict, "body")
    user_id = metadata.get("user_id") if metadata else None
    options = SimpleStreamOptions(
        temperature=wire.field(body, "temperature", (int, float), "body"),
        max_tokens=wire.field(body, "max_tokens", int, "body"),
        tool_choice=wire.field(body, "tool_choice", dict, "body"),
        metadata={"user_id": user_id} if isinstance(user_id, str) else None,
        cache_retention=_cache_retention(body),
    )
    rebuilt = build_request_body(model, context, options)
    extra = wire.carried_fields(body, rebuilt, typed=("messages", "system", "stream"))
    return model, context, options.model_copy(update={"extra_body": extra})


def _cache_retention(body: dict[str, Any]) -> Literal["none", "short", "long"]:
    markers: list[Any] = []

    def collect(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("cache_control"), dict):
                markers.append(value["cache_control"])
            for inner in value.values():
                collect(inner)
        elif isinstance(value, list):
            for inner in value:
                collect(inner)

    collect([body.get("system"), body.get("messages")])
    if not markers:
        return "none"
    return "long" if any(marker.get("ttl") == "1h" for marker in markers) else "short"


def _system_text(system: Any) -> str | None:
    if system is None or isinstance(system, str):
        return system or None
    if not isinstance(system, list):
        raise wire.WireRequestError("body.system must be a string or an array of text blocks")
    texts = []
    for position, block in enumerate(system):
        if wire.field(block, "type", str, f"system[{position}]") != "text":
            raise wire.unsupported(
                f"system block of type {wire.shown_value(block.get('type'))}", f"system[{position}]"
            )
        texts.append(wire.required(block, "text", str, f"system[{position}]"))
    return "\n\n".join(texts) or None


def _image(block: dict[str, Any], where: str) -> UserContent:
    """An image sent as base64; one by URL or file id is kept as the client sent it."""
    source = wire.required(block, "source", dict, where)
    if source.get("type") != "base64" or set(block) - {"type", "source"}:
        return wire.raw_part(ANTHROPIC_API, block, where)
    return ImageContent(
        data=wire.required(source, "data", str, f"{where}.source"),
        mime_type=wire.required(source, "media_type", str, f"{where}.source"),
    )


def _user_blocks_of(content: Any, where: str) -> list[UserContent]:
    if isinstance(content, str):
        return [TextContent(text=content)]
    if not isinstance(content, list):
        raise wire.WireRequestError(f"{where} must be a string or an array of blocks")
    blocks: list[UserContent] = []
    for position, block in enumerate(content):
        here = f"{where}[{position}]"
        kind = wire.field(block, "type", str, here)
        if kind == "text":
            blocks.append(TextContent(text=wire.required(block, "text", str, here)))
        elif kind == "image":
            blocks.append(_image(block, here))
        else:  # a document, a search result, ...: kept as sent
            blocks.append(wire.raw_part(ANTHROPIC_API, block, here))
    return blocks


def _parse_messages(messages: list[Any], model: Model) -> list[Any]:
    parsed: list[Any] = []
    names: dict[str, str] = {}  # tool_use id -> tool name, for the results
    for position, message in enumerate(messages):
        where = f"messages[{position}]"
        role = wire.required(message, "role", str, where)
        content = message.get("content")
        if role == "assistant":
            assistant = _parse_assistant(content, f"{where}.content", model)
            names.update((b.id, b.name) for b in assistant.content if isinstance(b, ToolCall))
            parsed.append(assistant)
        elif role != "user":
            raise wire.unsupported(f"message of role {wire.shown_value(role)}", where)
        elif isinstance(content, str):
            parsed.append(UserMessage(content=content, timestamp=wire.WIRE_TIMESTAMP))
        else:
            parsed.extend(_parse_user_turn(content, f"{where}.content", names))
    return parsed


def _parse_user_turn(content: Any, where: str, names: dict[str, str]) -> list[Any]:
    """A user turn: its tool results as result messages, and the rest as a user message."""
    if not isinstance(content, list):
        raise wire.WireRequestError(f"{where} must be a string or an array of blocks")
    parsed: list[Any] = []
    others: list[Any] = []
    for position, block in enumerate(content):
        here = f"{where}[{position}]"
        if wire.field(block, "type", str, here) != "tool_result":
            others.append(block)
            continue
        call_id = wire.required(block, "tool_use_id", str, here)
        parsed.append(
            ToolResultMessage(
                tool_call_id=call_id,
                tool_name=names.get(call_id, ""),
                content=_user_blocks_of(block.get("content") or "", f"{here}.content"),
                is_error=bool(block.get("is_error")),
                timestamp=wire.WIRE_TIMESTAMP,
            )
        )
    if others:
        parsed.append(
            UserMessage(content=_user_blocks_of(others, where), timestamp=wire.WIRE_TIMESTAMP)
        )
    return parsed


def _parse_assistant(content: Any, where: str, model: Model) -> AssistantMessage:
    """An assistant turn as the same model's message, so its signatures and server tool
    blocks go back as they came."""
    blocks: list[Any] = []
    if not isinstance(content, str | list | None):
        raise wire.WireRequestError(f"{where} must be a string or an array of blocks")
    for position, block in enumerate(
        [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    ):
        here = f"{where}[{position}]"
        kind = wire.field(block, "type", str, here)
        if kind == "text":
            blocks.append(TextContent(text=wire.required(block, "text", str, here)))
            citations = wire.field(block, "citations", list, here)
            if citations:
                blocks.append(
                    _server(CITATIONS, {"citations": list(citations)}, _citations_text(citations))
                )
        elif kind == "thinking":
            blocks.append(
                ThinkingContent(
                    thinking=wire.required(block, "thinking", str, here),
                    thinking_signature=wire.field(block, "signature", str, here),
                )
            )
        elif kind == "redacted_thinking":
            blocks.append(
                ThinkingContent(
                    thinking="",
                    thinking_signature=wire.required(block, "data", str, here),
                    redacted=True,
                )
            )
        elif kind == "tool_use":
            blocks.append(
                ToolCall(
                    id=wire.required(block, "id", str, here),
                    name=wire.required(block, "name", str, here),
                    arguments=wire.field(block, "input", dict, here, {}),
                )
            )
        else:
            payload = {key: value for key, value in block.items() if key != "cache_control"}
            blocks.append(_server(kind, payload, _server_block_text(payload)))
    return AssistantMessage(
        content=blocks,
        api=ANTHROPIC_API,
        provider=model.provider,
        model=model.id,
        timestamp=wire.WIRE_TIMESTAMP,
    )


def _server(kind: str, payload: dict[str, Any], text: str | None) -> ServerToolContent:
    return ServerToolContent(vendor=LABEL, api=ANTHROPIC_API, kind=kind, payload=payload, text=text)


def _parse_tools(tools: list[Any] | None) -> list[Tool] | None:
    parsed = [
        Tool(
            name=wire.required(tool, "name", str, f"tools[{position}]"),
            description=wire.field(tool, "description", str, f"tools[{position}]", ""),
            parameters=wire.field(tool, "input_schema", dict, f"tools[{position}]", {}),
        )
        for position, tool in enumerate(tools or [])
        # a server tool (web search, code execution) is carried whole in extra_body
        if isinstance(tool, dict)
        and tool.get("type") in (None, "custom")
        and "input_schema" in tool
    ]
    return parsed or None


# ----------------------------------------------------------------------------- outbound: to a client


def usage_body(usage: Usage) -> dict[str, int]:
    """Our usage in Anthropic's counts (which keep cache reads and writes apart, as ours do)."""
    return {
        "input_tokens": usage.input,
        "output_tokens": usage.output,
        "cache_creation_input_tokens": usage.cache_write,
        "cache_read_input_tokens": usage.cache_read,
    }


def _wire_stop_reason(message: AssistantMessage) -> str:
    last = message.content[-1] if message.content else None
    if isinstance(last, ServerToolContent) and last.kind == PAUSE_TURN:
        return PAUSE_TURN
    return _WIRE_STOP_REASONS.get(message.stop_reason, "end_turn")


def _citations_after(message: AssistantMessage, index: int) -> list[Any]:
    following = message.content[index + 1] if index + 1 < len(message.content) else None
    if isinstance(following, ServerToolContent) and following.kind == CITATIONS:
        return list(following.payload.get("citations") or [])
    return []


def _wire_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    """The content of ``message`` as Anthropic blocks: citations on their text block, the
    pause marker left out (it is the stop reason)."""
    blocks: list[dict[str, Any]] = []
    for index, block in enumerate(message.content):
        if isinstance(block, TextContent):
            text: dict[str, Any] = {"type": "text", "text": block.text}
            citations = _citations_after(message, index)
            if citations:
                text["citations"] = citations
            blocks.append(text)
        elif isinstance(block, ThinkingContent):
            if block.redacted:
                blocks.append({"type": "redacted_thinking", "data": block.thinking_signature or ""})
            else:
                blocks.append(
                    {
                        "type": "thinking",
                        "thinking": block.thinking,
                        "signature": block.thinking_signature or "",
                    }
                )
        elif isinstance(block, ToolCall):
            blocks.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": block.arguments}
            )
        elif block.kind not in (CITATIONS, PAUSE_TURN) and block.api == ANTHROPIC_API:
            blocks.append(dict(block.payload))
    return blocks


def _message_head(message: AssistantMessage) -> dict[str, Any]:
    return {
        "id": wire.answer_id("msg_", message),
        "type": "message",
        "role": "assistant",
        "model": wire.answer_model(message),
    }


def response_body(message: AssistantMessage, request_body: dict[str, Any]) -> dict[str, Any]:
    """The ``message`` a client that did not stream gets."""
    return {
        **_message_head(message),
        "content": _wire_blocks(message),
        "stop_reason": _wire_stop_reason(message),
        "stop_sequence": None,
        "usage": usage_body(message.usage),
    }


def error_body(status: int, message: str) -> dict[str, Any]:
    """Anthropic's error shape, which the SDK raises with its type and message."""
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


class StreamEncoder(roles.StreamEncoder):
    """Our events as Messages stream events: ``message_start`` (held until the next event, which
    carries the input token counts), each block as ``content_block_start`` / deltas /
    ``content_block_stop`` (a text block's stop waits one event for its citations), server tool
    blocks when a snapshot first holds them, then ``message_delta`` with the stop reason and
    the whole usage, and ``message_stop``."""

    def __init__(self, request_body: dict[str, Any]) -> None:
        super().__init__(request_body)
        self.started = False
        self.indexes: dict[int, int] = {}  # our content index -> the wire's block index
        self.arguments_sent: set[int] = set()
        self.pending_text: int | None = None
        self.server = wire.ServerBlockWatch()

    def before(self, event: AssistantMessageEvent, message: AssistantMessage) -> bytes:
        """The held ``message_start`` and text block stop, then new server blocks (none before
        an error, which ends the stream)."""
        if event.type == "start":
            return b""
        frames = []
        if not self.started:
            self.started = True
            start = {
                **_message_head(message),
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage_body(message.usage),
            }
            frames.append(self._event("message_start", message=start))
        if self.pending_text is not None:
            frames.append(self._stop_text(message))
        if event.type != "error":
            frames.extend(self._server_blocks(message))
        return b"".join(frames)

    def _event(self, kind: str, **fields: Any) -> bytes:
        return wire.sse_frame({"type": kind, **fields}, event=kind)

    def _start_block(self, index: int, block: dict[str, Any]) -> bytes:
        self.indexes[index] = len(self.indexes)
        return self._event("content_block_start", index=self.indexes[index], content_block=block)

    def _delta(self, index: int, delta: dict[str, Any]) -> bytes:
        return self._event("content_block_delta", index=self.indexes[index], delta=delta)

    def _stop(self, index: int) -> bytes:
        return self._event("content_block_stop", index=self.indexes[index])

    def _on_text_start(self, event: EventTextStart, message: AssistantMessage) -> bytes:
        return self._start_block(event.content_index, {"type": "text", "text": ""})

    def _on_text_delta(self, event: EventTextDelta, message: AssistantMessage) -> bytes:
        return self._delta(event.content_index, {"type": "text_delta", "text": event.delta})

    def _on_text_end(self, event: EventTextEnd, message: AssistantMessage) -> bytes:
        self.pending_text = event.content_index  # stopped at the next event: citations may follow
        return b""

    def _on_thinking_start(self, event: EventThinkingStart, message: AssistantMessage) -> bytes:
        block = message.content[event.content_index]
        if isinstance(block, ThinkingContent) and block.redacted:
            return b""  # started at its end, when its data (the signature) is known
        return self._start_block(
            event.content_index, {"type": "thinking", "thinking": "", "signature": ""}
        )

    def _on_thinking_delta(self, event: EventThinkingDelta, message: AssistantMessage) -> bytes:
        return self._delta(event.content_index, {"type": "thinking_delta", "thinking": event.delta})

    def _on_thinking_end(self, event: EventThinkingEnd, message: AssistantMessage) -> bytes:
        block = message.content[event.content_index]
        if isinstance(block, ThinkingContent) and block.redacted:
            data = {"type": "redacted_thinking", "data": block.thinking_signature or ""}
            return self._start_block(event.content_index, data) + self._stop(event.content_index)
        signature = b""
        if isinstance(block, ThinkingContent) and not block.redacted and block.thinking_signature:
            signature = self._delta(
                event.content_index,
                {"type": "signature_delta", "signature": block.thinking_signature},
            )
        return signature + self._stop(event.content_index)

    def _on_toolcall_start(self, event: EventToolCallStart, message: AssistantMessage) -> bytes:
        call = message.content[event.content_index]
        assert isinstance(call, ToolCall)
        return self._start_block(
            event.content_index, {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        )

    def _on_toolcall_delta(self, event: EventToolCallDelta, message: AssistantMessage) -> bytes:
        self.arguments_sent.add(event.content_index)
        return self._delta(
            event.content_index, {"type": "input_json_delta", "partial_json": event.delta}
        )

    def _on_toolcall_end(self, event: EventToolCallEnd, message: AssistantMessage) -> bytes:
        frames = b""
        if event.content_index not in self.arguments_sent and event.tool_call.arguments:
            frames = self._delta(
                event.content_index,
                {
                    "type": "input_json_delta",
                    "partial_json": orjson.dumps(event.tool_call.arguments).decode(),
                },
            )
        return frames + self._stop(event.content_index)

    def _on_done(self, event: EventDone, message: AssistantMessage) -> bytes:
        delta = {"stop_reason": _wire_stop_reason(message), "stop_sequence": None}
        return self._event(
            "message_delta", delta=delta, usage=usage_body(message.usage)
        ) + self._event("message_stop")

    def _on_error(self, event: EventError, message: AssistantMessage) -> bytes:
        return self._event(
            "error",
            error={"type": "api_error", "message": message.error_message or "the call failed"},
        )

    def _stop_text(self, message: AssistantMessage) -> bytes:
        index, self.pending_text = self.pending_text, None
        assert index is not None
        citations = [
            self._delta(index, {"type": "citations_delta", "citation": c})
            for c in _citations_after(message, index)
        ]
        return b"".join(citations) + self._stop(index)

    def _server_blocks(self, message: AssistantMessage) -> list[bytes]:
        frames = []
        for index, block in self.server.new_blocks(message):
            if block.kind in (CITATIONS, PAUSE_TURN) or block.api != ANTHROPIC_API:
                continue
            frames.append(self._start_block(index, dict(block.payload)))
            frames.append(self._stop(index))
        return frames


__all__ = [
    "ANTHROPIC_API",
    "AnthropicMessagesProvider",
    "StreamEncoder",
    "StreamTranslator",
    "build_request_body",
    "describe_anthropic_error",
    "error_body",
    "parse_request_body",
    "response_body",
]
