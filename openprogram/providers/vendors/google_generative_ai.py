"""The ``google-generative-ai`` provider: the Gemini API's ``streamGenerateContent``, through the
official ``google-genai`` SDK (``client.aio.models.generate_content_stream``).

The SDK is imported inside the call. :func:`build_request_body` produces the body in the SDK's
own request shape (``model``, ``contents``, ``config`` as plain dicts), which is what
``options.on_payload`` sees and may replace; the SDK then converts it to the wire format.
:class:`StreamTranslator` turns response chunks into our events: Gemini streams text and thought
text as parts that continue the current block, and sends each function call whole, so tool
arguments are set at once rather than parsed from deltas.

Thought signatures are opaque bytes (base64 on the wire), kept as the base64 text Gemini sends:
on a thought part as ``thinking_signature``, on a text part as ``text_signature``, on a function
call part as the call's ``thought_signature``; each goes back on the same kind of part. Gemini 3
rejects a function call sent back without its signature, so a call that never had one (from
another vendor or an older model) gets the documented placeholder instead.

Parts of tools Gemini runs itself (code execution's ``executableCode`` / ``codeExecutionResult``,
Gemini 3's server-side ``toolCall`` / ``toolResponse``) are kept whole, signature included, as
:class:`ServerToolContent` blocks and sent back as the same parts. Grounding metadata (Google
Search, URL context: Gemini's citations) is kept too but never sent back, as Gemini takes no
such part. Prompt tokens spent on server-side tools (``toolUsePromptTokenCount``) are input
tokens, billed as such. See docs/vendors.md.
"""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import orjson

