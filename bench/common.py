"""Shared benchmark plumbing: timing by best-of-N and one row format for every benchmark.

Targets are ratios against a baseline measured in the same run, because these machines are
noisy; absolute times are printed for context only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    """One line of the table: what was measured, the figure, the target, and whether it met it."""

    benchmark: str
    measured: str
    target: str
    ok: bool
    detail: str = ""


def best_time(
    function: Callable[[], object], repeat: int = 5, clock: Callable[[], float] = time.perf_counter
) -> float:
    """The fastest of ``repeat`` runs, in seconds: the least disturbed by the machine's noise.
    ``clock`` may be ``time.process_time`` for CPU-bound runs on a busy machine."""
    best = float("inf")
    for _ in range(repeat):
        start = clock()
        function()
        best = min(best, clock() - start)
    return best


def paired_best(
    baseline: Callable[[], object],
    measured: Callable[[], object],
    rounds: int = 9,
    clock: Callable[[], float] = time.process_time,
) -> tuple[float, float]:
    """The fastest run of each of two functions, measured alternately so that a burst of
    load on the machine hits both alike. CPU time of this process by default: these are
    CPU-bound runs, and CPU time is far less disturbed by other work than wall time."""
    best_baseline = best_measured = float("inf")
    for _ in range(rounds):
        start = clock()
        baseline()
        best_baseline = min(best_baseline, clock() - start)
        start = clock()
        measured()
        best_measured = min(best_measured, clock() - start)
    return best_baseline, best_measured


def ratio_row(
    benchmark: str, measured: float, baseline: float, limit: float, detail: str = ""
) -> Row:
    """A row for "measured costs at most ``limit`` x baseline"."""
    ratio = measured / baseline if baseline > 0 else float("inf")
    return Row(
        benchmark,
        f"{ratio:.2f}x ({measured * 1000:.1f} ms vs {baseline * 1000:.1f} ms)",
        f"<= {limit:g}x",
        ratio <= limit,
        detail,
    )
