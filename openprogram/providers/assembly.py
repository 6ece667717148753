"""Shared stream assembly: the one place that turns "a block began / text arrived / it ended"
into well-formed events with ``partial`` snapshots.

Every provider (the four vendors and faux) drives an :class:`AssistantStreamAssembler` instead
of building events itself, so the event protocol of the contract (snapshots that are never
shared mutable objects, strict tool-argument parsing at the end, exactly one terminal event)
is implemented once.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from typing import Any, Literal, TypeVar, cast

import orjson

from .partial_json import StreamingJsonObject, parse_streaming_json
from .types import (
    AssistantMessage,
    AssistantMessageEvent,
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
    Model,
    ServerToolContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    UsageCost,
)

#: What a provider's producer yields (the annotated union of every event class).
AssistantEvent = AssistantMessageEvent

#: A content block of the live message (every block is an immutable value).
_Block = TypeVar("_Block", TextContent, ThinkingContent, ToolCall, ServerToolContent)
#: One item of a vendor's stream, as its SDK hands it over.
_Chunk = TypeVar("_Chunk")


def compute_cost(model: Model, usage: Usage) -> UsageCost:
    """Dollar cost of ``usage`` at ``model``'s per-million-token prices."""
    prices = model.cost
    parts = (
        usage.input * prices.input / 1_000_000,
        usage.output * prices.output / 1_000_000,
        usage.cache_read * prices.cache_read / 1_000_000,
        usage.cache_write * prices.cache_write / 1_000_000,
    )
    return UsageCost(
        input=parts[0], output=parts[1], cache_read=parts[2], cache_write=parts[3], total=sum(parts)
    )


