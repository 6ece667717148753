"""The ``openai-responses`` provider: the OpenAI Responses API, streamed.

Requests are stateless (``store: false``), so everything the next turn needs travels in the
conversation itself:

- a reasoning item is kept whole, as JSON, in the ``thinking_signature`` of its thinking block
  (with ``encrypted_content``, which reasoning models are asked to include) and sent back as
  an input item on the next turn;
- a tool call id is ``"<call_id>|<item id>"``: the call id pairs the call with its output, and
  the item id (``fc_...``) lets the vendor match the call to the reasoning item before it;
- an assistant text block keeps its message item id in ``text_signature``.

Items of tools OpenAI runs itself (``web_search_call``, ``file_search_call``,
``code_interpreter_call``, ``mcp_call`` ..., and every item marked ``"execution": "server"``,
such as the hosted ``tool_search_call`` / ``tool_search_output``) are kept whole as
:class:`ServerToolContent` and go back as input items; so is a ``compaction`` item (the
conversation so far, encrypted), which goes back to its own model only. The annotations
(citations) of a message follow its text block and go back on that message. An item the
client is asked to execute that we cannot map (a client-side ``tool_search_call``) ends the
stream with an error instead of an answer that silently lacks it.

``response.completed`` lists every item in its final form: an item whose
``response.output_item.done`` never came is finished from there, and a server-side item whose
form changed since takes the completed form.

Vendor-private parts (reasoning items, item ids) are sent back only to the model that produced
them; :func:`~openprogram.providers.vendors.common.prepare_messages` has already turned another
model's thinking into text.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

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
    images_of,
    merge_extra_body,
    normalize_tool_call_id,
    prepare_messages,
    text_of,
)
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

API = "openai-responses"

#: Responses rejects call ids and item ids longer than this.
MAX_ID_LENGTH = 64

_STOP_REASONS = {"completed": "stop", "incomplete": "length"}

#: Output items of tools the vendor runs itself, kept as server tool blocks; so is every item
#: marked ``"execution": "server"`` (``tool_search_call``, ``tool_search_output`` ...).
#: ``compaction`` holds the conversation so far, encrypted, for the next stateless turn.
SERVER_ITEM_TYPES = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "compaction",
    }
)
#: Server items whose encrypted content only the model that wrote it can read: like reasoning
#: items, they go back to that model alone (another model still gets the whole conversation).
MODEL_BOUND_ITEM_TYPES = frozenset({"compaction"})
#: Items marked ``"execution": "client"`` that map onto something the agent acts on.
CLIENT_ITEM_TYPES = frozenset({"function_call"})
#: Items of tools the client is to run that have no home here (a custom tool's free-form
#: input, a shell, a patch, a computer): an answer holding one ends in an error naming it,
#: never as a silent empty ``stop``. One marked ``"execution": "server"`` is server activity.
UNSUPPORTED_CLIENT_ITEM_TYPES = frozenset(
    {"custom_tool_call", "local_shell_call", "shell_call", "apply_patch_call", "computer_call"}
)
#: The kind of the block that holds a message's annotations.
ANNOTATIONS = "annotations"


# --------------------------------------------------------------------------- request


def split_tool_call_id(tool_call_id: str) -> tuple[str, str | None]:
    """``"call_id|item_id"`` -> (call id, item id); ids from other vendors have no item id."""
    call_id, _, item_id = tool_call_id.partition("|")
    return normalize_tool_call_id(call_id, MAX_ID_LENGTH), item_id or None


def _input_parts(content: str | list[Any], model: Model) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append({"type": "input_text", "text": block.text})
        elif isinstance(block, ImageContent) and accepts_images(model):
            parts.append({"type": "input_image", "detail": "auto", "image_url": data_url(block)})
        elif isinstance(block, RawContent) and block.api == API and not block.message:
            parts.append(block.payload)
    return parts


def _assistant_items(message: AssistantMessage, model: Model) -> list[dict[str, Any]]:
    own = is_same_model(message, model)
    items: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ThinkingContent):
            # Other models' thinking was turned into text by prepare_messages; ours goes back
            # as the vendor's own reasoning item, or not at all.
            if own and block.thinking_signature:
                try:
                    stored = orjson.loads(block.thinking_signature)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(stored, dict) and stored.get("type") == "reasoning":
                    items.append(stored)
        elif isinstance(block, TextContent):
            if not block.text.strip():
                continue
            if own and block.text_signature:
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "id": block.text_signature,
                        "status": "completed",
                        "content": [{"type": "output_text", "text": block.text, "annotations": []}],
                    }
                )
            else:
                items.append({"role": "assistant", "content": block.text})
        elif isinstance(block, ToolCall):
            call_id, item_id = split_tool_call_id(block.id)
            item: dict[str, Any] = {
                "type": "function_call",
                "call_id": call_id,
                "name": block.name,
                "arguments": orjson.dumps(block.arguments).decode(),
            }
            if own and item_id and len(item_id) <= MAX_ID_LENGTH:
                item["id"] = item_id
            items.append(item)
        elif isinstance(block, ServerToolContent) and block.api == API:
            if own or block.kind not in MODEL_BOUND_ITEM_TYPES:
                _add_server_item(items, block)
    return items


def _add_server_item(items: list[dict[str, Any]], block: ServerToolContent) -> None:
    """A server tool item goes back as it came; annotations go back on their message."""
    if block.kind != ANNOTATIONS:
        items.append(dict(block.payload))
        return
    previous = items[-1] if items else None
    parts = previous.get("content") if previous is not None else None
    if isinstance(parts, list) and parts and isinstance(parts[0], dict):
        parts[0]["annotations"] = list(block.payload.get(ANNOTATIONS) or [])


def _tool_output(message: ToolResultMessage, model: Model) -> dict[str, Any]:
    call_id, _ = split_tool_call_id(message.tool_call_id)
    text = text_of(message.content)
    images = images_of(message.content) if accepts_images(model) else []
    raw = [block for block in message.content if isinstance(block, RawContent) and block.api == API]
    output: str | list[dict[str, Any]] = text
    if raw:  # parts kept as the client sent them: the whole output in its order
        output = _input_parts(list(message.content), model)
    elif images:
        output = [{"type": "input_text", "text": text}] if text else []
        output += [
            {"type": "input_image", "detail": "auto", "image_url": data_url(i)} for i in images
        ]
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def convert_input(model: Model, context: Context) -> list[dict[str, Any]]:
    """The ``input`` array: system prompt, then each message as its input item(s)."""
    items: list[dict[str, Any]] = []
    if context.system_prompt:
        developer = compat_flag(model, "supports_developer_role", model.reasoning)
        items.append(
            {"role": "developer" if developer else "system", "content": context.system_prompt}
        )
    for message in prepare_messages(context.messages, model):
        raw = wire.raw_message_of(message, API)
        if raw is not None:
            if raw:
                items.append(raw)
            continue
        if isinstance(message, UserMessage):
            parts = _input_parts(message.content, model)
            if parts:
                items.append({"role": "user", "content": parts})
        elif isinstance(message, AssistantMessage):
            items.extend(_assistant_items(message, model))
        elif isinstance(message, ToolResultMessage):
            items.append(_tool_output(message, model))
    return items


def build_request_body(
    model: Model, context: Context, options: StreamOptions | None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model.id,
        "input": convert_input(model, context),
        "stream": True,
        "store": False,
    }
    if options is not None and options.max_tokens is not None:
        body["max_output_tokens"] = options.max_tokens
    if options is not None and options.temperature is not None:
        body["temperature"] = options.temperature
    if context.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
                "strict": False,
            }
            for t in context.tools
        ]
        if options is not None and options.tool_choice is not None:
            body["tool_choice"] = options.tool_choice
    if options is not None and options.session_id and options.cache_retention != "none":
        body["prompt_cache_key"] = options.session_id
    if model.reasoning:
        # Stateless requests can only continue a reasoning chain with its encrypted content.
        body["include"] = ["reasoning.encrypted_content"]
        effort = reasoning_effort(model, options)
        if effort is not None:
            body["reasoning"] = {"effort": effort, "summary": "auto"}
    return merge_extra_body(body, options)


# --------------------------------------------------------------------------- response


def _failure_message(error: Any, fallback: str) -> str:
    if error is None:
        return fallback
    message = getattr(error, "message", None) or (
        error.get("message") if isinstance(error, dict) else None
    )
    code = getattr(error, "code", None) or (error.get("code") if isinstance(error, dict) else None)
    text = message or fallback
    return f"{text} (code {code})" if code else text


class StreamTranslator(roles.StreamTranslator):
    """Maps Responses stream events onto the assembler, keyed by output item id: one
    ``_on_<type>`` per event type (``response.output_text.delta`` is
    ``_on_response_output_text_delta``), each yielding its events. ``response.completed``
    finishes the message; a stream cut before it is left to the guard."""

    def __init__(self, assembler: AssistantStreamAssembler) -> None:
        super().__init__(assembler)
        self.blocks: dict[str, int] = {}  # output item id -> content index
        self.arguments: dict[str, str] = {}  # function call item id -> arguments text so far
        self.server_items: dict[str, dict[str, Any]] = {}  # server item id -> latest form kept

    def identify(self, event: Any) -> None:
        """``response.created`` (and every event that carries the response) names it and the
        model version that answers."""
        response = getattr(event, "response", None)
        if response is not None:
            self.assembler.set_response(
                getattr(response, "id", None), getattr(response, "model", None)
            )

    # ------------------------------------------------------------------ items

    def _on_response_output_item_added(self, event: Any) -> Iterator[AssistantEvent]:
        yield from self._begin_item(event.item)

    def _on_response_output_item_done(self, event: Any) -> Iterator[AssistantEvent]:
        yield from self._finish_item(event.item)

    def _begin_item(self, item: Any) -> Iterator[AssistantEvent]:
        """An item opens: a block of its kind begins. A server-side item takes its place in
        the content at once, in its in-progress form, so the content keeps the order of the
        output even when its final form only comes with ``response.completed``."""
        started: AssistantEvent
        if item.type == "reasoning":
            index, started = self.assembler.begin_thinking()
        elif item.type == "message":
            index, started = self.assembler.begin_text()
        elif item.type == "function_call":
            index, started = self.assembler.begin_tool_call(f"{item.call_id}|{item.id}", item.name)
            self.arguments[item.id] = ""
        else:
            self._keep_server_item(as_plain_dict(item))
            return
        self.blocks[item.id] = index
        yield started
        if item.type == "function_call" and item.arguments:
            yield from self._append_arguments(item.id, item.arguments)

    def _finish_item(self, item: Any) -> Iterator[AssistantEvent]:
        """An item's final form (``output_item.done``, or its entry in the completed
        response): the block closes with it. A block already closed keeps what its events
        said, but what has no events (a server-side item, a reasoning item's opaque content)
        takes the final form."""
        payload = as_plain_dict(item)
        if self._keep_server_item(payload):
            return
        index = self.blocks.get(item.id)
        if index is None:
            return
        if not self.assembler.is_open(index):
            if item.type == "reasoning":
                self.assembler.set_thinking_signature(index, orjson.dumps(payload).decode())
            return
        if item.type == "reasoning":
            summary = "\n\n".join(part.text for part in item.summary or [])
            # A reasoning item's block was begun as thinking (see _begin_item).
            block_text = cast(ThinkingContent, self.assembler.snapshot().content[index]).thinking
            if summary and not block_text:
                yield self.assembler.append_thinking(index, summary)
            self.assembler.set_thinking_signature(index, orjson.dumps(payload).decode())
            yield self.assembler.end_thinking(index)
        elif item.type == "message":
            # Text the deltas did not bring (a message known only from the completed response).
            final = "".join(
                getattr(part, "text", None) or getattr(part, "refusal", None) or ""
                for part in item.content or []
            )
            block_text = cast(TextContent, self.assembler.snapshot().content[index]).text
            if final.startswith(block_text) and len(final) > len(block_text):
                yield self.assembler.append_text(index, final[len(block_text) :])
            self.assembler.set_text_signature(index, item.id)
            yield self.assembler.end_text(index)
            annotations = [
                as_plain_dict(a)
                for part in item.content or []
                for a in getattr(part, "annotations", None) or []
            ]
            if annotations:
                text = "\n".join(
                    " ".join(str(a[k]) for k in ("title", "url") if a.get(k)) for a in annotations
                )
                self._add(ANNOTATIONS, {ANNOTATIONS: annotations}, text or None)
        elif item.type == "function_call":
            if item.arguments and item.arguments != self.arguments.get(item.id):
                self._replace_arguments(item.id, item.arguments)
            yield self.assembler.end_tool_call(index)

    def _keep_server_item(self, item: dict[str, Any]) -> bool:
        """Keep (or bring up to date) a server-side item; False for any other item. An item
        the client is asked to execute and that we cannot map ends the stream with an error,
        not with an answer that silently lacks it."""
        kind, execution = item.get("type"), item.get("execution")
        if kind in UNSUPPORTED_CLIENT_ITEM_TYPES and execution != "server":
            raise OpenAIStreamError(
                f"the response asks the client to run a {kind} item, which openprogram does not "
                "support (it runs function tools only); offer the model a function tool instead"
            )
        if execution == "client" and kind not in CLIENT_ITEM_TYPES:
            raise OpenAIStreamError(
                f"the response asks the client to execute a {item.get('type')} item "
                '(execution "client"), which openprogram does not support; use the tool with '
                '"execution": "server"'
            )
        if not is_server_item(item):
            return False
        item_id = str(item.get("id"))
        if self.server_items.get(item_id) == item:
            return True
        self.server_items[item_id] = item
        kind, text = str(item.get("type")), _server_item_text(item)
        index = self.blocks.get(item_id)
        if index is None:
            self.blocks[item_id] = self._add(kind, item, text)
        else:
            self.assembler.replace_server_tool(index, payload=item, text=text)
        return True

    def _add(self, kind: str, payload: dict[str, Any], text: str | None) -> int:
        return self.assembler.add_server_tool(
            ServerToolContent(
                vendor=self.assembler.model.provider, api=API, kind=kind, payload=payload, text=text
            )
        )

    # ------------------------------------------------------------------ deltas

    def _on_response_reasoning_summary_part_added(self, event: Any) -> Iterator[AssistantEvent]:
        # Summary parts are separate paragraphs of one thinking block.
        index = self.blocks.get(event.item_id)
        if index is not None and event.summary_index > 0:
            yield self.assembler.append_thinking(index, "\n\n")

    def _on_response_reasoning_summary_text_delta(self, event: Any) -> Iterator[AssistantEvent]:
        index = self.blocks.get(event.item_id)
        if index is not None and event.delta:
            yield self.assembler.append_thinking(index, event.delta)

    # Open-weight models served through the Responses API stream raw reasoning text instead.
    _on_response_reasoning_text_delta = _on_response_reasoning_summary_text_delta

    def _on_response_output_text_delta(self, event: Any) -> Iterator[AssistantEvent]:
        index = self.blocks.get(event.item_id)
        if index is not None and event.delta:
            yield self.assembler.append_text(index, event.delta)

    _on_response_refusal_delta = _on_response_output_text_delta

    def _on_response_function_call_arguments_delta(self, event: Any) -> Iterator[AssistantEvent]:
        if event.item_id in self.blocks and event.delta:
            yield from self._append_arguments(event.item_id, event.delta)

    def _on_response_function_call_arguments_done(self, event: Any) -> Iterator[AssistantEvent]:
        if event.item_id in self.blocks and event.arguments != self.arguments.get(event.item_id):
            self._replace_arguments(event.item_id, event.arguments)
        return iter(())

    def _append_arguments(self, item_id: str, delta: str) -> Iterator[AssistantEvent]:
        self.arguments[item_id] = self.arguments.get(item_id, "") + delta
        yield self.assembler.append_tool_arguments(self.blocks[item_id], delta)

    def _replace_arguments(self, item_id: str, text: str) -> None:
        """The final arguments win over what the deltas added up to."""
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return
        if isinstance(value, dict):
            self.arguments[item_id] = text
            self.assembler.set_tool_arguments(self.blocks[item_id], value)

    # ------------------------------------------------------------------ terminal

    def _on_response_completed(self, event: Any) -> Iterator[AssistantEvent]:
        response = event.response
        # The completed response holds every item's final form: items whose output_item.done
        # never came (or whose form changed since) end as it says.
        for item in getattr(response, "output", None) or []:
            if getattr(item, "id", None) is None:
                continue
            if item.id not in self.blocks and not is_server_item(as_plain_dict(item)):
                yield from self._begin_item(item)
            yield from self._finish_item(item)
        usage = getattr(response, "usage", None)
        if usage is not None:
            self.assembler.set_usage(
                split_usage(
                    usage.input_tokens or 0,
                    getattr(usage, "input_tokens_details", None),
                    usage.output_tokens or 0,
                    getattr(usage, "output_tokens_details", None),
                )
            )
        status = getattr(response, "status", None) or "completed"
        if status in ("failed", "cancelled"):
            raise OpenAIStreamError(
                _failure_message(response.error, f"the response ended with status {status}")
            )
        yield from self.assembler.finish(_STOP_REASONS.get(status, "stop"))

    _on_response_incomplete = _on_response_completed
    _on_response_failed = _on_response_completed

    def _on_error(self, event: Any) -> Iterator[AssistantEvent]:
        raise OpenAIStreamError(_failure_message(event, "the stream reported an error"))


class AnswerReader(roles.AnswerReader):
    """Each ``data:`` of the stream, or the whole response object of a call that did not
    stream (read as its ``response.completed`` event, which holds every item)."""

    translator_class = StreamTranslator

    def sse(self, event: str | None, data: str) -> list[AssistantEvent]:
        value = orjson.loads(data)
        return self.translator.handle(wire.JsonView(value)) if isinstance(value, dict) else []

    def body(self, body: Any) -> list[AssistantEvent]:
        if not isinstance(body, dict):
            return []
        return self.translator.handle(
            wire.JsonView({"type": "response.completed", "response": body})
        )

    def incomplete(self) -> Exception:
        return OpenAIStreamError(
            "the stream ended before response.completed; the answer is incomplete"
        )


def is_server_item(item: dict[str, Any]) -> bool:
    """Whether an output item is activity of a tool the vendor ran itself."""
    return item.get("type") in SERVER_ITEM_TYPES or item.get("execution") == "server"


def _server_item_text(item: dict[str, Any]) -> str | None:
    """A readable line for a server tool item: what it searched or ran, and what came back."""
    kind = item.get("type")
    if kind == "compaction":
        return "the conversation so far, compacted (encrypted)"
    raw_action = item.get("action")
    action = raw_action if isinstance(raw_action, dict) else {}
    arguments = item.get("arguments")
    pieces = [
        action.get("query"),
        ", ".join(str(q) for q in item.get("queries") or []),
        item.get("code"),
        f"{item.get('name')}({arguments or ''})" if item.get("name") else None,
        f"tool_search({orjson.dumps(arguments).decode()})" if kind == "tool_search_call" else None,
        item.get("output") if isinstance(item.get("output"), str) else None,
    ]
    tools = [t for t in item.get("tools") or [] if isinstance(t, dict)]
    if tools:  # mcp_list_tools, tool_search_output: the tools now available
        names = ", ".join(
            str(t.get("name") or t.get("server_label") or t.get("type")) for t in tools
        )
        label = item.get("server_label")
        pieces.append(f"{label}: {names}" if label else names)
    for output in item.get("outputs") or []:
        if isinstance(output, dict):
            pieces.append(output.get("logs") or output.get("url"))
    for result in item.get("results") or []:
        if isinstance(result, dict):
            pieces.append(result.get("filename") or result.get("text"))
    return "\n".join(str(p) for p in pieces if p) or None


class OpenAIResponsesProvider(OpenAIProviderBase):
    """api ``openai-responses``."""

    api = API

    def build_request_body(
        self, model: Model, context: Context, options: StreamOptions | None
    ) -> dict[str, Any]:
        return build_request_body(model, context, options)

    async def open_stream(self, client: Any, body: dict[str, Any]) -> Any:
        return await client.responses.create(**sdk_arguments(body, ("model", "input")))

    async def translate(
        self, assembler: AssistantStreamAssembler, stream: Any, model: Model
    ) -> AsyncIterator[AssistantEvent]:
        async for produced in roles.translated(StreamTranslator(assembler), stream):
            yield produced


# --------------------------------------------------------------------------- inbound: a client's request
#
# The two directions ``openprogram proxy`` adds (docs/proxy.md): a Responses body read into our
# request, and our events written back as Responses stream events or a response object.

#: Input items that belong to an assistant turn: consecutive ones make one assistant message.
_ASSISTANT_ITEM_TYPES = frozenset({"reasoning", "function_call"})


def parse_request_body(body: dict[str, Any], *, model_id: str | None = None) -> wire.ParsedRequest:
    """A Responses request body as ``(Model, Context, SimpleStreamOptions)``, such that
    :func:`build_request_body` gives back every field of ``body`` (those with no typed option,
    ``instructions`` and ``reasoning`` included, through ``extra_body``). Raises
    :class:`~.wire.WireRequestError` for what ours cannot hold (``previous_response_id`` is
    carried, but a replay cannot know what that response held)."""
    wire.check_depth(body)
    name = model_id or wire.required(body, "model", str, "body")
    raw = body.get("input")
    items: list[Any] = (
        [{"role": "user", "content": raw}]
        if isinstance(raw, str)
        else wire.required(body, "input", list, "body")
    )
    system, start = wire.leading_system(items, "input", ("input_text",))
    first_role = items[0].get("role") if items and isinstance(items[0], dict) else None
    model = Model(
        id=name,
        api=API,
        provider="openai",
        input=["text", "image"],
        compat={"supports_developer_role": first_role == "developer"},
    )
    context = Context(
        system_prompt=system,
        messages=_parse_items(items, start, model),
        tools=_parse_tools(wire.field(body, "tools", list, "body")),
    )
    session = wire.field(body, "prompt_cache_key", str, "body")
    options = SimpleStreamOptions(
        temperature=wire.field(body, "temperature", (int, float), "body"),
        max_tokens=wire.field(body, "max_output_tokens", int, "body"),
        tool_choice=wire.field(body, "tool_choice", (str, dict), "body"),
        session_id=session,
    )
    rebuilt = build_request_body(model, context, options)
    extra = wire.carried_fields(body, rebuilt, typed=("input", "stream"))
    return model, context, options.model_copy(update={"extra_body": extra})


def _user_content(content: Any, where: str) -> list[UserContent]:
    if isinstance(content, str):
        return [TextContent(text=content)]
    if not isinstance(content, list):
        raise wire.WireRequestError(f"{where} must be a string or an array of parts")
    blocks: list[UserContent] = []
    for position, part in enumerate(content):
        here = f"{where}[{position}]"
        kind = wire.field(part, "type", str, here)
        if kind == "input_text":
            blocks.append(TextContent(text=wire.required(part, "text", str, here)))
        elif kind == "input_image" and _data_url(part):
            head, data = part["image_url"].split(",", 1)
            blocks.append(ImageContent(data=data, mime_type=head[len("data:") : -len(";base64")]))
        else:  # an image by URL or file id, a file, audio: kept as sent
            blocks.append(wire.raw_part(API, part, here))
    return blocks


def _data_url(part: dict[str, Any]) -> bool:
    """Whether an ``input_image`` carries its image itself (a base64 ``data:`` URL)."""
    url = part.get("image_url")
    return isinstance(url, str) and url.startswith("data:") and ";base64," in url


def _is_assistant_item(item: dict[str, Any]) -> bool:
    kind = item.get("type")
    return item.get("role") == "assistant" or kind in _ASSISTANT_ITEM_TYPES or is_server_item(item)


def _parse_items(items: list[Any], start: int, model: Model) -> list[Any]:
    """Input items as messages: consecutive assistant-side items (reasoning, messages, calls,
    server tool items) make one assistant turn, in their order, as the same model's."""
    messages: list[Any] = []
    turn: list[Any] = []
    call_ids: dict[str, tuple[str, str]] = {}  # call_id -> (our tool call id, name)

    def close_turn() -> None:
        if turn:
            messages.append(
                AssistantMessage(
                    content=list(turn),
                    api=API,
                    provider=model.provider,
                    model=model.id,
                    timestamp=wire.WIRE_TIMESTAMP,
                )
            )
            turn.clear()

    for position in range(start, len(items)):
        item, where = items[position], f"input[{position}]"
        if not isinstance(item, dict):
            raise wire.WireRequestError(f"{where} must be a JSON object")
        for name in ("type", "role"):  # what the item is: both names when present
            wire.field(item, name, str, where)
        if _is_assistant_item(item):
            turn.extend(_assistant_blocks(item, where, call_ids))
            continue
        close_turn()
        kind, role = item.get("type"), item.get("role")
        if role == "user" and kind in (None, "message"):
            messages.append(
                UserMessage(
                    content=_user_content(item.get("content"), f"{where}.content"),
                    timestamp=wire.WIRE_TIMESTAMP,
                )
            )
        elif kind == "function_call_output":
            call_id = wire.required(item, "call_id", str, where)
            ours, tool = call_ids.get(call_id, (call_id, ""))
            output = item.get("output")
            content: list[UserContent] = (
                [TextContent(text=output)]
                if isinstance(output, str)
                else _user_content(output, f"{where}.output")
            )
            messages.append(
                ToolResultMessage(
                    tool_call_id=ours,
                    tool_name=tool,
                    content=content,
                    timestamp=wire.WIRE_TIMESTAMP,
                )
            )
        else:  # a system message after the conversation started, an item_reference ...: kept as sent
            messages.append(wire.raw_message(API, item, where))
    close_turn()
    return messages


def _assistant_blocks(
    item: dict[str, Any], where: str, call_ids: dict[str, tuple[str, str]]
) -> list[Any]:
    kind = item.get("type")
    if kind == "reasoning":
        summary = "\n\n".join(
            str(part.get("text") or "")
            for part in wire.field(item, "summary", list, where, [])
            if isinstance(part, dict)
        )
        return [ThinkingContent(thinking=summary, thinking_signature=orjson.dumps(item).decode())]
    if kind == "function_call":
        call_id = wire.required(item, "call_id", str, where)
        item_id = wire.field(item, "id", str, where)
        name = wire.required(item, "name", str, where)
        ours = f"{call_id}|{item_id}" if item_id else call_id
        call_ids[call_id] = (ours, name)
        return [
            ToolCall(
                id=ours,
                name=name,
                arguments=wire.json_arguments(item.get("arguments") or "", f"{where}.arguments"),
            )
        ]
    if is_server_item(item):
        return [
            ServerToolContent(
                vendor="openai",
                api=API,
                kind=str(kind),
                payload=dict(item),
                text=_server_item_text(item),
            )
        ]
    # an assistant message: its text, its id as the text signature, its annotations after it
    content = item.get("content")
    text = wire.text_of_parts(content, f"{where}.content", ("output_text", "refusal", "input_text"))
    blocks: list[Any] = [TextContent(text=text, text_signature=wire.field(item, "id", str, where))]
    annotations = (
        [
            a
            for part in content
            if isinstance(part, dict)
            for a in wire.field(part, "annotations", list, f"{where}.content", [])
        ]
        if isinstance(content, list)
        else []
    )
    if annotations:
        blocks.append(
            ServerToolContent(
                vendor="openai", api=API, kind=ANNOTATIONS, payload={ANNOTATIONS: annotations}
            )
        )
    return blocks


def _parse_tools(tools: list[Any] | None) -> list[Tool] | None:
    parsed = [
        Tool(
            name=wire.required(tool, "name", str, f"tools[{position}]"),
            description=wire.field(tool, "description", str, f"tools[{position}]", ""),
            parameters=wire.field(tool, "parameters", dict, f"tools[{position}]", {}),
        )
        for position, tool in enumerate(tools or [])
        # other tools (built-in ones) are carried whole in extra_body
        if isinstance(tool, dict) and tool.get("type") == "function"
    ]
    return parsed or None


# --------------------------------------------------------------------------- outbound: to a client


def usage_body(usage: Usage) -> dict[str, Any]:
    """Our usage as Responses counts it: cached tokens inside the input, reasoning tokens
    inside the output (the format always carries both details, as the vendor sends them)."""
    return {
        "input_tokens": wire.prompt_tokens(usage),
        "input_tokens_details": {"cached_tokens": usage.cache_read},
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning},
        "total_tokens": usage.total_tokens,
    }


