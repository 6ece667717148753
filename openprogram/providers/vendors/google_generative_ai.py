"""The ``google-generative-ai`` provider: the Gemini API's ``streamGenerateContent``, through the
official ``google-genai`` SDK (``client.aio.models.generate_content_stream``).

The SDK is imported inside the call. :func:`build_request_body` produces the body in the SDK's
own request shape (``model``, ``contents``, ``config`` as plain dicts), which is what
``options.on_payload`` sees and may replace; the SDK then converts it to the wire format.
:class:`StreamTranslator` turns response chunks into our events: Gemini streams text and thought
text as parts that continue the current block, and sends each function call whole, so tool
arguments are set at once rather than parsed from deltas.

Thought signatures are opaque bytes (base64 on the wire). A signature on a thought part is kept
as ``thinking_signature``, one on a text part as ``text_signature``, and both are sent back on
the same kind of part. Our ``ToolCall`` has no signature field, so a signature that Gemini puts
on a function call part is not kept; for Gemini 3 models, which reject a function call without
one, the documented placeholder signature is sent instead.

Code execution parts (``executable_code``, ``code_execution_result``) are kept as
:class:`ServerToolContent` blocks and sent back as the same parts; prompt tokens spent on
server-side tools (``toolUsePromptTokenCount``) are input tokens, billed as such.
"""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ..assembly import AssistantEvent, AssistantStreamAssembler
from ..base import AssembledProvider
from ..guard import ErrorDescriber
from ..types import (
    AssistantMessage,
    Context,
    ImageContent,
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
from .common import (
    api_key_for,
    apply_payload_hook,
    describe_provider_error,
    normalize_tool_call_id,
    prepare_messages,
    request_headers,
    text_of,
    thinking_budget,
)

if TYPE_CHECKING:
    from google.genai.types import HttpOptionsDict

GOOGLE_API = "google-generative-ai"
LABEL = "google"

#: Retries (after the first attempt) for 408/429/5xx and connection failures before the stream
#: starts. The SDK's own default is four retries over about 15 s; two keeps a transient error
#: from failing an agent run without stalling it. Waits are capped by
#: ``options.max_retry_delay_ms``.
DEFAULT_MAX_RETRIES = 2
RETRY_STATUS_CODES = (408, 429, 500, 502, 503, 504)

#: Accepted by Gemini in place of a thought signature it requires but we could not keep.
PLACEHOLDER_THOUGHT_SIGNATURE = "skip_thought_signature_validator"

_STOP_REASONS = {"STOP": "stop", "MAX_TOKENS": "length"}

#: Parts of tools Gemini runs itself, kept as server tool blocks under these kinds.
SERVER_PART_KINDS = ("executable_code", "code_execution_result")
_PRO_LEVELS = {"minimal": "LOW", "low": "LOW", "medium": "HIGH", "high": "HIGH", "xhigh": "HIGH"}
_FLASH_LEVELS = {"minimal": "MINIMAL", "low": "LOW", "medium": "MEDIUM", "high": "HIGH", "xhigh": "HIGH"}


# ----------------------------------------------------------------------------- provider


class GoogleGenerativeAIProvider(AssembledProvider):
    """Streams Gemini. One SDK client per call, so no connection pool outlives its event loop."""

    api = GOOGLE_API

    def __init__(
        self,
        *,
        max_retries: int = DEFAULT_MAX_RETRIES,
        retry_initial_delay: float = 1.0,
        timestamp: int | None = None,
    ) -> None:
        # ``timestamp`` fixes the assistant message timestamp, for deterministic tests.
        self.max_retries = max_retries
        self.retry_initial_delay = retry_initial_delay
        self.timestamp = timestamp

    def describe_error(self, model: Model) -> ErrorDescriber:
        return describe_provider_error(LABEL)

    def _http_options(self, model: Model, options: StreamOptions | None) -> HttpOptionsDict:
        max_delay = (options.max_retry_delay_ms if options is not None else 60000) / 1000
        http_options: HttpOptionsDict = {
            # Passing retry options also turns off the SDK's implicit reconnect loop (aiohttp).
            "retry_options": {
                "attempts": self.max_retries + 1,
                "initial_delay": self.retry_initial_delay,
                # Random extra wait of up to one initial delay (the SDK's default is 1 s).
                "jitter": self.retry_initial_delay,
                "max_delay": max_delay,
                "http_status_codes": list(RETRY_STATUS_CODES),
            },
        }
        if model.base_url:
            http_options["base_url"] = model.base_url
        headers = request_headers(model, options)
        if headers:
            http_options["headers"] = headers
        return http_options

    async def produce(
        self,
        assembler: AssistantStreamAssembler,
        model: Model,
        context: Context,
        options: StreamOptions | None,
    ) -> AsyncIterator[AssistantEvent]:
        api_key = api_key_for(model, options)
        request = apply_payload_hook(options, build_request_body(model, context, options))

        from google import genai

        client = genai.Client(
            api_key=api_key, vertexai=False, http_options=self._http_options(model, options)
        )
        try:
            response = await client.aio.models.generate_content_stream(
                model=request["model"], contents=request["contents"], config=request.get("config")
            )
            translator = StreamTranslator(assembler)
            try:
                # The SDK sends the request at the first chunk; ``start`` waits for the vendor.
                first = await anext(response, None)
                yield assembler.start()
                if first is not None:
                    for event in translator.handle(first):
                        yield event
                async for chunk in response:
                    for event in translator.handle(chunk):
                        yield event
            finally:
                aclose = getattr(response, "aclose", None)
                if aclose is not None:
                    await aclose()
            for event in translator.finish():
                yield event
        finally:
            await client.aio.aclose()


# ----------------------------------------------------------------------------- request


def _signature_bytes(signature: str | None) -> bytes | None:
    """Signatures are stored as the base64 text Gemini sends; the SDK wants the bytes."""
    if not signature:
        return None
    try:
        return base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        return None


def _image_part(image: ImageContent) -> dict[str, Any]:
    return {"inline_data": {"mime_type": image.mime_type, "data": base64.b64decode(image.data)}}


def _user_parts(content: str | list[Any], model: Model) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}] if content.strip() else []
    parts: list[dict[str, Any]] = []
    for item in content:
        if isinstance(item, TextContent):
            if item.text.strip():
                parts.append({"text": item.text})
        elif isinstance(item, ImageContent) and "image" in model.input:
            parts.append(_image_part(item))
    return parts


