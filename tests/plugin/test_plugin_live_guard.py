"""The pytest plugin never calls a model live by accident (docs/project.md, "Never live by
accident"): in replay mode (the default) a test without a recording that calls a network
model fails at once, naming itself and the ways out, and nothing reaches the server."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from bench.echo_server import EchoServer

UNMARKED = """
import os
import pytest
from openprogram.agent import AgentContext, AgentLoopConfig, agent_loop
from openprogram.providers.faux import FauxProvider, faux_text
from openprogram.providers import register_api_provider
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage

LOCAL = Model(id="echo", api="openai-completions", provider="local", base_url=os.environ["ECHO_URL"])


async def ask(model):
    context = AgentContext()
    events = [e async for e in agent_loop([UserMessage(content="hello")], context, AgentLoopConfig(model=model, api_key="local"))]
    return events[-1].messages[-1]


async def test_unmarked_calls_the_server():
    answer = await ask(LOCAL)
    assert answer.content[0].text == "echo: hello"


@pytest.mark.llm_live
async def test_meant_to_call_the_model():
    answer = await ask(LOCAL)
    assert answer.content[0].text == "echo: hello"


async def test_a_scripted_provider_is_not_blocked():
    register_api_provider("scripted-here", FauxProvider([faux_text("scripted")]))
    message = await complete(Model(id="s", api="scripted-here", provider="faux"), Context(messages=[UserMessage(content="x")]))
    assert message.content[0].text == "scripted"
"""


class CountingEchoServer(EchoServer):
    """The bench's OpenAI-compatible echo server, counting the requests it answers."""

    def __init__(self) -> None:
        super().__init__()
        self.requests = 0
        handler = self._server.RequestHandlerClass
        server = self

        class Counting(handler):  # type: ignore[misc, valid-type]
            def do_POST(self) -> None:  # noqa: N802
                server.requests += 1
                super().do_POST()

        self._server.RequestHandlerClass = Counting


def _run(pytester: pytest.Pytester, url: str, *args: str) -> pytest.RunResult:
    pytester._monkeypatch.setenv("ECHO_URL", url)
    return pytester.runpytest_subprocess(
        "-p",
        "asyncio",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "-q",
        *args,
    )


def test_an_unmarked_test_fails_in_replay_mode_and_makes_no_connection(pytester):
    pytester.makepyfile(test_live=UNMARKED)
    with CountingEchoServer() as server:
        result = _run(pytester, server.base_url, "-k", "unmarked or scripted")
        assert server.requests == 0
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_live.py::test_unmarked_calls_the_server called a model live (api openai-completions), and "
            "--llm-record-mode=replay (the default) never calls a model*",
            "*pytest test_live.py::test_unmarked_calls_the_server --llm-record-mode=record*",
            "*--llm-record-mode=off or mark it @pytest.mark.llm_live*",
        ]
    )


def test_off_mode_and_the_live_marker_call_the_server(pytester):
    pytester.makepyfile(test_live=UNMARKED)
    with CountingEchoServer() as server:
        marked = _run(pytester, server.base_url, "-k", "meant_to_call")
        assert server.requests == 1
        off = _run(pytester, server.base_url, "--llm-record-mode=off")
        assert server.requests == 3
    marked.assert_outcomes(passed=1)
    off.assert_outcomes(passed=3)


def test_a_suggested_command_pastes_into_a_posix_shell(pytester):
    """A parametrised id with an apostrophe and non-ASCII: the suggested command, run through
    ``sh -c``, records that very test."""
    pytester.makepyfile(
        test_ids="""
import pytest
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage

@pytest.mark.llm_recording
@pytest.mark.parametrize("country", ["Côte d'Ivoire", "Peru"])
async def test_capital(country):
    message = await complete(Model(id="echo", api="faux", provider="faux"), Context(messages=[UserMessage(content=country)]))
    assert message.content[0].text == f"echo: {country}"
"""
    )
    missing = _run(pytester, "http://127.0.0.1:9/v1", "-k", "Ivoire")
    missing.assert_outcomes(failed=1)
    line = next(
        line
        for line in missing.stdout.lines
        if line.strip().startswith("pytest ") and "--llm-record-mode=record" in line
    )
    command = line.strip()
    # pytest's own id (non-ASCII escaped as \\xf4 unless told otherwise), apostrophe and all.
    assert shlex.split(command)[1] in (
        "test_ids.py::test_capital[Côte d'Ivoire]",
        "test_ids.py::test_capital[C\\xf4te d'Ivoire]",
    )
    recorded = subprocess.run(
        [
            "sh",
            "-c",
            command.replace(
                "pytest ",
                f"{shlex.quote(sys.executable)} -m pytest -p asyncio -o asyncio_mode=auto -q ",
                1,
            ),
        ],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert "1 passed" in recorded.stdout
    recordings = sorted(
        path.name for path in (pytester.path / "recordings" / "test_ids").glob("*.jsonl")
    )
    assert len(recordings) == 1 and recordings[0].startswith("test_capital_C")
