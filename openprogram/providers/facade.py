"""The facade every model call goes through: look the provider up by ``model.api``, resolve
the key if the provider needs one, and stream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeVar

from . import credentials
from .api_registry import ApiProvider, get_api_provider
from .key_trust import key_refusal
from .types import (
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    Model,
    SimpleStreamOptions,
    StreamOptions,
)

_Options = TypeVar("_Options", bound=StreamOptions)


def _provider_for(model: Model) -> ApiProvider:
    provider = get_api_provider(model.api)
    if provider is None:
        raise LookupError(
            f"no provider registered for api '{model.api}' (model {model.provider}/{model.id})"
        )
    return provider


def _with_key(
    provider: ApiProvider, model: Model, options: _Options | None, options_class: type[_Options]
) -> _Options | None:
    if options is not None and options.api_key:
        # Noted whatever the provider: a keyless server's key is still a secret to redact.
        credentials.note_secret_value(options.api_key)
        return options
    if getattr(provider, "requires_credentials", True) is False:
        return options
    if credentials.environment_keys_withheld():  # a proxied call without a key of its own
        return options
    key = credentials.resolve_provider_key(model.provider)
    if key is None or (model.base_url and key_refusal(model) is not None):
        return options  # an untrusted host gets no key; the provider's key check says why
    if options is None:
        return options_class(api_key=key)
    return options.model_copy(update={"api_key": key})


def stream(
    model: Model, context: Context, options: StreamOptions | None = None
) -> AsyncIterator[AssistantMessageEvent]:
    """Stream one call's events. Raises ``LookupError`` at once for an unknown api."""
    provider = _provider_for(model)
    return provider.stream(model, context, _with_key(provider, model, options, StreamOptions))


def stream_simple(
    model: Model, context: Context, options: SimpleStreamOptions | None = None
) -> AsyncIterator[AssistantMessageEvent]:
    """Like :func:`stream`, with the provider-neutral reasoning options."""
    provider = _provider_for(model)
    return provider.stream_simple(
        model, context, _with_key(provider, model, options, SimpleStreamOptions)
    )


async def _final_message(events: AsyncIterator[AssistantMessageEvent]) -> AssistantMessage:
    final: AssistantMessage | None = None
    async for event in events:
        if event.type == "done":
            final = event.message
        elif event.type == "error":
            final = event.error
    if final is None:
        raise RuntimeError("the provider's stream ended without a terminal event")
    return final


async def complete(
    model: Model, context: Context, options: StreamOptions | None = None
) -> AssistantMessage:
    """The final assistant message of one call (an error is a message with stop_reason error)."""
    return await _final_message(stream(model, context, options))


async def complete_simple(
    model: Model, context: Context, options: SimpleStreamOptions | None = None
) -> AssistantMessage:
    return await _final_message(stream_simple(model, context, options))