def _stored_reasoning(block: ThinkingContent) -> dict[str, Any] | None:
    try:
        stored = orjson.loads(block.thinking_signature or "")
    except orjson.JSONDecodeError:
        return None
    return stored if isinstance(stored, dict) and stored.get("type") == "reasoning" else None


def _annotations_after(message: AssistantMessage, index: int) -> list[Any]:
    following = message.content[index + 1] if index + 1 < len(message.content) else None
    if isinstance(following, ServerToolContent) and following.kind == ANNOTATIONS:
        return list(following.payload.get(ANNOTATIONS) or [])
    return []


def _output_items(message: AssistantMessage, ids: dict[int, str]) -> list[dict[str, Any]]:
    """Every block of ``message`` as the output item a completed response lists."""
    items: list[dict[str, Any]] = []
    for index, block in enumerate(message.content):
        if isinstance(block, TextContent):
            items.append(_message_item(message, index, ids.get(index)))
        elif isinstance(block, ThinkingContent):
            items.append(_reasoning_item(block, ids.get(index) or f"rs_{index}"))
        elif isinstance(block, ToolCall):
            items.append(_call_item(block, orjson.dumps(block.arguments).decode()))
        elif (
            isinstance(block, ServerToolContent) and block.kind != ANNOTATIONS and block.api == API
        ):
            items.append(dict(block.payload))
    return items


