"""What the two OpenAI providers (Chat Completions and Responses) share: the SDK client, the
request plumbing around it, readable errors, and the small mapping helpers both wire formats
need.

Each provider only describes its body and how its stream events map onto an
:class:`~openprogram.providers.assembly.AssistantStreamAssembler`; everything between (the key,
the headers, the payload hook, opening and closing the SDK stream, the abort guard) lives here
once. The ``openai`` SDK is imported inside the call so that importing the providers stays light.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator
from typing import Any

from ..assembly import AssistantEvent, AssistantStreamAssembler
from ..base import AssembledProvider
from ..guard import ErrorDescriber
from ..types import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    StreamOptions,
    Usage,
)
from .common import (
    api_key_for,
    apply_payload_hook,
    as_plain_dict,
    describe_provider_error,
    request_headers,
)

#: SDK retries for 408/409/429/5xx and connection failures. The SDK's own default (2, with
#: 0.5 s .. 8 s backoff) is kept: transient vendor failures are common and cheap to retry. A
#: server that answers ``x-should-retry: false`` is never retried (the SDK obeys the header),
#: which is how tests keep error cases instant; pass ``max_retries=0`` to a provider for none.
DEFAULT_MAX_RETRIES = 2


class OpenAIStreamError(Exception):
    """A failure the vendor reported inside a stream that was otherwise healthy (an ``error``
    event, a failed response, a content-filter stop)."""


class _HttpFailure(Exception):
    """An SDK status error reduced to what a reader needs: the status and the vendor's own
    message, instead of the SDK's ``Error code: 401 - {...}`` rendering of the whole body."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message


def _vendor_message(body: object) -> str | None:
    """The human message inside an OpenAI-style error body (the SDK already unwraps the
    ``error`` key), if there is one."""
    if isinstance(body, dict):
        nested = body.get("error")
        if isinstance(nested, dict):
            body = nested
        message = body.get("message")
        if isinstance(message, str) and message.strip():
            return message
    if isinstance(body, str) and body.strip():
        return body
    return None


def _readable(error: BaseException) -> BaseException:
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        message = _vendor_message(getattr(error, "body", None))
        if message is not None:
            return _HttpFailure(status, message)
        return error
    if not type(error).__module__.startswith("openai"):
        return error
    from openai import APIConnectionError  # loaded already: the call that failed used it

    cause = error.__cause__
    if isinstance(error, APIConnectionError) and cause is not None:
        # The SDK says only "Connection error."; the transport's reason is what helps.
        detail = str(cause).strip() or type(cause).__name__
        return ConnectionError(f"{error.message} ({detail})")
    return error


def describe_openai_error(label: str) -> ErrorDescriber:
    """:func:`describe_provider_error` fed with the vendor's own message (the provider base
    scrubs credentials from the result)."""
    base = describe_provider_error(label)
    return lambda error: base(_readable(error))


# --------------------------------------------------------------------------- mapping helpers


def data_url(image: ImageContent) -> str:
    return f"data:{image.mime_type};base64,{image.data}"


def accepts_images(model: Model) -> bool:
    return "image" in model.input


def is_same_model(message: AssistantMessage, model: Model) -> bool:
    """Whether ``message`` came from the model being called now, so that vendor-private
    material (reasoning items, item ids, reasoning field names) may be sent back."""
    return (
        message.api == model.api
        and message.provider == model.provider
        and message.model == model.id
    )


def compat_flag(model: Model, name: str, default: Any = None) -> Any:
    return (model.compat or {}).get(name, default)


def reasoning_effort(model: Model, options: StreamOptions | None) -> str | None:
    """The provider-neutral reasoning level as an OpenAI effort, for reasoning models only.
    ``xhigh`` exists on few models; elsewhere it becomes ``high`` (opt in with
    ``compat={"supports_xhigh": True}``)."""
    level: str | None = getattr(options, "reasoning", None)
    if not level or not model.reasoning:
        return None
    if level == "xhigh" and not compat_flag(model, "supports_xhigh", False):
        return "high"
    return level


def split_usage(
    prompt_tokens: int, details: Any, output_tokens: int, output_details: Any = None
) -> Usage:
    """OpenAI counts cached and cache-written tokens inside the prompt total (in both APIs, in
    a details object); they are split out so that each is priced at its own rate. Reasoning
    tokens (``output_details.reasoning_tokens``) are counted inside the output total, and so
    are ours."""
    reasoning_tokens = (
        (getattr(output_details, "reasoning_tokens", None) or 0)
        if output_details is not None
        else 0
    )
    cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
    written = (getattr(details, "cache_write_tokens", None) or 0) if details is not None else 0
    cached = min(cached, prompt_tokens)
    written = min(written, prompt_tokens - cached)
    return Usage(
        input=prompt_tokens - cached - written,
        output=output_tokens,
        reasoning=reasoning_tokens,
        cache_read=cached,
        cache_write=written,
    )


