"""The base every built-in provider shares: ``stream``/``stream_simple`` and the event stream
contract around one call.

A provider only describes a call's happy path in :meth:`AssembledProvider.produce`, driving an
:class:`~.assembly.AssistantStreamAssembler`; the base runs it under
:func:`~.guard.guarded_stream` (exactly one terminal event, aborts, failures as ``error``
events) and scrubs every known credential from error messages.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from .assembly import AssistantEvent, AssistantStreamAssembler
from .guard import ErrorDescriber, guarded_stream, without_secrets
from .types import AssistantMessageEvent, Context, Model, SimpleStreamOptions, StreamOptions


class AssembledProvider:
    """Subclasses implement :meth:`produce` and :meth:`describe_error`. The neutral
    ``reasoning`` option is read from the options by ``produce``, so ``stream`` and
    ``stream_simple`` differ only in the options type they advertise."""

    requires_credentials = True
    #: Fixes the assistant message timestamp, for deterministic tests.
    timestamp: int | None = None

    def stream(
        self, model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        return self._guarded(model, context, options)

    def stream_simple(
        self, model: Model, context: Context, options: SimpleStreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        return self._guarded(model, context, options)

    def produce(
        self,
        assembler: AssistantStreamAssembler,
        model: Model,
        context: Context,
        options: StreamOptions | None,
    ) -> AsyncIterator[AssistantEvent]:
        """The call's events, from ``start`` to ``done``, built with ``assembler``."""
        raise NotImplementedError

    def describe_error(self, model: Model) -> ErrorDescriber:
        """How a failure of this provider reads in the ``error`` event's message."""
        raise NotImplementedError

    async def _guarded(
        self, model: Model, context: Context, options: StreamOptions | None
    ) -> AsyncIterator[AssistantMessageEvent]:
        assembler = AssistantStreamAssembler(model, timestamp=self.timestamp)
        signal = options.signal if options is not None else None
        describe = without_secrets(self.describe_error(model), options.api_key if options else None)
        produce = self.produce(assembler, model, context, options)
        async for event in guarded_stream(
            assembler, produce, signal=signal, describe_error=describe
        ):
            yield event


def streams_assembled_snapshots(provider: object) -> bool:
    """Whether every snapshot ``provider`` streams is made by the shared assembler (it is an
    :class:`AssembledProvider` that keeps the base's ``stream`` and ``stream_simple``): a tool
    call's snapshot arguments are then, by construction, the partial-JSON parse of its deltas,
    which the recorder need not check."""
    if not isinstance(provider, AssembledProvider):
        return False
    kind = type(provider)
    return (
        kind.stream is AssembledProvider.stream
        and kind.stream_simple is AssembledProvider.stream_simple
        and kind._guarded is AssembledProvider._guarded
    )
