"""``record_replay.ignore`` and ``record_replay.normalize`` in the configuration: validated at
``config set`` (a bad one writes nothing), and used by the runtime's replay."""

from __future__ import annotations

import json
import subprocess

from tests.conftest import PYTHON, cli_env


def openprogram(home, *args):
    return subprocess.run(
        [PYTHON, "-m", "openprogram", *args], env=cli_env(home), capture_output=True, text=True, timeout=120
    )


def test_a_bad_regex_or_pattern_is_a_usage_error_that_writes_nothing(isolated_home):
    for key, value in [
        ("record_replay.normalize", '[["(", "x"]]'),
        ("record_replay.normalize", '"just text"'),
        ("record_replay.ignore", '["nowhere.at.all"]'),
    ]:
        result = openprogram(isolated_home, "config", "set", key, value)
        assert result.returncode == 2, result.stderr
        assert key in result.stderr and "nothing was written" in result.stderr
        assert not (isolated_home / "config.json").exists()


def test_the_runtime_replays_with_the_configured_normalize_rule(isolated_home):
    assert openprogram(isolated_home, "recordings", "record", "--name", "dated").returncode == 0
    recorded = openprogram(isolated_home, "run", "--system", "Today is 2026-12-01.", "hello")
    assert recorded.returncode == 0, recorded.stderr
    assert openprogram(isolated_home, "recordings", "replay", "dated").returncode == 0

    drifted = openprogram(isolated_home, "run", "--system", "Today is 2026-12-02.", "hello")
    assert drifted.returncode == 1 and "context.system_prompt" in drifted.stderr

    rule = json.dumps([[r"\d{4}-\d\d-\d\d", "<date>"]])
    assert openprogram(isolated_home, "config", "set", "record_replay.normalize", rule).returncode == 0
    replayed = openprogram(isolated_home, "run", "--system", "Today is 2026-12-02.", "hello")
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout


def test_a_hand_edited_bad_rule_blocks_with_a_diagnosis(isolated_home):
    (isolated_home / "config.json").write_text(
        json.dumps({"record_replay": {"mode": "replay", "file": "any", "normalize": [["(", "x"]]}})
    )
    status = json.loads(openprogram(isolated_home, "recordings", "status", "--json").stdout)
    assert status["problem"] == "invalid_volatile"
    assert "record_replay.normalize" in status["reason"]
    assert "openprogram config unset record_replay.normalize" in status["fix"]
    (isolated_home / "config.json").write_text(
        json.dumps({"record_replay": {"mode": "off", "normalize": [["(", "x"]]}})
    )
    assert json.loads(openprogram(isolated_home, "recordings", "status", "--json").stdout)["blocked"] is False