def sdk_arguments(body: dict[str, Any], required: tuple[str, ...]) -> dict[str, Any]:
    """Keyword arguments for an SDK ``create`` call that send ``body`` as it is: the required
    parameters by name, everything else through ``extra_body``, so that a body replaced by
    ``options.on_payload`` (or a field the installed SDK does not know yet) reaches the wire."""
    arguments = {name: body[name] for name in required if name in body}
    extra = {key: value for key, value in body.items() if key not in required and key != "stream"}
    arguments["stream"] = True
    if extra:
        arguments["extra_body"] = extra
    return arguments


def openai_error_body(status: int, message: str) -> dict[str, Any]:
    """An error as both OpenAI APIs answer it, which the SDK raises with ``message``: the
    error body of an HTTP failure, and the inner object of an error inside a stream."""
    kind = "invalid_request_error" if 400 <= status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


# --------------------------------------------------------------------------- the provider base


class OpenAIProviderBase(AssembledProvider):
    """The request lifecycle of an OpenAI-SDK provider. Subclasses set :attr:`api` and supply
    :meth:`build_request_body`, :meth:`open_stream` and :meth:`translate`."""

    api: str = ""

    def __init__(
        self, *, max_retries: int = DEFAULT_MAX_RETRIES, timestamp: int | None = None
    ) -> None:
        # ``timestamp`` fixes the assistant message timestamp, for deterministic tests.
        self.max_retries = max_retries
        self.timestamp = timestamp

    # ------------------------------------------------------------------ to override

    def build_request_body(
        self, model: Model, context: Context, options: StreamOptions | None
    ) -> dict[str, Any]:
        raise NotImplementedError

    async def open_stream(self, client: Any, body: dict[str, Any]) -> Any:
        raise NotImplementedError

    def translate(
        self, assembler: AssistantStreamAssembler, stream: Any, model: Model
    ) -> AsyncIterator[AssistantEvent]:
        """The call's events from ``start`` on (see :func:`~..assembly.translate_stream`)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ lifecycle

    def describe_error(self, model: Model) -> ErrorDescriber:
        return describe_openai_error(model.provider)

    async def produce(
        self,
        assembler: AssistantStreamAssembler,
        model: Model,
        context: Context,
        options: StreamOptions | None,
    ) -> AsyncIterator[AssistantEvent]:
        api_key = api_key_for(model, options)
        body = apply_payload_hook(options, self.build_request_body(model, context, options))
        # The SDK client is not closed: it runs on the loop's shared HTTP pool. Closing the
        # stream (also on abort or error) releases the connection.
        stream = await self.open_stream(self._client(model, options, api_key), body)
        try:
            # ``translate`` yields ``start`` once the first chunk names the answer.
            async for event in self.translate(assembler, stream, model):
                yield event
        finally:
            await stream.close()

    def _client(self, model: Model, options: StreamOptions | None, api_key: str) -> Any:
        # A light SDK client per call, over the event loop's shared HTTP pool.
        from openai import AsyncOpenAI

        return AsyncOpenAI(
            api_key=api_key,
            base_url=model.base_url or None,
            default_headers=request_headers(model, options) or None,
            max_retries=self.max_retries,
            http_client=_shared_http_client(),
        )


_pools_lock = threading.Lock()
_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()


def _shared_http_client() -> Any:
    """One pooled HTTP client per event loop, with the SDK's own defaults (timeouts, limits,
    redirects). Building one loads the CA store (about 90 ms, longer than a whole local call),
    and a pool may only be used on the loop that created it. Reuse also keeps connections
    alive between calls. Never closed by a call: closing an SDK client that was given this
    pool would close it for everyone on the loop."""
    from openai import DefaultAsyncHttpxClient

    loop = asyncio.get_running_loop()
    with _pools_lock:
        client = _pools.get(loop)
        if client is None or client.is_closed:
            client = DefaultAsyncHttpxClient()
            _pools[loop] = client
    return client


__all__ = [
    "DEFAULT_MAX_RETRIES",
    "OpenAIProviderBase",
    "OpenAIStreamError",
    "accepts_images",
    "as_plain_dict",
    "compat_flag",
    "data_url",
    "describe_openai_error",
    "is_same_model",
    "openai_error_body",
    "reasoning_effort",
    "sdk_arguments",
    "split_usage",
]
