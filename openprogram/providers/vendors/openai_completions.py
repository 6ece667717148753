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

from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson

from ..assembly import AssistantEvent, AssistantStreamAssembler
from ..types import (
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    EventDone,
    EventError,
    EventStart,
    EventTextDelta,
    EventThinkingDelta,
    EventThinkingEnd,
    EventToolCallDelta,
    EventToolCallEnd,
    EventToolCallStart,
    ImageContent,
    Message,
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
from . import wire as wire_module
from .common import images_of, merge_extra_body, normalize_tool_call_id, prepare_messages, text_of
from .openai_common import (
    OpenAIProviderBase,
    OpenAIStreamError,
    accepts_images,
    as_plain_dict,
    compat_flag,
    data_url,
    is_same_model,
    openai_error_body,
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

_STOP_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
}


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
        elif isinstance(block, RawContent) and block.api == API and not block.message:
            parts.append(block.payload)
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
                items.extend(orjson.loads(signature[len(DETAILS_SIGNATURE) :]))
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
        wire.append(
            {"role": "developer" if developer else "system", "content": context.system_prompt}
        )
    pending_images: list[ImageContent] = []

    def flush_images() -> None:
        if pending_images:
            parts: list[dict[str, Any]] = [
                {"type": "text", "text": "Attached image(s) from tool result:"}
            ]
            parts += [
                {"type": "image_url", "image_url": {"url": data_url(i)}} for i in pending_images
            ]
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
        raw = wire_module.raw_message_of(message, API)
        if raw is not None:
            if raw:
                wire.append(raw)
            continue
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


def build_request_body(
    model: Model, context: Context, options: StreamOptions | None
) -> dict[str, Any]:
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
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
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
        getattr(usage, "completion_tokens_details", None),
    )


class StreamTranslator(roles.StreamTranslator):
    """Maps chunks onto the assembler. One block is "current" at a time: a delta of another
    kind (or a new tool call) closes it, as the vendor streams blocks one after another.
    Chunks carry no type, so :meth:`handle` reads each whole; the message ends in
    :meth:`finish`, once the stream has."""

    def __init__(self, assembler: AssistantStreamAssembler) -> None:
        super().__init__(assembler)
        #: Whether the stream's ``data: [DONE]`` arrived (see :meth:`finish`).
        self.saw_done = False
        self.current: tuple[str, int | None] | None = None  # kind, tool position
        self.current_index = -1
        self.tools: dict[int, tuple[str, int]] = {}  # tool position -> (id, content index)
        self.finish_reason: str | None = None
        self.details: list[dict[str, Any]] = []  # reasoning_details of the current thinking
        self.server_items: dict[tuple[str, int], dict[str, Any]] = {}  # (kind, position) -> item

    def identify(self, chunk: Any) -> None:
        """Every chunk names the completion and the model version that wrote it."""
        self.assembler.set_response(getattr(chunk, "id", None), getattr(chunk, "model", None))

    def handle(self, chunk: Any) -> list[AssistantEvent]:
        return list(self._read_chunk(chunk))

    def _read_chunk(self, chunk: Any) -> Iterator[AssistantEvent]:
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
                    key = (
                        kind,
                        item.get("index", position)
                        if kind == "executed_tools"
                        else len(self.server_items),
                    )
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
                    if (
                        isinstance(piece, dict)
                        and isinstance(piece.get("text"), str)
                        and piece["text"]
                    ):
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

    def _begin(
        self, key: tuple[str, int | None], *, tool: tuple[str, str] | None = None
    ) -> Iterator[AssistantEvent]:
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

    def finish(self) -> list[AssistantEvent]:
        """The terminal events. ``[DONE]`` after well-formed chunks (:attr:`saw_done`) is a
        normal end even without a ``finish_reason`` (some compatible servers never send one);
        a stream that has neither was cut short."""
        reason = self.finish_reason
        if reason is None and not self.saw_done:
            raise OpenAIStreamError(
                "the stream ended without a finish_reason and before data: [DONE]; "
                "the answer is incomplete"
            )
        if reason == "content_filter":
            raise OpenAIStreamError(
                "the response was stopped by the content filter (finish_reason content_filter)"
            )
        events = self.assembler.close_open_blocks()
        self._add_server_tools()
        return events + self.assembler.finish(_STOP_REASONS.get(reason or "stop", "stop"))

    def _add_server_tools(self) -> None:
        model = self.assembler.model
        for (kind, _), item in self.server_items.items():
            self.assembler.add_server_tool(
                ServerToolContent(
                    vendor=model.provider,
                    api=API,
                    kind=kind,
                    payload=item,
                    text=_server_tool_text(kind, item),
                )
            )


