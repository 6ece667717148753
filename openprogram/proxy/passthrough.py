"""The live call of a proxied request: the client's own request sent upstream as it came, and
the vendor's answer handed back to the client as it arrives, unparsed on the way.

:class:`PassthroughProvider` is built for one request and stands in for the api's registered
provider while that request is answered (``api_registry.providing``), so the mode in force
wraps it like any provider: a recorder in record and update, nothing in ``off``; a replay
never calls it. It is an ordinary provider of events as well: it reads the same bytes it
forwards with the vendor module's ``AnswerReader`` (the stream translator the vendor's own
provider uses), so the recording holds the call's events as always, and it offers the bytes
themselves through ``raw_answer()``, which the recorder keeps beside them (docs/proxy.md, "What
the client gets").

When the client's response ends with the answer (``end_early``: a proxy of its own), the
answer is read into events once all of it went to the client: reading and recording a burst of
deltas then takes nothing from forwarding it. Each event still carries the moment its bytes
arrived (``event_arrival_ns()``), which the recorder writes as its time.

What goes upstream: the method, the path (under the upstream's base URL), the query and the
body bytes as the client sent them, with the client's headers less the hop-by-hop ones,
``Host``, ``Content-Length``, ``Accept-Encoding`` (the proxy asks for the body uncompressed, so
it can read and keep it) and the proxy's own ``X-OpenProgram-*``. What comes back: the status
and the headers (less the hop-by-hop ones and those of an encoding), then every piece of the
body the moment it arrives; the first byte never waits for a translation.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import ssl
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from time import monotonic_ns
from typing import Any

import orjson

from ..providers.api_registry import VendorAnswer
from ..providers.assembly import AssistantEvent, AssistantStreamAssembler
from ..providers.base import AssembledProvider
from ..providers.guard import ErrorDescriber
from ..providers.types import TERMINAL_EVENT_TYPES, Context, Model, StreamOptions
from ..providers.vendors.common import PLACEHOLDER_KEY, api_key_for, describe_provider_error
from ..providers.vendors.wire import SseDecoder
from .formats import WireFormat

Send = Callable[[dict[str, Any]], Awaitable[None]]

#: Headers that belong to one connection, never forwarded (RFC 9110 7.6.1), and those the
#: proxy sets itself on the way up.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
_NOT_SENT_UP = HOP_BY_HOP | {"host", "content-length", "accept-encoding"}
#: Of the answer's headers: the body reaches the client decoded and re-framed by the proxy.
_NOT_SENT_BACK = HOP_BY_HOP | {"content-length", "content-encoding", "set-cookie"}
OWN_HEADER_PREFIX = "x-openprogram-"

#: How long a live call may wait: to connect, and between two pieces of the answer (a model
#: that thinks for minutes sends nothing meanwhile). The SDKs' own default is 600 s.
CONNECT_TIMEOUT_SECONDS = 30.0
READ_TIMEOUT_SECONDS = 600.0


def upstream_headers(headers: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The client's headers as they go upstream (see the module docstring)."""
    kept = [
        (name, value)
        for name, value in headers
        if name.lower() not in _NOT_SENT_UP and not name.lower().startswith(OWN_HEADER_PREFIX)
    ]
    kept.append(("accept-encoding", "identity"))
    return kept


