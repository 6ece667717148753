"""``openprogram proxy`` in front of the OpenAI SDK: ``python -m bench.run proxy``.

A 200-delta Chat Completions stream, read to its end by the same ``openai`` client in three
ways: from a plain local server that writes the stream's bytes (the baseline), through an
``openprogram proxy`` process recording against that server, and through one replaying the
recording (no server). Rows give each way's time against the baseline measured in the same run
(wall time, best of N, called alternately with the plain server), and the time to the first
text delta against the plain server's. The proxy runs as its own process, as the command does:
in the benchmark's process it would share one interpreter lock with the client and the server,
and measure their contention rather than the proxy.

The plain server is this benchmark's own, like :mod:`bench.echo_server`: ``tests/`` is not a
package a benchmark run can rely on.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson

from bench.common import Row

DELTAS = 200
REPEAT = 15
#: Limits against the plain server. Recording forwards the vendor's bytes as they arrive and
#: reads them into the recording beside that; a replay sends the recorded bytes.
RECORD_LIMIT = 1.3
REPLAY_LIMIT = 1.1
#: How much later than the plain server's the first text delta may arrive through the proxy.
FIRST_DELTA_LIMIT_MS = 2.0
REQUEST = {
    "model": "gpt-4o-mini",
    "messages": [{"role": "user", "content": "Count to 200."}],
    "stream": True,
}


def stream_bytes() -> bytes:
    """The stream as OpenAI writes it: role chunk, 200 content deltas, finish, usage, [DONE]."""
    head = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-4o-mini",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + orjson.dumps(body) + b"\n\n"

    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"content": f" {number}"}) for number in range(1, DELTAS + 1)]
    frames.append(chunk({}, "stop"))
    usage = {"prompt_tokens": 12, "completion_tokens": DELTAS, "total_tokens": DELTAS + 12}
    frames.append(b"data: " + orjson.dumps({**head, "choices": [], "usage": usage}) + b"\n\n")
    frames.append(b"data: [DONE]\n\n")
    return b"".join(frames)


class _QuietServer(ThreadingHTTPServer):
    """A client that closes its stream once it has read ``[DONE]`` (the SDK does) resets the
    connection before the chunked terminator: not worth a traceback."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class PlainServer:
    """Answers every POST with the stream's bytes, one write per frame, as a vendor does."""

    def __init__(self) -> None:
        frames = [frame + b"\n\n" for frame in stream_bytes().split(b"\n\n") if frame]

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                return

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for frame in frames:
                    self.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> PlainServer:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def read_stream(client: Any) -> tuple[float, float, str]:
    """One call read to its end: ``(seconds to the first text delta, seconds in all, text)``."""
    start = time.perf_counter()
    first = None
    pieces = []
    for chunk in client.chat.completions.create(**REQUEST):
        if chunk.choices and chunk.choices[0].delta.content:
            first = first or time.perf_counter()
            pieces.append(chunk.choices[0].delta.content)
    end = time.perf_counter()
    return (first or end) - start, end - start, "".join(pieces)


def paired(
    baseline: Callable[[], tuple[float, float, str]],
    measured: Callable[[], tuple[float, float, str]],
    rounds: int,
) -> tuple[tuple[float, float, str], tuple[float, float, str]]:
    """The fastest first delta and whole call of each way, called alternately so that a burst
    of load on the machine hits both alike."""
    results: tuple[list[tuple[float, float, str]], list[tuple[float, float, str]]] = ([], [])
    for _ in range(rounds):
        results[0].append(baseline())
        results[1].append(measured())
    return _fastest(results[0]), _fastest(results[1])


def _fastest(results: list[tuple[float, float, str]]) -> tuple[float, float, str]:
    return min(r[0] for r in results), min(r[1] for r in results), results[-1][2]


class ProxyProcess:
    """``openprogram proxy --port 0`` with ``arguments``, in a process of its own; ``url`` once
    it listens (its first line says where). Stopping it ends its session (the recording)."""

    def __init__(self, *arguments: str) -> None:
        import os
        import subprocess
        import sys

        home = tempfile.mkdtemp(prefix="bench-proxy-home-")
        env = {**os.environ, "OPENPROGRAM_HOME": home}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "openprogram", "proxy", "--port", "0", *arguments],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        first = self.process.stdout.readline()
        if "listening on " not in first:
            self.stop()
            raise RuntimeError(
                f"the proxy did not start: {first}{self.process.stderr.read() if self.process.stderr else ''}"
            )
        self.url = first.split("listening on ", 1)[1].split(" ", 1)[0]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)

    def __enter__(self) -> ProxyProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def run() -> list[Row]:
    import openai

    expected = "".join(f" {number}" for number in range(1, DELTAS + 1))
    with tempfile.TemporaryDirectory() as folder, PlainServer() as server:
        path = Path(folder) / "bench.jsonl"

        def client(url: str) -> Any:
            return openai.OpenAI(base_url=url + "/v1", api_key="sk-bench-0123456789", max_retries=0)

        plain_client = client(server.url)
        read_stream(plain_client)  # warm: the SDK's first call loads what it needs
        upstream = f"openai-completions={server.url}/v1"
        with ProxyProcess(
            "--mode", "record", "--recording", str(path), "--upstream", upstream
        ) as proxy:
            proxied = client(proxy.url)
            read_stream(proxied)
            plain, recorded = paired(
                lambda: read_stream(plain_client), lambda: read_stream(proxied), REPEAT
            )
        with ProxyProcess("--mode", "replay", "--recording", str(path)) as proxy:
            proxied = client(proxy.url)
            read_stream(proxied)  # the recording holds REPEAT + 1 identical calls, in one lane
            plain_again, replayed = paired(
                lambda: read_stream(plain_client), lambda: read_stream(proxied), REPEAT
            )
    assert plain[2] == recorded[2] == replayed[2] == expected, "a stream came back changed"
    return [
        _row("record", recorded, plain, RECORD_LIMIT),
        _row("replay", replayed, plain_again, REPLAY_LIMIT),
        _first_delta_row("record", recorded, plain),
        _first_delta_row("replay", replayed, plain_again),
    ]


def _row(
    mode: str, measured: tuple[float, float, str], plain: tuple[float, float, str], limit: float
) -> Row:
    ratio = measured[1] / plain[1]
    return Row(
        f"proxy: {DELTAS}-delta stream, {mode} vs plain server (openai SDK)",
        f"{ratio:.2f}x ({measured[1] * 1000:.1f} ms vs {plain[1] * 1000:.1f} ms)",
        f"<= {limit:g}x",
        ratio <= limit,
    )


def _first_delta_row(
    mode: str, measured: tuple[float, float, str], plain: tuple[float, float, str]
) -> Row:
    later = (measured[0] - plain[0]) * 1000
    return Row(
        f"proxy: first text delta, {mode} vs plain server",
        f"+{later:.1f} ms ({measured[0] * 1000:.1f} ms vs {plain[0] * 1000:.1f} ms)",
        f"<= +{FIRST_DELTA_LIMIT_MS:g} ms",
        later <= FIRST_DELTA_LIMIT_MS,
    )


if __name__ == "__main__":
    from bench.run import print_table

    print_table(run())