class AnswerReader(roles.AnswerReader):
    """Each ``data:`` of the stream, or the whole body of a call that did not stream (read as
    the one chunk that says all of it)."""

    translator_class = StreamTranslator
    translator: StreamTranslator

    def sse(self, event: str | None, data: str) -> list[AssistantEvent]:
        if data.strip() == "[DONE]":
            self.translator.saw_done = True
            return []
        chunk = orjson.loads(data)
        if isinstance(chunk, dict) and isinstance(chunk.get("error"), dict):
            raise OpenAIStreamError(chunk["error"].get("message") or "the stream reported an error")
        return self.translator.handle(wire.JsonView(chunk)) if isinstance(chunk, dict) else []

    def body(self, body: Any) -> list[AssistantEvent]:
        self.translator.saw_done = True
        return (
            self.translator.handle(wire.JsonView(_completion_as_chunk(body)))
            if isinstance(body, dict)
            else []
        )


def _completion_as_chunk(body: dict[str, Any]) -> dict[str, Any]:
    """A ``chat.completion`` as the one chunk that streams all of it: each choice's message is
    its delta, its tool calls numbered as a stream numbers them."""
    choices = []
    for choice in body.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        delta = dict(choice.get("message") or {})
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            delta["tool_calls"] = [
                {**call, "index": position}
                for position, call in enumerate(calls)
                if isinstance(call, dict)
            ]
        choices.append({**choice, "delta": delta})
    return {**body, "choices": choices}


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
        output_details = usage.get("completion_tokens_details")
        return SimpleNamespace(
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            prompt_tokens_details=SimpleNamespace(**details) if isinstance(details, dict) else None,
            completion_tokens_details=SimpleNamespace(**output_details)
            if isinstance(output_details, dict)
            else None,
        )
    return usage


class OpenAICompletionsProvider(OpenAIProviderBase):
    """api ``openai-completions``."""

    api = API

    def build_request_body(
        self, model: Model, context: Context, options: StreamOptions | None
    ) -> dict[str, Any]:
        return build_request_body(model, context, options)

    async def open_stream(self, client: Any, body: dict[str, Any]) -> Any:
        return await client.chat.completions.create(**sdk_arguments(body, ("model", "messages")))

    async def translate(
        self, assembler: AssistantStreamAssembler, stream: Any, model: Model
    ) -> AsyncIterator[AssistantEvent]:
        translator = StreamTranslator(assembler)
        _watch_done(stream, translator)
        async for event in roles.translated(translator, stream):
            yield event


def _watch_done(stream: Any, translator: StreamTranslator) -> None:
    """Note on ``translator`` when the stream's ``data: [DONE]`` arrives, which the SDK
    consumes silently. The SDK reads its server-sent events through ``_iter_events`` (looked
    up when iteration starts), so a wrapper there sees them; on an SDK without it, no
    ``[DONE]`` is assumed and a stream without ``finish_reason`` stays an error, as before."""
    original = getattr(stream, "_iter_events", None)
    if original is None:
        return

    async def watched() -> AsyncIterator[Any]:
        async for event in original():
            if getattr(event, "data", "").startswith("[DONE]"):
                translator.saw_done = True
            yield event

    stream._iter_events = watched


# --------------------------------------------------------------------------- inbound: a client's request
#
# The two directions ``openprogram proxy`` adds (docs/proxy.md): a Chat Completions body read
# into our request, and our events written back as Chat Completions chunks or a completion.

_FINISH_REASONS = {"stop": "stop", "length": "length", "toolUse": "tool_calls"}


def parse_request_body(body: dict[str, Any], *, model_id: str | None = None) -> wire.ParsedRequest:
    """A Chat Completions request body as ``(Model, Context, SimpleStreamOptions)``, such that
    :func:`build_request_body` gives back every field of ``body`` (those with no typed option
    through ``extra_body``). Raises :class:`~.wire.WireRequestError` for what ours cannot hold."""
    wire.check_depth(body)
    messages = wire.required(body, "messages", list, "body")
    name = model_id or wire.required(body, "model", str, "body")
    max_field = (
        "max_tokens"
        if "max_tokens" in body and "max_completion_tokens" not in body
        else "max_completion_tokens"
    )
    system, start = wire.leading_system(messages, "messages", ("text",))
    model = Model(
        id=name,
        api=API,
        provider="openai",
        input=["text", "image"],
        compat={
            "max_tokens_field": max_field,
            "supports_developer_role": bool(messages)
            and isinstance(messages[0], dict)
            and messages[0].get("role") == "developer",
        },
    )
    context = Context(
        system_prompt=system,
        messages=_parse_messages(messages, start, model),
        tools=_parse_tools(wire.field(body, "tools", list, "body")),
    )
    options = SimpleStreamOptions(
        temperature=wire.field(body, "temperature", (int, float), "body"),
        max_tokens=wire.field(body, max_field, int, "body"),
        tool_choice=wire.field(body, "tool_choice", (str, dict), "body"),
    )
    rebuilt = build_request_body(model, context, options)
    extra = wire.carried_fields(body, rebuilt, typed=("messages", "stream", "stream_options"))
    return model, context, options.model_copy(update={"extra_body": extra})


