"""One proxied request, answered: read into our types (for matching, lanes and the recording),
sent through ``stream_simple`` in its lane with this request's :class:`.passthrough
.PassthroughProvider` standing in for the api's provider, and answered with what came of it:

- a live call (record, update's new calls, off): the vendor's answer, forwarded as it arrived
  by the passthrough itself;
- a replayed call that keeps the vendor's answer: those bytes, with their recorded chunking;
- any other replayed call (one recorded through ``openprogram.providers``, or whose answer
  redaction had to change): its events, written in the client's wire format.

Plain ASGI (``send`` and a request already read), so this module imports no web framework and
stays testable alone. The whole call runs in the one task that serves the request: its lane is
a context variable, entered here around the stream and left here when it ends.

What a client can get wrong, and what a replay refuses, is answered in the vendor's own error
shape with the diagnosis in the message, so the client's SDK raises it as it would raise the
vendor's own error, and the proxy goes on serving:

- an unreadable body or one ours cannot carry: 400 (whatever reading it raised: a body that
  fails in a way no check foresaw is still the client's to fix, never a 500 with a traceback);
- a replay mismatch (``replay mismatch at call N, field ...``): 400;
- an upstream that cannot be reached: 502, naming the host and how to point elsewhere; a
  replayed call recorded without the vendor's answer that failed: the status its message names
  (``HTTP 401``), else 502; once its stream has started, the format's in-stream error.

An answer the vendor gave, an error included, reaches the client as the vendor sent it (and
replays so); one whose connection broke part-way breaks off for the client too. The proxy's own
error answers say ``x-should-retry: false``: a retry of a mismatch would only mismatch again.

Unless the proxy was started with ``--env-keys`` (``ProxySettings.env_keys``), a request that
carries no credential of its own gets no key of the proxy's environment (docs/proxy.md,
"Security").

A fault a replay serves (``--fault``, the marker's ``faults=``) is answered otherwise: as the
vendor's server fails, for the client's SDK to retry (:mod:`.faults`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ..providers.credentials import (
    MIN_SECRET_LENGTH,
    resolve_provider_key,
    withhold_environment_keys,
)
from ..providers.faults import Fault, fault_of
from ..providers.types import (
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    EventError,
    Model,
    SimpleStreamOptions,
)
from ..providers.vendors.wire import WireRequestError
from .faults import DROP_CONNECTION, answer_fault
from .formats import VendorWire, WireFormat, client_credential
from .lanes import LANE_HEADER, LaneBook, conversation_lane, in_lane, lane_segments
from .settings import DEFAULT_UPSTREAMS, ProxySettings
from .wire_paths import with_client_path

Send = Callable[[dict[str, Any]], Awaitable[None]]

#: What starts every message the proxy itself writes, so a reader tells it from the vendor's.
PREFIX = "openprogram proxy: "

_HTTP_STATUS = re.compile(r"\bHTTP (\d{3})\b")

#: What a key-less request is told when the proxy's environment keys are withheld from it.
ENV_KEYS_HINT = (
    "send the key from the client (its SDK's api_key), or start the proxy with --env-keys"
)
NO_ENV_KEY_HINT = (
    "send the key from the client (its SDK's api_key), or set it in the proxy's environment"
)

#: What reading a body may raise besides ``WireRequestError`` when it holds what no check of the
#: vendor module foresaw: the body's fault all the same, so a 400 rather than a 500.
_UNFORESEEN = (TypeError, KeyError, AttributeError, IndexError, RecursionError)


@dataclass(frozen=True)
class IncomingRequest:
    """A request as the exchange needs it: lower-case headers, the query, the body, and what
    the path said (Gemini names the model and the action there); for the live call, the
    method, the path, the query string and the headers as they came."""

    headers: Mapping[str, str]
    query: Mapping[str, str]
    body: bytes
    model_id: str | None = None
    action: str | None = None
    method: str = "POST"
    path: str = ""
    query_string: bytes = b""
    raw_headers: tuple[tuple[str, str], ...] = ()
    #: Waits until the client goes away (a ``timeout`` fault holds the answer until then).
    disconnected: Callable[[], Awaitable[None]] | None = None
    #: Closes the request's connection at once (a ``cut`` or ``network`` fault).
    drop: Callable[[], None] | None = None


@dataclass(frozen=True)
class PreparedCall:
    """A request read and ready to send: the client's body (the encoders read it), whether it
    asked for a stream (and whether its answer is server-sent events), the call as
    ``stream_simple`` takes it, its lane path, and where its live call goes."""

    body: dict[str, Any]
    streaming: bool
    model: Model
    context: Context
    options: SimpleStreamOptions
    lane: list[str]
    upstream_url: str = ""
    client_key: bool = False
    event_stream: bool = False


class AnswerBrokeOff(Exception):
    """The vendor's answer broke off after it had started to reach the client: the client's
    connection is dropped too (the ASGI server closes a response left unfinished)."""


class ProxyFailure(Exception):
    """A failure to answer in the vendor's error shape with this status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def answer(
    wire_format: WireFormat,
    settings: ProxySettings,
    lanes: LaneBook,
    request: IncomingRequest,
    send: Send,
) -> None:
    """Answer one request of ``wire_format``: in this task, or, when the settings name the
    context calls run in (a pytest fixture's: the test's recording scope, run values and
    declared secrets), in a task of its own that runs in a copy of that context."""
    drop = (
        DROP_CONNECTION.get()
    )  # the server's, for this connection: read before leaving its context
    if drop is not None and request.drop is None:
        request = dataclasses.replace(request, drop=drop)
    if settings.call_context is None:
        await _answer(wire_format, settings, lanes, request, send)
        return
    try:
        context = settings.call_context()
    except Exception as error:  # noqa: BLE001 - a request the context refuses (outside the test)
        status, message = _failure(error)
        await send_error(send, wire_format.vendor, status, message, _credential(request))
        return
    call = asyncio.get_running_loop().create_task(
        _answer(wire_format, settings, lanes, request, send), context=context.copy()
    )
    await call  # a client that goes away cancels this task, and with it the call's