from ..assembly import AssistantEvent, AssistantStreamAssembler
from ..base import AssembledProvider
from ..guard import ErrorDescriber
from ..types import (
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    EventDone,
    EventError,
    EventTextDelta,
    EventTextEnd,
    EventThinkingDelta,
    EventThinkingEnd,
    EventToolCallEnd,
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
    describe_provider_error,
    normalize_tool_call_id,
    prepare_messages,
    request_headers,
    sdk_http_module,
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

#: Accepted by Gemini 3 in place of the signature of a function call that never had one.
PLACEHOLDER_THOUGHT_SIGNATURE = "skip_thought_signature_validator"

_STOP_REASONS = {"STOP": "stop", "MAX_TOKENS": "length"}

#: Parts of tools Gemini runs itself, kept whole as server tool blocks: the kind (the SDK's
#: field name) and the part's field on the wire.
SERVER_PARTS = {
    "executable_code": "executableCode",
    "code_execution_result": "codeExecutionResult",
    "tool_call": "toolCall",
    "tool_response": "toolResponse",
}
#: Candidate metadata holding Gemini's citations, kept as server tool blocks (kind -> wire
#: field) and never sent back: a request's content has no place for it.
CITATION_KINDS = {
    "grounding_metadata": "groundingMetadata",
    "url_context_metadata": "urlContextMetadata",
}
_PRO_LEVELS = {"minimal": "LOW", "low": "LOW", "medium": "HIGH", "high": "HIGH", "xhigh": "HIGH"}
_FLASH_LEVELS = {
    "minimal": "MINIMAL",
    "low": "LOW",
    "medium": "MEDIUM",
    "high": "HIGH",
    "xhigh": "HIGH",
}


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
        # The SDK's own HTTP stack, as the other vendors' SDKs speak: with aiohttp installed
        # (litellm brings it) google-genai would switch to it, and a failure would read
        # differently live than the same failure replayed (docs/recordings-cli.md, faults).
        http_options["async_client_args"] = {"transport": sdk_http_module().AsyncHTTPTransport()}
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
            try:
                # The SDK sends the request at the first chunk; ``start`` waits for the vendor.
                async for event in roles.translated(StreamTranslator(assembler), response):
                    yield event
            finally:
                aclose = getattr(response, "aclose", None)
                if aclose is not None:
                    await aclose()
        finally:
            await client.aio.aclose()


# ----------------------------------------------------------------------------- request


def _signature_bytes(signature: str | None) -> bytes | None:
    """Signatures are stored as the base64 text Gemini sends; the SDK wants the bytes. The
    URL-safe alphabet (the SDK's own rendering) is read too."""
    if not signature:
        return None
    for altchars in (None, b"-_"):
        try:
            return base64.b64decode(signature, altchars=altchars, validate=True)
        except (binascii.Error, ValueError):
            continue
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
        elif isinstance(item, RawContent) and item.api == GOOGLE_API and not item.message:
            parts.append(item.payload)
    return parts


def _model_parts(message: AssistantMessage, model: Model) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    is_gemini_3 = "gemini-3" in model.id.lower()
    own_api = message.api == GOOGLE_API
    # Gemini signs only the first of parallel calls: a signed turn goes back as it came.
    signed = own_api and any(
        isinstance(b, ToolCall) and b.thought_signature for b in message.content
    )
    for block in message.content:
        if isinstance(block, TextContent):
            if not block.text.strip():
                continue
            part: dict[str, Any] = {"text": block.text}
            # Another vendor's text signature (a Responses message id) means nothing here.
            signature = _signature_bytes(block.text_signature) if own_api else None
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
            server_part = _server_part(block) if block.api == GOOGLE_API else None
            if server_part is not None:
                parts.append(server_part)
        elif isinstance(block, ToolCall):
            function: dict[str, Any] = {"name": block.name, "args": block.arguments}
            if own_api and not _own_call_id(block):
                function["id"] = block.id  # Gemini's own id (Gemini 3 sends one) goes back
            part = {"function_call": function}
            signature = _signature_bytes(block.thought_signature) if own_api else None
            if signature:
                part["thought_signature"] = signature
            elif is_gemini_3 and not signed:
                # The placeholder is base64 text (URL-safe alphabet); Gemini compares the bytes.
                part["thought_signature"] = base64.urlsafe_b64decode(PLACEHOLDER_THOUGHT_SIGNATURE)
            parts.append(part)
    return parts


def _server_part(block: ServerToolContent) -> dict[str, Any] | None:
    """The part a server tool block came as (its payload, in the wire's field names, which the
    SDK accepts), or None for what Gemini takes no part for (grounding metadata)."""
    field = SERVER_PARTS.get(block.kind)
    if field is None:
        return None
    payload = dict(block.payload)
    if field not in payload:
        # Recorded when only the part's inner object was kept.
        return {block.kind: payload}
    part = {key: value for key, value in payload.items() if key != "thoughtSignature"}
    signature = _signature_bytes(payload.get("thoughtSignature"))
    if signature:
        part["thought_signature"] = signature
    return part


def _function_response_part(result: ToolResultMessage, sent_ids: set[str]) -> dict[str, Any]:
    """The result of a call; it names the call's id when the call went back with Gemini's."""
    text = text_of(result.content)
    if not text and any(isinstance(item, ImageContent) for item in result.content):
        text = "(see attached image)"
    payload = {"error": text} if result.is_error else {"output": text}
    response: dict[str, Any] = {"name": result.tool_name, "response": payload}
    if result.tool_call_id in sent_ids:
        response["id"] = result.tool_call_id
    return {"function_response": response}


def convert_contents(context: Context, model: Model) -> list[dict[str, Any]]:
    """Our conversation as Gemini contents. Function responses of one assistant turn go into a
    single user turn, and images a tool returned follow them as inline data."""
    contents: list[dict[str, Any]] = []
    messages = list(prepare_messages(context.messages, model))
    sent_ids = {
        block.id
        for message in messages
        if isinstance(message, AssistantMessage) and message.api == GOOGLE_API
        for block in message.content
        if isinstance(block, ToolCall) and not _own_call_id(block)
    }
    for message in messages:
        if isinstance(message, UserMessage):
            parts = _user_parts(message.content, model)
            if parts:
                contents.append({"role": "user", "parts": parts})
        elif isinstance(message, AssistantMessage):
            parts = _model_parts(message, model)
            if parts:
                contents.append({"role": "model", "parts": parts})
        elif isinstance(message, ToolResultMessage):
            parts = [_function_response_part(message, sent_ids)]
            if "image" in model.input:
                parts.extend(
                    _image_part(item) for item in message.content if isinstance(item, ImageContent)
                )
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
    mode = {"auto": "AUTO", "any": "ANY", "required": "ANY", "none": "NONE"}.get(
        choice.lower(), "AUTO"
    )
    return {"function_calling_config": {"mode": mode}}


def build_request_body(
    model: Model, context: Context, options: StreamOptions | None
) -> dict[str, Any]:
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


def _wire_form(value: Any) -> dict[str, Any]:
    """An SDK object as Gemini's JSON: the wire's camelCase field names, unset fields left
    out, and a part's signature in the standard base64 Gemini sends (the SDK would render it
    URL-safe), so the kept form is the vendor's own."""
    wire: dict[str, Any] = value.model_dump(mode="json", by_alias=True, exclude_none=True)
    signature = _signature_text(getattr(value, "thought_signature", None))
    if signature:
        wire["thoughtSignature"] = signature
    return wire


class StreamTranslator(roles.StreamTranslator):
    """Turns ``GenerateContentResponse`` chunks into assembler calls. Text and thought parts
    continue the open block of their kind; any other part closes it. Chunks carry no type, so
    :meth:`handle` reads each whole; the message ends in :meth:`finish`, once the stream has."""

    def __init__(self, assembler: AssistantStreamAssembler) -> None:
        super().__init__(assembler)
        self.open_index: int | None = None
        self.open_kind: str | None = None
        self.finish_reason: str | None = None
        self.finish_message: str | None = None
        self.response_id: str | None = None
        self.calls = 0
        # The latest grounding metadata of the candidate, by kind: Gemini sends it with the
        # last chunks, and a later chunk's is the whole of it.
        self.citations: dict[str, Any] = {}

    def identify(self, chunk: Any) -> None:
        """Every chunk names the response and the model version that answers."""
        self.assembler.set_response(
            getattr(chunk, "response_id", None), getattr(chunk, "model_version", None)
        )

    def handle(self, chunk: Any) -> list[AssistantEvent]:
        events: list[AssistantEvent] = []
        self.response_id = self.response_id or getattr(chunk, "response_id", None)
        candidate = chunk.candidates[0] if chunk.candidates else None
        if candidate is not None:
            parts = candidate.content.parts if candidate.content and candidate.content.parts else []
            for part in parts:
                events.extend(self._part(part))
            for kind in CITATION_KINDS:
                metadata = getattr(candidate, kind, None)
                if metadata is not None:
                    self.citations[kind] = metadata
            if candidate.finish_reason is not None:
                reason = candidate.finish_reason
                self.finish_reason = str(getattr(reason, "value", reason))
                self.finish_message = getattr(candidate, "finish_message", None)
        if chunk.usage_metadata is not None:
            self._usage(chunk.usage_metadata)
        return events

    def _part(self, part: Any) -> list[AssistantEvent]:
        if part.function_call is not None:
            return self._close() + self._function_call(part)
        for kind in SERVER_PARTS:
            if getattr(part, kind, None) is not None:
                return self._close() + self._server_part(kind, part)
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

    def _function_call(self, part: Any) -> list[AssistantEvent]:
        call = part.function_call
        name = call.name or ""
        self.calls += 1
        call_id = call.id or normalize_tool_call_id(
            f"{name}_{self.response_id or 'call'}_{self.calls}"
        )
        index, start = self.assembler.begin_tool_call(call_id, name)
        self.assembler.set_tool_arguments(index, dict(call.args or {}))
        signature = _signature_text(part.thought_signature)
        if signature:
            self.assembler.set_tool_call_signature(index, signature)
        return [start, self.assembler.end_tool_call(index)]

    def _server_part(self, kind: str, part: Any) -> list[AssistantEvent]:
        """The whole part is the payload: its signature must go back with it."""
        payload = _wire_form(part)
        inner = payload.get(SERVER_PARTS[kind])
        self._add(kind, payload, _server_part_text(kind, inner if isinstance(inner, dict) else {}))
        return []

    def _add(self, kind: str, payload: dict[str, Any], text: str | None) -> None:
        self.assembler.add_server_tool(
            ServerToolContent(vendor=LABEL, api=GOOGLE_API, kind=kind, payload=payload, text=text)
        )

    def _add_citations(self) -> None:
        """Grounding metadata follows the answer it grounds, keyed by its wire name as the
        other vendors' citations are."""
        for kind, metadata in self.citations.items():
            wire = _wire_form(metadata)
            if wire:
                self._add(kind, {CITATION_KINDS[kind]: wire}, _citations_text(wire))

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
        ours keeps ``input`` uncached and ``output`` everything generated, thoughts included
        (they are billed as output) and also counted as ``reasoning``. Prompt tokens of
        server-side tools (``toolUsePromptTokenCount``) are billed as input, so they are input."""
        prompt = (metadata.prompt_token_count or 0) + (
            getattr(metadata, "tool_use_prompt_token_count", None) or 0
        )
        cached = metadata.cached_content_token_count or 0
        thoughts = metadata.thoughts_token_count or 0
        self.assembler.set_usage(
            Usage(
                input=max(0, prompt - cached),
                output=(metadata.candidates_token_count or 0) + thoughts,
                reasoning=thoughts,
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
        self._add_citations()
        if reason in _STOP_REASONS:
            return events + self.assembler.finish(_STOP_REASONS[reason])
        detail = f": {self.finish_message}" if self.finish_message else ""
        return events + [
            self.assembler.fail(f"{LABEL}: generation stopped with finish reason {reason}{detail}")
        ]


class GeminiView(wire.JsonView):
    """Gemini's JSON read as the SDK's objects are: snake_case names for the wire's camelCase
    (either spelling found), and a part's ``thought_signature`` as bytes."""

    __slots__ = ()

    def field_value(self, name: str) -> Any:
        value = self.get(_camel(name), self.get(name))
        if name == "thought_signature":
            return _signature_bytes(value) if isinstance(value, str) else None
        return self.view_of(value)


_CAMEL_NAMES: dict[str, str] = {}


def _camel(name: str) -> str:
    camel = _CAMEL_NAMES.get(name)
    if camel is None:
        head, *rest = name.split("_")
        camel = _CAMEL_NAMES[name] = head + "".join(word[:1].upper() + word[1:] for word in rest)
    return camel


class AnswerReader(roles.AnswerReader):
    """Each ``data:`` of the stream, or a whole body (one response, or the list of them
    ``streamGenerateContent`` answers without ``alt=sse``)."""

    translator_class = StreamTranslator

    def sse(self, event: str | None, data: str) -> list[AssistantEvent]:
        return self.body(orjson.loads(data))

    def body(self, body: Any) -> list[AssistantEvent]:
        events: list[AssistantEvent] = []
        for chunk in body if isinstance(body, list) else [body]:
            if isinstance(chunk, dict):
                if isinstance(chunk.get("error"), dict):
                    raise ConnectionError(
                        chunk["error"].get("message") or "the stream reported an error"
                    )
                events.extend(self.translator.handle(GeminiView(chunk)))
        return events


def _server_part_text(kind: str, inner: dict[str, Any]) -> str | None:
    """A readable line for a server tool part: the code, its output, the tool Gemini called
    with its arguments, or what the tool answered."""
    if kind == "executable_code":
        text = inner.get("code")
    elif kind == "code_execution_result":
        text = inner.get("output")
    elif kind == "tool_call":
        text = (
            f"{inner.get('toolType') or 'tool'}({orjson.dumps(inner.get('args') or {}).decode()})"
        )
    else:
        text = orjson.dumps(inner["response"]).decode() if "response" in inner else None
    return text if isinstance(text, str) and text else None


def _citations_text(metadata: dict[str, Any]) -> str | None:
    """The queries searched, then one line per source (its title and address), or each URL
    fetched with its status."""
    lines = [str(query) for query in metadata.get("webSearchQueries") or []]
    for chunk in metadata.get("groundingChunks") or []:
        # A chunk holds one source under its kind (``web``, ``retrievedContext``, ``maps``).
        for source in chunk.values() if isinstance(chunk, dict) else ():
            if isinstance(source, dict):
                lines.append(" ".join(str(source[k]) for k in ("title", "uri") if source.get(k)))
    for entry in metadata.get("urlMetadata") or []:
        if isinstance(entry, dict):
            lines.append(
                " ".join(
                    str(entry[k]) for k in ("retrievedUrl", "urlRetrievalStatus") if entry.get(k)
                )
            )
    return "\n".join(line for line in lines if line) or None


# ----------------------------------------------------------------------------- inbound: a client's request
#
# The two directions ``openprogram proxy`` adds (docs/proxy.md): a ``generateContent`` body (the
# wire's camelCase JSON) read into our request, and our events written back as
# ``streamGenerateContent`` chunks or one response.

#: Our stop reasons as Gemini's finish reasons (a tool call ends ``STOP`` on Gemini's wire).
_FINISH_REASONS = {"stop": "STOP", "length": "MAX_TOKENS", "toolUse": "STOP"}
#: Gemini's error status for an HTTP status (its error shape names one).
_ERROR_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}
#: The ``generationConfig`` fields with a typed option; every other one is carried.
_TYPED_GENERATION = {"temperature": "temperature", "maxOutputTokens": "max_tokens"}


