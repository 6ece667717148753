"""A user's recorded test suite, replayed vs live: ``python -m bench.run suite``.

N generated agent tests (8 model calls each: four prompts that each ask ``faux/echo`` for a
tool call and then get its answer) run through the pytest plugin, in one run:

* replayed (``--llm-record-mode=replay``) from recordings made beforehand, untimed;
* live on ``faux/echo`` (``--llm-record-mode=off``), the baseline: the in-memory provider does
  no work, so the ratio is what record/replay costs a suite on top of the agent code itself;
* with vcrpy cassettes instead (one per test, ``record_mode="none"``, matched on the request
  body too, as openprogram replay compares requests): the agent on the ``openai-completions``
  provider, the OpenAI SDK pointed at a local echo server (:mod:`bench.echo_server`) that was
  up while the cassettes were recorded, untimed, and is stopped while they are replayed. The
  row is what a user gains over the usual HTTP-level alternative; vcrpy is the ``bench`` extra
  only (``pip install -e ".[bench]"``), and without it the row says it was skipped.

Each pytest session is a subprocess; the time counted is the CPU time of running the tests
(from the end of collection to the end of the session, measured inside it), so the
interpreter's and pytest's start-up, equal on both sides, do not dilute the ratio, and other
work on the machine disturbs it far less than wall time (every side is CPU-bound: in-memory
provider, files read once, vcrpy's cassettes). Alternate runs, best of each.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from bench.common import Row, ratio_row
from bench.echo_server import EchoServer

TESTS = 200
ROUNDS = 5
LIMIT = 1.15
VCRPY_LIMIT = 1.0  # openprogram replay no slower than vcrpy cassettes
# A vcrpy run takes 15-30 s on a loaded two-core machine, ten times openprogram replay's: one
# timed run (in the first round), after the untimed recording one, settles the bound and keeps
# the whole benchmark near a minute and a half.
VCRPY_ROUNDS = 1

TEST_MODULE = textwrap.dedent(
    """
    import asyncio
    import os
    import pytest
    from openprogram.agent import AgentContext, AgentLoopConfig, agent_loop
    from openprogram.providers.models import get_model
    from openprogram.providers.types import Model, UserMessage
    from openprogram.tools import builtin_tools

    def model():  # faux/echo, or the OpenAI SDK talking to the bench's echo server (behind vcrpy)
        base_url = os.environ.get("BENCH_SUITE_BASE_URL")
        if base_url:
            return Model(id="echo", api="openai-completions", provider="local", base_url=base_url)
        return get_model("faux/echo")


    async def conversation(seed):
        context = AgentContext(tools=builtin_tools(["calculator"]))
        config = AgentLoopConfig(model=model())
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
        _began.append(time.process_time())

    def pytest_sessionfinish(session, exitstatus):
        if _began:
            with open(os.environ["BENCH_SUITE_TIMING"], "w") as handle:
                handle.write(str(time.process_time() - _began[0]))

    if os.environ.get("BENCH_VCR_CASSETTES"):
        import pytest
        import vcr

        _vcr = vcr.VCR(
            cassette_library_dir=os.environ["BENCH_VCR_CASSETTES"],
            record_mode=os.environ["BENCH_VCR_RECORD_MODE"],
            match_on=("method", "scheme", "host", "port", "path", "query", "body"),
            filter_headers=["authorization"],
        )

        @pytest.fixture(autouse=True)
        def _cassette(request):
            with _vcr.use_cassette(f"{request.node.name}.yaml") as cassette:
                yield
            if _vcr.record_mode == "none":
                assert cassette.all_played, "a recorded call was not replayed"
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


def _run(folder: Path, mode: str, extra_env: dict[str, str] | None = None) -> float:
    timing = folder / "timing.txt"
    env = {
        **os.environ,
        "BENCH_SUITE_TIMING": str(timing),
        "OPENPROGRAM_HOME": str(folder / "home"),
    }
    env.update(extra_env or {})
    # Byte code cached as in a user's CI (pytest rewrites the plugin's package too), in a
    # folder of this run: the untimed recording session warms it for both sides.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            f"--llm-record-mode={mode}",
            str(folder),
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"the {mode} suite failed:\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}"
        )
    return float(timing.read_text())


def _record_cassettes(folder: Path) -> dict[str, str]:
    """Record one cassette per test with the echo server up (untimed), then stop the server:
    the environment returned replays them with nothing listening at the recorded address."""
    cassettes = folder / "cassettes"
    with EchoServer() as server:
        base = {"BENCH_SUITE_BASE_URL": server.base_url, "BENCH_VCR_CASSETTES": str(cassettes)}
        _run(folder, "off", {**base, "BENCH_VCR_RECORD_MODE": "once"})
    if len(list(cassettes.glob("*.yaml"))) != TESTS:
        raise RuntimeError(f"expected {TESTS} cassettes in {cassettes}")
    return {**base, "BENCH_VCR_RECORD_MODE": "none"}


def _seconds(times: list[float]) -> str:
    return ", ".join(f"{t:.2f}" for t in times)


def run() -> list[Row]:
    with_vcrpy = importlib.util.find_spec("vcr") is not None
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        _write_suite(folder, TESTS)
        _run(folder, "record")
        cassette_env = _record_cassettes(folder) if with_vcrpy else None
        live, replayed, cassettes = [], [], []
        for round_number in range(ROUNDS):
            live.append(_run(folder, "off"))
            replayed.append(_run(folder, "replay"))
            if cassette_env is not None and round_number < VCRPY_ROUNDS:
                cassettes.append(_run(folder, "off", cassette_env))
        rows = [
            ratio_row(
                f"suite: {TESTS} recorded agent tests (8 calls each), replayed vs live faux/echo",
                min(replayed),
                min(live),
                LIMIT,
                f"CPU time of the test run only, best of {ROUNDS}; live {_seconds(live)} s, "
                f"replayed {_seconds(replayed)} s",
            )
        ]
        rows.append(_vcrpy_row(replayed, cassettes) if with_vcrpy else _vcrpy_skipped())
        return rows


VCRPY_BENCHMARK = "suite: vcrpy cassettes (OpenAI SDK) vs openprogram replay"
VCRPY_TARGET = f">= {VCRPY_LIMIT:g}x"


def _vcrpy_row(replayed: list[float], cassettes: list[float]) -> Row:
    """vcrpy's time over openprogram replay's: openprogram replay must be no slower."""
    ratio = min(cassettes) / min(replayed)
    return Row(
        VCRPY_BENCHMARK,
        f"{ratio:.2f}x ({min(cassettes) * 1000:.1f} ms vs {min(replayed) * 1000:.1f} ms)",
        VCRPY_TARGET,
        ratio >= VCRPY_LIMIT,
        f"vcrpy time / replay time, the same {TESTS} tests; {len(cassettes)} vcrpy run "
        f"vs best of {len(replayed)} replays; vcrpy "
        f"{_seconds(cassettes)} s (one YAML cassette per test, matched on the body too, the SDK "
        f"building its HTTP client on each test's event loop)",
    )


def _vcrpy_skipped() -> Row:
    return Row(VCRPY_BENCHMARK, "skipped: pip install -e '.[bench]'", VCRPY_TARGET, True)
