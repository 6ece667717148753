"""``openprogram run`` end to end, in a subprocess, as a user runs it."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import PYTHON, cli_env


def openprogram(home, *args, **env):
    return subprocess.run(
        [PYTHON, "-m", "openprogram", *args],
        env=cli_env(home, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_run_echoes_with_no_configuration(isolated_home):
    result = openprogram(isolated_home, "run", "hello there")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "echo: hello there\n"
    assert result.stderr == ""


def test_run_shows_tool_calls_and_results(isolated_home):
    result = openprogram(isolated_home, "run", "/calculator (2+3)*7")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        '-> calculator({"expression":"(2+3)*7"})',
        "<- calculator returned: 35",
        "calculator returned: 35",
    ]


def test_run_json_streams_agent_events(isolated_home):
    result = openprogram(isolated_home, "run", "--json", "/calculator 6*7")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "agent_start" and kinds[-1] == "agent_end"
    ends = [e for e in events if e["type"] == "tool_execution_end"]
    assert ends[0]["result"]["content"][0]["text"] == "42"
    updates = [e for e in events if e["type"] == "message_update"]
    assert updates and all("partial" not in e["assistant_message_event"] for e in updates)


def test_file_tool_is_opt_in_and_confined(isolated_home, tmp_path):
    (tmp_path / "notes.txt").write_text("remember the milk")
    ok = subprocess.run(
        [PYTHON, "-m", "openprogram", "run", "--tool", "read_file", "/read_file notes.txt"],
        env=cli_env(isolated_home),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert "read_file returned: remember the milk" in ok.stdout
    default = subprocess.run(
        [PYTHON, "-m", "openprogram", "run", "/read_file notes.txt"],
        env=cli_env(isolated_home),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert "Tool 'read_file' not found" in default.stdout


def test_unknown_model_is_a_usage_error_without_traceback(isolated_home):
    result = openprogram(isolated_home, "run", "--model", "nope/x", "hi")
    assert result.returncode == 2
    assert "--model: unknown model 'nope/x'" in result.stderr
    assert "Traceback" not in result.stderr


def test_configured_default_model_and_profiles(isolated_home):
    assert (
        openprogram(
            isolated_home, "--profile", "p1", "config", "set", "default_model", "faux/echo"
        ).returncode
        == 0
    )
    bad = openprogram(isolated_home, "config", "set", "default_model", "not-a-ref")
    assert bad.returncode == 2 and "nothing was written" in bad.stderr
    assert not (isolated_home / "config.json").exists()
    got = openprogram(isolated_home, "--profile", "p1", "config", "get", "default_model")
    assert json.loads(got.stdout) == "faux/echo"
    assert openprogram(isolated_home, "--profile", "p1", "run", "x").stdout == "echo: x\n"


@pytest.mark.parametrize(
    ("config", "key", "message"),
    [
        ({"default_model": 12}, "default_model", "must look like provider/model-id"),
        ({"models": [{"id": 1}]}, "models", "entry 0: id"),
        (
            {"tools": {"enabled": "calculator"}},
            "tools.enabled",
            "must be a JSON list of tool names",
        ),
        ({"run": {"max_turns": "many"}}, "run.max_turns", "whole number"),
    ],
)
def test_a_hand_edited_bad_setting_is_named_with_its_fix_not_a_traceback(
    isolated_home, config, key, message
):
    (isolated_home / "config.json").write_text(json.dumps(config))
    result = openprogram(isolated_home, "run", "hi")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert str(isolated_home / "config.json") in line and f"{key}: " in line and message in line
    assert f"openprogram config unset {key}" in line


def test_a_full_disk_while_recording_fails_the_run_with_one_line(isolated_home):
    assert openprogram(isolated_home, "recordings", "record", "--name", "big").returncode == 0
    recording = isolated_home / "recordings" / "big.jsonl"
    header = recording.read_bytes()
    limit = len(header) + 200  # room for the header only: the first request line cannot fit
    script = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n"
        "from openprogram.cli.main import main\n"
        "sys.exit(main(['run', 'word ' * 200]))\n"
    )
    result = subprocess.run(
        [PYTHON, "-c", script],
        env=cli_env(isolated_home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert f"recording file {recording}: cannot write" in line
    assert "openprogram recordings off" in line
    assert recording.read_bytes().startswith(header)
    assert set(p.name for p in isolated_home.iterdir()) <= {
        "config.json",
        "recordings",
        ".config.lock",
    }