def parse_request_body(body: dict[str, Any], *, model_id: str | None = None) -> wire.ParsedRequest:
    """A ``generateContent`` body (the model comes from the path: ``model_id``) as ``(Model,
    Context, SimpleStreamOptions)``. Fields with no typed option (``safetySettings``,
    ``toolConfig``, the rest of ``generationConfig``, a tool list ours cannot rebuild) go to
    ``extra_body`` in the wire's own names, which the SDK merges into the body it sends.
    Function call ids are not sent back (Gemini pairs results with calls by name and order).
    Raises :class:`~.wire.WireRequestError` for what ours cannot hold."""
    wire.check_depth(body)
    if not model_id:
        raise wire.WireRequestError(
            "the model is named in the path: /v1beta/models/MODEL:generateContent"
        )
    body = camel_case_fields(body)
    name = model_id.removeprefix("models/")
    model = Model(id=name, api=GOOGLE_API, provider=LABEL, input=["text", "image"])
    tools = wire.field(body, "tools", list, "body")
    context = Context(
        system_prompt=_system_text(wire.field(body, "systemInstruction", (dict, str), "body")),
        messages=_parse_contents(wire.required(body, "contents", list, "body"), model),
        tools=_parse_tools(tools),
    )
    generation = dict(wire.field(body, "generationConfig", dict, "body", {}))
    typed = {
        ours: generation.pop(theirs)
        for theirs, ours in _TYPED_GENERATION.items()
        if theirs in generation
    }
    options = SimpleStreamOptions(
        temperature=wire.field(typed, "temperature", (int, float), "generationConfig"),
        max_tokens=wire.field(typed, "max_tokens", int, "generationConfig"),
    )
    extra = {
        key: value
        for key, value in body.items()
        if key not in ("contents", "systemInstruction", "tools", "generationConfig")
    }
    if generation:
        extra["generationConfig"] = generation
    if tools and tools != _wire_tools(context.tools):
        extra["tools"] = tools  # a tool list the typed tools do not give back goes whole
    return model, context, options.model_copy(update={"extra_body": extra or None})