async def _answer(
    wire_format: WireFormat,
    settings: ProxySettings,
    lanes: LaneBook,
    request: IncomingRequest,
    send: Send,
) -> None:
    vendor = wire_format.vendor
    credential = _credential(request)
    try:
        call = _prepare(wire_format, settings, lanes, request)
    except ProxyFailure as failure:
        await send_error(send, vendor, failure.status, str(failure), credential)
        return
    from ..providers.api_registry import providing
    from ..providers.facade import stream_simple
    from ..providers.replay import served_answers
    from .passthrough import PassthroughProvider

    headers = request.raw_headers
    if settings.client_token is not None:  # the test's token opens this proxy only: never sent on
        headers = tuple((name, value) for name, value in headers if not _is_credential_header(name))
    live = PassthroughProvider(
        wire_format,
        method=request.method,
        url=call.upstream_url,
        headers=headers,
        body=request.body,
        send=send,
        client_key=call.client_key,
        # A test's fixture reads the recording once its client's call returns: the response
        # ends after the call is recorded. A proxy of its own ends its session after every call.
        end_early=settings.call_context is None,
    )
    # The environment's key reaches a call only as the explicit key _prepare chose: the host
    # check of a project's upstream stands in front of it (docs/proxy.md, "Security").
    keys = withhold_environment_keys(NO_ENV_KEY_HINT if settings.env_keys else ENV_KEYS_HINT)
    with in_lane(call.lane), keys, providing(wire_format.api, live), served_answers() as served:
        try:
            events = stream_simple(call.model, call.context, call.options)
            try:
                first = await anext(events)
            except BaseException:
                await _close(events)
                raise
        except Exception as error:  # a replay mismatch, a blocked runtime, an unknown api
            status, message = _failure(error, wire_format, call)
            await send_error(send, vendor, status, message, credential)
            return
        if live.responded:  # the vendor's answer is on its way to the client as it arrives
            last = await _drain(first, events)
            if not live.completed:  # as the vendor's connection broke, so does the client's
                raise AnswerBrokeOff(_message_of(last).error_message or "the answer broke off")
            await live.end_response()
            return
        fault = fault_of(first) if first.type == "error" else None
        if fault is not None:  # a replayed fault, before any answer: as the vendor's server fails
            await _close(events)
            await answer_fault(
                wire_format.api,
                fault,
                send,
                started=False,
                streaming=call.streaming,
                disconnected=request.disconnected,
                drop=request.drop,
            )
            return
        stored = served.answer
        if stored is not None and _fits(stored, call):
            await _close(events)
            await _send_answer(_split_sends(send, settings), stored)
            return
        if first.type == "error":
            await _close(events)
            status = _status_of(first.error)
            await send_error(
                send, vendor, status, first.error.error_message or "the call failed", credential
            )
            return
        failed = _Failing(wire_format.api, call.streaming, request.disconnected, request.drop)
        if call.streaming:
            await _stream(
                vendor.StreamEncoder(call.body),
                first,
                events,
                _split_sends(send, settings),
                credential,
                failed,
            )
        else:
            await _complete(vendor, call.body, first, events, send, credential, failed)


