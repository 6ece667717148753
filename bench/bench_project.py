"""What finding and reading the project configuration (``[tool.openprogram]``, docs/project.md)
adds to start-up: ``openprogram recordings status`` and the pytest plugin's load, each run as a
whole subprocess from a folder seven levels below a ``pyproject.toml`` that holds a model and
record/replay rules, against the same command in a folder with no project file above it.

Both sides run in the same bench run, interleaved, best of N; the target is the difference
(at most 5 ms), the ratio is printed beside it. A subprocess start varies by more than 5 ms on a
busy machine, so the in-process cost of a cold lookup (first call in a process: the upward
search, the read and the parse) is a row of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Row, best_time

REPO_ROOT = Path(__file__).resolve().parent.parent
LIMIT_MS = 5.0
REPEAT = 15
DEPTH = 7

PYPROJECT = """\
[project]
name = "bench-project"
version = "0"

[tool.pytest.ini_options]
asyncio_mode = "auto"

[[tool.openprogram.models]]
provider = "llamacpp"
id = "smollm2"
api = "openai-completions"
base_url = "http://127.0.0.1:8765/v1"

[tool.openprogram.record_replay]
ignore = ["options.metadata.*"]
normalize = [["\\\\d{4}-\\\\d{2}-\\\\d{2}", "<date>"]]
secret_env = ["INTERNAL_HOST"]
"""

#: A marked test: its fixture reads the project's record/replay rules (``off``: no recording).
TEST_FILE = "import pytest\n\n\n@pytest.mark.llm_recording\ndef test_nothing():\n    pass\n"


def _folders(root: Path) -> tuple[Path, Path]:
    """``(inside a project, seven levels deep; outside any project, as deep)``."""
    project = root / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(PYPROJECT)
    inside = project.joinpath(*(f"level{n}" for n in range(DEPTH)))
    outside = root / "plain" / Path(*(f"level{n}" for n in range(DEPTH)))
    for folder in (inside, outside):
        folder.mkdir(parents=True)
        (folder / "test_start.py").write_text(TEST_FILE)
        # The rootdir of the pytest run: the same ini file on both sides.
        (folder / "pytest.ini").write_text("[pytest]\n")
    return inside, outside


def _runner(home: str, cwd: Path, *command: str):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    # Only openprogram's plugin (``-p``): the other plugins of a dev install (hypothesis alone
    # takes 1.4 s to import) would bury a few milliseconds in their own noise.
    env.update(OPENPROGRAM_HOME=home, PYTHONPATH=str(REPO_ROOT), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    env.pop("OPENPROGRAM_PROFILE", None)

    def run_once() -> None:
        completed = subprocess.run(
            [sys.executable, *command],
            cwd=cwd,
            env=env,
            capture_output=True,
            stdin=subprocess.DEVNULL,
        )
        if completed.returncode != 0:
            raise RuntimeError(
                f"{' '.join(command)} failed in {cwd}: {completed.stderr.decode()[-500:]}"
            )

    return run_once


def _paired(inside, outside) -> tuple[float, float]:
    inside(), outside()  # page cache and .pyc files warm before either is timed
    best_inside = best_outside = float("inf")
    for _ in range(REPEAT):
        best_inside = min(best_inside, best_time(inside, 1))
        best_outside = min(best_outside, best_time(outside, 1))
    return best_inside, best_outside


def _difference_row(benchmark: str, inside: float, outside: float) -> Row:
    added_ms = (inside - outside) * 1000
    return Row(
        benchmark,
        f"{added_ms:+.1f} ms ({inside / outside:.3f}x: {inside * 1000:.0f} ms vs {outside * 1000:.0f} ms)",
        f"<= {LIMIT_MS:g} ms",
        added_ms <= LIMIT_MS,
        f"best of {REPEAT} subprocess runs each, {DEPTH} folders below pyproject.toml vs no project",
    )


def _cold_lookup_ms(inside: Path) -> float:
    """The first lookup of a process (nothing cached), in-process, best of N."""
    from openprogram import project

    best = float("inf")
    for _ in range(50):
        project._cache.clear()
        start = time.perf_counter()
        project.project_config(inside)
        best = min(best, time.perf_counter() - start)
    return best * 1000


def run() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="bench-project-") as scratch:
        root = Path(scratch)
        home = root / "home"
        home.mkdir()
        inside, outside = _folders(root)
        status = _paired(
            _runner(str(home), inside, "-m", "openprogram", "recordings", "status"),
            _runner(str(home), outside, "-m", "openprogram", "recordings", "status"),
        )
        plugin = _paired(
            _runner(
                str(home),
                inside,
                "-m",
                "pytest",
                "-q",
                "-p",
                "openprogram.testing",
                "-p",
                "no:cacheprovider",
                "--llm-record-mode=off",
                "test_start.py",
            ),
            _runner(
                str(home),
                outside,
                "-m",
                "pytest",
                "-q",
                "-p",
                "openprogram.testing",
                "-p",
                "no:cacheprovider",
                "--llm-record-mode=off",
                "test_start.py",
            ),
        )
        cold = _cold_lookup_ms(inside)
    return [
        _difference_row("project lookup: added to recordings status", *status),
        _difference_row("project lookup: added to the pytest plugin's load", *plugin),
        Row(
            "project lookup: cold, in-process",
            f"{cold:.2f} ms",
            f"<= {LIMIT_MS:g} ms",
            cold <= LIMIT_MS,
            f"search up {DEPTH} folders, read and parse pyproject.toml, nothing cached; best of 50",
        ),
    ]


if __name__ == "__main__":
    for row in run():
        print(row)