#: Fields whose value is the caller's own data (a tool's arguments and result, a schema): its
#: keys are never renamed.
_DATA_FIELDS = frozenset(
    {
        "args",
        "response",
        "parameters",
        "parametersJsonSchema",
        "responseSchema",
        "responseJsonSchema",
        "partialArgs",
    }
)


def camel_case_fields(value: Any) -> Any:
    """A request body with every field named as Gemini's JSON names it. Its JSON API takes the
    protobuf field names too (``function_call``, ``inline_data``, ``thought_signature``), and
    clients use both, even in one part (litellm sends ``function_call`` beside
    ``thoughtSignature``): a request reads the same whichever spelling it uses. The values of
    :data:`_DATA_FIELDS` are data, kept as they are."""
    if isinstance(value, list):
        return [camel_case_fields(item) for item in value]
    if not isinstance(value, dict):
        return value
    renamed: dict[str, Any] = {}
    for key, item in value.items():
        name = _camel(key) if "_" in key else key
        renamed[name] = item if name in _DATA_FIELDS else camel_case_fields(item)
    return renamed


def _system_text(instruction: dict[str, Any] | str | None) -> str | None:
    if instruction is None or isinstance(instruction, str):
        return instruction or None
    texts = [
        wire.required(part, "text", str, f"systemInstruction.parts[{position}]")
        for position, part in enumerate(
            wire.field(instruction, "parts", list, "systemInstruction", [])
        )
    ]
    return "\n\n".join(texts) or None


