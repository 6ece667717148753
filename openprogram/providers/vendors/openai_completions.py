"""The ``openai-completions`` provider: OpenAI Chat Completions streaming, and with it every
OpenAI-compatible server (Ollama, vLLM, llama.cpp server, LM Studio, OpenRouter, Groq ...)
reached through ``model.base_url``.

Compatible servers differ in small ways, so a few choices read ``model.compat``:
``max_tokens_field`` (``"max_completion_tokens"`` on OpenAI itself, ``"max_tokens"`` elsewhere,
which every compatible server understands), ``supports_usage_in_streaming`` (default True:
sends ``stream_options.include_usage``), ``supports_developer_role`` (default: OpenAI reasoning
models only) and ``supports_xhigh``.

What compatible servers stream beyond OpenAI's own shape is read too (see docs/vendors.md):
``[DONE]`` without any ``finish_reason`` is a normal end; ``delta.reasoning_details``
(OpenRouter, Snowflake) and list-typed ``delta.content`` (Mistral reasoning models) become
thinking and text; Groq ``executed_tools`` and ``annotations`` (web search citations) become
:class:`~openprogram.providers.types.ServerToolContent` blocks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import orjson

from ..assembly import AssistantEvent, AssistantStreamAssembler
from ..types import (
    AssistantMessage,
    Context,
    ImageContent,
    Message,
    Model,
    ServerToolContent,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .common import images_of, merge_extra_body, normalize_tool_call_id, prepare_messages, text_of
from .openai_common import (
    OpenAIProviderBase,
    OpenAIStreamError,
    accepts_images,
    as_plain_dict,
    compat_flag,
    data_url,
    is_same_model,
    reasoning_effort,
    sdk_arguments,
    split_usage,
)

API = "openai-completions"

#: Chat Completions rejects tool call ids longer than this.
MAX_TOOL_CALL_ID_LENGTH = 40

#: The delta fields compatible servers put reasoning in, most common first. The name found is
#: kept as the thinking signature, so the next turn sends the reasoning back in the same field.
REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")

#: The thinking signature of reasoning that came as ``reasoning_details``: the items, as JSON,
#: follow this prefix, and go back whole in the same field on the next turn.
DETAILS_SIGNATURE = "reasoning_details:"

_STOP_REASONS = {"stop": "stop", "length": "length", "tool_calls": "toolUse", "function_call": "toolUse"}


# --------------------------------------------------------------------------- request


def _tool_call_id(tool_call_id: str) -> str:
    return normalize_tool_call_id(tool_call_id, MAX_TOOL_CALL_ID_LENGTH)


def _user_parts(content: str | list[Any], model: Model) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageContent) and accepts_images(model):
            parts.append({"type": "image_url", "image_url": {"url": data_url(block)}})
    return parts


def _assistant_message(message: AssistantMessage, model: Model) -> dict[str, Any] | None:
    text = "".join(b.text for b in message.content if isinstance(b, TextContent) and b.text.strip())
    calls = [b for b in message.content if isinstance(b, ToolCall)]
    wire: dict[str, Any] = {"role": "assistant", "content": text or None}
    thinking = [b for b in message.content if isinstance(b, ThinkingContent) and b.thinking.strip()]
    signature = thinking[0].thinking_signature if thinking else None
    if signature in REASONING_FIELDS and is_same_model(message, model):
        wire[signature] = "\n".join(b.thinking for b in thinking)
    details = _reasoning_details(message) if is_same_model(message, model) else []
    if details:
        wire["reasoning_details"] = details
    if calls:
        wire["tool_calls"] = [
            {
                "id": _tool_call_id(call.id),
                "type": "function",
                "function": {"name": call.name, "arguments": orjson.dumps(call.arguments).decode()},
            }
            for call in calls
        ]
    if not text and not calls:
        return None
    return wire


def _reasoning_details(message: AssistantMessage) -> list[dict[str, Any]]:
    """The ``reasoning_details`` items of this message's thinking (encrypted ones included),
    as the server sent them."""
    items: list[dict[str, Any]] = []
    for block in message.content:
        signature = block.thinking_signature if isinstance(block, ThinkingContent) else None
        if signature and signature.startswith(DETAILS_SIGNATURE):
            try:
                items.extend(orjson.loads(signature[len(DETAILS_SIGNATURE):]))
            except (orjson.JSONDecodeError, TypeError):
                continue
    return items


def _tool_result_message(message: ToolResultMessage, has_images: bool) -> dict[str, Any]:
    text = text_of(message.content)
    if not text and has_images:
        text = "(see attached image)"
    return {"role": "tool", "tool_call_id": _tool_call_id(message.tool_call_id), "content": text}


def convert_messages(model: Model, context: Context) -> list[dict[str, Any]]:
    """The ``messages`` array. Images returned by tools travel in one user message after the
    run of tool results, because a ``tool`` message holds text only and tool messages must
    directly follow the assistant message that called them."""
    wire: list[dict[str, Any]] = []
    if context.system_prompt:
        developer = compat_flag(
            model, "supports_developer_role", model.reasoning and model.provider == "openai"
        )
        wire.append({"role": "developer" if developer else "system", "content": context.system_prompt})
    pending_images: list[ImageContent] = []

    def flush_images() -> None:
        if pending_images:
            parts: list[dict[str, Any]] = [{"type": "text", "text": "Attached image(s) from tool result:"}]
            parts += [{"type": "image_url", "image_url": {"url": data_url(i)}} for i in pending_images]
            wire.append({"role": "user", "content": parts})
            pending_images.clear()

    messages: list[Message] = prepare_messages(context.messages, model)
    for message in messages:
        if isinstance(message, ToolResultMessage):
            images = images_of(message.content) if accepts_images(model) else []
            wire.append(_tool_result_message(message, bool(images)))
            pending_images.extend(images)
            continue
        flush_images()
        if isinstance(message, UserMessage):
            content = _user_parts(message.content, model)
            if content:
                wire.append({"role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            converted = _assistant_message(message, model)
            if converted is not None:
                wire.append(converted)
    flush_images()
    return wire


def build_request_body(model: Model, context: Context, options: StreamOptions | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model.id,
        "messages": convert_messages(model, context),
        "stream": True,
    }
    if compat_flag(model, "supports_usage_in_streaming", True):
        body["stream_options"] = {"include_usage": True}
    if options is not None and options.max_tokens is not None:
        default_field = "max_completion_tokens" if model.provider == "openai" else "max_tokens"
        body[compat_flag(model, "max_tokens_field", default_field)] = options.max_tokens
    if options is not None and options.temperature is not None:
        body["temperature"] = options.temperature
    if context.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
            }
            for t in context.tools
        ]
        if options is not None and options.tool_choice is not None:
            body["tool_choice"] = options.tool_choice
    effort = reasoning_effort(model, options)
    if effort is not None:
        if model.provider == "openrouter":
            body["reasoning"] = {"effort": effort}
        else:
            body["reasoning_effort"] = effort
    return merge_extra_body(body, options)


# --------------------------------------------------------------------------- response


def usage_from_chunk(usage: Any) -> Usage:
    return split_usage(
        getattr(usage, "prompt_tokens", None) or 0,
        getattr(usage, "prompt_tokens_details", None),
        getattr(usage, "completion_tokens", None) or 0,
    )


class StreamTranslator:
    """Maps chunks onto the assembler. One block is "current" at a time: a delta of another
    kind (or a new tool call) closes it, as the vendor streams blocks one after another."""

    def __init__(self, assembler: AssistantStreamAssembler) -> None:
        self.assembler = assembler
        self.current: tuple[str, int | None] | None = None  # kind, tool position
        self.current_index = -1
        self.tools: dict[int, tuple[str, int]] = {}  # tool position -> (id, content index)
        self.finish_reason: str | None = None
        self.details: list[dict[str, Any]] = []  # reasoning_details of the current thinking
        self.server_items: dict[tuple[str, int], dict[str, Any]] = {}  # (kind, position) -> item

    def handle(self, chunk: Any) -> Iterator[AssistantEvent]:
        usage = getattr(chunk, "usage", None) or _groq_usage(chunk)
        if usage:
            self.assembler.set_usage(usage_from_chunk(usage))
        for choice in (getattr(chunk, "choices", None) or [])[:1]:
            delta = getattr(choice, "delta", None)
            if delta is not None:
                yield from self._on_delta(delta)
            finish_reason = getattr(choice, "finish_reason", None)
            if finish_reason:
                self.finish_reason = finish_reason

    def _on_delta(self, delta: Any) -> Iterator[AssistantEvent]:
        details = _extra(delta, "reasoning_details")
        if isinstance(details, list) and details:
            yield from self._on_reasoning_details(details)
        else:
            for field in REASONING_FIELDS:
                value = getattr(delta, field, None)
                if isinstance(value, str) and value:
                    yield from self._thinking(value, field)
                    break
        content = getattr(delta, "content", None)
        if isinstance(content, str) and content:
            yield from self._text(content)
        elif isinstance(content, list):
            yield from self._on_content_parts(content)
        for call in getattr(delta, "tool_calls", None) or []:
            yield from self._on_tool_call(call)
        for kind in ("executed_tools", "annotations"):
            items = _extra(delta, kind)
            for position, item in enumerate(items if isinstance(items, list) else []):
                if isinstance(item, dict):
                    key = (kind, item.get("index", position) if kind == "executed_tools" else len(self.server_items))
                    self.server_items[key] = {**self.server_items.get(key, {}), **item}

    def _text(self, text: str) -> Iterator[AssistantEvent]:
        if self.current != ("text", None):
            yield from self._begin(("text", None))
        yield self.assembler.append_text(self.current_index, text)

    def _thinking(self, text: str, signature: str | None) -> Iterator[AssistantEvent]:
        if self.current != ("thinking", None):
            yield from self._begin(("thinking", None))
            self.assembler.set_thinking_signature(self.current_index, signature)
        if text:
            yield self.assembler.append_thinking(self.current_index, text)

    def _on_reasoning_details(self, items: list[Any]) -> Iterator[AssistantEvent]:
        """``reasoning.text`` items are thinking; every item (summaries and encrypted ones
        too) is kept in the signature, merged by ``index``, to go back on the next turn."""
        for item in items:
            if not isinstance(item, dict):
                continue
            text = item.get("text") if item.get("type") == "reasoning.text" else None
            if item.get("type") == "reasoning.summary" and not self.details:
                text = item.get("summary")
            if self.current != ("thinking", None):
                self.details = []
            yield from self._thinking(text if isinstance(text, str) else "", None)
            _merge_detail(self.details, item)
            self.assembler.set_thinking_signature(
                self.current_index, DETAILS_SIGNATURE + orjson.dumps(self.details).decode()
            )

    def _on_content_parts(self, parts: list[Any]) -> Iterator[AssistantEvent]:
        """Typed content parts (Mistral reasoning models): ``thinking`` parts hold text parts."""
        for part in parts:
            if not isinstance(part, dict):
                part = as_plain_dict(part)
            if part.get("type") == "text" and part.get("text"):
                yield from self._text(part["text"])
            elif part.get("type") == "thinking":
                inner = part.get("thinking")
                pieces = inner if isinstance(inner, list) else [{"type": "text", "text": inner}]
                for piece in pieces:
                    if isinstance(piece, dict) and isinstance(piece.get("text"), str) and piece["text"]:
                        yield from self._thinking(piece["text"], None)

    def _on_tool_call(self, call: Any) -> Iterator[AssistantEvent]:
        # Servers that omit ``index`` stream one call at a time, told apart by their ids.
        position = getattr(call, "index", None) or 0
        call_id = getattr(call, "id", None)
        function = getattr(call, "function", None)
        name = getattr(function, "name", None) or ""
        known = self.tools.get(position)
        if known is None or (call_id and call_id != known[0]):
            call_id = call_id or f"call_{len(self.tools)}"
            yield from self._begin(("tool", position), tool=(call_id, name))
            self.tools[position] = (call_id, self.current_index)
            index = self.current_index
        else:
            index = known[1]
            if name:
                self.assembler.set_tool_call_identity(index, name=name)
        arguments = getattr(function, "arguments", None)
        if arguments:
            yield self.assembler.append_tool_arguments(index, arguments)

    def _begin(self, key: tuple[str, int | None], *, tool: tuple[str, str] | None = None) -> Iterator[AssistantEvent]:
        yield from self.assembler.close_open_blocks()
        self.current = key
        event: AssistantEvent
        if key[0] == "text":
            self.current_index, event = self.assembler.begin_text()
        elif key[0] == "thinking":
            self.current_index, event = self.assembler.begin_thinking()
        else:
            assert tool is not None
            self.current_index, event = self.assembler.begin_tool_call(*tool)
        yield event

    def finish(self, saw_done: bool) -> list[AssistantEvent]:
        """The terminal events. ``[DONE]`` after well-formed chunks is a normal end even
        without a ``finish_reason`` (some compatible servers never send one); a stream that
        has neither was cut short."""
        reason = self.finish_reason
        if reason is None and not saw_done:
            raise OpenAIStreamError(
                "the stream ended without a finish_reason and before data: [DONE]; "
                "the answer is incomplete"
            )
        if reason == "content_filter":
            raise OpenAIStreamError("the response was stopped by the content filter (finish_reason content_filter)")
        events = self.assembler.close_open_blocks()
        self._add_server_tools()
        return events + self.assembler.finish(_STOP_REASONS.get(reason or "stop", "stop"))

    def _add_server_tools(self) -> None:
        model = self.assembler.model
        for (kind, _), item in self.server_items.items():
            self.assembler.add_server_tool(
                ServerToolContent(
                    vendor=model.provider, api=API, kind=kind, payload=item, text=_server_tool_text(kind, item)
                )
            )


def _extra(delta: Any, name: str) -> Any:
    """A delta field the SDK's model does not declare (kept in its extra fields)."""
    value = getattr(delta, name, None)
    if value is None:
        extra = getattr(delta, "model_extra", None) or {}
        value = extra.get(name)
    return value


