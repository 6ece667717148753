"""Peak memory of ``openprogram recordings show`` against replaying the same recording.

``show`` needs metadata per call only (model, event count, outcome, usage of the final
message), so it reads the file as strictly as a replay does but keeps just each call's request
and last event row. Target: what its peak resident memory grows by, from a one-call file to
the big one, is at most half what a process that opens the recording with ``ReplayProvider``
grows by (the baseline, measured in the same run on the same files). Growth, not whole
processes: the interpreter and the imports (about 35 MB each) are the same on both sides and
once hid how much each keeps; since replay itself keeps events compactly, whole-process peaks
differ by less than the file does. Each is a subprocess; peak RSS is read with
``resource.getrusage``. The recording is written line by line in the recorder's shape: 200
calls x 100 events, about 20 MB.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench.common import Row

REPO_ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.5
CALLS, EVENTS = 200, 100

_MODEL = {
    "id": "echo",
    "name": "echo",
    "api": "faux",
    "provider": "faux",
    "base_url": "",
    "reasoning": False,
    "input": ["text"],
    "cost": {"input": 0.0, "output": 0.0, "cache_read": 0.0, "cache_write": 0.0},
    "context_window": 128000,
    "max_tokens": 8192,
    "headers": None,
    "compat": None,
}
_USAGE = {
    "input": 17,
    "output": 11,
    "cache_read": 0,
    "cache_write": 0,
    "total_tokens": 28,
    "cost": {"input": 0.0, "output": 0.0, "cache_read": 0.0, "cache_write": 0.0, "total": 0.0},
}


def write_recording(path: Path, calls: int = CALLS, events: int = EVENTS) -> None:
    """A valid recording of ``calls`` streamed text answers of ``events`` events each."""
    with open(path, "wb") as out:

        def line(row: dict) -> None:
            out.write(orjson.dumps(row) + b"\n")

        line(
            {
                "type": "header",
                "format_version": 1,
                "recording_id": "bench",
                "created_at": "2026-01-01T00:00:00.000Z",
                "redaction_version": 1,
                "openprogram_version": "0",
            }
        )
        for call in range(calls):
            prompt = f"{call} " + "lorem ipsum dolor sit amet " * 700
            line(
                {
                    "type": "request",
                    "call_index": call,
                    "session": "s",
                    "model": _MODEL,
                    "context": {
                        "system_prompt": None,
                        "tools": None,
                        "messages": [{"role": "user", "content": prompt, "timestamp": 0}],
                    },
                    "options": None,
                }
            )
            partial = {
                "role": "assistant",
                "content": [],
                "api": "faux",
                "provider": "faux",
                "model": "echo",
                "usage": _USAGE,
                "stop_reason": "stop",
                "error_message": None,
                "timestamp": 0,
            }
            event = {"type": "event", "call_index": call}
            line({**event, "event_index": 0, "event": {"type": "start", "partial": partial}})
            line(
                {
                    **event,
                    "event_index": 1,
                    "event": {
                        "type": "text_start",
                        "content_index": 0,
                        "partial_patch": [
                            [
                                "push",
                                ["content"],
                                {"type": "text", "text": "", "text_signature": None},
                            ]
                        ],
                    },
                }
            )
            text = ""
            for index in range(2, events - 2):
                delta = f"word{index} " * 22
                text += delta
                line(
                    {
                        **event,
                        "event_index": index,
                        "event": {
                            "type": "text_delta",
                            "content_index": 0,
                            "delta": delta,
                            "partial_patch": [["append", ["content", 0, "text"], delta]],
                        },
                    }
                )
            line(
                {
                    **event,
                    "event_index": events - 2,
                    "event": {
                        "type": "text_end",
                        "content_index": 0,
                        "content": text,
                        "partial_patch": [],
                    },
                }
            )
            message = {
                **partial,
                "content": [{"type": "text", "text": text, "text_signature": None}],
            }
            line(
                {
                    **event,
                    "event_index": events - 1,
                    "event": {"type": "done", "reason": "stop", "message": message},
                }
            )
            line({"type": "call_end", "call_index": call, "event_count": events})


def peak_rss_and_time(home: str, *args: str) -> tuple[int, float]:
    """Peak RSS (bytes) and wall time of one ``python ARGS`` subprocess."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(OPENPROGRAM_HOME=home, PYTHONPATH=str(REPO_ROOT))
    script = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
        "assert done.returncode == 0\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    start = time.perf_counter()
    output = subprocess.run(
        [sys.executable, "-c", script, sys.executable, *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(output) * 1024, time.perf_counter() - start


def _peaks(home: str, path: Path) -> tuple[tuple[int, float], tuple[int, float]]:
    """(peak RSS, wall time) of opening ``path`` with ``ReplayProvider``, then of ``show``."""
    replay = peak_rss_and_time(
        home,
        "-c",
        f"from openprogram.providers.replay import ReplayProvider; ReplayProvider({str(path)!r})",
    )
    show = peak_rss_and_time(home, "-m", "openprogram", "recordings", "show", str(path))
    return replay, show


def run() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="bench-show-") as home:
        small, path = Path(home) / "small.jsonl", Path(home) / "big.jsonl"
        write_recording(small, calls=1)
        write_recording(path)
        size = path.stat().st_size
        (replay_small, _), (show_small, _) = _peaks(home, small)
        (replay_rss, replay_time), (show_rss, show_time) = _peaks(home, path)
    show_growth, replay_growth = show_rss - show_small, replay_rss - replay_small
    ratio = show_growth / replay_growth if replay_growth > 0 else float("inf")
    mib = 2**20
    return [
        Row(
            "show: peak RSS growth vs ReplayProvider's",
            f"{ratio:.2f}x (+{show_growth / mib:.0f} MiB vs +{replay_growth / mib:.0f} MiB)",
            f"<= {TARGET:.2f}x",
            ratio <= TARGET,
            f"from a 1-call file to a {size / mib:.0f} MiB one, {CALLS} calls x {EVENTS} events; whole "
            f"processes {show_rss / mib:.0f} MiB vs {replay_rss / mib:.0f} MiB; wall time show "
            f"{show_time:.1f} s, replay open {replay_time:.1f} s (context only)",
        )
    ]


if __name__ == "__main__":
    for row in run():
        print(row)