def _wire_tools(tools: list[Tool] | None) -> list[dict[str, Any]] | None:
    """The wire form of the tools :func:`build_request_body` declares, as the SDK sends them."""
    if not tools:
        return None
    declarations = [
        {
            "description": tool.description,
            "name": tool.name,
            "parametersJsonSchema": tool.parameters,
        }
        for tool in tools
    ]
    return [{"functionDeclarations": declarations}]


def _parse_tools(tools: list[Any] | None) -> list[Tool] | None:
    parsed = []
    for position, tool in enumerate(tools or []):
        for number, declaration in enumerate(
            wire.field(tool, "functionDeclarations", list, f"tools[{position}]", [])
        ):
            where = f"tools[{position}].functionDeclarations[{number}]"
            schema = (
                declaration.get("parametersJsonSchema") if isinstance(declaration, dict) else None
            )
            if schema is None and isinstance(declaration, dict):
                schema = declaration.get(
                    "parameters"
                )  # an OpenAPI schema: the list is carried whole
            parsed.append(
                Tool(
                    name=wire.required(declaration, "name", str, where),
                    description=wire.field(declaration, "description", str, where, ""),
                    parameters=schema if isinstance(schema, dict) else {},
                )
            )
    return parsed or None


def _inline_image(part: dict[str, Any], where: str) -> ImageContent:
    data = wire.required(part, "inlineData", dict, where)
    return ImageContent(
        data=wire.required(data, "data", str, f"{where}.inlineData"),
        mime_type=wire.required(data, "mimeType", str, f"{where}.inlineData"),
    )