def _prepare(
    wire_format: WireFormat, settings: ProxySettings, lanes: LaneBook, request: IncomingRequest
) -> PreparedCall:
    try:
        body = orjson.loads(request.body or b"{}")
    except orjson.JSONDecodeError as error:
        raise ProxyFailure(400, f"{PREFIX}the request body is not JSON: {error}") from None
    if not isinstance(body, dict):
        raise ProxyFailure(400, f"{PREFIX}the request body must be a JSON object")
    try:
        model, context, options = wire_format.vendor.parse_request_body(
            body, model_id=request.model_id
        )
        derived = conversation_lane(
            context,
            options.extra_body,
            api=wire_format.api,
            model_id=model.id,
            normalize=settings.lane_normalizer(),
        )
        header = request.headers.get(LANE_HEADER)
        segments = lane_segments(
            header, lanes.lane_for(derived) if derived and not header else derived
        )
    except (WireRequestError, ValueError) as error:
        raise ProxyFailure(400, f"{PREFIX}{error}") from None
    except _UNFORESEEN as error:
        raise ProxyFailure(
            400,
            f"{PREFIX}the request body could not be read ({type(error).__name__}: {error}); check it against the vendor's API reference",
        ) from None
    forwarded = {
        name: request.headers[name]
        for name in wire_format.forwarded_headers
        if name in request.headers
    }
    known = known_model(wire_format.api, model)
    if known is not None:
        model = known
    base_url = settings.live_base_url(wire_format.api, known)
    # The llm_proxy fixture's per-test key opens this proxy only; it never travels on.
    sent = (
        None
        if settings.client_token is not None
        else client_credential(request.headers, request.query)
    )
    key = sent
    if key is None and settings.env_keys:
        key = resolve_provider_key(model.provider)
    refusal = settings.key_refusal(wire_format.api)
    if refusal is not None and key:
        raise ProxyFailure(403, f"{PREFIX}{refusal}")
    if (
        known is not None
        and key
        and base_url == known.base_url
        and base_url != DEFAULT_UPSTREAMS[wire_format.api]
    ):
        # a project's model on a host the user does not trust gets no key (docs/project.md)
        from ..providers.key_trust import key_refusal

        model_refusal = key_refusal(known)
        if model_refusal is not None:
            raise ProxyFailure(403, f"{PREFIX}{model_refusal}")
    model = model.model_copy(update={"base_url": base_url})
    options = options.model_copy(update={"api_key": key, "headers": forwarded or None})
    streaming = wire_format.streams(body, request.action)
    return PreparedCall(
        body,
        streaming,
        model,
        context,
        options,
        segments,
        upstream_url=wire_format.upstream_url(base_url, request.path, request.query_string),
        client_key=sent is not None,
        event_stream=wire_format.answers_with_events(streaming, request.query),
    )


async def _drain(
    first: AssistantMessageEvent, events: AsyncIterator[AssistantMessageEvent]
) -> AssistantMessageEvent:
    """Consume a live call's events (the passthrough forwards the answer as they are pulled,
    and the recorder writes them); the last one."""
    last = first
    try:
        async for event in events:
            last = event
    finally:
        await _close(events)
    return last


