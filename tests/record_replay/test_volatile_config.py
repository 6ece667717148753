"""``record_replay.ignore`` and ``record_replay.normalize`` in the configuration: validated at
``config set`` (a bad one writes nothing), and used by the runtime's replay."""

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
    assert (
        openprogram(isolated_home, "config", "set", "record_replay.normalize", rule).returncode == 0
    )
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
    assert (
        json.loads(openprogram(isolated_home, "recordings", "status", "--json").stdout)["blocked"]
        is False
    )


def test_a_replacement_with_a_bad_group_reference_is_refused_at_config_set(isolated_home):
    for rule, reason in [
        ([r"(\d+)", r"<\9>"], "invalid group reference 9"),
        ([r"\d+", r"\g<number>"], "unknown group name 'number'"),
        ([r"\d+", r"\q"], r"bad escape \q"),
    ]:
        result = openprogram(
            isolated_home, "config", "set", "record_replay.normalize", json.dumps([rule])
        )
        assert result.returncode == 2, result.stderr
        assert "record_replay.normalize" in result.stderr and reason in result.stderr
        assert "nothing was written" in result.stderr and "Traceback" not in result.stderr
        assert not (isolated_home / "config.json").exists()
    good = openprogram(
        isolated_home,
        "config",
        "set",
        "record_replay.normalize",
        json.dumps([[r"(?P<n>\d+)", r"<\g<n>>"]]),
    )
    assert good.returncode == 0, good.stderr


def test_a_hand_edited_bad_replacement_blocks_instead_of_crashing_every_replay(isolated_home):
    assert openprogram(isolated_home, "recordings", "record", "--name", "dated").returncode == 0
    assert openprogram(isolated_home, "run", "hello 2026").returncode == 0
    (isolated_home / "config.json").write_text(
        json.dumps(
            {"record_replay": {"mode": "replay", "file": "dated", "normalize": [[r"(\d+)", r"\9"]]}}
        )
    )
    status = json.loads(openprogram(isolated_home, "recordings", "status", "--json").stdout)
    assert (
        status["problem"] == "invalid_volatile" and "invalid group reference 9" in status["reason"]
    )
    run = openprogram(isolated_home, "run", "hello 2026")
    assert (
        run.returncode == 1
        and "Traceback" not in run.stderr
        and "record_replay.normalize" in run.stderr
    )