def _merge_detail(details: list[dict[str, Any]], item: dict[str, Any]) -> None:
    """Append ``item``, or grow the item of the same type and index by its text pieces."""
    for kept in details:
        if kept.get("type") == item.get("type") and kept.get("index") == item.get("index"):
            for field in ("text", "summary", "data"):
                if isinstance(item.get(field), str):
                    kept[field] = (kept.get(field) or "") + item[field]
            for field, value in item.items():
                if field not in ("text", "summary", "data") and value is not None:
                    kept[field] = value
            return
    details.append(dict(item))


def _server_tool_text(kind: str, item: dict[str, Any]) -> str | None:
    if kind == "annotations":
        citation = item.get("url_citation") or {}
        parts = [citation.get("title"), citation.get("url")]
        return " ".join(str(p) for p in parts if p) or None
    output = item.get("output")
    return output if isinstance(output, str) and output else None


def _groq_usage(chunk: Any) -> Any:
    """Groq reports usage under ``x_groq.usage`` in the last chunk."""
    extra = getattr(chunk, "x_groq", None)
    usage = extra.get("usage") if isinstance(extra, dict) else getattr(extra, "usage", None)
    if isinstance(usage, dict):
        from types import SimpleNamespace

        details = usage.get("prompt_tokens_details")
        return SimpleNamespace(
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            prompt_tokens_details=SimpleNamespace(**details) if isinstance(details, dict) else None,
        )
    return usage