def _model_parts(message: AssistantMessage, model: Model) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    is_gemini_3 = "gemini-3" in model.id.lower()
    for block in message.content:
        if isinstance(block, TextContent):
            if not block.text.strip():
                continue
            part: dict[str, Any] = {"text": block.text}
            signature = _signature_bytes(block.text_signature)
            if signature:
                part["thought_signature"] = signature
            parts.append(part)
        elif isinstance(block, ThinkingContent):
            if block.redacted or not block.thinking.strip():
                continue
            part = {"text": block.thinking, "thought": True}
            signature = _signature_bytes(block.thinking_signature)
            if signature:
                part["thought_signature"] = signature
            parts.append(part)
        elif isinstance(block, ServerToolContent):
            if block.api == GOOGLE_API and block.kind in SERVER_PART_KINDS:
                parts.append({block.kind: dict(block.payload)})
        elif isinstance(block, ToolCall):
            part = {"function_call": {"name": block.name, "args": block.arguments}}
            if is_gemini_3:
                # The placeholder is base64 text (URL-safe alphabet); Gemini compares the bytes.
                part["thought_signature"] = base64.urlsafe_b64decode(PLACEHOLDER_THOUGHT_SIGNATURE)
            parts.append(part)
    return parts


def _function_response_part(result: ToolResultMessage) -> dict[str, Any]:
    text = text_of(result.content)
    if not text and any(isinstance(item, ImageContent) for item in result.content):
        text = "(see attached image)"
    payload = {"error": text} if result.is_error else {"output": text}
    return {"function_response": {"name": result.tool_name, "response": payload}}