def _parse_contents(contents: list[Any], model: Model) -> list[Any]:
    parsed: list[Any] = []
    pending: list[ToolCall] = []  # the last model turn's calls, answered by name and order
    for position, content in enumerate(contents):
        where = f"contents[{position}]"
        parts = wire.required(content, "parts", list, where)
        if wire.field(content, "role", str, where, "user") == "model":
            message = _parse_model_turn(parts, f"{where}.parts", model, position)
            pending = [block for block in message.content if isinstance(block, ToolCall)]
            parsed.append(message)
            continue
        user: list[UserContent] = []
        for number, part in enumerate(parts):
            here = f"{where}.parts[{number}]"
            if not isinstance(part, dict):
                raise wire.WireRequestError(f"{here} must be a JSON object")
            if "text" in part:
                user.append(TextContent(text=wire.required(part, "text", str, here)))
            elif "inlineData" in part:
                user.append(_inline_image(part, here))
            elif "functionResponse" in part:
                parsed.append(
                    _function_result(part["functionResponse"], f"{here}.functionResponse", pending)
                )
            else:  # a file by URI, a video ...: kept as sent
                user.append(wire.raw_part(GOOGLE_API, part, here))
        if user:
            parsed.append(UserMessage(content=user, timestamp=wire.WIRE_TIMESTAMP))
    return parsed


def _function_result(response: Any, where: str, pending: list[ToolCall]) -> ToolResultMessage:
    """A ``functionResponse``: ``{"output": text}`` or ``{"error": text}`` as openprogram sends
    them; any other response object is its JSON text (the vendor reads it as the same JSON)."""
    name = wire.required(response, "name", str, where)
    call = next((c for c in pending if c.name == name), None)
    if call is not None:
        pending.remove(call)
    payload = wire.field(response, "response", dict, where, {})
    is_error = set(payload) == {"error"} and isinstance(payload["error"], str)
    if set(payload) == {"output"} and isinstance(payload["output"], str):
        text = payload["output"]
    else:
        text = payload["error"] if is_error else orjson.dumps(payload).decode()
    return ToolResultMessage(
        tool_call_id=call.id if call is not None else name,
        tool_name=name,
        content=[TextContent(text=text)],
        is_error=is_error,
        timestamp=wire.WIRE_TIMESTAMP,
    )


