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
from typing import Any

import orjson

from ..assembly import AssistantEvent, AssistantStreamAssembler
from ..base import AssembledProvider
from ..guard import ErrorDescriber
from ..partial_json import parse_streaming_json
from ..types import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    ServerToolContent,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
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
ADAPTIVE_THINKING_MARKERS = ("opus-4-6", "opus-4.6", "sonnet-4-6", "sonnet-4.6", "opus-4-7", "mythos")

_EFFORT_BY_LEVEL = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "max"}

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
            required = {key: body[key] for key in ("model", "max_tokens", "messages") if key in body}
            extra = {key: value for key, value in body.items() if key not in required and key != "stream"}
            response = await client.messages.create(
                **required,
                stream=True,
                extra_body=extra or None,
                extra_headers=request_headers(model, options) or None,
            )
            translator = StreamTranslator(assembler)
            try:
                # ``start`` once the vendor has accepted the request, as every vendor provider does.
                yield assembler.start()
                async for raw_event in response:
                    for event in translator.handle(raw_event):
                        yield event
                    if assembler.finished:
                        return
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


def build_request_body(model: Model, context: Context, options: StreamOptions | None) -> dict[str, Any]:
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
    return blocks


def _tool_result_block(result: ToolResultMessage, model: Model) -> dict[str, Any]:
    images = [item for item in result.content if isinstance(item, ImageContent)]
    content: str | list[dict[str, Any]]
    if images and "image" in model.input:
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
                    {"type": "thinking", "thinking": block.thinking, "signature": block.thinking_signature}
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


class StreamTranslator:
    """Turns raw Messages stream events into assembler calls. Anthropic numbers content blocks
    itself (and may send block kinds we do not represent, such as server tool results), so its
    indexes are mapped onto ours."""

    def __init__(self, assembler: AssistantStreamAssembler) -> None:
        self.assembler = assembler
        self.blocks: dict[int, int] = {}
        self.stop_reason: str | None = None
        self.usage = Usage()
        self.server: dict[int, tuple[dict[str, Any], list[str]]] = {}  # their index -> (block, json)
        self.citations: dict[int, list[dict[str, Any]]] = {}  # our text index -> citations

    def handle(self, event: Any) -> list[AssistantEvent]:
        handler = getattr(self, f"_on_{event.type}", None)
        return handler(event) if handler is not None else []

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
            return [assembler.append_tool_arguments(index, delta.partial_json)] if delta.partial_json else []
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
            ServerToolContent(vendor=LABEL, api=ANTHROPIC_API, kind=kind, payload=payload, text=text)
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
            return [self.assembler.fail(f"{LABEL}: the model declined to answer (stop_reason {reason})")]
        events = self.assembler.close_open_blocks()
        if reason == PAUSE_TURN:
            self._add(PAUSE_TURN, {"stop_reason": PAUSE_TURN}, "paused by the server; the turn continues")
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
        " ".join(str(c[key]) for key in ("title", "url") if c.get(key)) or str(c.get("cited_text", ""))
        for c in citations
    )


def _end_block(assembler: AssistantStreamAssembler, index: int) -> AssistantEvent:
    block = assembler.snapshot().content[index]
    if isinstance(block, TextContent):
        return assembler.end_text(index)
    if isinstance(block, ThinkingContent):
        return assembler.end_thinking(index)
    return assembler.end_tool_call(index)


__all__ = [
    "ANTHROPIC_API",
    "AnthropicMessagesProvider",
    "StreamTranslator",
    "build_request_body",
    "describe_anthropic_error",
]