def convert_contents(context: Context, model: Model) -> list[dict[str, Any]]:
    """Our conversation as Gemini contents. Function responses of one assistant turn go into a
    single user turn, and images a tool returned follow them as inline data."""
    contents: list[dict[str, Any]] = []
    for message in prepare_messages(context.messages, model):
        if isinstance(message, UserMessage):
            parts = _user_parts(message.content, model)
            if parts:
                contents.append({"role": "user", "parts": parts})
        elif isinstance(message, AssistantMessage):
            parts = _model_parts(message, model)
            if parts:
                contents.append({"role": "model", "parts": parts})
        elif isinstance(message, ToolResultMessage):
            parts = [_function_response_part(message)]
            if "image" in model.input:
                parts.extend(_image_part(item) for item in message.content if isinstance(item, ImageContent))
            previous = contents[-1] if contents else None
            if (
                previous is not None
                and previous["role"] == "user"
                and any("function_response" in part for part in previous["parts"])
            ):
                previous["parts"].extend(parts)
            else:
                contents.append({"role": "user", "parts": parts})
    return contents


def _thinking_config(model: Model, options: StreamOptions | None) -> dict[str, Any] | None:
    level = getattr(options, "reasoning", None)
    if not level or not model.reasoning:
        return None
    model_id = model.id.lower()
    if "gemini-3" in model_id:
        levels = _PRO_LEVELS if "pro" in model_id else _FLASH_LEVELS
        return {"include_thoughts": True, "thinking_level": levels.get(level, "HIGH")}
    budgeted = thinking_budget(model, options)
    if budgeted is None:
        return None
    return {"include_thoughts": True, "thinking_budget": budgeted[1]}


