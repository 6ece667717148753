"""``record_replay.mode=update``: the runtime replays what matches and records from the first
drift, rewriting the recording when the process exits."""

from __future__ import annotations

import json
import subprocess

from tests.conftest import PYTHON, cli_env


def openprogram(home, *args):
    return subprocess.run(
        [PYTHON, "-m", "openprogram", *args],
        env=cli_env(home),
        capture_output=True,
        text=True,
        timeout=120,
    )


def requests(path) -> list[str]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [row["context"]["messages"][0]["content"] for row in rows if row["type"] == "request"]


def test_update_mode_across_commands(isolated_home):
    assert openprogram(isolated_home, "recordings", "record", "--name", "s").returncode == 0
    path = isolated_home / "recordings" / "s.jsonl"
    first = openprogram(isolated_home, "run", "hello one")
    second = openprogram(isolated_home, "run", "hello two")
    assert first.returncode == second.returncode == 0
    result = openprogram(isolated_home, "config", "set", "record_replay.mode", "update")
    assert result.returncode == 0, result.stderr
    status = json.loads(openprogram(isolated_home, "recordings", "status", "--json").stdout)
    assert status["mode"] == "update" and status["blocked"] is False

    before = path.read_bytes()
    again = openprogram(isolated_home, "run", "hello one")  # unchanged: replayed, no live call
    assert again.returncode == 0 and again.stdout == first.stdout
    assert path.read_bytes() == before

    changed = openprogram(isolated_home, "run", "hello three")  # drifts: recorded
    assert changed.returncode == 0 and changed.stdout == "echo: hello three\n"
    assert sorted(requests(path)) == ["hello one", "hello three", "hello two"]
    assert openprogram(isolated_home, "recordings", "replay", "s").returncode == 0
    for prompt, expected in [("hello three", changed.stdout), ("hello two", second.stdout)]:
        replayed = openprogram(isolated_home, "run", prompt)
        assert replayed.returncode == 0 and replayed.stdout == expected


def test_update_mode_needs_a_managed_id(isolated_home):
    assert (
        openprogram(isolated_home, "config", "set", "record_replay.file", "/tmp/x.jsonl").returncode
        == 0
    )
    before = (isolated_home / "config.json").read_bytes()
    result = openprogram(isolated_home, "config", "set", "record_replay.mode", "update")
    assert result.returncode == 2
    assert (isolated_home / "config.json").read_bytes() == before
    assert "update mode needs a managed recording ID" in result.stderr
