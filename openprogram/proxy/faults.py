"""A replayed fault answered as the vendor's server fails (docs/proxy.md, "Faults"), so the
client's SDK meets it as it would live and its own retry logic runs.

- ``rate_limit``, ``overloaded``, ``server_error``: the vendor's status, headers (a short
  ``retry-after`` for a rate limit) and error body, and never ``x-should-retry: false``;
- ``timeout``: no byte more (before the answer, or after the events a stalled stream sent)
  until the client gives up and goes away;
- ``cut``: the stream's events up to the fault's event, then the connection closes before the
  body's end;
- ``network``: the connection closes before any byte of an answer (a server cannot refuse a
  connection it has accepted; the SDKs meet a connection closed unanswered as they meet a
  refused one: a connection error, retried).

The connection is closed through :data:`DROP_CONNECTION`, which the server sets for the
requests of each connection (``server.py``); without it, the answer's head is sent and the
body left unfinished, which makes the server close the connection.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson

from ..providers.faults import Fault
from ..providers.vendors.failures import fault_answer

Send = Callable[[dict[str, Any]], Awaitable[None]]

#: Closes the connection the current request came on, at once (set by the server).
DROP_CONNECTION: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "openprogram_proxy_drop_connection", default=None
)
#: The longest a ``timeout`` fault holds a request whose client never gives up.
STALL_LIMIT_SECONDS = 900.0
#: How long a dropped connection may take to close (what was written before goes out first).
DROP_WAIT_SECONDS = 10.0


def fault_response(api: str, fault: Fault) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
    """The status, headers and body ``api``'s vendor answers for ``fault``; None for the kinds
    that are no answer (``timeout``, ``cut``, ``network``)."""
    answer = fault_answer(api, fault.kind)
    if answer is None:
        return None
    headers = [(b"content-type", b"application/json")]
    headers += [(name.encode(), value.encode()) for name, value in answer.headers.items()]
    return answer.status, headers, orjson.dumps(answer.body)


async def answer_fault(
    api: str,
    fault: Fault,
    send: Send,
    *,
    started: bool,
    streaming: bool,
    disconnected: Callable[[], Awaitable[None]] | None,
    drop: Callable[[], None] | None,
) -> None:
    """Fail the request as ``fault`` says; ``started`` when the answer's head (and maybe some
    events) went out already. ``drop`` closes the connection (see :data:`DROP_CONNECTION`)."""
    response = None if started else fault_response(api, fault)
    if response is not None:
        status, headers, body = response
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})
        return
    if fault.kind == "timeout":
        if disconnected is not None:
            try:
                await asyncio.wait_for(disconnected(), STALL_LIMIT_SECONDS)
            except TimeoutError:
                pass
        return
    if drop is not None:
        drop()
        if (
            disconnected is not None
        ):  # returned before the server saw it closed, it would log an error
            try:
                await asyncio.wait_for(disconnected(), DROP_WAIT_SECONDS)
            except TimeoutError:
                pass
        return
    if not started:  # no way to close it unanswered: the head, then no body
        kind = b"text/event-stream" if streaming else b"application/json"
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]}
        )


async def until_disconnected(receive: Callable[[], Awaitable[Mapping[str, Any]]]) -> None:
    """Wait for the client to go away (the request's body was read already: what comes next
    is its ``http.disconnect``)."""
    while (await receive())["type"] != "http.disconnect":
        continue


__all__ = [
    "DROP_CONNECTION",
    "STALL_LIMIT_SECONDS",
    "answer_fault",
    "fault_response",
    "until_disconnected",
]