class OpenAICompletionsProvider(OpenAIProviderBase):
    """api ``openai-completions``."""

    api = API

    def build_request_body(self, model: Model, context: Context, options: StreamOptions | None) -> dict[str, Any]:
        return build_request_body(model, context, options)

    async def open_stream(self, client: Any, body: dict[str, Any]) -> Any:
        return await client.chat.completions.create(**sdk_arguments(body, ("model", "messages")))

    async def translate(
        self, assembler: AssistantStreamAssembler, stream: Any, model: Model
    ) -> AsyncIterator[AssistantEvent]:
        translator = StreamTranslator(assembler)
        saw_done = _watch_done(stream)
        async for chunk in stream:
            for event in translator.handle(chunk):
                yield event
        for event in translator.finish(saw_done()):
            yield event


def _watch_done(stream: Any) -> Callable[[], bool]:
    """Whether the stream's ``data: [DONE]`` arrived, which the SDK consumes silently. The
    SDK reads its server-sent events through ``_iter_events`` (looked up when iteration
    starts), so a wrapper there sees them; on an SDK without it, no ``[DONE]`` is assumed
    and a stream without ``finish_reason`` stays an error, as before."""
    original = getattr(stream, "_iter_events", None)
    seen = [False]
    if original is None:
        return lambda: seen[0]

    async def watched() -> AsyncIterator[Any]:
        async for event in original():
            if getattr(event, "data", "").startswith("[DONE]"):
                seen[0] = True
            yield event

    stream._iter_events = watched
    return lambda: seen[0]


__all__ = [
    "API",
    "OpenAICompletionsProvider",
    "StreamTranslator",
    "build_request_body",
    "convert_messages",
    "usage_from_chunk",
]