class AssistantStreamAssembler:
    """Accumulates one assistant message and emits the events that describe its growth.

    The live message is private; every event carries a snapshot built from fresh block
    objects, so a consumer that keeps an event never sees it change afterwards.
    """

    def __init__(self, model: Model, *, timestamp: int | None = None) -> None:
        self.model = model
        fields: dict[str, Any] = {"api": model.api, "provider": model.provider, "model": model.id}
        if timestamp is not None:
            fields["timestamp"] = timestamp
        self._message = AssistantMessage(content=[], **fields)
        self._open: set[int] = set()
        self._arguments: dict[int, StreamingJsonObject] = {}
        self.finished = False

    # ------------------------------------------------------------------ inspection

    @property
    def content_count(self) -> int:
        return len(self._message.content)

    def has_tool_calls(self) -> bool:
        return any(isinstance(block, ToolCall) for block in self._message.content)

    def is_open(self, index: int) -> bool:
        return index in self._open

    def snapshot(self) -> AssistantMessage:
        """A copy of the message so far: a new message and content list; the blocks and the
        usage are immutable values, shared with the live message until they change."""
        message = self._message
        return message.model_copy(update={"content": list(message.content)})

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> EventStart:
        return EventStart(partial=self.snapshot())

    def set_response(self, response_id: Any = None, response_model: Any = None) -> None:
        """The vendor's id of the answer and the model version that answered, as soon as the
        vendor names them (its first chunk, before ``start``): every snapshot from then on
        carries them. The first name given wins, so every event of a call agrees; anything but
        a non-empty string is no name."""
        message = self._message
        if message.response_id is None and isinstance(response_id, str) and response_id:
            message.response_id = response_id
        if message.response_model is None and isinstance(response_model, str) and response_model:
            message.response_model = response_model

    def set_usage(self, usage: Usage) -> None:
        """Take the call's token counts; the total (when the vendor gave none) and the cost
        are computed here."""
        total = (
            usage.total_tokens or usage.input + usage.output + usage.cache_read + usage.cache_write
        )
        self._message.usage = usage.model_copy(
            update={"total_tokens": total, "cost": compute_cost(self.model, usage)}
        )

    # ------------------------------------------------------------------ text

    def begin_text(self) -> tuple[int, EventTextStart]:
        index = self._add_block(TextContent(text=""))
        return index, EventTextStart(content_index=index, partial=self.snapshot())

    def append_text(self, index: int, delta: str) -> EventTextDelta:
        block = self._block(index, TextContent)
        self._replace(index, block, text=block.text + delta)
        return EventTextDelta(content_index=index, delta=delta, partial=self.snapshot())

    def set_text_signature(self, index: int, signature: str | None) -> None:
        self._replace(index, self._block(index, TextContent), text_signature=signature)

    def end_text(self, index: int) -> EventTextEnd:
        block = self._block(index, TextContent)
        self._open.discard(index)
        return EventTextEnd(content_index=index, content=block.text, partial=self.snapshot())

    # ------------------------------------------------------------------ thinking

    def begin_thinking(self, *, redacted: bool = False) -> tuple[int, EventThinkingStart]:
        index = self._add_block(ThinkingContent(thinking="", redacted=redacted))
        return index, EventThinkingStart(content_index=index, partial=self.snapshot())

    def append_thinking(self, index: int, delta: str) -> EventThinkingDelta:
        block = self._block(index, ThinkingContent)
        self._replace(index, block, thinking=block.thinking + delta)
        return EventThinkingDelta(content_index=index, delta=delta, partial=self.snapshot())

    def set_thinking_signature(
        self, index: int, signature: str | None, *, append: bool = False
    ) -> None:
        block = self._block(index, ThinkingContent)
        if append and block.thinking_signature:
            signature = block.thinking_signature + (signature or "")
        self._replace(index, block, thinking_signature=signature)

    def end_thinking(self, index: int) -> EventThinkingEnd:
        block = self._block(index, ThinkingContent)
        self._open.discard(index)
        return EventThinkingEnd(
            content_index=index, content=block.thinking, partial=self.snapshot()
        )

    # ------------------------------------------------------------------ tool calls

    def begin_tool_call(self, tool_call_id: str, name: str) -> tuple[int, EventToolCallStart]:
        index = self._add_block(ToolCall(id=tool_call_id, name=name, arguments={}))
        self._arguments[index] = StreamingJsonObject()
        return index, EventToolCallStart(content_index=index, partial=self.snapshot())

    def set_tool_call_identity(
        self, index: int, *, tool_call_id: str | None = None, name: str | None = None
    ) -> None:
        block = self._block(index, ToolCall)
        changes = {"id": tool_call_id, "name": name}
        self._replace(index, block, **{key: value for key, value in changes.items() if value})

    def set_tool_call_signature(self, index: int, signature: str | None) -> None:
        """The vendor's opaque signature of a tool call (Gemini's ``thoughtSignature``), kept
        as sent so that it can go back to the same api."""
        self._replace(index, self._block(index, ToolCall), thought_signature=signature)

    def append_tool_arguments(self, index: int, delta: str) -> EventToolCallDelta:
        """Parsing is incremental (see ``partial_json``): linear in the arguments' length."""
        block = self._block(index, ToolCall)
        self._replace(index, block, arguments=self._arguments[index].feed(delta))
        return EventToolCallDelta(content_index=index, delta=delta, partial=self.snapshot())

    def set_tool_arguments(self, index: int, arguments: dict[str, Any]) -> None:
        """For vendors that deliver arguments whole (Google) rather than as text."""
        block = self._block(index, ToolCall)
        self._replace(index, block, arguments=dict(arguments))
        self._arguments[index] = StreamingJsonObject(orjson.dumps(arguments).decode())

    def end_tool_call(self, index: int) -> EventToolCallEnd:
        block = self._block(index, ToolCall)
        streamed = self._arguments.get(index)
        text = streamed.text if streamed is not None else ""
        if text.strip():
            try:
                parsed = orjson.loads(text)
            except orjson.JSONDecodeError:
                parsed = parse_streaming_json(text)
            block = self._replace(
                index, block, arguments=parsed if isinstance(parsed, dict) else {}
            )
        self._open.discard(index)
        return EventToolCallEnd(content_index=index, tool_call=block, partial=self.snapshot())

    # ------------------------------------------------------------------ server-side tools

    def add_server_tool(self, block: ServerToolContent) -> int:
        """Append a vendor-run tool block, complete as it is: it has no events of its own
        (the event protocol has none for it) and shows in the next snapshot."""
        self._message.content.append(block)
        return len(self._message.content) - 1

    def replace_server_tool(self, index: int, *, payload: dict[str, Any], text: str | None) -> None:
        """A server tool block's final form, arrived after the block was added (a Responses
        item completed only in ``response.completed``). Snapshots already handed out keep
        the block they had: blocks are immutable values."""
        self._replace(index, self._block(index, ServerToolContent), payload=payload, text=text)

    # ------------------------------------------------------------------ terminal

    def close_open_blocks(self) -> list[AssistantEvent]:
        """End events for every block still open, in content order."""
        events: list[AssistantEvent] = []
        for index in sorted(self._open):
            block = self._message.content[index]
            if isinstance(block, TextContent):
                events.append(self.end_text(index))
            elif isinstance(block, ThinkingContent):
                events.append(self.end_thinking(index))
            else:
                events.append(self.end_tool_call(index))
        return events

    def finish(self, stop_reason: str = "stop") -> list[AssistantEvent]:
        """Close what is open and emit ``done``. A plain "stop" after tool calls becomes
        "toolUse", because several OpenAI-compatible servers report it that way."""
        events = self.close_open_blocks()
        if stop_reason == "stop" and self.has_tool_calls():
            stop_reason = "toolUse"
        if stop_reason not in ("stop", "length", "toolUse"):
            stop_reason = "stop"
        # One of the three values, as just checked (mypy does not narrow a str by "in").
        reason = cast('Literal["stop", "length", "toolUse"]', stop_reason)
        self._message.stop_reason = reason
        self.finished = True
        events.append(EventDone(reason=reason, message=self.snapshot()))
        return events

    def fail(self, error_message: str, *, aborted: bool = False) -> EventError:
        """The terminal ``error`` event; content that arrived so far is kept."""
        reason: Literal["error", "aborted"] = "aborted" if aborted else "error"
        self._open.clear()
        self._message.stop_reason = reason
        self._message.error_message = error_message
        self.finished = True
        return EventError(reason=reason, error=self.snapshot())

    # ------------------------------------------------------------------ internals

    def _add_block(self, block: TextContent | ThinkingContent | ToolCall) -> int:
        self._message.content.append(block)
        index = len(self._message.content) - 1
        self._open.add(index)
        return index

    def _replace(self, index: int, block: _Block, **changes: Any) -> _Block:
        """Put a changed copy of ``block`` (an immutable value) in its place."""
        replaced = block.model_copy(update=changes)
        self._message.content[index] = replaced
        return replaced

    def _block(self, index: int, kind: type[_Block]) -> _Block:
        block = self._message.content[index]
        if not isinstance(block, kind):
            raise TypeError(f"content block {index} is {type(block).__name__}, not {kind.__name__}")
        return block


async def translate_stream(
    assembler: AssistantStreamAssembler,
    chunks: AsyncIterable[_Chunk],
    identify: Callable[[_Chunk], None],
    handle: Callable[[_Chunk], Iterable[AssistantEvent]],
) -> AsyncIterator[AssistantEvent]:
    """``start``, then the events ``handle`` makes of each chunk, until the stream ends or the
    message is finished (nothing after the end counts).

    ``start`` waits for the vendor's first chunk: every vendor names its answer there (its id
    and the model version that answered), and ``identify`` notes them on the assembler (see
    :meth:`AssistantStreamAssembler.set_response`) before ``start``'s snapshot is taken, so that
    every event of the call carries them. ``identify`` sees every chunk, for a vendor that names
    them later."""
    iterator = aiter(chunks)
    first = await anext(iterator, None)  # SDK streams never yield None
    if first is not None:
        identify(first)
    yield assembler.start()
    if first is None:
        return
    for event in handle(first):
        yield event
    if assembler.finished:
        return
    async for chunk in iterator:
        identify(chunk)
        for event in handle(chunk):
            yield event
        if assembler.finished:
            return
