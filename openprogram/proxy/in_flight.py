"""The calls a running proxy is answering, for the two moments that must know them:

- its stop (``openprogram proxy``, by Ctrl-C or SIGTERM): an ``update`` session stopped while
  calls were in flight is not complete, so it is not kept, and a second Ctrl-C ends those calls
  (docs/proxy.md, "Stopping");
- the end of a test body (``llm_proxy``): a call still being answered then (a client that
  stopped reading a stream early) is ended there, so that its recording holds what the client
  was sent, with its ``call_end``, before the test's recording is closed (docs/proxy.md,
  "In pytest").

A call is a ``POST`` request (``GET /v1/models`` is answered at once and records nothing).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["InFlight"]


class InFlight:
    """ASGI middleware around the proxy's application that knows the calls being answered."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._calls: dict[asyncio.Task[Any], _Answer] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def count(self) -> int:
        """Calls being answered now (read it in the server's thread, or for a message)."""
        return len(self._calls)

    @property
    def unanswered(self) -> int:
        """Calls whose client does not have the whole answer yet. A call whose response has
        ended may still be recording it (a proxy of its own ends the response first): that
        is the proxy's own work, which a stop waits for, not the client's."""
        return sum(1 for answer in self._calls.values() if not answer.finished)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        task = asyncio.current_task()
        if scope["type"] != "http" or scope.get("method") != "POST" or task is None:
            await self._app(scope, receive, send)
            return
        self._loop = asyncio.get_running_loop()
        answer = self._calls[task] = _Answer(send)
        try:
            await self._app(scope, receive, answer.send)
        except asyncio.CancelledError:
            if not answer.ending:
                raise
            # Ended by end_all: the call has recorded its end; close the response and return
            # as a request that was answered (the client, if still there, sees the stream end).
            task.uncancel()
            await answer.close()
        finally:
            del self._calls[task]

    def end_all(self, timeout: float) -> int:
        """From another thread: cancel every call being answered, wait until each has ended
        (its recorder writes a ``call_end`` with outcome ``cancelled`` and the events it got),
        and return how many there were. Raises ``TimeoutError`` when they take longer."""
        loop = self._loop
        if loop is None or not self._calls:
            return 0
        future = asyncio.run_coroutine_threadsafe(self._end_all(), loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(
                f"the calls the proxy was answering did not end within {timeout:g} s"
            ) from None

    async def end_now(self) -> int:
        """:meth:`end_all` from the server's own loop (a stop that cuts the calls in flight)."""
        return await self._end_all()

    async def _end_all(self) -> int:
        ending = list(self._calls.items())
        for task, answer in ending:
            answer.ending = True
            task.cancel()
        await asyncio.gather(*(task for task, _ in ending), return_exceptions=True)
        return len(ending)


class _Answer:
    """One call's response as sent so far, so a call ended early can close it properly."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False
        self.finished = False
        self.ending = False

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.finished = True
        await self._send(message)

    async def close(self) -> None:
        if self.finished:
            return
        if not self.started:
            body = b'{"error": {"message": "openprogram proxy: the call was ended before its answer (its test ended)"}}'
            await self._send(
                {
                    "type": "http.response.start",
                    "status": 503,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await self._send({"type": "http.response.body", "body": body, "more_body": False})
            return
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})
