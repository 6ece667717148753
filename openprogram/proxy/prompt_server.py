"""A uvicorn server that stops as soon as it is asked.

uvicorn looks at its exit flag every 0.1 s and, when stopping, sleeps 0.1 s after asking its
connections to close, then 0.1 s at a time until they have: 0.1 to 0.3 s each time a proxy
stops, which a suite that starts a proxy per test (``llm_proxy``) pays on every test. This
server is woken by :meth:`PromptServer.request_exit` instead, and looks every few milliseconds
whether its connections and tasks have ended; what it waits for, and in what order, is
uvicorn's own shutdown (docs/proxy.md, "From Python, in a background thread").
"""

from __future__ import annotations

import asyncio
import contextlib
import socket

import uvicorn

#: How often a running server looks at its exit flag when nothing wakes it (uvicorn's tick:
#: the flag a signal handler sets is seen within it).
TICK_SECONDS = 0.1

#: How often a stopping server looks whether its connections and tasks have ended.
DRAIN_POLL_SECONDS = 0.005


class PromptServer(uvicorn.Server):
    """:class:`uvicorn.Server`, woken from any thread by :meth:`request_exit`."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None

    def request_exit(self) -> None:
        """Stop serving, from any thread: the calls in flight are answered first, as when
        uvicorn stops on a signal."""
        self.should_exit = True
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing to wake
                loop.call_soon_threadsafe(wake.set)

    async def main_loop(self) -> None:
        # Set before the first look at the flag: a request_exit that finds no loop yet has
        # set the flag before that look, so it is seen.
        self._wake = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), TICK_SECONDS)
            should_exit = await self.on_tick(counter)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's ``Server.shutdown`` (as of 0.55) without its fixed 0.1 s sleeps: compare
        the two when uvicorn is upgraded."""
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        try:
            async with asyncio.timeout(self.config.timeout_graceful_shutdown):
                await self._drain()
        except TimeoutError:
            for task in self.server_state.tasks:
                task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
        if not self.force_exit:
            await self.lifespan.shutdown()

    async def _drain(self) -> None:
        """uvicorn's wait for the connections, then the tasks, then the listening servers."""
        while self.server_state.connections and not self.force_exit:
            await asyncio.sleep(DRAIN_POLL_SECONDS)
        while self.server_state.tasks and not self.force_exit:
            await asyncio.sleep(DRAIN_POLL_SECONDS)
        for server in self.servers:
            await server.wait_closed()