def client_headers(headers: Sequence[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The answer's headers as they go back to the client."""
    return [
        (name, value)
        for name, value in headers
        if name.lower().decode("latin-1") not in _NOT_SENT_BACK
    ]


class UpstreamHttpError(Exception):
    """The vendor answered with an error status (its answer went to the client as it came)."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message


class UpstreamUnreachable(ConnectionError):
    """No answer: the upstream could not be reached, or stopped answering."""


class PassthroughProvider(AssembledProvider):
    """One proxied request's live call (see the module docstring). ``url`` is where it goes,
    ``headers`` and ``body`` what the client sent, ``send`` the ASGI channel back to it;
    ``client_key`` whether the client sent a credential (else the key the facade resolved, if
    any, is added in the vendor's own header)."""

    def __init__(
        self,
        wire_format: WireFormat,
        *,
        method: str,
        url: str,
        headers: Sequence[tuple[str, str]],
        body: bytes,
        send: Send,
        client_key: bool,
        end_early: bool = False,
    ) -> None:
        self.wire_format = wire_format
        self.method = method
        self.url = url
        self.headers = upstream_headers(headers)
        self.body = body
        self.send = send
        self.client_key = client_key
        #: End the client's response as soon as the answer is whole, before its events are read
        #: and recorded (else the exchange ends it once they are: see :meth:`end_response`).
        self.end_early = end_early
        #: True once the answer's status went to the client: the exchange then sends nothing.
        self.responded = False
        #: True once the whole answer went to the client (the body ended normally).
        self.completed = False
        self._answer: VendorAnswer | None = None
        #: When each piece of the answer arrived (``monotonic_ns``), and the piece the event
        #: being handed on was read from.
        self._arrivals: list[int] = []
        self._arrival: int | None = None
        self._ended = False
        self._pump_task: asyncio.Task[None] | None = None

    def raw_answer(self) -> VendorAnswer | None:
        """The vendor's whole answer as it came, once it has (None when it broke off)."""
        return self._answer

    def event_arrival_ns(self) -> int | None:
        """When the bytes of the event just handed on arrived (``time.monotonic_ns``): the
        answer's head for its start event, None before that. The recorder writes it as the
        event's time."""
        return self._arrival

    def describe_error(self, model: Model) -> ErrorDescriber:
        return describe_provider_error(model.provider)

    async def produce(
        self,
        assembler: AssistantStreamAssembler,
        model: Model,
        context: Context,
        options: StreamOptions | None,
    ) -> AsyncIterator[AssistantEvent]:
        import httpx

        headers, url = list(self.headers), self.url
        if not self.client_key:
            # The vendor providers' own rule: the key the call carries, none for a local server
            # that needs none, else the error naming what to set (or to start with --env-keys).
            key = api_key_for(model, options)
            if key != PLACEHOLDER_KEY:
                name, prefix = self.wire_format.credential_header
                if name == "?":
                    from urllib.parse import quote

                    url += ("&" if "?" in url else "?") + f"{prefix}={quote(key, safe='')}"
                else:
                    headers.append((name, prefix + key))
        client = _http_client()
        request = client.build_request(self.method, url, headers=headers, content=self.body)
        try:
            response = await client.send(request, stream=True)
        except httpx.TransportError as error:
            raise UpstreamUnreachable(self._unreachable(error)) from error
        # The start event's moment: the answer's head, which came before any of its pieces
        # (read later, "now" could fall after the first piece's arrival, out of order).
        self._arrival = monotonic_ns()
        try:
            status = response.status_code
            content_type = response.headers.get("content-type", "")
            await self.send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": client_headers(response.headers.raw),
                }
            )
            self.responded = True
            chunks: list[bytes] = []
            pieces = self._forward(response, chunks)  # forwarding starts now, before any event
            await asyncio.sleep(0)  # and goes first: the first piece may be there already
            if status >= 400:
                async for _chunk in pieces:
                    pass
                raise UpstreamHttpError(
                    status, _vendor_message(b"".join(chunks)) or f"the upstream answered {status}"
                )
            yield assembler.start()
            reader = self.wire_format.vendor.AnswerReader(assembler)
            held: list[AssistantEvent] = []
            if "text/event-stream" in content_type:
                decoder = SseDecoder()
                async for chunk, arrival in self._read(pieces, chunks):
                    if held:
                        continue  # the answer is whole: the rest only goes to the client
                    self._arrival = arrival
                    for kind, data in decoder.feed(chunk):
                        for event in reader.sse(kind, data):
                            if held or event.type in TERMINAL_EVENT_TYPES:
                                held.append(event)
                            else:
                                yield event
                pending = (
                    [event for kind, data in decoder.flush() for event in reader.sse(kind, data)]
                    if not held
                    else []
                )
            else:
                async for _chunk, arrival in self._read(pieces, chunks):
                    self._arrival = arrival
                body = b"".join(chunks)
                pending = reader.body(orjson.loads(body)) if body.strip() else []
            if not held:
                pending += reader.end()
            for event in (*pending, *held):
                yield event
        except (GeneratorExit, asyncio.CancelledError):  # the client went away: so does the answer
            if self._pump_task is not None:
                self._pump_task.cancel()
            raise
        finally:
            pump = self._pump_task
            if pump is not None and not pump.done():
                await pump  # reading the answer failed: the client still gets all of it
            await response.aclose()

    async def _read(
        self, pieces: AsyncIterator[bytes], chunks: list[bytes]
    ) -> AsyncIterator[tuple[bytes, int]]:
        """Each piece of the answer to read, with the moment it arrived: as it is forwarded,
        or (:attr:`end_early`) once the whole answer was, then what broke it off, if anything."""
        arrivals = self._arrivals
        if not self.end_early:
            position = 0
            async for chunk in pieces:
                yield chunk, arrivals[position]
                position += 1
            return
        failure: Exception | None = None
        try:
            async for _chunk in pieces:
                pass
        except UpstreamUnreachable as error:
            failure = error  # what arrived before it is read first, as it would have been
        for position, chunk in enumerate(chunks):  # whole now: the pump above has ended
            yield chunk, arrivals[position]
            await asyncio.sleep(0)  # a client's next call, come meanwhile, is not kept waiting
        if failure is not None:
            raise failure

    def _forward(self, response: Any, chunks: list[bytes]) -> AsyncIterator[bytes]:
        """Each piece of the answer, once it went to the client. A task of its own, started
        here, forwards the answer as fast as it arrives, however long reading and recording its
        events take (they follow in the caller's task), and all of it even when they fail."""
        queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue()
        pump = self._pump_task = asyncio.get_running_loop().create_task(
            self._pump(response, chunks, queue)
        )
        return self._pieces(queue, pump)

    async def _pieces(
        self, queue: asyncio.Queue[bytes | BaseException | None], pump: asyncio.Task[None]
    ) -> AsyncIterator[bytes]:
        try:
            while True:
                item = await queue.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
                await asyncio.sleep(0)  # the forwarding task goes first whenever it can
        except (GeneratorExit, asyncio.CancelledError):  # the client went away
            pump.cancel()
            raise
        finally:
            if not pump.done() and not pump.cancelled():
                await pump

    async def _pump(
        self, response: Any, chunks: list[bytes], queue: asyncio.Queue[bytes | BaseException | None]
    ) -> None:
        import httpx

        send, put, arrived = self.send, queue.put_nowait, self._arrivals.append
        content_type = response.headers.get("content-type", "")
        try:
            async for chunk in response.aiter_bytes():
                if chunk:
                    arrived(monotonic_ns())
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    chunks.append(chunk)
                    put(chunk)
        except httpx.TransportError as error:
            # What arrived is the answer as the client saw it: kept, marked as broken off.
            self._answer = VendorAnswer(response.status_code, content_type, chunks, False)
            put(
                UpstreamUnreachable(
                    f"the answer from {_host(self.url)} broke off: {_reason(error)}"
                )
            )
            return
        except Exception as error:  # noqa: BLE001 - handed to the reader of the queue
            put(error)
            return
        self._answer = VendorAnswer(response.status_code, content_type, chunks)
        self.completed = True
        if self.end_early:
            await self.end_response()
        put(None)
        # The connection goes back to the pool now, not once the answer's events are read:
        # the client's next call (which may come at once) reuses it.
        await response.aclose()

    async def end_response(self) -> None:
        """End the client's response. Unless :attr:`end_early`, the exchange does it once the
        call is recorded: a test that returns when its client's call does (``llm_proxy``) then
        reads a recording that holds the call."""
        if not self._ended:
            self._ended = True
            await self.send({"type": "http.response.body", "body": b"", "more_body": False})

    def _unreachable(self, error: Exception) -> str:
        api = self.wire_format.api
        return (
            f"cannot reach {_host(self.url)} ({_reason(error)}): the live call of {api} went to "
            f"{self.url.split('?', 1)[0]}; point it elsewhere with openprogram proxy --upstream "
            f"{api}=URL, the llm_recording marker's upstream={{{api!r}: URL}}, or the project's "
            "[tool.openprogram.proxy.upstream] table"
        )


def _vendor_message(body: bytes) -> str | None:
    """The human message of a vendor's error body (every vendor nests it under ``error``)."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = body.decode("utf-8", "replace").strip()
        return " ".join(text.split())[:500] or None
    if isinstance(value, list) and value:
        value = value[0]
    error = value.get("error") if isinstance(value, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) and message else None


def _host(url: str) -> str:
    from urllib.parse import urlparse

    parsed = urlparse(url)
    return parsed.netloc.rpartition("@")[2] or url


def _reason(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}".rstrip(": ")


_pools_lock = threading.Lock()
_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's own default TLS context (its CA bundle, ``SSL_CERT_FILE`` and ``SSL_CERT_DIR``
    as set when the first proxy starts), made once: loading the CA bundle costs about 35 ms of
    CPU, which every proxy start (one per ``llm_proxy`` test) would pay again for its pool."""
    import httpx

    return httpx.create_ssl_context()


def _http_client() -> Any:
    """One pooled HTTP client per event loop (a pool may only be used on the loop that made
    it), kept for the loop's life: connections to the upstream stay open between calls."""
    import httpx

    loop = asyncio.get_running_loop()
    with _pools_lock:
        client = _pools.get(loop)
        if client is None or client.is_closed:
            timeout = httpx.Timeout(READ_TIMEOUT_SECONDS, connect=CONNECT_TIMEOUT_SECONDS)
            # A request's head and body are separate writes: without TCP_NODELAY the body waits
            # for the upstream's delayed acknowledgement of the head.
            transport = httpx.AsyncHTTPTransport(
                verify=_tls_context(), socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
            )
            client = httpx.AsyncClient(timeout=timeout, follow_redirects=False, transport=transport)
            _pools[loop] = client
    return client


__all__ = [
    "HOP_BY_HOP",
    "PassthroughProvider",
    "UpstreamHttpError",
    "UpstreamUnreachable",
    "upstream_headers",
]
