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

import pytest

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
        "agent.py",
        "pytest.ini",
        "test_agent.py",
        "test_concurrent.py",
        "test_what_goes_wrong.py",
        "test_spend.py",
        "pyproject.toml",
    }
    assert sum(1 for kind, _, _ in steps if kind == "command") >= 10


@pytest.mark.slow
def test_every_tutorial_command_runs_as_written(tmp_path, isolated_home):
    project = tmp_path / "my-agent"
    project.mkdir()
    env = cli_env(
        isolated_home,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        GIT_AUTHOR_NAME="Tutorial",
        GIT_AUTHOR_EMAIL="tutorial@example.invalid",
        GIT_COMMITTER_NAME="Tutorial",
        GIT_COMMITTER_EMAIL="tutorial@example.invalid",
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
        assert result.returncode == wanted, (
            f"{command!r} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        )
        assert "Traceback" not in result.stderr, command
        outputs.setdefault(command, []).append(result.stdout + result.stderr)  # every run, in order

    assert "42" in outputs['openprogram run "/calculator 6*7"'][0]
    assert "--llm-record-mode=record" in outputs["pytest -q"][0]
    recording = project / "recordings" / "test_agent" / "test_uses_the_calculator.jsonl"
    assert recording.exists()
    conversation = outputs[
        f"openprogram recordings show {recording.relative_to(project)} --conversation"
    ][0]
    assert "calculator" in conversation and "42" in conversation
    concurrent = (
        project / "recordings" / "test_concurrent" / "test_sub_agents_in_a_dated_session.jsonl"
    )
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
    assert (
        "3 passed"
        in outputs[
            "pytest -q test_what_goes_wrong.py --llm-fault=server_error --llm-rechunk=random"
        ][0]
    )
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=project, capture_output=True, text=True
    ).stdout.split()
    assert str(recording.relative_to(project)) in tracked
    # Section 8, as written: usage, a budget that fails in replay, the prompt cache, the doctor.
    usage = outputs["pytest -q --llm-usage"][0]
    assert "openprogram usage" in usage and "replaying saved" in usage
    assert re.search(r"^test_agent.py::test_uses_the_calculator\s+replay\s+2\s", usage, re.M)
    assert '"schema_version": 1' in (project / "usage.json").read_text()
    over = outputs["pytest -q test_agent.py"][0]
    assert "calls 2 > budget 1 (over by 1, 100%); call 1 (echo) crossed it, from 1 to 2" in over
    assert "1 passed" in outputs["pytest -q test_agent.py"][1]
    cache = outputs[
        "openprogram recordings show recordings/test_spend/test_adds_within_budget.jsonl --cache"
    ][0]
    assert "every call keeps the whole request before it as a prefix" in cache and "100%" in cache
    doctor = next(
        text
        for command, texts in outputs.items()
        if command.startswith("openprogram recordings doctor")
        for text in texts
    )
    assert "datetime in context.system_prompt" in doctor and "No other difference." in doctor
    assert "two live runs compared" in outputs["pytest -q test_concurrent.py --llm-doctor"][0]


def test_examples_run_offline_from_their_committed_recordings(isolated_home):
    example = REPO_ROOT / "examples" / "calculator_agent"
    before = {p: p.read_bytes() for p in (example / "recordings").rglob("*.jsonl")}
    assert len(before) == 2
    env = cli_env(isolated_home)
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *shlex.split("-o addopts="),
        ],
        cwd=example,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout
    assert {p: p.read_bytes() for p in (example / "recordings").rglob("*.jsonl")} == before


# ============================================================================ what they install

#: A requirement that pip resolves on the package index by this name: ``openprogram``, with or
#: without extras and a version. On PyPI that name is another project (docs/install.md).
REGISTRY_NAME = re.compile(r"openprogram(\[[^\]]*\])?((===|==|>=|<=|~=|!=|<|>)\S*)?", re.IGNORECASE)
#: pip options whose value is a file, not a requirement.
FILE_OPTIONS = {"-r", "--requirement", "-c", "--constraint", "-w", "--wheel-dir", "-t", "--target"}


