"""A local OpenAI Chat Completions server that answers like ``faux/echo``, for benchmarks.

The suite benchmark (:mod:`bench.bench_suite`) records vcrpy cassettes in front of the OpenAI
SDK, and the SDK needs something to talk to while they are recorded: this server, on
127.0.0.1, streams the same conversation the in-memory ``faux/echo`` model holds (a line
``/NAME ARGS`` asks for a tool call, tool results are reported as ``NAME returned: ...``,
anything else is echoed), so the agent makes the same calls and gets the same answers on
every side of the comparison. Responses are deterministic (ids, timestamps and usage depend on
the request only), so a cassette recorded twice is the same file.

It is the benchmark's own rather than ``tests/vendor_server.py``: that one plays scripted
responses queued by a test, this one derives each answer from the request, and ``tests/`` is
not a package a benchmark run can rely on.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CREATED = 1_700_000_000
MODEL = "echo"


def _text(content: Any) -> str:
    """The text of a message's ``content``: a string, or a list of parts of which the text
    parts count (as the provider sends multimodal user messages and tool results)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _tool_names(messages: list[dict[str, Any]]) -> dict[str, str]:
    """Tool-call id -> tool name, from the assistant messages: a ``tool`` message names only
    the call it answers, and the report says which tool returned."""
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            names[call["id"]] = call["function"]["name"]
    return names


def _first_required(tools: list[dict[str, Any]], name: str) -> str | None:
    for tool in tools:
        function = tool.get("function", {})
        if function.get("name") == name:
            required = function.get("parameters", {}).get("required") or []
            return required[0] if required else None
    return None


def answer(body: dict[str, Any]) -> tuple[str | None, list[tuple[str, str]]]:
    """What the echo model says to a request: ``(text, [(tool name, JSON arguments)])``,
    text ``None`` when it calls tools instead."""
    messages: list[dict[str, Any]] = body.get("messages") or []
    trailing: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        trailing.append(message)
    if trailing:
        names = _tool_names(messages)
        lines = [
            f"{names.get(result.get('tool_call_id', ''), 'tool')} returned: {_text(result.get('content'))}"
            for result in reversed(trailing)
        ]
        return "\n".join(lines), []
    last_user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    text = _text(last_user.get("content")) if last_user else ""
    calls = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith("/") or len(stripped) < 2:
            continue
        name, _, raw = stripped[1:].partition(" ")
        raw = raw.strip()
        try:
            arguments = json.loads(raw) if raw.startswith("{") else None
        except ValueError:
            arguments = None
        if arguments is None:
            parameter = _first_required(body.get("tools") or [], name)
            arguments = {parameter: raw} if parameter else {}
        calls.append((name, json.dumps(arguments, separators=(",", ":"))))
    if calls:
        return None, calls
    return f"echo: {text}", []


def sse_stream(body: dict[str, Any]) -> bytes:
    """The whole ``text/event-stream`` body of the answer: a role chunk, the text or one chunk
    per tool call, the finish chunk, a usage chunk, then ``[DONE]``."""
    text, calls = answer(body)
    turn = len(body.get("messages") or [])
    head = {
        "id": f"chatcmpl-echo-{turn}",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": "" if text is not None else None})]
    if text is not None:
        chunks.append(chunk({"content": text}))
    for index, (name, arguments) in enumerate(calls):
        call = {
            "index": index,
            "id": f"call_{turn}_{index}",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        chunks.append(chunk({"tool_calls": [call]}))
    chunks.append(chunk({}, "tool_calls" if calls else "stop"))
    prompt = max(1, len(json.dumps(body.get("messages") or [])) // 4)
    completion = max(1, len(text or "".join(a for _, a in calls)) // 4)
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    chunks.append({**head, "choices": [], "usage": usage})
    frames = [f"data: {json.dumps(c, separators=(',', ':'))}\n\n" for c in chunks]
    frames.append("data: [DONE]\n\n")
    return "".join(frames).encode()


def completion(body: dict[str, Any]) -> bytes:
    """The whole ``chat.completion`` JSON of the answer, for a request that does not stream."""
    text, calls = answer(body)
    turn = len(body.get("messages") or [])
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{turn}_{index}",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            for index, (name, arguments) in enumerate(calls)
        ]
    prompt = max(1, len(json.dumps(body.get("messages") or [])) // 4)
    done = max(1, len(text or "".join(a for _, a in calls)) // 4)
    return json.dumps(
        {
            "id": f"chatcmpl-echo-{turn}",
            "object": "chat.completion",
            "created": CREATED,
            "model": MODEL,
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": done,
                "total_tokens": prompt + done,
            },
        },
        separators=(",", ":"),
    ).encode()


class EchoServer:
    """Use as a context manager: ``with EchoServer() as server: server.base_url ...``, on a
    free port of 127.0.0.1."""

    def __init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> EchoServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body are separate writes: with Nagle's algorithm the body would wait for
    # the client's delayed ACK, about 40 ms on every call.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        return

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        length = int(self.headers.get("content-length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.endswith("/chat/completions"):
            self._send(404, "application/json", b'{"error": {"message": "not found"}}')
            return
        if request.get("stream") is True:
            self._send(200, "text/event-stream", sse_stream(request))
        else:
            self._send(200, "application/json", completion(request))

    def _send(self, status: int, content_type: str, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