def _parse_model_turn(parts: list[Any], where: str, model: Model, turn: int) -> AssistantMessage:
    """A model turn as the same api's message, so its signatures and server parts go back as
    they came."""
    blocks: list[Any] = []
    for number, part in enumerate(parts):
        here = f"{where}[{number}]"
        if not isinstance(part, dict):
            raise wire.WireRequestError(f"{here} must be a JSON object")
        signature = wire.field(part, "thoughtSignature", str, here)
        server_kind = next((kind for kind, name in SERVER_PARTS.items() if name in part), None)
        if "functionCall" in part:
            call = wire.required(part, "functionCall", dict, here)
            name = wire.required(call, "name", str, f"{here}.functionCall")
            blocks.append(
                ToolCall(
                    id=normalize_tool_call_id(f"{name}_turn{turn}_{number}"),
                    name=name,
                    arguments=wire.field(call, "args", dict, f"{here}.functionCall", {}),
                    thought_signature=signature,
                )
            )
        elif server_kind is not None:
            inner = part[SERVER_PARTS[server_kind]]
            text = _server_part_text(server_kind, inner if isinstance(inner, dict) else {})
            blocks.append(
                ServerToolContent(
                    vendor=LABEL, api=GOOGLE_API, kind=server_kind, payload=dict(part), text=text
                )
            )
        elif "text" in part:
            text = wire.required(part, "text", str, here)
            if part.get("thought"):
                blocks.append(ThinkingContent(thinking=text, thinking_signature=signature))
            else:
                blocks.append(TextContent(text=text, text_signature=signature))
        else:
            raise wire.unsupported(f"model part with {wire.shown_names(part)}", here)
    return AssistantMessage(
        content=blocks,
        api=GOOGLE_API,
        provider=model.provider,
        model=model.id,
        timestamp=wire.WIRE_TIMESTAMP,
    )


# ----------------------------------------------------------------------------- outbound: to a client


def usage_body(usage: Usage) -> dict[str, int]:
    """Our usage in Gemini's counts: cached tokens inside the prompt, thoughts apart from the
    answer's own tokens (ours counts them inside ``output``), each written only where Gemini
    writes it, when there are some."""
    body = {
        "promptTokenCount": wire.prompt_tokens(usage),
        "candidatesTokenCount": max(0, usage.output - usage.reasoning),
        "totalTokenCount": usage.total_tokens,
    }
    if usage.cache_read:
        body["cachedContentTokenCount"] = usage.cache_read
    if usage.reasoning:
        body["thoughtsTokenCount"] = usage.reasoning
    return body


def _own_call_id(call: ToolCall) -> bool:
    """Whether the call's id is one openprogram made up (Gemini sends none): it is not sent."""
    head, _, number = call.id.rpartition("_")
    return head.startswith(normalize_tool_call_id(call.name) + "_") and number.isdigit()


def _call_part(call: ToolCall) -> dict[str, Any]:
    function: dict[str, Any] = {"name": call.name, "args": call.arguments}
    if not _own_call_id(call):
        function["id"] = call.id
    part: dict[str, Any] = {"functionCall": function}
    if call.thought_signature:
        part["thoughtSignature"] = call.thought_signature
    return part


def _block_part(block: Any) -> dict[str, Any] | None:
    """A whole block as the one part Gemini would send for it."""
    if isinstance(block, TextContent):
        part: dict[str, Any] = {"text": block.text}
        if block.text_signature:
            part["thoughtSignature"] = block.text_signature
        return part
    if isinstance(block, ThinkingContent):
        part = {"text": block.thinking, "thought": True}
        if block.thinking_signature:
            part["thoughtSignature"] = block.thinking_signature
        return part
    if isinstance(block, ToolCall):
        return _call_part(block)
    if (
        isinstance(block, ServerToolContent)
        and block.api == GOOGLE_API
        and block.kind in SERVER_PARTS
    ):
        return dict(block.payload)
    return None


def _citations(message: AssistantMessage) -> dict[str, Any]:
    """The candidate's grounding metadata, from its citation blocks."""
    found: dict[str, Any] = {}
    for block in message.content:
        if (
            isinstance(block, ServerToolContent)
            and block.api == GOOGLE_API
            and block.kind in CITATION_KINDS
        ):
            found.update(block.payload)
    return found


def _candidate(parts: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"content": {"parts": parts, "role": "model"}, "index": 0, **fields}


def response_body(message: AssistantMessage, request_body: dict[str, Any]) -> dict[str, Any]:
    """The ``GenerateContentResponse`` a client of ``generateContent`` gets for ``message``."""
    parts = [part for part in (_block_part(block) for block in message.content) if part is not None]
    reason = _FINISH_REASONS.get(message.stop_reason, "STOP")
    return {
        "candidates": [_candidate(parts, finishReason=reason, **_citations(message))],
        "usageMetadata": usage_body(message.usage),
        "modelVersion": wire.answer_model(message),
        "responseId": wire.answer_id("", message),
    }