def _message_item(
    message: AssistantMessage, index: int, fallback_id: str | None, status: str = "completed"
) -> dict[str, Any]:
    block = message.content[index]
    assert isinstance(block, TextContent)
    return {
        "id": block.text_signature or fallback_id or f"msg_{index}",
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [
            {
                "type": "output_text",
                "text": block.text,
                "annotations": _annotations_after(message, index),
            }
        ],
    }


def _reasoning_item(block: ThinkingContent, fallback_id: str) -> dict[str, Any]:
    stored = _stored_reasoning(block)
    if stored is not None:
        return stored
    summary = [{"type": "summary_text", "text": block.thinking}] if block.thinking else []
    return {"id": fallback_id, "type": "reasoning", "summary": summary}


def _call_item(call: ToolCall, arguments: str, status: str = "completed") -> dict[str, Any]:
    call_id, item_id = call.id.partition("|")[::2]
    return {
        "id": item_id or f"fc_{call_id}",
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": call.name,
        "arguments": arguments,
    }


def response_body(
    message: AssistantMessage, request_body: dict[str, Any], ids: dict[int, str] | None = None
) -> dict[str, Any]:
    """The ``response`` object for ``message``: what a client that did not stream gets, and what
    ``response.completed`` carries. ``ids`` are the item ids a stream already announced."""
    incomplete = message.stop_reason == "length"
    failed = message.stop_reason in ("error", "aborted")
    status = "failed" if failed else "incomplete" if incomplete else "completed"
    return {
        "id": wire.answer_id("resp_", message),
        "object": "response",
        "created_at": message.timestamp // 1000,
        "status": status,
        "error": {"code": "server_error", "message": message.error_message or ""}
        if failed
        else None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "model": wire.answer_model(message),
        "output": _output_items(message, ids or {}),
        "parallel_tool_calls": True,
        "tool_choice": request_body.get("tool_choice") or "auto",
        "tools": request_body.get("tools") or [],
        "usage": usage_body(message.usage),
    }