def _image_part(part: dict[str, Any], where: str) -> UserContent:
    """An image sent as a ``data:`` URL; one sent by address (which the vendor fetches) is kept
    as the client sent it."""
    url = (
        (part.get("image_url") or {}).get("url")
        if isinstance(part.get("image_url"), dict)
        else None
    )
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        return wire.raw_part(API, part, where)
    head, data = url.split(",", 1)
    return ImageContent(data=data, mime_type=head[len("data:") : -len(";base64")])


def _user_content(content: Any, where: str) -> str | list[UserContent]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise wire.WireRequestError(f"{where} must be a string or an array of parts")
    blocks: list[UserContent] = []
    for position, part in enumerate(content):
        here = f"{where}[{position}]"
        kind = wire.field(part, "type", str, here)
        if kind == "text":
            blocks.append(TextContent(text=wire.required(part, "text", str, here)))
        elif kind == "image_url":
            blocks.append(_image_part(part, here))
        else:  # audio, a file: kept as sent
            blocks.append(wire.raw_part(API, part, here))
    return blocks


def _parse_messages(messages: list[Any], start: int, model: Model) -> list[Message]:
    parsed: list[Message] = []
    names: dict[str, str] = {}  # tool call id -> tool name, for the results
    for position in range(start, len(messages)):
        message, where = messages[position], f"messages[{position}]"
        role = wire.required(message, "role", str, where)
        if role == "user":
            parsed.append(
                UserMessage(
                    content=_user_content(message.get("content"), f"{where}.content"),
                    timestamp=wire.WIRE_TIMESTAMP,
                )
            )
        elif role == "assistant":
            assistant = _parse_assistant(message, where, model)
            names.update((b.id, b.name) for b in assistant.content if isinstance(b, ToolCall))
            parsed.append(assistant)
        elif role == "tool":
            call_id = wire.required(message, "tool_call_id", str, where)
            text = wire.text_of_parts(message.get("content") or "", f"{where}.content", ("text",))
            parsed.append(
                ToolResultMessage(
                    tool_call_id=call_id,
                    tool_name=names.get(call_id, ""),
                    content=[TextContent(text=text)],
                    timestamp=wire.WIRE_TIMESTAMP,
                )
            )
        elif role in ("system", "developer"):  # after the conversation started: kept as sent
            parsed.append(wire.raw_message(API, message, where))
        else:
            raise wire.unsupported(f"message of role {wire.shown_value(role)}", where)
    return parsed


def _parse_assistant(message: dict[str, Any], where: str, model: Model) -> AssistantMessage:
    """An assistant turn as the same model's message, so its reasoning goes back in the field
    it came in (see :func:`_assistant_message`)."""
    content: list[Any] = []
    details = wire.field(message, "reasoning_details", list, where)
    if details:
        text = "".join(
            str(item.get("text") or "")
            for item in details
            if isinstance(item, dict) and item.get("type") == "reasoning.text"
        )
        content.append(
            ThinkingContent(
                thinking=text, thinking_signature=DETAILS_SIGNATURE + orjson.dumps(details).decode()
            )
        )
    for name in REASONING_FIELDS:
        reasoning = wire.field(message, name, str, where)
        if reasoning:
            content.append(ThinkingContent(thinking=reasoning, thinking_signature=name))
            break
    text = wire.text_of_parts(message.get("content") or "", f"{where}.content", ("text",))
    if text:
        content.append(TextContent(text=text))
    for position, call in enumerate(wire.field(message, "tool_calls", list, where, [])):
        here = f"{where}.tool_calls[{position}]"
        function = wire.required(call, "function", dict, here)
        content.append(
            ToolCall(
                id=wire.required(call, "id", str, here),
                name=wire.required(function, "name", str, f"{here}.function"),
                arguments=wire.json_arguments(
                    function.get("arguments") or "", f"{here}.function.arguments"
                ),
            )
        )
    return AssistantMessage(
        content=content,
        api=API,
        provider=model.provider,
        model=model.id,
        timestamp=wire.WIRE_TIMESTAMP,
    )