def _fits(answer: tuple[int, str, list[bytes], bool], call: PreparedCall) -> bool:
    """Whether a stored answer is what this request asks for: an error as it came, a success
    only in the form asked (a stream recorded for a client that now asks for a whole body, or
    the other way round, is answered from the events)."""
    status, content_type = answer[0], answer[1]
    return status >= 400 or ("text/event-stream" in content_type) == call.event_stream


async def _send_answer(send: Send, answer: tuple[int, str, list[bytes], bool]) -> None:
    """A stored vendor answer, byte for byte, in the pieces it arrived in; one whose connection
    broke off breaks off here too."""
    status, content_type, chunks, complete = answer
    headers = [(b"content-type", content_type.encode("latin-1"))] if content_type else []
    if "text/event-stream" in content_type:
        headers.append((b"cache-control", b"no-cache"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    for chunk in chunks:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    if not complete:
        raise AnswerBrokeOff("the recorded answer broke off here, as the vendor's did")
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def known_model(api: str, parsed: Model) -> Model | None:
    """The model the client names as openprogram knows it (the project's models, the user's,
    the built-in catalog; docs/proxy.md, "Models"): its prices give the call its cost, a
    configured one's ``base_url`` is where its live calls go, and a call recorded through
    ``openprogram.providers`` with it is the same request. None for a model none of them
    holds (the request's own reading of it stands)."""
    from ..providers.models import all_models
    from ..state import ConfigError

    try:
        models = all_models()
    except (ConfigError, ValueError):  # an unreadable configuration: the request's own model
        return None
    found = [model for model in models if model.api == api and model.id == parsed.id]
    same_provider = [model for model in found if model.provider == parsed.provider]
    candidates = same_provider or found
    return candidates[0] if candidates else None


def _is_credential_header(name: str) -> bool:
    """A header a client's SDK puts its key in (see :func:`.formats.client_credential`)."""
    lowered = name.lower()
    return lowered == "authorization" or lowered.endswith("api-key")


def _failure(
    error: Exception, wire_format: WireFormat | None = None, call: PreparedCall | None = None
) -> tuple[int, str]:
    """The status and message of a call that failed before its first event (a mismatch also
    names the message by the client's index in ``call``'s body)."""
    from ..providers.replay import RecordedCallInterrupted, ReplayMismatch

    if isinstance(error, ReplayMismatch):
        message = f"{PREFIX}{error}"
        if wire_format is not None and call is not None:
            message = with_client_path(
                message, wire_format, call.body, error.field_path, call.model.id
            )
        return 400, message
    if isinstance(error, RecordedCallInterrupted):
        return 502, f"{PREFIX}{error}"
    return 500, f"{PREFIX}{type(error).__name__}: {error}"


def _status_of(message: AssistantMessage) -> int:
    """The vendor's own status when the error names one (``openai: HTTP 401: ...``)."""
    found = _HTTP_STATUS.search(message.error_message or "")
    status = int(found.group(1)) if found else 502
    return status if 400 <= status < 600 else 502


async def _close(events: AsyncIterator[AssistantMessageEvent]) -> None:
    """Close a provider's stream (every provider's is an async generator; the protocol only
    promises an iterator)."""
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()


def _message_of(event: AssistantMessageEvent) -> AssistantMessage:
    if event.type == "done":
        return event.message
    if event.type == "error":
        return event.error
    return event.partial


def _failed_event(
    last: AssistantMessageEvent, error: BaseException, credential: str | None
) -> EventError:
    """The ``error`` event a stream that raised part-way ends with (an interrupted recorded
    call replays its events, then raises): what arrived is kept, as the event protocol says."""
    text = redacted(f"{PREFIX}{error}", credential)
    message = _message_of(last).model_copy(update={"stop_reason": "error", "error_message": text})
    return EventError(reason="error", error=message)


@dataclass(frozen=True)
class _Failing:
    """What answering a fault that breaks an answer part-way needs to know."""

    api: str
    streaming: bool
    disconnected: Callable[[], Awaitable[None]] | None
    drop: Callable[[], None] | None

    async def answer(self, fault: Fault, send: Send, *, started: bool) -> None:
        await answer_fault(
            self.api,
            fault,
            send,
            started=started,
            streaming=self.streaming,
            disconnected=self.disconnected,
            drop=self.drop,
        )


def _split_sends(send: Send, settings: ProxySettings) -> Send:
    """``send``, or, when the replay re-chunks (``--rechunk``), a ``send`` that writes each
    body chunk in pieces cut at seeded offsets, so a client's reads split SSE lines too."""
    seed = settings.replay.rechunk if settings.replay is not None else None
    if seed is None:
        return send
    rng = random.Random(f"openprogram-bytes:{seed}")

    async def split(message: dict[str, Any]) -> None:
        body = message.get("body", b"")
        if message["type"] != "http.response.body" or len(body) < 2:
            await send(message)
            return
        cuts = sorted(rng.sample(range(1, len(body)), min(len(body) - 1, rng.randint(1, 3))))
        for start, end in zip([0, *cuts], [*cuts, len(body)], strict=True):
            more = message.get("more_body", False) if end == len(body) else True
            await send({"type": "http.response.body", "body": body[start:end], "more_body": more})

    return split


async def _stream(
    encoder: Any,
    first: AssistantMessageEvent,
    events: AsyncIterator[AssistantMessageEvent],
    send: Send,
    credential: str | None,
    failing: _Failing,
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
        }
    )
    last = first
    try:
        await _send_body(send, encoder.encode(first))
        async for event in events:
            fault = fault_of(event)
            if fault is not None:  # the stream breaks here, as the vendor's does
                await failing.answer(fault, send, started=True)
                return
            last = event
            await _send_body(send, encoder.encode(event))
    except Exception as error:
        await _send_body(send, encoder.encode(_failed_event(last, error, credential)))
    finally:
        await _close(events)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _send_body(send: Send, chunk: bytes) -> None:
    if chunk:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})


