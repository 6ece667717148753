"""A scripted HTTP server on 127.0.0.1 that speaks a vendor's wire format to the real SDK.

Tests queue :class:`ScriptedResponse` objects (status, headers, body chunks written one by one
with chunked transfer encoding) and read back every request the SDK sent. A response can break
off (the connection is closed mid-body, without the chunked terminator) or hold (stop after
some chunks until the test releases it), which is how mid-stream failures and aborts are
exercised without sleeping.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOLD_LIMIT_SECONDS = 10.0


class _QuietServer(ThreadingHTTPServer):
    """A client that goes away mid-response (an aborted stream, a cancelled call) is what
    many tests do on purpose: its connection errors are not printed as tracebacks."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


@dataclass
class ScriptedResponse:
    status: int = 200
    chunks: list[bytes] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "text/event-stream"})
    break_after: int | None = None  # close the socket after this many chunks
    hold_after: int | None = None  # wait for ``release`` after this many chunks, then close
    pause_after: int | None = None  # wait for ``release`` after this many chunks, then go on


@dataclass
class ReceivedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


def sse(*events: Any, event_names: list[str] | None = None, done: bool = False) -> list[bytes]:
    """Server-sent-event frames, one chunk each: ``data: <json>\\n\\n`` (with ``event:`` lines
    when names are given), optionally followed by ``data: [DONE]``."""
    frames = []
    for position, payload in enumerate(events):
        data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
        name = event_names[position] if event_names else None
        prefix = f"event: {name}\n" if name else ""
        frames.append(f"{prefix}data: {data}\n\n".encode())
    if done:
        frames.append(b"data: [DONE]\n\n")
    return frames


class VendorServer:
    """Use as a context manager: ``with VendorServer() as server: server.url ...``."""

    def __init__(self) -> None:
        self._responses: deque[ScriptedResponse] = deque()
        self.requests: list[ReceivedRequest] = []
        self.release = threading.Event()
        self.hold_timed_out = False
        self.holding = threading.Event()
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        # A short poll interval: shutdown() waits for the next poll, once per test.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def queue(self, *responses: ScriptedResponse) -> VendorServer:
        with self._lock:
            self._responses.extend(responses)
        return self

    def __enter__(self) -> VendorServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()

    def _next(self) -> ScriptedResponse:
        with self._lock:
            if self._responses:
                return self._responses.popleft()
        return ScriptedResponse(
            status=500,
            headers={"content-type": "application/json", "x-should-retry": "false"},
            chunks=[b'{"error": {"message": "test server: no response queued"}}'],
        )

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                return

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                with server._lock:
                    server.requests.append(
                        ReceivedRequest(
                            self.command,
                            self.path,
                            {k.lower(): v for k, v in self.headers.items()},
                            body,
                        )
                    )
                response = server._next()
                self.send_response(response.status)
                for name, value in response.headers.items():
                    self.send_header(name, value)
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for position, chunk in enumerate(response.chunks):
                    if response.break_after is not None and position >= response.break_after:
                        self.close_connection = True
                        self.wfile.flush()
                        self.connection.shutdown(2)
                        return
                    if response.hold_after is not None and position == response.hold_after:
                        server.holding.set()
                        if not server.release.wait(HOLD_LIMIT_SECONDS):
                            server.hold_timed_out = True
                        self.close_connection = True
                        return
                    if response.pause_after is not None and position == response.pause_after:
                        server.holding.set()
                        if not server.release.wait(HOLD_LIMIT_SECONDS):
                            server.hold_timed_out = True
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                if response.break_after is not None and response.break_after >= len(
                    response.chunks
                ):
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if response.hold_after is not None and response.hold_after >= len(response.chunks):
                    server.holding.set()
                    if not server.release.wait(HOLD_LIMIT_SECONDS):
                        server.hold_timed_out = True
                    self.close_connection = True
                    return
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            do_POST = _serve
            do_GET = _serve

        return Handler
