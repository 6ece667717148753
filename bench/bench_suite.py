"""A user's recorded test suite, replayed vs live: ``python -m bench.run suite``.

N generated agent tests (8 model calls each: four prompts that each ask ``faux/echo`` for a
tool call and then get its answer) run through the pytest plugin, in one run:

* replayed (``--llm-record-mode=replay``) from recordings made beforehand, untimed;
* live on ``faux/echo`` (``--llm-record-mode=off``), the baseline: the in-memory provider does
  no work, so the ratio is what record/replay costs a suite on top of the agent code itself.

Each pytest session is a subprocess; the time counted is the one of running the tests (from the
end of collection to the end of the session, measured inside it), so the interpreter's and
pytest's start-up, equal on both sides, do not dilute the ratio. Alternate runs, best of each.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from bench.common import Row, ratio_row

TESTS = 200
ROUNDS = 3
LIMIT = 1.15

TEST_MODULE = textwrap.dedent(
    """
    import asyncio
    import pytest
    from openprogram.agent import AgentContext, AgentLoopConfig, agent_loop
    from openprogram.providers.models import get_model
    from openprogram.providers.types import UserMessage
    from openprogram.tools import builtin_tools


    async def conversation(seed):
        context = AgentContext(tools=builtin_tools(["calculator"]))
        config = AgentLoopConfig(model=get_model("faux/echo"))
        answers = []
        for turn in range(4):  # two calls each: the tool call, then the answer
            prompt = UserMessage(content=f"/calculator {seed}*{turn + 2}", timestamp=seed * 10 + turn)
            events = [event async for event in agent_loop([prompt], context, config)]
            answers.append(events[-1].messages[-1].content[0].text)
        return answers
    """
)

TEST_FUNCTION = textwrap.dedent(
    """

    @pytest.mark.llm_recording
    def test_agent_{n}():
        answers = asyncio.run(conversation({n}))
        assert answers == [f"calculator returned: {{{n} * (turn + 2)}}" for turn in range(4)]
    """
)

CONFTEST = textwrap.dedent(
    """
    import os, time
    _began = []

    def pytest_collection_finish(session):
        _began.append(time.perf_counter())

    def pytest_sessionfinish(session, exitstatus):
        if _began:
            with open(os.environ["BENCH_SUITE_TIMING"], "w") as handle:
                handle.write(str(time.perf_counter() - _began[0]))
    """
)


def _write_suite(folder: Path, tests: int) -> None:
    (folder / "conftest.py").write_text(CONFTEST)
    per_module = 20
    for start in range(0, tests, per_module):
        body = TEST_MODULE + "".join(
            TEST_FUNCTION.format(n=n) for n in range(start, min(start + per_module, tests))
        )
        (folder / f"test_generated_{start // per_module:03d}.py").write_text(body)


def _run(folder: Path, mode: str) -> float:
    timing = folder / "timing.txt"
    env = {**os.environ, "BENCH_SUITE_TIMING": str(timing), "OPENPROGRAM_HOME": str(folder / "home")}
    # Byte code cached as in a user's CI (pytest rewrites the plugin's package too), in a
    # folder of this run: the untimed recording session warms it for both sides.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         f"--llm-record-mode={mode}", str(folder)],
        cwd=folder, env=env, capture_output=True, text=True,
    )
    if result.returncode != 0:
        raise RuntimeError(f"the {mode} suite failed:\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}")
    return float(timing.read_text())


def run() -> list[Row]:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        _write_suite(folder, TESTS)
        _run(folder, "record")
        live, replayed = [], []
        for _ in range(ROUNDS):
            live.append(_run(folder, "off"))
            replayed.append(_run(folder, "replay"))
        return [
            ratio_row(
                f"suite: {TESTS} recorded agent tests (8 calls each), replayed vs live faux/echo",
                min(replayed), min(live), LIMIT,
                f"test run only, best of {ROUNDS}; live {', '.join(f'{t:.2f}' for t in live)} s, "
                f"replayed {', '.join(f'{t:.2f}' for t in replayed)} s",
            )
        ]
