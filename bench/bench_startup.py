"""Start-up cost of ``openprogram recordings status`` against ``openprogram run hi``.

``status`` is what a user runs when provider calls are blocked, and what scripts poll; it must
answer in under a third of the time ``run`` needs just to start and answer one faux/echo
prompt. Both are measured as whole subprocesses (interpreter start included, as a user sees
them), in the same run, interleaved, best of N, against a fresh state folder with no configuration.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import Row, best_time, ratio_row

REPO_ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.33
REPEAT = 9


def _runner(home: str, *args: str):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(OPENPROGRAM_HOME=home, PYTHONPATH=str(REPO_ROOT))
    env.pop("OPENPROGRAM_PROFILE", None)
    command = [sys.executable, "-m", "openprogram", *args]

    def run_once() -> None:
        completed = subprocess.run(command, env=env, capture_output=True, stdin=subprocess.DEVNULL)
        if completed.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {completed.stderr.decode()[-500:]}")

    return run_once


def run() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as home:
        status = _runner(home, "recordings", "status")
        run_hi = _runner(home, "run", "hi")
        status(), run_hi()  # warm the page cache and .pyc files before timing either
        # Interleaved, so a burst of load elsewhere on the machine hits both sides alike.
        status_time = run_time = float("inf")
        for _ in range(REPEAT):
            status_time = min(status_time, best_time(status, 1))
            run_time = min(run_time, best_time(run_hi, 1))
    return [
        ratio_row(
            "startup: recordings status vs run hi",
            status_time,
            run_time,
            TARGET,
            f"best of {REPEAT} subprocess runs each, faux/echo, no configuration",
        )
    ]


if __name__ == "__main__":
    for row in run():
        print(row)