def error_body(status: int, message: str) -> dict[str, Any]:
    """Gemini's error shape, which the SDK raises with its code, status and message."""
    name = _ERROR_STATUSES.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
    return {"error": {"code": status, "message": message, "status": name}}


class StreamEncoder(roles.StreamEncoder):
    """Our events as ``streamGenerateContent`` chunks (``data: <GenerateContentResponse>``):
    text and thought deltas as parts that continue each other (a block's signature on an empty
    part of its kind before the next block), each function call and server part whole, then
    a last chunk with the finish reason, the grounding metadata and the usage. Server parts a
    snapshot first holds go out with the event's own parts, in one chunk."""

    def __init__(self, request_body: dict[str, Any]) -> None:
        super().__init__(request_body)
        self.server = wire.ServerBlockWatch()
        #: ``modelVersion`` and ``responseId`` of the first chunk, repeated on every chunk.
        self.names: dict[str, str] | None = None

    def _on_error(self, event: EventError, message: AssistantMessage) -> bytes:
        return wire.sse_frame(error_body(500, message.error_message or "the call failed"))

    def _on_done(self, event: EventDone, message: AssistantMessage) -> bytes:
        candidate = _candidate(
            self._server_parts(message),
            finishReason=_FINISH_REASONS[event.reason],
            **_citations(message),
        )
        return self._chunk(message, candidate, usageMetadata=usage_body(message.usage))

    def _on_text_delta(self, event: EventTextDelta, message: AssistantMessage) -> bytes:
        return self._parts_chunk(message, [{"text": event.delta}])

    def _on_thinking_delta(self, event: EventThinkingDelta, message: AssistantMessage) -> bytes:
        return self._parts_chunk(message, [{"text": event.delta, "thought": True}])

    def _on_text_end(self, event: EventTextEnd, message: AssistantMessage) -> bytes:
        return self._parts_chunk(
            message, _signature_parts(message.content[event.content_index], thought=False)
        )

    def _on_thinking_end(self, event: EventThinkingEnd, message: AssistantMessage) -> bytes:
        return self._parts_chunk(
            message, _signature_parts(message.content[event.content_index], thought=True)
        )

    def _on_toolcall_end(self, event: EventToolCallEnd, message: AssistantMessage) -> bytes:
        return self._parts_chunk(message, [_call_part(event.tool_call)])

    def unhandled(self, event: AssistantMessageEvent, message: AssistantMessage) -> bytes:
        """An event with no part of its own still carries the server parts that came with it."""
        return self._parts_chunk(message, [])

    def _server_parts(self, message: AssistantMessage) -> list[dict[str, Any]]:
        return [
            dict(block.payload)
            for _, block in self.server.new_blocks(message)
            if block.kind in SERVER_PARTS
        ]

    def _parts_chunk(self, message: AssistantMessage, parts: list[dict[str, Any]]) -> bytes:
        """A chunk of the new server parts and ``parts`` (nothing when there are none)."""
        parts = self._server_parts(message) + parts
        return self._chunk(message, _candidate(parts)) if parts else b""

    def _chunk(self, message: AssistantMessage, candidate: dict[str, Any], **fields: Any) -> bytes:
        if self.names is None:
            self.names = {
                "modelVersion": wire.answer_model(message),
                "responseId": wire.answer_id("", message),
            }
        return wire.sse_frame({"candidates": [candidate], **fields, **self.names})


def _signature_parts(block: Any, *, thought: bool) -> list[dict[str, Any]]:
    """A block's signature on an empty part of its kind, sent at its end (none without one)."""
    signature = (
        block.text_signature
        if isinstance(block, TextContent)
        else getattr(block, "thinking_signature", None)
    )
    if not signature:
        return []
    part: dict[str, Any] = {"text": "", "thoughtSignature": signature}
    if thought:
        part["thought"] = True
    return [part]


__all__ = [
    "GOOGLE_API",
    "GoogleGenerativeAIProvider",
    "StreamEncoder",
    "StreamTranslator",
    "build_request_body",
    "error_body",
    "parse_request_body",
    "response_body",
]
