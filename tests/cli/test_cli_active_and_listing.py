"""One rule for the active recording (``status``, ``list`` and ``delete`` agree in every mode,
``update`` included), ``list FOLDER`` for a test suite's recordings, a ``show NAME`` hint that
works for them, and the verbs registered in one place."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from tests.cli.test_recordings_cli import folder_of, make_recording, recordings, write_config
from tests.conftest import PYTHON, REPO_ROOT, cli_env


@pytest.mark.parametrize("mode", ["record", "replay", "update"])
def test_status_list_and_delete_agree_on_the_active_recording(isolated_home, mode):
    path = make_recording(folder_of(isolated_home) / "demo1.jsonl")
    make_recording(folder_of(isolated_home) / "other.jsonl")
    write_config(isolated_home, {"record_replay": {"mode": mode, "file": "demo1"}})
    status = json.loads(recordings(isolated_home, "status", "--json").stdout)
    assert status["path"] == str(path) and status["blocked"] is False
    listed = json.loads(recordings(isolated_home, "list", "--json").stdout)["recordings"]
    assert [row["id"] for row in listed if row["active"]] == ["demo1"]
    delete = recordings(isolated_home, "delete", "demo1", "--yes")
    assert delete.returncode == 1 and "is the active recording" in delete.stderr and path.exists()
    assert recordings(isolated_home, "delete", "other", "--yes").returncode == 0


def test_a_blocked_configuration_still_protects_its_file(isolated_home):
    path = make_recording(folder_of(isolated_home) / "demo1.jsonl")
    write_config(
        isolated_home,
        {"record_replay": {"mode": "update", "file": "demo1", "ignore": ["nonsense["]}},
    )
    assert recordings(isolated_home, "status").returncode == 1  # the bad pattern blocks
    delete = recordings(isolated_home, "delete", "demo1", "--yes")
    assert delete.returncode == 1 and "is the active recording" in delete.stderr and path.exists()
    old = time.time() - 30 * 86400
    os.utime(path, (old, old))
    prune = recordings(isolated_home, "prune", "--older-than-days", "1", "--yes")
    assert "is the active recording" in prune.stderr and path.exists()


# ============================================================================ list FOLDER


@pytest.fixture
def suite(tmp_path):
    """A test suite's recordings: usable, interrupted (torn, missing call_end), invalid, of
    two sessions, a symlink, and hidden files that are no recordings."""
    from tests.cli.test_recover_cli import cut_recording

    folder = tmp_path / "recordings"
    (folder / "test_a").mkdir(parents=True)
    (folder / "test_b").mkdir()
    make_recording(folder / "test_a" / "test_one.jsonl", ("x", "y"))
    cut_recording(folder / "test_a" / "test_torn.jsonl", torn=True)
    cut_recording(folder / "test_a" / "test_unended.jsonl", torn=False)
    (folder / "test_b" / "test_bad.jsonl").write_text("not a recording\n")
    two = folder / "test_b" / "test_two_sessions.jsonl"
    make_recording(two, ("one",))
    make_recording(two, ("two",))
    (folder / "test_b" / "link.jsonl").symlink_to(two)
    lines = [json.loads(line) for line in two.read_text().splitlines()]
    (folder / "test_b" / "test_sorted_keys.jsonl").write_text(  # another writer's key order
        "".join(json.dumps(row, sort_keys=True) + "\n" for row in lines)
    )
    (folder / "test_b" / "test_no_sessions.jsonl").write_text(  # written before sessions existed
        "".join(
            json.dumps({k: v for k, v in row.items() if k != "session"}) + "\n" for row in lines
        )
    )
    (folder / "test_b" / ".test_bad.jsonl.abc.update").write_text("hidden\n")
    (folder / ".cache").mkdir()
    make_recording(folder / ".cache" / "hidden.jsonl")
    return folder


def test_list_folder_shows_each_test_recording_with_its_state(isolated_home, suite, tmp_path):
    result = recordings(isolated_home, "list", str(suite), "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["schema_version"] == 1 and document["folder"] == str(suite)
    rows = {row["name"]: row for row in document["recordings"]}
    assert sorted(rows) == [
        "test_a/test_one.jsonl",
        "test_a/test_torn.jsonl",
        "test_a/test_unended.jsonl",
        "test_b/link.jsonl",
        "test_b/test_bad.jsonl",
        "test_b/test_no_sessions.jsonl",
        "test_b/test_sorted_keys.jsonl",
        "test_b/test_two_sessions.jsonl",
    ]
    assert (rows["test_a/test_one.jsonl"]["state"], rows["test_a/test_one.jsonl"]["calls"]) == (
        "usable",
        2,
    )
    assert rows["test_a/test_one.jsonl"]["sessions"] == 1
    assert rows["test_b/test_two_sessions.jsonl"]["sessions"] == 2
    assert (
        rows["test_b/test_sorted_keys.jsonl"]["calls"],
        rows["test_b/test_sorted_keys.jsonl"]["sessions"],
    ) == (2, 2)
    assert (
        rows["test_b/test_no_sessions.jsonl"]["calls"],
        rows["test_b/test_no_sessions.jsonl"]["sessions"],
    ) == (2, 1)
    for name in ("test_a/test_torn.jsonl", "test_a/test_unended.jsonl"):
        assert rows[name]["state"] == "interrupted" and "recordings recover" in rows[name]["reason"]
    assert rows["test_b/test_bad.jsonl"]["state"] == "invalid"
    assert "recording header" in rows["test_b/test_bad.jsonl"]["reason"]
    assert rows["test_b/link.jsonl"]["state"] == "symlink"
    assert all(row["age_seconds"] >= 0 and row["size_bytes"] > 0 for row in rows.values())

    text = recordings(isolated_home, "list", str(suite))
    assert text.returncode == 0
    header, *lines = text.stdout.splitlines()
    assert header.split() == ["NAME", "STATE", "CALLS", "SESSIONS", "SIZE", "AGE", "NOTE"]
    assert any(line.startswith("test_a/test_one.jsonl") and " usable " in line for line in lines)


def test_list_folder_agrees_with_the_strict_reader_on_every_file(isolated_home, suite):
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.file.reader import read_recording_file
    from openprogram.recordings.store.listing import list_folder

    for row in list_folder(suite):
        if row.state == "symlink":
            continue
        try:
            recording = read_recording_file(row.path)
        except RecordingFileError as error:
            assert row.state == ("interrupted" if error.kind == "interrupted" else "invalid"), row
            continue
        assert row.state == "usable" and row.calls == len(recording.calls)
        assert row.sessions == len({call.session for call in recording.calls})


def test_list_of_a_missing_folder_is_a_usage_error(isolated_home, tmp_path):
    result = recordings(isolated_home, "list", str(tmp_path / "nowhere"))
    assert (
        result.returncode == 2
        and "cannot list" in result.stderr
        and "Traceback" not in result.stderr
    )


def test_show_name_of_a_test_recording_points_at_its_path(isolated_home, suite):
    result = subprocess.run(
        [PYTHON, "-m", "openprogram", "recordings", "show", "test_one"],
        env=cli_env(isolated_home),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=suite.parent,
    )
    assert result.returncode == 1
    assert (
        "a test's recording is named by its path: recordings/test_a/test_one.jsonl" in result.stderr
    )
    shown = subprocess.run(
        [PYTHON, "-m", "openprogram", "recordings", "show", "recordings/test_a/test_one.jsonl"],
        env=cli_env(isolated_home),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=suite.parent,
    )
    assert shown.returncode == 0, shown.stderr
    nothing = recordings(isolated_home, "show", "nowhere")
    assert "'openprogram recordings list FOLDER' (a test suite's recordings/)" in nothing.stderr


# ============================================================================ one place per verb


def test_every_verb_is_registered_once_with_its_arguments():
    from openprogram.cli import recordings_cmd

    documented = open(REPO_ROOT / "docs" / "recordings-cli.md").read()
    usage = documented[
        documented.index("```\nopenprogram recordings status") : documented.index(
            "```", documented.index("openprogram recordings status")
        )
    ]
    in_docs = [
        line.split()[2] for line in usage.splitlines() if line.startswith("openprogram recordings ")
    ]
    assert list(recordings_cmd.VERBS) == in_docs
    assert {name for name, entry in recordings_cmd.VERBS.items() if entry.mutating} == {
        "record",
        "replay",
        "off",
        "delete",
        "prune",
        "recover",
    }