async def _complete(
    vendor: Any,
    body: dict[str, Any],
    first: AssistantMessageEvent,
    events: AsyncIterator[AssistantMessageEvent],
    send: Send,
    credential: str | None,
    failing: _Failing,
) -> None:
    last = first
    try:
        async for event in events:
            last = event
    except Exception as error:
        last = _failed_event(last, error, credential)
    finally:
        await _close(events)
    fault = fault_of(last)
    if fault is not None:
        await failing.answer(fault, send, started=False)
        return
    if last.type == "done":
        await send_json(send, 200, vendor.response_body(last.message, body))
        return
    message = _message_of(last)
    status = _status_of(message) if last.type == "error" else 502
    await send_error(
        send, vendor, status, message.error_message or f"{PREFIX}the stream ended early", credential
    )


def _credential(request: IncomingRequest) -> str | None:
    return client_credential(request.headers, request.query)


def redacted(message: str, credential: str | None = None) -> str:
    """``message`` as an answer may show it: redacted by the rules the recording file follows
    (known keys, credential shapes, secrets in URLs), and without the credential the client
    sent (docs/proxy.md, "Security")."""
    from ..providers.recording import PLACEHOLDER, remove_secret_values

    text = str(remove_secret_values(message))
    if credential and len(credential) >= MIN_SECRET_LENGTH:
        text = text.replace(credential, PLACEHOLDER)
    return text


async def send_error(
    send: Send, vendor: VendorWire, status: int, message: str, credential: str | None = None
) -> None:
    """An error answer in the vendor's shape, its message :func:`redacted`: every message the
    proxy answers with goes through here, whatever of the client's request it quotes."""
    await send_json(send, status, vendor.error_body(status, redacted(message, credential)))


async def send_json(send: Send, status: int, payload: Any) -> None:
    """A whole JSON answer; an error one tells the SDKs not to retry."""
    headers = [(b"content-type", b"application/json")]
    if status >= 400:
        headers.append((b"x-should-retry", b"false"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": orjson.dumps(payload), "more_body": False})


__all__ = [
    "ENV_KEYS_HINT",
    "IncomingRequest",
    "PREFIX",
    "ProxyFailure",
    "answer",
    "redacted",
    "send_error",
    "send_json",
]
