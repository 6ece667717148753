"""Time and memory per turn of a long agent's version 2 recording: ``python -m bench.run turns``.

An agent resends its whole conversation at every turn; format version 2 stores each turn as its
growth (``context_patch``), so the file grows with the turns. Reading it must too: files of
1,000, 2,000 and 4,000 turns are written in the recorder's line shapes (each turn's request the
answer and a tool result pushed onto the turn before; a streamed answer of a few text deltas and
a tool call), then each is, in a fresh subprocess:

* opened by the strict reader (what a replay does first);
* shown (``recordings show``: a summary read and each call's metadata);
* told as a conversation (``show --conversation``);
* viewed (``recordings view``: the HTML page, in memory).

Time is the subprocess's CPU time for the step (imports excluded); memory the tracemalloc peak
of the step, measured in a second run (tracing slows it). Target: per turn, 4,000 turns cost at
most 2x what 1,000 turns cost, in time and in memory (flat: linear in the file). Before contexts
were resolved sharing structure, the 2,000-turn page alone took 4 GB.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

from bench.common import Row

REPO_ROOT = Path(__file__).resolve().parent.parent
TURNS = (1000, 2000, 4000)
STEPS = ("open", "show", "conversation", "view")
LIMIT = 2.0

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
_TOOLS = [
    {
        "name": "read",
        "description": "read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]


def _assistant(content: list[dict]) -> dict:
    return {
        "role": "assistant",
        "content": content,
        "api": "faux",
        "provider": "faux",
        "model": "echo",
        "usage": _USAGE,
        "stop_reason": "toolUse",
        "error_message": None,
        "timestamp": 0,
    }


def write_recording(path: Path, turns: int) -> None:
    """A version 2 recording of an agent's ``turns`` turns, each request patched from the last."""
    from openprogram.recordings.file.format import (
        ContextBases,
        call_end_row,
        encode_line,
        header_row,
        request_line,
    )

    bases = ContextBases(2)
    messages: list[dict] = [
        {"role": "user", "content": "Read every file, then sum them up.", "timestamp": 0}
    ]
    key, where = ("s1", ""), {"session": "s1"}
    with open(path, "wb") as out:
        out.write(encode_line(header_row(2)))
        for turn in range(turns):
            context = {
                "system_prompt": "You read files.",
                "messages": list(messages),
                "tools": _TOOLS,
            }
            out.write(
                request_line(
                    turn,
                    bases.request_body(
                        key, {"model": _MODEL, "context": context, "options": None}, where
                    ),
                )
            )
            bases.wrote(key, turn, context)
            text = f"Reading file {turn} now."
            call = {
                "type": "toolCall",
                "id": f"call_{turn}",
                "name": "read",
                "arguments": {"path": f"file{turn}"},
                "thought_signature": None,
            }
            final = _assistant([{"type": "text", "text": text, "text_signature": None}, call])
            events = [
                {"type": "start", "partial": _assistant([])},
                {
                    "type": "text_start",
                    "content_index": 0,
                    "partial_patch": [
                        ["push", ["content"], {"type": "text", "text": "", "text_signature": None}]
                    ],
                },
            ]
            for number, word in enumerate(text.split(" ")):
                delta = word if number == 0 else " " + word
                events.append(
                    {
                        "type": "text_delta",
                        "content_index": 0,
                        "delta": delta,
                        "partial_patch": [["append", ["content", 0, "text"], delta]],
                    }
                )
            events += [
                {"type": "text_end", "content_index": 0, "content": text, "partial_patch": []},
                {
                    "type": "toolcall_start",
                    "content_index": 1,
                    "partial_patch": [["push", ["content"], {**call, "arguments": {}}]],
                },
                {
                    "type": "toolcall_end",
                    "content_index": 1,
                    "tool_call": call,
                    "partial_patch": [["set", ["content", 1, "arguments"], call["arguments"]]],
                },
                {"type": "done", "reason": "toolUse", "message": final},
            ]
            for index, event in enumerate(events):
                out.write(
                    b'{"type":"event","call_index":%d,"event_index":%d,"t":%d,"event":%s}\n'
                    % (turn, index, index, orjson.dumps(event))
                )
            out.write(encode_line(call_end_row(turn, len(events))))
            result = f"contents of file {turn}: " + "lorem ipsum " * 20
            messages += [
                final,
                {
                    "role": "toolResult",
                    "tool_call_id": f"call_{turn}",
                    "tool_name": "read",
                    "content": [{"type": "text", "text": result, "text_signature": None}],
                    "details": None,
                    "is_error": False,
                    "timestamp": 0,
                },
            ]


#: Run in the subprocess: one step on one file, printing its CPU seconds or tracemalloc peak.
_CHILD = """
import json, sys, time, tracemalloc
from openprogram.recordings.file.reader import read_recording_file
from openprogram.recordings.views.conversation import render_conversation
from openprogram.recordings.views.inspection import read_recording, summarize_calls
from openprogram.recordings.views.view import render_recording_page

path, step, traced = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
steps = {
    "open": lambda: read_recording_file(path),
    "show": lambda: summarize_calls(read_recording(path).calls),
    "conversation": lambda: render_conversation(read_recording(path)),
    "view": lambda: render_recording_page(read_recording(path)),
}
if traced:
    tracemalloc.start()
start = time.process_time()
kept = steps[step]()
seconds = time.process_time() - start
peak = tracemalloc.get_traced_memory()[1] if traced else 0
print(json.dumps({"seconds": seconds, "peak": peak}))
"""


def measure(path: Path, step: str, traced: bool, root: Path = REPO_ROOT) -> dict[str, float]:
    """One step on ``path`` in a fresh interpreter importing openprogram from ``root``."""
    env = {name: value for name, value in os.environ.items() if not name.endswith("_API_KEY")}
    env["PYTHONPATH"] = str(root)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), step, "1" if traced else "0"],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


def per_turn(
    turns: tuple[int, ...] = TURNS, root: Path = REPO_ROOT
) -> dict[str, dict[int, tuple[float, float]]]:
    """``{step: {turns: (µs per turn, KB per turn)}}``."""
    figures: dict[str, dict[int, tuple[float, float]]] = {step: {} for step in STEPS}
    with tempfile.TemporaryDirectory(prefix="bench-turns-") as folder:
        for count in turns:
            path = Path(folder) / f"agent{count}.jsonl"
            write_recording(path, count)
            for step in STEPS:
                seconds = min(measure(path, step, False, root)["seconds"] for _ in range(2))
                peak = measure(path, step, True, root)["peak"]
                figures[step][count] = (seconds / count * 1e6, peak / count / 1024)
    return figures


def run() -> list[Row]:
    figures = per_turn()
    rows = []
    first, last = TURNS[0], TURNS[-1]
    for step, by_turns in figures.items():
        time_ratio = by_turns[last][0] / by_turns[first][0]
        memory_ratio = by_turns[last][1] / by_turns[first][1]
        shown = "; ".join(
            f"{count}: {us:.0f} us, {kb:.1f} KB" for count, (us, kb) in by_turns.items()
        )
        rows.append(
            Row(
                f"long agent, version 2: {step} per turn, {last:,} vs {first:,} turns",
                f"time {time_ratio:.2f}x, memory {memory_ratio:.2f}x",
                f"<= {LIMIT:g}x each",
                time_ratio <= LIMIT and memory_ratio <= LIMIT,
                f"per turn (CPU time, tracemalloc peak): {shown}",
            )
        )
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
