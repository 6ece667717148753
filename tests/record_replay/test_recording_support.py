"""Helpers shared by the record/replay tests (this module holds no tests)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson

from openprogram.providers.assembly import AssistantStreamAssembler
from openprogram.providers.types import Context, Model, UserMessage

MODEL = Model(id="m", api="faux", provider="faux")


def context_of(text: str) -> Context:
    return Context(system_prompt="be brief", messages=[UserMessage(content=text, timestamp=1)])


async def collect(stream: AsyncIterator[Any]) -> list[Any]:
    return [event async for event in stream]


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in Path(path).read_bytes().split(b"\n") if line]


def call_ends(path: Path) -> list[dict[str, Any]]:
    return [row for row in rows_of(path) if row["type"] == "call_end"]


def text_events(text_pieces: list[str], *, model: Model = MODEL, timestamp: int = 7) -> list[Any]:
    """The well-formed events of an answer streamed in the given pieces."""
    assembler = AssistantStreamAssembler(model, timestamp=timestamp)
    events = [assembler.start()]
    index, event = assembler.begin_text()
    events.append(event)
    events.extend(assembler.append_text(index, piece) for piece in text_pieces)
    events.extend(assembler.finish())
    return events


class ScriptedProvider:
    """A provider whose stream is a plain async iterator (no ``aclose``) over given events,
    optionally raising, or waiting forever, after some of them."""

    requires_credentials = True

    def __init__(
        self,
        events: list[Any],
        *,
        raise_after: int | None = None,
        error: BaseException | None = None,
        hang_after: int | None = None,
        with_aclose: bool = False,
    ) -> None:
        self.events = events
        self.raise_after = raise_after
        self.error = error or RuntimeError("provider exploded")
        self.hang_after = hang_after
        self.with_aclose = with_aclose
        self.streams: list[_ScriptedStream] = []
        self.seen_options: list[Any] = []

    def stream(self, model, context, options=None):
        self.seen_options.append(options)
        stream = _ScriptedStream(self) if not self.with_aclose else _ClosableStream(self)
        self.streams.append(stream)
        return stream

    stream_simple = stream


class _ScriptedStream:
    def __init__(self, provider: ScriptedProvider) -> None:
        self.provider = provider
        self.position = 0
        self.closed = False

    def __aiter__(self):
        return self

    async def __anext__(self):
        provider = self.provider
        if provider.raise_after is not None and self.position == provider.raise_after:
            raise provider.error
        if provider.hang_after is not None and self.position == provider.hang_after:
            await asyncio.Event().wait()
        if self.position >= len(provider.events):
            raise StopAsyncIteration
        event = provider.events[self.position]
        self.position += 1
        return event


class _ClosableStream(_ScriptedStream):
    async def aclose(self) -> None:
        self.closed = True
