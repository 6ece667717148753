"""The ``openai-completions`` provider: OpenAI Chat Completions streaming, and with it every
OpenAI-compatible server (Ollama, vLLM, llama.cpp server, LM Studio, OpenRouter, Groq ...)
reached through ``model.base_url``.

Compatible servers differ in small ways, so a few choices read ``model.compat``:
``max_tokens_field`` (``"max_completion_tokens"`` on OpenAI itself, ``"max_tokens"`` elsewhere,
which every compatible server understands), ``supports_usage_in_streaming`` (default True:
sends ``stream_options.include_usage``), ``supports_developer_role`` (default: OpenAI reasoning
models only) and ``supports_xhigh``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson

from ..assembly import AssistantEvent, AssistantStreamAssembler
from ..types import (
    AssistantMessage,
    Context,
    ImageContent,
    Message,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .common import images_of, normalize_tool_call_id, prepare_messages, text_of
from .openai_common import (
    OpenAIProviderBase,
    OpenAIStreamError,
    accepts_images,
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
    return body


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
        for field in REASONING_FIELDS:
            value = getattr(delta, field, None)
            if isinstance(value, str) and value:
                if self.current != ("thinking", None):
                    yield from self._begin(("thinking", None))
                    self.assembler.set_thinking_signature(self.current_index, field)
                yield self.assembler.append_thinking(self.current_index, value)
                break
        content = getattr(delta, "content", None)
        if isinstance(content, str) and content:
            if self.current != ("text", None):
                yield from self._begin(("text", None))
            yield self.assembler.append_text(self.current_index, content)
        for call in getattr(delta, "tool_calls", None) or []:
            yield from self._on_tool_call(call)

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
        if key[0] == "text":
            self.current_index, event = self.assembler.begin_text()
        elif key[0] == "thinking":
            self.current_index, event = self.assembler.begin_thinking()
        else:
            assert tool is not None
            self.current_index, event = self.assembler.begin_tool_call(*tool)
        yield event

    def finish(self) -> list[AssistantEvent]:
        if self.finish_reason is None:
            raise ConnectionError("the stream ended before a finish_reason arrived")
        if self.finish_reason == "content_filter":
            raise OpenAIStreamError("the response was stopped by the content filter (finish_reason content_filter)")
        return self.assembler.finish(_STOP_REASONS.get(self.finish_reason, "stop"))


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
        async for chunk in stream:
            for event in translator.handle(chunk):
                yield event
        for event in translator.finish():
            yield event


__all__ = [
    "API",
    "OpenAICompletionsProvider",
    "StreamTranslator",
    "build_request_body",
    "convert_messages",
    "usage_from_chunk",
]