def pip_installs(text: str) -> list[list[str]]:
    """The arguments of every ``pip install`` in ``text``, each up to the end of its line, of
    its inline code span or of its shell command."""
    commands = []
    for match in re.finditer(r"pip install(?P<rest>[^\n`]*)", text):
        rest = re.split(r"\s(?:#|&&|\|\||;)\s", match.group("rest"))[0]
        try:
            words = shlex.split(rest)
        except ValueError:
            words = rest.split()
        commands.append([word.strip("'\"").rstrip("),.;:") for word in words])
    return commands


def installs_the_registry_project(words: list[str]) -> bool:
    skip = False
    for position, word in enumerate(words):
        if skip or word in FILE_OPTIONS:
            skip = not skip
            continue
        following = words[position + 1] if position + 1 < len(words) else ""
        if REGISTRY_NAME.fullmatch(word) and following != "@":  # "name @ URL" names where it is
            return True
    return False


def test_no_install_resolves_to_the_registry_project_of_that_name():
    """``grep -rn "pip install" README.md docs openprogram CHANGELOG.md`` finds no command that
    installs PyPI's ``openprogram``, an unrelated project: every one names this project's source."""
    sources = [REPO_ROOT / "README.md", REPO_ROOT / "CHANGELOG.md"]
    sources += sorted((REPO_ROOT / "docs").rglob("*.md")) + sorted(
        (REPO_ROOT / "openprogram").rglob("*.py")
    )
    found = {
        f"{path.relative_to(REPO_ROOT)}: pip install {' '.join(words)}": installs_the_registry_project(
            words
        )
        for path in sources
        for words in pip_installs(path.read_text())
    }
    assert len(found) >= 10  # the scan sees the installs (the tutorial's, the proxy's, the hints)
    assert [command for command, bad in found.items() if bad] == []


def test_the_check_catches_the_registry_name_in_every_spelling():
    for bad in (
        "pip install openprogram pytest",
        "pip install -U openprogram)",
        "pip install 'openprogram[proxy]'",
        'pip install "openprogram==0.1.0"',
        "pip install -q OpenProgram[proxy]>=0.1",
    ):
        assert installs_the_registry_project(pip_installs(bad)[0]), bad
    for good in (
        "pip install -e .",
        'pip install -e ".[proxy]"',
        "pip install path/to/openprogram pytest",
        "pip install 'path/to/openprogram[proxy]'",
        "pip install wheels/openprogram-*.whl",
        'pip install "openprogram[proxy] @ git+https://example.invalid/openprogram.git"',
        "pip install -r openprogram",
        "pip install 'starlette>=0.40' 'uvicorn>=0.29'",
    ):
        assert not installs_the_registry_project(pip_installs(good)[0]), good


def test_the_docs_say_why_the_registry_name_is_not_this_project():
    install = (REPO_ROOT / "docs" / "install.md").read_text()
    assert "PyPI" in install and "unrelated project" in install and "AGPL" in install
    assert "`path/to/openprogram`" in install  # the placeholder, defined once
    for page in ("tutorial.md", "proxy.md"):
        assert "](install.md)" in (REPO_ROOT / "docs" / page).read_text(), page
    assert "docs/install.md" in (REPO_ROOT / "README.md").read_text()


# ============================================================================ format versions


def test_the_docs_state_the_format_versions_the_code_reads_and_writes():
    from openprogram.recordings.file.format import (
        READABLE_FORMAT_VERSIONS,
        RECORDING_FORMAT_VERSION,
        version_problem,
    )

    file_format = (REPO_ROOT / "docs" / "file-format.md").read_text()
    cli = (REPO_ROOT / "docs" / "recordings-cli.md").read_text()
    readable = " and ".join(map(str, READABLE_FORMAT_VERSIONS))
    assert "equality" not in file_format
    assert (
        f"New files are written as version {RECORDING_FORMAT_VERSION}. Readers read versions {readable}"
        in file_format
    )
    assert f'accepts the versions under\n"Versions" ({readable})' in file_format
    newer = version_problem(RECORDING_FORMAT_VERSION + 1)
    assert newer is not None and " ".join(newer.split()) in " ".join(
        file_format.split()
    )  # quoted as said
    row = next(line for line in cli.splitlines() if line.startswith("| `wrong_version` |"))
    assert f"({readable})" in row and "is not 1 " not in row
