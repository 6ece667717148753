"""A team's journey (docs/project.md), executed: a project commits its model in
``[tool.openprogram]`` and its recordings; tests recorded against a local OpenAI-compatible
server replay in a clone with a fresh state folder after the server is gone, with a teammate's
own port, with a new price in the catalog; a changed system prompt fails showing the word."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.echo_server import EchoServer
from tests.cli.test_recordings_cli import cli
from tests.conftest import cli_env

PYPROJECT = """\
[project]
name = "team-agent"

[tool.pytest.ini_options]
asyncio_mode = "auto"

[[tool.openprogram.models]]
id = "smollm2"
api = "openai-completions"
provider = "llamacpp"
base_url = "{base_url}"
context_window = 8192
cost = {{ input = 0.0, output = 0.0 }}
"""

TESTS = textwrap.dedent(
    """
    import pytest

    from openprogram.agent import AgentContext, AgentLoopConfig, agent_loop
    from openprogram.providers.models import get_model
    from openprogram.providers.types import UserMessage
    from openprogram.tools import builtin_tools

    SYSTEM = "You are a careful calculator. " + "Be exact. " * 300 + "Rule 7: answer in blue words."

    async def run(prompt):
        context = AgentContext(system_prompt=SYSTEM, tools=builtin_tools(["calculator"]))
        config = AgentLoopConfig(model=get_model("llamacpp/smollm2"), api_key="local")
        return [event async for event in agent_loop([UserMessage(content=prompt)], context, config)]

    @pytest.mark.llm_recording
    async def test_multiplies():
        events = await run("/calculator 6*7")
        assert "42" in events[-1].messages[-1].content[0].text

    @pytest.mark.llm_recording
    async def test_echoes():
        events = await run("hello team")
        assert "hello team" in events[-1].messages[-1].content[0].text
    """
)


def _pytest(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = cli_env(home)
    env.pop("PYTHONPATH", None)  # the project imports the installed package, as a user's does
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _project(folder: Path, base_url: str) -> Path:
    folder.mkdir()
    (folder / "pyproject.toml").write_text(PYPROJECT.format(base_url=base_url))
    (folder / "tests").mkdir()
    (folder / "tests" / "test_agent.py").write_text(TESTS)
    return folder


@pytest.mark.slow
def test_recorded_tests_replay_on_a_clone_with_a_fresh_state_folder(tmp_path):
    with EchoServer() as server:
        project = _project(tmp_path / "team-agent", server.base_url)
        recorded = _pytest(project, tmp_path / "home-alice", "--llm-record-mode=record")
        assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    recordings = sorted(path.relative_to(project) for path in project.rglob("recordings/*/*.jsonl"))
    assert len(recordings) == 2

    # A clone in another folder, a teammate with a fresh state folder, the server gone.
    clone = tmp_path / "clone" / "team-agent"
    shutil.copytree(project, clone)
    bob = tmp_path / "home-bob"
    replayed = _pytest(clone, bob)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "2 passed" in replayed.stdout

    # Bob's own server listens on another port: his configuration overrides the project's entry.
    mine = [
        {
            "id": "smollm2",
            "api": "openai-completions",
            "provider": "llamacpp",
            "base_url": "http://127.0.0.1:9/v1",
        }
    ]
    configured = cli(bob, "config", "set", "models", json.dumps(mine))
    assert configured.returncode == 0, configured.stderr
    moved = _pytest(clone, bob)
    assert moved.returncode == 0, moved.stdout + moved.stderr

    # A release with new prices and a larger context window in the catalog replays the same.
    pyproject = clone / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text()
        .replace("context_window = 8192", "context_window = 32768")
        .replace("input = 0.0, output = 0.0", "input = 0.5, output = 1.5")
    )
    priced = _pytest(clone, bob)
    assert priced.returncode == 0, priced.stdout + priced.stderr

    # A changed system prompt fails, the window showing the changed word.
    tests = clone / "tests" / "test_agent.py"
    tests.write_text(tests.read_text().replace("answer in blue words", "answer in green words"))
    drifted = _pytest(clone, bob)
    assert drifted.returncode == 1, drifted.stdout
    assert "field context.system_prompt: (first difference at character" in drifted.stdout
    assert "answer in blue words" in drifted.stdout and "answer in green words" in drifted.stdout
