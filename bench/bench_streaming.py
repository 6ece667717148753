"""Live assembly cost as a stream grows: ``python -m bench.run streaming``.

Two workloads through the faux provider, bare (no recording), at 50, 100 and 200 KB:

* tool arguments: a file-writing call whose ``content`` argument is the bulk (code with
  newlines, quotes and backslashes, so escapes are everywhere), in the faux provider's
  8-character ``toolcall_delta`` pieces;
* tool arguments of numbers: a table of small numbers and literals (many small values, the case
  where every fragment changes the structure), in the same pieces;
* text: whitespace-free text in 4-character ``text_delta`` pieces.

A linear process has a flat per-KB slope, so the target is the 200 KB time against four times
the 50 KB time measured in the same run. Each ``partial`` holds its own copy of the text so far
(the immutable-snapshot design), so some memory-copy growth is expected; for the table of
numbers that copy (of the open list) dominates, hence its looser target.

To add a recorded variant, pass another ``make_provider`` to :func:`measure` (for example one
that wraps :func:`bare` in a ``RecordingProvider``): every workload streams through
:func:`stream_one`, whatever the provider.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import orjson

from bench.common import Row, best_time, ratio_row
from openprogram.providers import faux as faux_module
from openprogram.providers.faux import FauxProvider, FauxResponse
from openprogram.providers.types import Context, Model, UserMessage

MODEL = Model(id="bench", api="faux", provider="faux")
CONTEXT = Context(messages=[UserMessage(content="write the file", timestamp=1)])
SIZES_KB = (50, 100, 200)
LINEARITY_LIMIT = 1.5
CODE_LINE = 'def handler(request):\n    return render("page.html", {"path": "C:\\\\temp"})\n'
TEXT_CHUNK = 4


@dataclass(frozen=True)
class Workload:
    """A scripted answer of a given size, and the text chunking it streams with."""

    name: str
    script: Callable[[int], FauxResponse]
    text_chunk: int | None = None  # fixed-size text pieces instead of the faux word chunks
    limit: float = LINEARITY_LIMIT
    note: str = ""


def tool_arguments_script(kb: int) -> FauxResponse:
    """A ``write`` call whose JSON arguments are ``kb`` KB long."""
    target = kb * 1024
    line = len(orjson.dumps(CODE_LINE)) - 2
    content = CODE_LINE * (target // line + 1)
    arguments = {"path": "src/handler.py", "content": content}
    overshoot = len(orjson.dumps(arguments)) - target
    arguments["content"] = content[: len(content) - max(0, overshoot) // 2]
    return faux_module.faux_tool_call("write", arguments)


def numbers_script(kb: int) -> FauxResponse:
    """A call whose ``kb`` KB of arguments are a table of small numbers and literals."""
    row = 24  # bytes of JSON per row, about
    return faux_module.faux_tool_call(
        "table", {"rows": [[i, i * 2.5, True, None] for i in range(kb * 1024 // row)]}
    )


def text_script(kb: int) -> FauxResponse:
    return faux_module.faux_text("".join(f"w{i:07d}" for i in range(kb * 1024 // 8)))


WORKLOADS = (
    Workload("tool arguments, 8-char deltas", tool_arguments_script),
    Workload(
        "tool arguments of numbers, 8-char deltas",
        numbers_script,
        limit=2.5,
        note="not linear by design: every snapshot holds its own copy of the open list of rows "
        "(shallow, once per delta); the parsing itself is linear (the tests count it)",
    ),
    Workload("text, 4-char deltas", text_script, text_chunk=TEXT_CHUNK),
)


def bare(script: FauxResponse) -> FauxProvider:
    return FauxProvider([script], timestamp=1)


@contextlib.contextmanager
def fixed_text_chunks(size: int | None) -> Iterator[None]:
    """Make the faux provider stream text in ``size``-character pieces (it splits on
    whitespace otherwise, which whitespace-free text does not have)."""
    if size is None:
        yield
        return
    original = faux_module.chunk_text
    faux_module.chunk_text = lambda text, words_per_chunk=1: faux_module.chunk_fixed(text, size)
    try:
        yield
    finally:
        faux_module.chunk_text = original


def stream_one(provider) -> int:
    """Stream one call of ``provider`` to the end, dropping the events; returns their count."""

    async def consume() -> int:
        count = 0
        async for _ in provider.stream(MODEL, CONTEXT):
            count += 1
        return count

    return asyncio.run(consume())


def measure(
    workload: Workload, make_provider: Callable[[FauxResponse], object] = bare
) -> dict[int, float]:
    """Best CPU time, in seconds, to stream the workload at each of :data:`SIZES_KB`."""
    times = {}
    for kb in SIZES_KB:
        script = workload.script(kb)
        with fixed_text_chunks(workload.text_chunk):
            run_once = lambda script=script: stream_one(make_provider(script))  # noqa: E731
            times[kb] = best_time(run_once, repeat=3, clock=time.process_time)
    return times


def linearity_row(
    name: str, times: dict[int, float], limit: float = LINEARITY_LIMIT, note: str = ""
) -> Row:
    """200 KB against 4 x 50 KB, with the absolute times and the per-KB slopes."""
    small, large = SIZES_KB[0], SIZES_KB[-1]
    slopes = ", ".join(f"{kb} KB {times[kb] * 1000 / kb:.2f}" for kb in SIZES_KB)
    absolute = ", ".join(f"{kb} KB {times[kb] * 1000:.0f} ms" for kb in SIZES_KB)
    detail = f"{absolute}; ms per KB: {slopes}" + (f"; {note}" if note else "")
    return ratio_row(
        f"streaming {name}: {large} KB vs {large // small} x {small} KB",
        times[large],
        times[small] * large / small,
        limit,
        detail,
    )


def run() -> list[Row]:
    return [
        linearity_row(f"{workload.name}, bare", measure(workload), workload.limit, workload.note)
        for workload in WORKLOADS
    ]
