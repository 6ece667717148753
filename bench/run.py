"""Run every benchmark in this folder and print one table: ``python -m bench.run``.

Each ``bench/bench_*.py`` module exposes ``run() -> list[Row]``. Exit status 1 when a target
is missed, so the command can gate a release (never the test suite: timings are not tests).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

from bench.common import Row


def collect(selected: list[str]) -> list[Row]:
    rows: list[Row] = []
    folder = Path(__file__).parent
    for info in sorted(pkgutil.iter_modules([str(folder)]), key=lambda i: i.name):
        if not info.name.startswith("bench_"):
            continue
        if selected and not any(word in info.name for word in selected):
            continue
        module = importlib.import_module(f"bench.{info.name}")
        print(f"running {info.name} ...", file=sys.stderr, flush=True)
        rows.extend(module.run())
    return rows


def print_table(rows: list[Row]) -> None:
    headers = ("benchmark", "measured", "target", "ok")
    table = [(r.benchmark, r.measured, r.target, "yes" if r.ok else "NO") for r in rows]
    widths = [
        max(len(h), *(len(row[i]) for row in table)) if table else len(h)
        for i, h in enumerate(headers)
    ]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    print(line)
    print("  ".join("-" * w for w in widths))
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
    for r in rows:
        if r.detail:
            print(f"  note: {r.benchmark}: {r.detail}")


def main(argv: list[str] | None = None) -> int:
    rows = collect(list(argv if argv is not None else sys.argv[1:]))
    print_table(rows)
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