def _parse_tools(tools: list[Any] | None) -> list[Tool] | None:
    if not tools:
        return None
    parsed = []
    for position, tool in enumerate(tools):
        function = (
            tool.get("function")
            if isinstance(tool, dict) and tool.get("type") == "function"
            else None
        )
        if not isinstance(function, dict):
            continue  # carried whole in extra_body: the rebuilt tools differ from the client's
        parsed.append(
            Tool(
                name=wire.required(function, "name", str, f"tools[{position}].function"),
                description=wire.field(
                    function, "description", str, f"tools[{position}].function", ""
                ),
                parameters=wire.field(
                    function, "parameters", dict, f"tools[{position}].function", {}
                ),
            )
        )
    return parsed or None


# --------------------------------------------------------------------------- outbound: to a client


def usage_body(usage: Usage) -> dict[str, Any]:
    """Our usage as Chat Completions counts it: cached tokens inside the prompt, reasoning
    tokens inside the completion."""
    details: dict[str, int] = {"cached_tokens": usage.cache_read}
    if usage.cache_write:
        details["cache_write_tokens"] = usage.cache_write
    body: dict[str, Any] = {
        "prompt_tokens": wire.prompt_tokens(usage),
        "completion_tokens": usage.output,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": details,
    }
    if usage.reasoning:
        # Optional in the format: written only where there is a count to give.
        body["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning}
    return body


def _reasoning_field(block: ThinkingContent) -> str:
    signature = block.thinking_signature
    return signature if signature in REASONING_FIELDS else REASONING_FIELDS[0]


def _details_of(block: ThinkingContent) -> list[Any] | None:
    signature = block.thinking_signature or ""
    if not signature.startswith(DETAILS_SIGNATURE):
        return None
    try:
        items = orjson.loads(signature[len(DETAILS_SIGNATURE) :])
    except orjson.JSONDecodeError:
        return None
    return items if isinstance(items, list) else None


def _unstreamed_reasoning(block: ThinkingContent) -> dict[str, Any]:
    """Thinking whose field was not known while it streamed, whole: ``reasoning_details``
    (their items hold more than the text, and only the end has them all) beside the text in
    ``reasoning``, as OpenRouter sends both; reasoning that named no field (Mistral's typed
    parts) in ``reasoning_content``."""
    details = _details_of(block)
    if details is not None:
        return {"content": None, "reasoning": block.thinking, "reasoning_details": details}
    return {"content": None, REASONING_FIELDS[0]: block.thinking}


def _server_items(message: AssistantMessage) -> dict[str, list[dict[str, Any]]]:
    """The Groq ``executed_tools`` and the ``annotations`` of the answer, as they came."""
    items: dict[str, list[dict[str, Any]]] = {}
    for block in message.content:
        if isinstance(block, ServerToolContent) and block.api == API:
            items.setdefault(block.kind, []).append(dict(block.payload))
    return items


class StreamEncoder(roles.StreamEncoder):
    """Our events as ``chat.completion.chunk`` server-sent events, as OpenAI streams them: a
    role chunk, content / reasoning / tool call deltas, the finish chunk, the usage chunk
    (when the request asked for ``stream_options.include_usage``), then ``data: [DONE]``."""

    def __init__(self, request_body: dict[str, Any]) -> None:
        super().__init__(request_body)
        options = request_body.get("stream_options")
        self.include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        self.head: dict[str, Any] | None = None
        self.tools: dict[int, int] = {}  # content index -> tool call position
        self.arguments_sent: set[int] = set()

    def before(self, event: AssistantMessageEvent, message: AssistantMessage) -> bytes:
        """Every chunk repeats the first event's id, creation time and model."""
        if self.head is None:
            self.head = {
                "id": wire.answer_id("chatcmpl-", message),
                "object": "chat.completion.chunk",
                "created": message.timestamp // 1000,
                "model": wire.answer_model(message),
            }
        return b""

    def _on_start(self, event: EventStart, message: AssistantMessage) -> bytes:
        return self._chunk({"role": "assistant", "content": ""})

    def _on_text_delta(self, event: EventTextDelta, message: AssistantMessage) -> bytes:
        return self._chunk({"content": event.delta})

    def _on_thinking_delta(self, event: EventThinkingDelta, message: AssistantMessage) -> bytes:
        block = message.content[event.content_index]
        if isinstance(block, ThinkingContent) and block.thinking_signature in REASONING_FIELDS:
            return self._chunk({"content": None, block.thinking_signature: event.delta})
        return b""  # its field is known at its end (see _on_thinking_end)

    def _on_thinking_end(self, event: EventThinkingEnd, message: AssistantMessage) -> bytes:
        block = message.content[event.content_index]
        assert isinstance(block, ThinkingContent)
        return (
            self._chunk(_unstreamed_reasoning(block))
            if block.thinking_signature not in REASONING_FIELDS
            else b""
        )

    def _on_toolcall_start(self, event: EventToolCallStart, message: AssistantMessage) -> bytes:
        call = message.content[event.content_index]
        assert isinstance(call, ToolCall)
        position = self.tools[event.content_index] = len(self.tools)
        return self._chunk(
            {
                "tool_calls": [
                    {
                        "index": position,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }
                ]
            }
        )

    def _on_toolcall_delta(self, event: EventToolCallDelta, message: AssistantMessage) -> bytes:
        self.arguments_sent.add(event.content_index)
        return self._tool_arguments(event.content_index, event.delta)

    def _on_toolcall_end(self, event: EventToolCallEnd, message: AssistantMessage) -> bytes:
        if event.content_index in self.arguments_sent or not event.tool_call.arguments:
            return b""
        # arguments that came whole (no deltas) still reach the client
        return self._tool_arguments(
            event.content_index, orjson.dumps(event.tool_call.arguments).decode()
        )

    def _on_done(self, event: EventDone, message: AssistantMessage) -> bytes:
        return self._finish(event.message, _FINISH_REASONS[event.reason])

    def _on_error(self, event: EventError, message: AssistantMessage) -> bytes:
        error = {
            "message": event.error.error_message or "the call failed",
            "type": "server_error",
            "param": None,
            "code": None,
        }
        return wire.sse_frame({"error": error})

    def _tool_arguments(self, index: int, text: str) -> bytes:
        return self._chunk(
            {"tool_calls": [{"index": self.tools[index], "function": {"arguments": text}}]}
        )

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return wire.sse_frame({**(self.head or {}), "choices": [choice]})

    def _finish(self, message: AssistantMessage, finish_reason: str) -> bytes:
        frames = []
        server = _server_items(message)
        if server:
            frames.append(self._chunk(dict(server)))
        frames.append(self._chunk({}, finish_reason))
        if self.include_usage:
            frames.append(
                wire.sse_frame(
                    {**(self.head or {}), "choices": [], "usage": usage_body(message.usage)}
                )
            )
        frames.append(b"data: [DONE]\n\n")
        return b"".join(frames)


def response_body(message: AssistantMessage, request_body: dict[str, Any]) -> dict[str, Any]:
    """The ``chat.completion`` a client that did not stream gets for ``message``."""
    text = "".join(b.text for b in message.content if isinstance(b, TextContent))
    wire_message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    for block in message.content:
        if isinstance(block, ThinkingContent):
            details = _details_of(block)
            if details is not None:
                wire_message["reasoning_details"] = details
                wire_message["reasoning"] = wire_message.get("reasoning", "") + block.thinking
            else:
                field_name = _reasoning_field(block)
                wire_message[field_name] = wire_message.get(field_name, "") + block.thinking
    calls = [b for b in message.content if isinstance(b, ToolCall)]
    if calls:
        wire_message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": orjson.dumps(c.arguments).decode()},
            }
            for c in calls
        ]
    wire_message.update(_server_items(message))
    reason = message.stop_reason if message.stop_reason in _FINISH_REASONS else "stop"
    return {
        "id": wire.answer_id("chatcmpl-", message),
        "object": "chat.completion",
        "created": message.timestamp // 1000,
        "model": wire.answer_model(message),
        "choices": [
            {
                "index": 0,
                "message": wire_message,
                "logprobs": None,
                "finish_reason": _FINISH_REASONS[reason],
            }
        ],
        "usage": usage_body(message.usage),
    }


#: The error body a Chat Completions client reads (the SDK raises it with this message).
error_body = openai_error_body


__all__ = [
    "API",
    "OpenAICompletionsProvider",
    "StreamEncoder",
    "StreamTranslator",
    "build_request_body",
    "convert_messages",
    "error_body",
    "parse_request_body",
    "response_body",
    "usage_from_chunk",
]
