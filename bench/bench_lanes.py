"""Replay with lanes and sessions costs what replay in one lane costs.

Two rows, each a ratio measured in one run: the 50 x 200 workload recorded in ten lanes (one
session) against the same calls in the root lane, and 1,000 short calls over 100 lanes
against the same calls in one lane. Both open the file and replay every call.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from bench.common import Row, paired_best, ratio_row
from openprogram.providers.faux import FauxProvider, faux_text
from openprogram.providers.lanes import lane
from openprogram.providers.recording import RecordingProvider
from openprogram.providers.replay import ReplayProvider
from openprogram.providers.types import Context, Model, UserMessage

MODEL = Model(id="bench", api="faux", provider="faux")
LIMIT = 1.1


def _context(number: int) -> Context:
    return Context(messages=[UserMessage(content=f"question {number}", timestamp=1)])


async def _calls(provider, calls: int, lanes: int) -> int:
    count = 0
    for number in range(calls):
        if lanes > 1:
            with lane(f"worker-{number % lanes}"):
                async for _ in provider.stream(MODEL, _context(number)):
                    count += 1
        else:
            async for _ in provider.stream(MODEL, _context(number)):
                count += 1
    return count


def _record(path: Path, calls: int, words: int, lanes: int) -> None:
    answers = [faux_text(" ".join(f"w{n}x{i}" for i in range(words))) for n in range(calls)]
    recorder = RecordingProvider(FauxProvider(answers, timestamp=1), path)
    asyncio.run(_calls(recorder, calls, lanes))
    recorder.sink.close()


def _row(folder: Path, name: str, calls: int, words: int, lanes: int) -> Row:
    single, laned = folder / f"{calls}-one.jsonl", folder / f"{calls}-{lanes}.jsonl"
    _record(single, calls, words, 1)
    _record(laned, calls, words, lanes)
    counts: dict[str, int] = {}

    def replay(path: Path, lanes_used: int) -> None:
        counts[path.name] = asyncio.run(_calls(ReplayProvider(path), calls, lanes_used))

    baseline, measured = paired_best(
        lambda: replay(single, 1), lambda: replay(laned, lanes), rounds=7
    )
    events = counts[laned.name]
    detail = f"{events / measured / 1000:.0f}k vs {events / baseline / 1000:.0f}k events/s, one lane as the baseline"
    return ratio_row(name, measured, baseline, LIMIT, detail)


def run() -> list[Row]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder)
        return [
            _row(path, "open + replay 50 x 200 in 10 lanes vs 1 lane", 50, 200, 10),
            _row(path, "open + replay 1,000 calls in 100 lanes vs 1 lane", 1000, 5, 100),
        ]
