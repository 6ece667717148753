"""The tutorial is executed as written, and the examples run as tests.

In docs/tutorial.md, a fence whose info string names a file (```python file=agent.py```) is
written to that file, and every line of a ```sh``` fence is run in order in a fresh folder, with
the installed ``pytest`` and ``openprogram`` on PATH and no network use. A command must exit 0
unless its line ends in ``# exits N``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT, cli_env

FENCE = re.compile(r"^```(\S*)([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
EXPECTED_EXIT = re.compile(r"#\s*exits\s+(\d+)\s*$")


def tutorial_steps(text: str) -> list[tuple[str, str, str]]:
    steps = []
    for language, info, body in FENCE.findall(text):
        target = re.search(r"file=(\S+)", info)
        if target:
            steps.append(("file", target.group(1), body))
        elif language == "sh":
            for line in body.splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    steps.append(("command", line, ""))
    return steps


def test_tutorial_has_files_and_commands():
    steps = tutorial_steps((REPO_ROOT / "docs" / "tutorial.md").read_text())
    assert {name for kind, name, _ in steps if kind == "file"} == {
        "agent.py", "pytest.ini", "test_agent.py", "test_concurrent.py", "test_what_goes_wrong.py",
    }
    assert sum(1 for kind, _, _ in steps if kind == "command") >= 10


def test_every_tutorial_command_runs_as_written(tmp_path, isolated_home):
    project = tmp_path / "my-agent"
    project.mkdir()
    env = cli_env(
        isolated_home,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        GIT_AUTHOR_NAME="Tutorial", GIT_AUTHOR_EMAIL="tutorial@example.invalid",
        GIT_COMMITTER_NAME="Tutorial", GIT_COMMITTER_EMAIL="tutorial@example.invalid",
    )
    env.pop("PYTHONPATH", None)  # the tutorial uses the installed package, like a user
    outputs = {}
    for kind, name, body in tutorial_steps((REPO_ROOT / "docs" / "tutorial.md").read_text()):
        if kind == "file":
            (project / name).write_text(body)
            continue
        expected = EXPECTED_EXIT.search(name)
        command = EXPECTED_EXIT.sub("", name).strip()
        result = subprocess.run(
            command, shell=True, cwd=project, env=env, capture_output=True, text=True, timeout=300
        )
        wanted = int(expected.group(1)) if expected else 0
        assert result.returncode == wanted, f"{command!r} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        assert "Traceback" not in result.stderr, command
        outputs.setdefault(command, []).append(result.stdout + result.stderr)  # every run, in order

    assert "42" in outputs['openprogram run "/calculator 6*7"'][0]
    assert "--llm-record-mode=record" in outputs["pytest -q"][0]
    recording = project / "recordings" / "test_agent" / "test_uses_the_calculator.jsonl"
    assert recording.exists()
    conversation = outputs[f"openprogram recordings show {recording.relative_to(project)} --conversation"][0]
    assert "calculator" in conversation and "42" in conversation
    concurrent = project / "recordings" / "test_concurrent" / "test_sub_agents_in_a_dated_session.jsonl"
    assert "{{tmp_path}}" in concurrent.read_text() and "pytest-of-" not in concurrent.read_text()
    # Section 4, as written: the changed test fails with the mismatch it shows, and the diff
    # of the two recordings shows the change.
    drifted = outputs["pytest -q"][2]
    assert (
        "replay mismatch at call 0, field context.messages[0].content:\n"
        "recorded '/calculator 6*7', incoming '/calculator 6*8'"
    ) in drifted
    diff = outputs[f"openprogram recordings diff before.jsonl {recording.relative_to(project)}"][0]
    assert "6*7" in diff and "6*8" in diff and "identical" not in diff
    # Section 7: the faults, the re-chunking and the random seed it picked, and no recording changed.
    assert "3 passed" in outputs["pytest -q test_what_goes_wrong.py"][0]
    assert "3 passed" in outputs["pytest -q test_what_goes_wrong.py --llm-fault=server_error --llm-rechunk=random"][0]
    tracked = subprocess.run(["git", "ls-files"], cwd=project, capture_output=True, text=True).stdout.split()
    assert str(recording.relative_to(project)) in tracked


def test_examples_run_offline_from_their_committed_recordings(isolated_home):
    example = REPO_ROOT / "examples" / "calculator_agent"
    before = {p: p.read_bytes() for p in (example / "recordings").rglob("*.jsonl")}
    assert len(before) == 2
    env = cli_env(isolated_home)
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *shlex.split("-o addopts=")],
        cwd=example, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout
    assert {p: p.read_bytes() for p in (example / "recordings").rglob("*.jsonl")} == before