class StreamEncoder(roles.StreamEncoder):
    """Our events as Responses stream events: ``response.created``, each block as an output
    item (added, its deltas, done), server tool items when a snapshot first holds them, then
    ``response.completed`` (``response.incomplete`` at the length limit) with every item in its
    final form.

    A message's id and a reasoning item's id are known only when the item ends (they are its
    text and thinking signatures), and a client's SDK holds an item to the id it was added
    with, so such an item reaches the client whole when it ends: its added event, every delta
    as it came, and its done events. A function call's id is known from its start: it streams
    as it comes."""

    def __init__(self, request_body: dict[str, Any]) -> None:
        super().__init__(request_body)
        self.sequence = 0
        self.outputs: dict[int, int] = {}  # content index -> output index
        self.ids: dict[int, str] = {}  # content index -> item id
        self.deltas: dict[int, list[str]] = {}  # a message's or reasoning's deltas, held
        self.arguments: dict[int, str] = {}
        self.server = wire.ServerBlockWatch()
        self.pending_message: int | None = None  # a text block ended, its annotations may follow

    def before(self, event: AssistantMessageEvent, message: AssistantMessage) -> bytes:
        """The message item held since its text ended, now that its annotations are known."""
        return self._flush_message(message) if self.pending_message is not None else b""

    def after(self, event: AssistantMessageEvent, message: AssistantMessage) -> bytes:
        """Server items a snapshot first holds (or holds changed); the last event has them."""
        return b"" if event.type in ("done", "error") else b"".join(self._server_items(message))

    def _on_start(self, event: EventStart, message: AssistantMessage) -> bytes:
        response = {
            **response_body(message, self.request_body),
            "status": "in_progress",
            "usage": None,
        }
        return self._event("response.created", response=response) + self._event(
            "response.in_progress", response=response
        )

    def _on_text_start(
        self, event: EventTextStart | EventThinkingStart, message: AssistantMessage
    ) -> bytes:
        self.outputs[event.content_index] = len(self.outputs)
        self.deltas[event.content_index] = []
        return b""

    _on_thinking_start = _on_text_start

    def _on_text_delta(
        self, event: EventTextDelta | EventThinkingDelta, message: AssistantMessage
    ) -> bytes:
        self.deltas[event.content_index].append(event.delta)
        return b""

    _on_thinking_delta = _on_text_delta

    def _on_toolcall_start(self, event: EventToolCallStart, message: AssistantMessage) -> bytes:
        return self._begin_call(event.content_index, message)

    def _on_toolcall_delta(self, event: EventToolCallDelta, message: AssistantMessage) -> bytes:
        self.arguments[event.content_index] = (
            self.arguments.get(event.content_index, "") + event.delta
        )
        return self._event(
            "response.function_call_arguments.delta",
            **self._where(event.content_index),
            delta=event.delta,
        )

    def _on_text_end(self, event: EventTextEnd, message: AssistantMessage) -> bytes:
        self.pending_message = event.content_index  # sent at the next event: annotations may follow
        return b""

    def _on_thinking_end(self, event: EventThinkingEnd, message: AssistantMessage) -> bytes:
        return self._reasoning(event.content_index, message)

    def _on_toolcall_end(self, event: EventToolCallEnd, message: AssistantMessage) -> bytes:
        return self._end_call(event.content_index, event.tool_call)

    def _on_done(self, event: EventDone, message: AssistantMessage) -> bytes:
        kind = "response.incomplete" if event.reason == "length" else "response.completed"
        return self._event(kind, response=response_body(message, self.request_body, self.ids))

    def _on_error(self, event: EventError, message: AssistantMessage) -> bytes:
        return self._event(
            "error",
            code="server_error",
            message=message.error_message or "the call failed",
            param=None,
        )

    def _event(self, kind: str, **fields: Any) -> bytes:
        frame = wire.sse_frame(
            {"type": kind, "sequence_number": self.sequence, **fields}, event=kind
        )
        self.sequence += 1
        return frame

    def _where(self, index: int) -> dict[str, Any]:
        return {"item_id": self.ids[index], "output_index": self.outputs[index]}

    def _begin_call(self, index: int, message: AssistantMessage) -> bytes:
        self.outputs[index] = len(self.outputs)
        call = message.content[index]
        assert isinstance(call, ToolCall)
        item = _call_item(call, "", status="in_progress")
        self.ids[index] = item["id"]
        return self._event(
            "response.output_item.added", output_index=self.outputs[index], item=item
        )

    def _flush_message(self, message: AssistantMessage) -> bytes:
        index, self.pending_message = self.pending_message, None
        assert index is not None
        item = _message_item(message, index, None)
        self.ids[index] = item["id"]
        part = item["content"][0]
        added = {
            "id": item["id"],
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        empty = {"type": "output_text", "text": "", "annotations": []}
        frames = [
            self._event("response.output_item.added", output_index=self.outputs[index], item=added),
            self._event(
                "response.content_part.added", **self._where(index), content_index=0, part=empty
            ),
        ]
        frames += [
            self._event(
                "response.output_text.delta",
                **self._where(index),
                content_index=0,
                delta=delta,
                logprobs=[],
            )
            for delta in self.deltas.pop(index, [])
        ]
        frames += [
            self._event(
                "response.output_text.done",
                **self._where(index),
                content_index=0,
                text=part["text"],
                logprobs=[],
            ),
            self._event(
                "response.content_part.done", **self._where(index), content_index=0, part=part
            ),
            self._event("response.output_item.done", output_index=self.outputs[index], item=item),
        ]
        return b"".join(frames)

    def _reasoning(self, index: int, message: AssistantMessage) -> bytes:
        block = message.content[index]
        assert isinstance(block, ThinkingContent)
        item = _reasoning_item(block, f"rs_{index}")
        self.ids[index] = str(item.get("id"))
        deltas = self.deltas.pop(index, [])
        added = {"id": self.ids[index], "type": "reasoning", "summary": []}
        frames = [
            self._event("response.output_item.added", output_index=self.outputs[index], item=added)
        ]
        if deltas:
            part = {"type": "summary_text", "text": block.thinking}
            frames.append(
                self._event(
                    "response.reasoning_summary_part.added",
                    **self._where(index),
                    summary_index=0,
                    part={**part, "text": ""},
                )
            )
            frames += [
                self._event(
                    "response.reasoning_summary_text.delta",
                    **self._where(index),
                    summary_index=0,
                    delta=delta,
                )
                for delta in deltas
            ]
            frames.append(
                self._event(
                    "response.reasoning_summary_text.done",
                    **self._where(index),
                    summary_index=0,
                    text=block.thinking,
                )
            )
            frames.append(
                self._event(
                    "response.reasoning_summary_part.done",
                    **self._where(index),
                    summary_index=0,
                    part=part,
                )
            )
        frames.append(
            self._event("response.output_item.done", output_index=self.outputs[index], item=item)
        )
        return b"".join(frames)

    def _end_call(self, index: int, call: ToolCall) -> bytes:
        streamed = self.arguments.get(index, "")
        arguments = (
            streamed
            if streamed and _same_arguments(streamed, call.arguments)
            else orjson.dumps(call.arguments).decode()
        )
        frames = []
        if not streamed and call.arguments:
            frames.append(
                self._event(
                    "response.function_call_arguments.delta", **self._where(index), delta=arguments
                )
            )
        frames.append(
            self._event(
                "response.function_call_arguments.done", **self._where(index), arguments=arguments
            )
        )
        frames.append(
            self._event(
                "response.output_item.done",
                output_index=self.outputs[index],
                item=_call_item(call, arguments),
            )
        )
        return b"".join(frames)

    def _server_items(self, message: AssistantMessage) -> list[bytes]:
        frames = []
        for index, block in self.server.changed_blocks(message):
            if index in self.outputs:
                frames.append(
                    self._event(
                        "response.output_item.done",
                        output_index=self.outputs[index],
                        item=dict(block.payload),
                    )
                )
        for index, block in self.server.new_blocks(message):
            if block.kind == ANNOTATIONS or block.api != API:
                continue
            self.outputs[index] = len(self.outputs)
            item = dict(block.payload)
            frames.append(
                self._event(
                    "response.output_item.added", output_index=self.outputs[index], item=item
                )
            )
            frames.append(
                self._event(
                    "response.output_item.done", output_index=self.outputs[index], item=item
                )
            )
        return frames


def _same_arguments(text: str, arguments: dict[str, Any]) -> bool:
    try:
        return bool(orjson.loads(text) == arguments)
    except orjson.JSONDecodeError:
        return False


#: The error body a Responses client reads (the SDK raises it with this message).
error_body = openai_error_body


__all__ = [
    "API",
    "OpenAIResponsesProvider",
    "StreamEncoder",
    "StreamTranslator",
    "build_request_body",
    "convert_input",
    "error_body",
    "parse_request_body",
    "response_body",
    "split_tool_call_id",
]