def _tool_config(choice: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(choice, dict):
        return choice
    mode = {"auto": "AUTO", "any": "ANY", "required": "ANY", "none": "NONE"}.get(choice.lower(), "AUTO")
    return {"function_calling_config": {"mode": mode}}


def build_request_body(model: Model, context: Context, options: StreamOptions | None) -> dict[str, Any]:
    """``{"model", "contents", "config"}`` in the SDK's (snake_case) form.

    ``options.extra_body`` holds wire-body fields (``generationConfig``, ``safetySettings``
    ...), which this shape cannot name: they travel as the SDK's per-request
    ``http_options.extra_body``, which the SDK merges into the wire body last, key by key,
    as :func:`~.common.merge_extra_body` does for the other vendors."""
    config: dict[str, Any] = {
        # Function declarations are answered by our agent loop, never by the SDK itself.
        "automatic_function_calling": {"disable": True},
    }
    if context.system_prompt:
        config["system_instruction"] = context.system_prompt
    if context.tools:
        config["tools"] = [
            {
                "function_declarations": [
                    {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters_json_schema": tool.parameters,
                    }
                    for tool in context.tools
                ]
            }
        ]
    if options is not None:
        if options.temperature is not None:
            config["temperature"] = options.temperature
        if options.max_tokens:
            config["max_output_tokens"] = options.max_tokens
        if options.tool_choice is not None and context.tools:
            config["tool_config"] = _tool_config(options.tool_choice)
    thinking = _thinking_config(model, options)
    if thinking is not None:
        config["thinking_config"] = thinking
    if options is not None and options.extra_body:
        config["http_options"] = {"extra_body": copy.deepcopy(options.extra_body)}
    return {"model": model.id, "contents": convert_contents(context, model), "config": config}


# ----------------------------------------------------------------------------- response


def _signature_text(signature: bytes | None) -> str | None:
    return base64.b64encode(signature).decode("ascii") if signature else None


class StreamTranslator:
    """Turns ``GenerateContentResponse`` chunks into assembler calls. Text and thought parts
    continue the open block of their kind; any other part closes it."""

    def __init__(self, assembler: AssistantStreamAssembler) -> None:
        self.assembler = assembler
        self.open_index: int | None = None
        self.open_kind: str | None = None
        self.finish_reason: str | None = None
        self.finish_message: str | None = None
        self.response_id: str | None = None
        self.calls = 0

    def handle(self, chunk: Any) -> list[AssistantEvent]:
        events: list[AssistantEvent] = []
        self.response_id = self.response_id or getattr(chunk, "response_id", None)
        candidate = chunk.candidates[0] if chunk.candidates else None
        if candidate is not None:
            parts = candidate.content.parts if candidate.content and candidate.content.parts else []
            for part in parts:
                events.extend(self._part(part))
            if candidate.finish_reason is not None:
                reason = candidate.finish_reason
                self.finish_reason = str(getattr(reason, "value", reason))
                self.finish_message = getattr(candidate, "finish_message", None)
        if chunk.usage_metadata is not None:
            self._usage(chunk.usage_metadata)
        return events

    def _part(self, part: Any) -> list[AssistantEvent]:
        if part.function_call is not None:
            return self._close() + self._function_call(part.function_call)
        for kind in SERVER_PART_KINDS:
            value = getattr(part, kind, None)
            if value is not None:
                return self._close() + self._server_part(kind, value)
        if part.text is None:
            return []
        kind = "thinking" if part.thought else "text"
        events: list[AssistantEvent] = []
        index: int | None
        start: AssistantEvent
        if self.open_kind != kind:
            if not part.text:
                # A bare signature part with no block of its kind to carry it: nothing to show.
                return []
            events.extend(self._close())
            if kind == "thinking":
                index, start = self.assembler.begin_thinking()
            else:
                index, start = self.assembler.begin_text()
            self.open_index, self.open_kind = index, kind
            events.append(start)
        index = self.open_index
        assert index is not None
        if part.text:
            if kind == "thinking":
                events.append(self.assembler.append_thinking(index, part.text))
            else:
                events.append(self.assembler.append_text(index, part.text))
        signature = _signature_text(part.thought_signature)
        if signature:
            if kind == "thinking":
                self.assembler.set_thinking_signature(index, signature)
            else:
                self.assembler.set_text_signature(index, signature)
        return events

    def _function_call(self, call: Any) -> list[AssistantEvent]:
        name = call.name or ""
        self.calls += 1
        call_id = call.id or normalize_tool_call_id(f"{name}_{self.response_id or 'call'}_{self.calls}")
        index, start = self.assembler.begin_tool_call(call_id, name)
        self.assembler.set_tool_arguments(index, dict(call.args or {}))
        return [start, self.assembler.end_tool_call(index)]

    def _server_part(self, kind: str, value: Any) -> list[AssistantEvent]:
        payload = value.model_dump(mode="json", exclude_none=True)
        text = payload.get("code") if kind == "executable_code" else payload.get("output")
        self.assembler.add_server_tool(
            ServerToolContent(vendor=LABEL, api=GOOGLE_API, kind=kind, payload=payload, text=text or None)
        )
        return []

    def _close(self) -> list[AssistantEvent]:
        index, kind = self.open_index, self.open_kind
        self.open_index = self.open_kind = None
        if index is None:
            return []
        if kind == "thinking":
            return [self.assembler.end_thinking(index)]
        return [self.assembler.end_text(index)]

    def _usage(self, metadata: Any) -> None:
        """Gemini counts cached tokens inside the prompt and thoughts apart from the answer;
        ours keeps ``input`` uncached and ``output`` everything generated. Prompt tokens of
        server-side tools (``toolUsePromptTokenCount``) are billed as input, so they are input."""
        prompt = (metadata.prompt_token_count or 0) + (getattr(metadata, "tool_use_prompt_token_count", None) or 0)
        cached = metadata.cached_content_token_count or 0
        output = (metadata.candidates_token_count or 0) + (metadata.thoughts_token_count or 0)
        self.assembler.set_usage(
            Usage(
                input=max(0, prompt - cached),
                output=output,
                cache_read=cached,
                total_tokens=metadata.total_token_count or 0,
            )
        )

    def finish(self) -> list[AssistantEvent]:
        """The terminal events once the stream has ended cleanly."""
        reason = self.finish_reason
        if reason is None:
            raise ConnectionError("the stream ended without a finish reason")
        events = self._close()
        if reason in _STOP_REASONS:
            return events + self.assembler.finish(_STOP_REASONS[reason])
        detail = f": {self.finish_message}" if self.finish_message else ""
        return events + [self.assembler.fail(f"{LABEL}: generation stopped with finish reason {reason}{detail}")]


__all__ = ["GOOGLE_API", "GoogleGenerativeAIProvider", "StreamTranslator", "build_request_body"]
