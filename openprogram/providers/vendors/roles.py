"""The shapes of a vendor's stream roles, shared by every vendor module (see
``docs/architecture.md``, "Vendors").

- A :class:`StreamTranslator` turns the vendor's stream into our events: ``handle(raw)`` for
  each chunk or event and ``finish()`` once the stream has ended, both returning a list. By
  default ``handle`` dispatches to ``_on_<type>`` (the raw event's ``type``, dots as
  underscores); a vendor whose chunks carry no type overrides ``handle``.
- An :class:`AnswerReader` is the translator the proxy uses on the JSON the vendor sent
  (``sse``, ``body``, ``end``), around the same translator.
- A :class:`StreamEncoder` turns our events back into a vendor's stream bytes for a client of
  ``openprogram proxy``: ``encode(event)`` dispatches to ``_on_<type>(event, message)``
  between the ``before`` and ``after`` hooks, as translators do; no ``if`` chain over types.

:func:`translated` is the one loop that drives a translator over an SDK's stream, for every
vendor provider.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any, ClassVar, cast

from ..assembly import AssistantEvent, AssistantStreamAssembler, translate_stream
from ..types import AssistantMessage, AssistantMessageEvent


def handler_of(owner: object, kind: str) -> Callable[..., Any] | None:
    """``owner``'s ``_on_<kind>`` method (a dot in ``kind`` read as an underscore), or None."""
    return cast("Callable[..., Any] | None", getattr(owner, "_on_" + kind.replace(".", "_"), None))


class StreamTranslator:
    """The vendor's stream into our events, through the shared assembler."""

    def __init__(self, assembler: AssistantStreamAssembler) -> None:
        self.assembler = assembler

    def identify(self, raw: Any) -> None:
        """Note the answer's id and model version on the assembler from ``raw``, if it names
        them (see :func:`~..assembly.translate_stream`)."""

    def handle(self, raw: Any) -> list[AssistantEvent]:
        """The events one chunk or event of the stream makes: its ``_on_<type>`` handler's
        (an event without one makes none)."""
        handler = handler_of(self, str(getattr(raw, "type", None) or ""))
        return list(handler(raw)) if handler is not None else []

    def finish(self) -> list[AssistantEvent]:
        """The terminal events once the stream has ended without the message finished. By
        default none: a vendor whose stream ends the message itself (``message_stop``,
        ``response.completed``) leaves a stream cut short to the guard, which says so."""
        return []


async def translated(
    translator: StreamTranslator, chunks: AsyncIterable[Any]
) -> AsyncIterator[AssistantEvent]:
    """``translator``'s events for an SDK's stream of ``chunks``: ``start`` once the first
    chunk names the answer, the events of each chunk, then ``finish()``'s if the chunks did
    not finish the message."""
    assembler = translator.assembler
    async for event in translate_stream(assembler, chunks, translator.identify, translator.handle):
        yield event
    if not assembler.finished:
        for event in translator.finish():
            yield event


class AnswerReader:
    """The vendor's answer as the JSON it sent, into events: each ``data:`` of a stream
    (``sse``), or the whole body of a call that did not stream (``body``), then ``end``.
    ``openprogram proxy`` forwards the vendor's bytes and reads them with this
    (docs/proxy.md)."""

    #: The vendor's translator, which reads the JSON as it reads the SDK's objects.
    translator_class: ClassVar[type[StreamTranslator]]

    def __init__(self, assembler: AssistantStreamAssembler) -> None:
        self.assembler = assembler
        self.translator = self.translator_class(assembler)

    def sse(self, event: str | None, data: str) -> list[AssistantEvent]:
        raise NotImplementedError

    def body(self, body: Any) -> list[AssistantEvent]:
        raise NotImplementedError

    def end(self) -> list[AssistantEvent]:
        """The translator's terminal events; an answer that ended before its message did is
        an incomplete one (:meth:`incomplete` says why)."""
        events = [] if self.assembler.finished else self.translator.finish()
        if not self.assembler.finished:
            raise self.incomplete()
        return events

    def incomplete(self) -> Exception:
        return ConnectionError("the stream ended before the answer was complete")


def message_of(event: AssistantMessageEvent) -> AssistantMessage:
    """The message an event carries: the final one, the failed one, or the partial snapshot."""
    if event.type == "done":
        return event.message
    if event.type == "error":
        return event.error
    return event.partial


class StreamEncoder:
    """Our events as a vendor's stream bytes: ``encode(event)`` is ``before`` + the event's
    ``_on_<type>(event, message)`` (``unhandled`` for a type without one) + ``after``."""

    def __init__(self, request_body: dict[str, Any]) -> None:
        self.request_body = request_body

    def encode(self, event: AssistantMessageEvent) -> bytes:
        message = message_of(event)
        before = self.before(event, message)
        handler = handler_of(self, event.type)
        encoded = handler(event, message) if handler is not None else self.unhandled(event, message)
        return before + cast(bytes, encoded) + self.after(event, message)

    def before(self, event: AssistantMessageEvent, message: AssistantMessage) -> bytes:
        """What precedes every event's own bytes (a held frame that the event releases)."""
        return b""

    def after(self, event: AssistantMessageEvent, message: AssistantMessage) -> bytes:
        """What follows every event's own bytes (server tool blocks a snapshot first holds)."""
        return b""

    def unhandled(self, event: AssistantMessageEvent, message: AssistantMessage) -> bytes:
        """The bytes of an event type the vendor's stream has no frame for."""
        return b""


__all__ = [
    "AnswerReader",
    "StreamEncoder",
    "StreamTranslator",
    "handler_of",
    "message_of",
    "translated",
]
