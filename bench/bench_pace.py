"""Replay with and without the replay options: ``python -m bench.run pace``.

* pacing: a call recorded with its first event 300 ms after the request and 20 ms between the
  others (50 text deltas), replayed without pacing against the same replay with
  ``pace="recorded"`` (wall time: pacing is waiting). Target: the unpaced replay takes under 5%
  of the paced one, i.e. it does not wait;
* re-chunking: the 50-delta call replayed with ``rechunk=SEED`` against without (CPU time, best
  of N): the cost of re-splitting, for reference.

Replays without options take the replayer's plain path: their own rows are bench_recording's.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench.common import Row, paired_best, ratio_row

FIRST_MS, GAP_MS, DELTAS = 300, 20, 50


def _record(path: Path) -> None:
    from openprogram.providers import api_registry
    from openprogram.providers.faux import FauxProvider, faux_text
    from openprogram.providers.initialization import initialize_provider_runtime
    from openprogram.providers.scoped import use_recording
    from openprogram.providers.stream import complete
    from openprogram.providers.types import Context, Model, UserMessage

    initialize_provider_runtime()
    provider = FauxProvider()
    api_registry.register_api_provider("bench-pace", provider)
    provider.queue(faux_text(" ".join(f"word{n}" for n in range(DELTAS))))
    model = Model(id="m", api="bench-pace", provider="faux")
    with use_recording(path, "record"):
        asyncio.run(complete(model, Context(messages=[UserMessage(content="go", timestamp=0)])))
    rows = []
    for line in path.read_bytes().splitlines():  # the recorded times, as the docstring says
        row = orjson.loads(line)
        if "event_index" in row:
            row["t"] = FIRST_MS + GAP_MS * row["event_index"]
        rows.append(orjson.dumps(row))
    path.write_bytes(b"\n".join(rows) + b"\n")


def _replay(path: Path, **options: Any) -> None:
    from openprogram.providers.scoped import use_recording
    from openprogram.providers.stream import complete
    from openprogram.providers.types import Context, Model, UserMessage

    model = Model(id="m", api="bench-pace", provider="faux")
    with use_recording(path, "replay", **options) as scope:
        asyncio.run(complete(model, Context(messages=[UserMessage(content="go", timestamp=0)])))
        scope.assert_consumed()


def run() -> list[Row]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "paced.jsonl"
        _record(path)
        start = time.perf_counter()
        _replay(path, pace="recorded")
        paced = time.perf_counter() - start
        unpaced = min(_timed(lambda: _replay(path)) for _ in range(5))
        share = unpaced / paced
        rows = [
            Row(
                "replay without pacing vs pace=recorded (300 ms + 20 ms gaps)",
                f"{share * 100:.1f}% ({unpaced * 1000:.1f} ms vs {paced * 1000:.0f} ms)",
                "< 5%",
                share < 0.05,
                f"the recording's last event is at {FIRST_MS + GAP_MS * (DELTAS + 3)} ms",
            )
        ]
        plain, rechunked = paired_best(
            lambda: _replay(path), lambda: _replay(path, rechunk=7), rounds=7
        )
        rows.append(
            ratio_row(
                "replay rechunk=SEED vs as recorded (50 deltas)",
                rechunked,
                plain,
                3.0,
                "CPU time, open included",
            )
        )
    return rows


def _timed(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start
