"""The ``faux`` provider: scripted, deterministic answers for tests and demos.

Queue responses on a :class:`FauxProvider` (text, thinking, tool calls, errors, or a function
of the request); each call pops one and streams it as the complete event sequence a real
provider would produce, chunked deterministically. With nothing queued, the model ``echo``
answers by itself (see :func:`echo_response`); any other model reports an empty queue as an
``error`` event.

Echo syntax, for the CLI and demos: a user message line ``/NAME ARGS`` asks for a call of tool
NAME. ARGS is a JSON object, or plain text that becomes the value of the tool's first required
parameter (``/calculator 6*7``). Several such lines make parallel calls. After tool results the
echo model reports them; otherwise it answers ``echo: <last user text>``.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from .assembly import AssistantStreamAssembler
from .base import AssembledProvider
from .guard import ErrorDescriber, describe_plain_error
from .types import (
    ANSWER_ONLY_FIELDS,
    AssistantMessageEvent,
    Context,
    Model,
    StreamOptions,
    TextContent,
    Tool,
    ToolResultMessage,
    Usage,
    UserContent,
    UserMessage,
)

FAUX_API = "faux"


@dataclass(frozen=True)
class FauxText:
    text: str


@dataclass(frozen=True)
class FauxThinking:
    thinking: str
    signature: str | None = None


@dataclass(frozen=True)
class FauxToolCall:
    name: str
    arguments: dict[str, Any]
    id: str | None = None


FauxBlock = FauxText | FauxThinking | FauxToolCall


@dataclass(frozen=True)
class FauxResponse:
    """One scripted answer. ``error`` makes the call end in an ``error`` event after the
    blocks (if any) have streamed; ``stop_reason`` None means "toolUse" if there are tool
    calls, else "stop"."""

    blocks: tuple[FauxBlock, ...] = ()
    stop_reason: str | None = None
    error: str | None = None
    usage: dict[str, int] | None = None


FauxResponder = Callable[[Model, Context, StreamOptions | None], FauxResponse]
FauxScript = FauxResponse | FauxResponder


def faux_text(text: str) -> FauxResponse:
    return FauxResponse(blocks=(FauxText(text),))


def faux_thinking(thinking: str, text: str = "", signature: str | None = None) -> FauxResponse:
    blocks: list[FauxBlock] = [FauxThinking(thinking, signature)]
    if text:
        blocks.append(FauxText(text))
    return FauxResponse(blocks=tuple(blocks))


def faux_tool_call(
    name: str, arguments: dict[str, Any], *, id: str | None = None, text: str = ""
) -> FauxResponse:
    blocks: list[FauxBlock] = [FauxText(text)] if text else []
    blocks.append(FauxToolCall(name, arguments, id))
    return FauxResponse(blocks=tuple(blocks))


def faux_tool_calls(*calls: tuple[str, dict[str, Any]], text: str = "") -> FauxResponse:
    blocks: list[FauxBlock] = [FauxText(text)] if text else []
    blocks.extend(FauxToolCall(name, args) for name, args in calls)
    return FauxResponse(blocks=tuple(blocks))


def faux_error(message: str, *, partial_text: str = "") -> FauxResponse:
    blocks = (FauxText(partial_text),) if partial_text else ()
    return FauxResponse(blocks=blocks, error=message)


_CHUNK = re.compile(r"\s*\S+\s*|\s+")


def chunk_text(text: str, words_per_chunk: int = 1) -> list[str]:
    """Split text into deterministic word chunks that concatenate back to ``text``."""
    words = _CHUNK.findall(text)
    if not words:
        return [text] if text else []
    return ["".join(words[i : i + words_per_chunk]) for i in range(0, len(words), words_per_chunk)]


def chunk_fixed(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class FauxProvider(AssembledProvider):
    """A scripted provider. Thread-safe queue; records every request it receives in
    :attr:`calls` so tests can assert what the agent sent."""

    requires_credentials = False

    def __init__(
        self,
        responses: Iterable[FauxScript] = (),
        *,
        words_per_chunk: int = 1,
        chunk_delay: float = 0.0,
        timestamp: int | None = None,
    ) -> None:
        self._queue: deque[FauxScript] = deque(responses)
        self._lock = threading.Lock()
        self.words_per_chunk = words_per_chunk
        self.chunk_delay = chunk_delay
        self.timestamp = timestamp
        self.calls: list[tuple[Model, Context, StreamOptions | None]] = []

    def queue(self, *responses: FauxScript) -> FauxProvider:
        with self._lock:
            self._queue.extend(responses)
        return self

    @property
    def pending(self) -> int:
        return len(self._queue)

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()
            self.calls.clear()

    def _next_response(
        self, model: Model, context: Context, options: StreamOptions | None
    ) -> FauxResponse:
        with self._lock:
            self.calls.append((model, context, options))
            script = self._queue.popleft() if self._queue else None
        if script is None:
            if model.id == "echo":
                return echo_response(context)
            return FauxResponse(
                error="faux: no scripted response left for this call; queue one with FauxProvider.queue(...)"
            )
        if callable(script):
            return script(model, context, options)
        return script

    def describe_error(self, model: Model) -> ErrorDescriber:
        return describe_plain_error("faux")

    async def produce(
        self,
        assembler: AssistantStreamAssembler,
        model: Model,
        context: Context,
        options: StreamOptions | None,
    ) -> AsyncIterator[AssistantMessageEvent]:
        response = self._next_response(model, context, options)
        event: AssistantMessageEvent
        yield assembler.start()
        tool_number = sum(1 for m in context.messages if m.role == "assistant")
        for position, block in enumerate(response.blocks):
            if isinstance(block, FauxText):
                index, event = assembler.begin_text()
                yield event
                for piece in chunk_text(block.text, self.words_per_chunk):
                    await self._pause()
                    yield assembler.append_text(index, piece)
                yield assembler.end_text(index)
            elif isinstance(block, FauxThinking):
                index, event = assembler.begin_thinking()
                yield event
                for piece in chunk_text(block.thinking, self.words_per_chunk):
                    await self._pause()
                    yield assembler.append_thinking(index, piece)
                assembler.set_thinking_signature(index, block.signature)
                yield assembler.end_thinking(index)
            else:
                call_id = block.id or f"faux_call_{tool_number}_{position}"
                index, event = assembler.begin_tool_call(call_id, block.name)
                yield event
                for piece in chunk_fixed(orjson.dumps(block.arguments).decode(), 8):
                    await self._pause()
                    yield assembler.append_tool_arguments(index, piece)
                yield assembler.end_tool_call(index)
        await self._pause()
        if response.usage is not None:
            assembler.set_usage(_usage(response.usage))
        else:
            assembler.set_usage(_estimated_usage(context, response))
        if response.error is not None:
            yield assembler.fail(response.error)
            return
        for event in assembler.finish(response.stop_reason or "stop"):
            yield event

    async def _pause(self) -> None:
        # Yielding to the loop between chunks lets an abort signal land mid-stream.
        await asyncio.sleep(self.chunk_delay)


def _usage(values: dict[str, int]) -> Usage:
    return Usage.model_validate(values)


def _estimated_usage(context: Context, response: FauxResponse) -> Usage:
    """Deterministic token counts (four characters a token), so cost displays are stable."""
    prompt_chars = len(context.system_prompt or "") + len(
        orjson.dumps(
            [
                m.model_dump(mode="json", exclude={"timestamp": True, **ANSWER_ONLY_FIELDS})
                for m in context.messages
            ]
        )
    )
    output_chars = 0
    for block in response.blocks:
        if isinstance(block, FauxText):
            output_chars += len(block.text)
        elif isinstance(block, FauxThinking):
            output_chars += len(block.thinking)
        else:
            output_chars += len(orjson.dumps(block.arguments))
    return Usage(
        input=max(1, prompt_chars // 4), output=max(1, output_chars // 4) if response.blocks else 0
    )


# ----------------------------------------------------------------------------- echo


_TOOL_LINE = re.compile(r"^\s*/([A-Za-z_][A-Za-z0-9_.-]*)(?:\s+(.*))?$")


def _text_of(content: str | list[UserContent]) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, TextContent))


def echo_response(context: Context) -> FauxResponse:
    """The answer of model ``faux/echo``: tool calls for ``/NAME ARGS`` lines, a report of
    tool results after they arrive, otherwise ``echo: <last user text>``."""
    trailing_results: list[ToolResultMessage] = []
    for message in reversed(context.messages):
        if isinstance(message, ToolResultMessage):
            trailing_results.append(message)
        else:
            break
    if trailing_results:
        lines = [
            f"{result.tool_name} {'failed' if result.is_error else 'returned'}: {_text_of(result.content)}"
            for result in reversed(trailing_results)
        ]
        return faux_text("\n".join(lines))

    last_user = next((m for m in reversed(context.messages) if isinstance(m, UserMessage)), None)
    text = _text_of(last_user.content) if last_user is not None else ""
    calls = _requested_tool_calls(text, context)
    if calls:
        return FauxResponse(blocks=tuple(FauxToolCall(name, args) for name, args in calls))
    return faux_text(f"echo: {text}")


def _requested_tool_calls(text: str, context: Context) -> list[tuple[str, dict[str, Any]]]:
    tools = {tool.name: tool for tool in (context.tools or [])}
    calls = []
    for line in text.splitlines():
        match = _TOOL_LINE.match(line)
        if not match:
            continue
        name, raw = match.group(1), (match.group(2) or "").strip()
        calls.append((name, _arguments_for(raw, tools.get(name))))
    return calls


def _arguments_for(raw: str, tool: Tool | None) -> dict[str, Any]:
    if raw.startswith("{"):
        try:
            value = orjson.loads(raw)
            if isinstance(value, dict):
                return value
        except orjson.JSONDecodeError:
            pass
    if not raw:
        return {}
    parameter = "input"
    if tool is not None:
        schema = tool.parameters or {}
        required = schema.get("required") or list((schema.get("properties") or {}).keys())
        if required:
            parameter = required[0]
    return {parameter: raw}


#: The process-wide instance that ``register_builtins()`` registers for api ``faux``.
DEFAULT_FAUX_PROVIDER = FauxProvider()
