"""The activation plan: one answer to "what will the record_replay settings do at the next
start", and the runtime, ``config set`` and ``recordings status`` all acting on it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
from pathlib import Path

import pytest

from openprogram.recordings.file.format import RecordingFileError
from openprogram.recordings.store.activation import (
    FIX_OFF,
    ActivationPlan,
    load_activation_plan,
    plan_activation,
)
from tests.cli.test_recordings_cli import CORRUPT, FUTURE, folder_of, make_recording, write_config


def _snapshot(folder: Path) -> dict[str, tuple[int, float, int]]:
    """Every entry under ``folder`` with its size, mtime and mode: planning must change none."""
    entries = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            info = path.lstat()
            entries[str(path)] = (info.st_size, info.st_mtime, info.st_mode)
    return entries


def _settings(mode, file=None):
    return {"record_replay": {"mode": mode} | ({} if file is None else {"file": file})}


# ============================================================================ each problem


PROBLEMS = [
    pytest.param(
        _settings("rewind", "x"),
        None,
        "unknown_mode",
        "unknown record_replay.mode 'rewind'",
        id="unknown-mode",
    ),
    pytest.param(
        {"record_replay": "replay"},
        None,
        "unknown_mode",
        "unknown record_replay.mode '<invalid: str>'",
        id="not-an-object",
    ),
    pytest.param(
        _settings("replay", ""),
        None,
        "empty_selector",
        "record_replay.mode is replay but record_replay.file is empty",
        id="empty-selector",
    ),
    pytest.param(
        _settings("record"),
        None,
        "empty_selector",
        "record_replay.mode is record but record_replay.file is empty",
        id="no-record-selector",
    ),
    pytest.param(
        _settings("replay", 42),
        None,
        "invalid_id",
        "record_replay.file must be a recording ID or a path (a JSON string), not 42",
        id="selector-not-text",
    ),
    pytest.param(
        _settings("record", "/tmp/x.jsonl"),
        None,
        "path_selector_in_record_mode",
        "record mode needs a managed recording ID, not a path ('/tmp/x.jsonl')",
        id="record-path",
    ),
    pytest.param(
        _settings("replay", "-bad"),
        None,
        "invalid_id",
        "invalid recording ID '-bad'",
        id="invalid-id",
    ),
    pytest.param(
        _settings("replay", "missing-one"),
        None,
        "missing_file",
        "missing-one.jsonl: does not exist",
        id="missing-file",
    ),
    pytest.param(
        _settings("replay", "corrupt"),
        CORRUPT,
        "interrupted_file",
        "corrupt.jsonl at line 2",
        id="torn-last-line",
    ),
    pytest.param(
        _settings("replay", "corrupt"),
        CORRUPT.replace("call_", "call_\n"),
        "corrupt_file",
        "corrupt.jsonl at line 2",
        id="corrupt-file",
    ),
    pytest.param(
        _settings("replay", "future"),
        FUTURE,
        "wrong_version",
        "format_version 3 is newer than this openprogram reads (1 and 2); a newer openprogram is needed",
        id="wrong-version",
    ),
    pytest.param(
        _settings("record", "future"),
        FUTURE,
        "wrong_version",
        "future.jsonl at line 1: format_version 3 is newer",
        id="record-into-wrong-version",
    ),
    pytest.param(
        _settings("record", "garbage"),
        "not a header\n",
        "corrupt_file",
        "does not start with a recording header",
        id="record-into-garbage",
    ),
]


@pytest.mark.parametrize(("config", "content", "problem", "reason"), PROBLEMS)
def test_each_problem_has_its_code_reason_and_fixes_and_planning_touches_nothing(
    isolated_home, config, content, problem, reason
):
    if content is not None:
        (folder_of(isolated_home) / f"{config['record_replay']['file']}.jsonl").write_text(content)
    before = _snapshot(isolated_home)

    plan = plan_activation(config)

    assert plan.mode == "blocked" and plan.blocked
    assert plan.problem == problem
    assert reason in plan.reason
    assert FIX_OFF in plan.fixes and len(set(plan.fixes)) == len(plan.fixes)
    assert plan.file_usable is (None if problem == "unknown_mode" else False)
    assert _snapshot(isolated_home) == before


def test_a_symlinked_record_target_is_refused_as_a_symlink(isolated_home):
    real = make_recording(isolated_home / "elsewhere.jsonl")
    (folder_of(isolated_home) / "linked.jsonl").symlink_to(real)
    plan = plan_activation(_settings("record", "linked"))
    assert (plan.problem, plan.file_usable) == ("symlink", False)
    assert "is a symbolic link" in plan.reason


def test_a_folder_is_not_a_file_in_either_mode(isolated_home):
    (folder_of(isolated_home) / "folder.jsonl").mkdir()
    for mode in ("record", "replay"):
        plan = plan_activation(_settings(mode, "folder"))
        assert plan.problem == "not_a_file", mode


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_replay_file_offers_chmod(isolated_home):
    path = make_recording(folder_of(isolated_home) / "locked.jsonl")
    path.chmod(0)
    plan = plan_activation(_settings("replay", "locked"))
    assert plan.problem == "unreadable_file" and "cannot read" in plan.reason
    assert plan.fixes[0] == f"chmod 600 {path}"


def test_usable_plans(isolated_home):
    folder = folder_of(isolated_home)
    good = make_recording(folder / "good.jsonl", prompts=("a", "b"))

    replay = plan_activation(_settings("replay", "good"))
    assert (replay.mode, replay.path, replay.managed_id, replay.file_usable) == (
        "replay",
        good,
        "good",
        True,
    )
    assert replay.calls == 2 and replay.events > 0 and replay.problem is None and replay.fixes == ()

    new = plan_activation(_settings("record", "newone"))
    assert (new.mode, new.path, new.file_usable) == ("record", folder / "newone.jsonl", True)
    assert not (folder / "newone.jsonl").exists()

    appending = plan_activation(_settings("record", "good"))
    assert (appending.mode, appending.file_usable) == ("record", True)

    off = plan_activation(_settings("off", "good"))
    assert (off.mode, off.path, off.managed_id, off.file_usable) == ("off", good, "good", None)
    assert plan_activation({}) == ActivationPlan(mode="off", configured_mode="off")


def test_without_a_file_check_only_the_settings_and_existence_are_checked(isolated_home):
    (folder_of(isolated_home) / "corrupt.jsonl").write_text(CORRUPT)
    unchecked = plan_activation(_settings("replay", "corrupt"), check_file=False)
    assert unchecked.mode == "replay" and unchecked.file_usable is None
    missing = plan_activation(_settings("replay", "gone"), check_file=False)
    assert missing.problem == "missing_file"


def test_managed_ids_resolve_in_the_given_profile(isolated_home):
    plan = plan_activation(_settings("record", "r1"), profile="work")
    assert plan.path == isolated_home / "profiles" / "work" / "recordings" / "r1.jsonl"
    assert not (isolated_home / "profiles").exists()


# ============================================================================ the error kind


def test_recording_file_errors_carry_their_kind_across_pickling():
    error = RecordingFileError(
        "/x.jsonl",
        "format_version 3 is newer than this openprogram reads (1 and 2); a newer openprogram is needed",
        1,
        None,
        "wrong_version",
    )
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.kind, str(copy)) == ("wrong_version", str(error))
    assert RecordingFileError("/x.jsonl", "bad").kind == "corrupt"
    with pytest.raises(ValueError, match="unknown recording file error kind"):
        RecordingFileError("/x.jsonl", "bad", kind="weird")


def test_a_missing_file_read_anyway_is_reported_as_missing(tmp_path):
    from openprogram.recordings.file.reader import read_recording_file

    with pytest.raises(RecordingFileError) as caught:
        read_recording_file(tmp_path / "none.jsonl")
    assert caught.value.kind == "missing"
    plan = plan_activation(_settings("replay", str(tmp_path / "x.jsonl")), check_file=False)
    assert plan.blocked_by_file(caught.value).problem == "missing_file"


# ============================================================================ one plan, three users


def _runtime_plan(fresh_registry) -> tuple[str, ActivationPlan | None, str | None]:
    """What the runtime activates for the saved configuration (on a fresh registry)."""
    from openprogram.providers import initialization

    try:
        snapshot = initialization._activate_record_replay()
    except Exception as error:  # the runtime's own fallback for the unexpected
        snapshot = initialization._block(error)
    return snapshot.mode, snapshot.plan, snapshot.diagnosis


def _status_json() -> tuple[int, dict]:
    from openprogram.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["recordings", "status", "--json"])
    return code, json.loads(out.getvalue())


def _config_set_refusal(home: Path, config: dict) -> str | None:
    """Write ``config`` through the validated transaction (starting from off): the refusal."""
    from openprogram import config as config_module

    write_config(home, {})
    try:
        with config_module.config_transaction() as current:
            current.update(config)
    except config_module.ConfigError as error:
        return str(error)
    return None


@pytest.mark.parametrize(("config", "content", "problem", "reason"), PROBLEMS)
def test_runtime_config_set_and_status_agree_on_every_blocked_plan(
    isolated_home, fresh_registry, config, content, problem, reason
):
    if content is not None:
        (folder_of(isolated_home) / f"{config['record_replay']['file']}.jsonl").write_text(content)
    plan = plan_activation(config)

    refusal = _config_set_refusal(isolated_home, config)
    assert refusal is not None and plan.reason in refusal
    assert json.loads((isolated_home / "config.json").read_text()) == {}  # nothing was written

    write_config(isolated_home, config)
    assert load_activation_plan() == plan

    mode, runtime_plan, diagnosis = _runtime_plan(fresh_registry)
    assert mode == "blocked" and runtime_plan == plan
    assert diagnosis.startswith(f"record/replay could not be activated: {plan.reason}")

    code, status = _status_json()
    assert code == 1
    assert (status["problem"], status["reason"], status["fix"]) == (
        plan.problem,
        plan.reason,
        list(plan.fixes),
    )


def test_runtime_config_set_and_status_agree_on_a_usable_replay(isolated_home, fresh_registry):
    make_recording(folder_of(isolated_home) / "good.jsonl", prompts=("a",))
    config = _settings("replay", "good")
    plan = plan_activation(config)
    assert _config_set_refusal(isolated_home, config) is None
    mode, runtime_plan, diagnosis = _runtime_plan(fresh_registry)
    assert (mode, diagnosis) == ("replay", None)
    assert (runtime_plan.mode, runtime_plan.path) == (plan.mode, plan.path)
    code, status = _status_json()
    assert code == 0 and status["blocked"] is False and status["path"] == str(plan.path)


def test_the_runtime_reads_a_replay_file_once(isolated_home, fresh_registry, monkeypatch):
    """The plan checks the settings and that the file exists; the replay provider reads it."""
    from openprogram.recordings.file import reader
    from openprogram.recordings.replay import replayer

    make_recording(folder_of(isolated_home) / "good.jsonl", prompts=("a", "b"))
    write_config(isolated_home, _settings("replay", "good"))
    reads = []
    original = reader.read_recording_file

    def counting(path):
        reads.append(Path(path).name)
        return original(path)

    monkeypatch.setattr(reader, "read_recording_file", counting)
    monkeypatch.setattr(replayer, "read_recording_file", counting)
    mode, _, _ = _runtime_plan(fresh_registry)
    assert (mode, reads) == ("replay", ["good.jsonl"])


def test_a_record_target_whose_writer_died_mid_call_is_blocked_until_recovered(isolated_home):
    from openprogram.recordings.store.activation import plan_activation
    from tests.cli.test_recordings_cli import (
        cli,
        folder_of,
        make_recording,
        recordings,
        write_config,
    )
    from tests.cli.test_recover_cli import cut_recording

    path = cut_recording(folder_of(isolated_home) / "died.jsonl", torn=False)
    config = {"record_replay": {"mode": "record", "file": "died"}}
    plan = plan_activation(config)
    assert plan.blocked and plan.problem == "interrupted_file" and plan.file_usable is False
    assert str(path) in plan.reason and "call 1 has no call_end" in plan.reason
    assert plan.fixes[0] == f"openprogram recordings recover {path}"
    write_config(isolated_home, config)
    before = path.read_bytes()
    status = recordings(isolated_home, "status")
    assert status.returncode == 1 and "usable" not in status.stdout
    assert f"openprogram recordings recover {path}" in status.stdout
    run = cli(isolated_home, "run", "hello")  # the runtime refuses to append too
    assert run.returncode != 0 and f"openprogram recordings recover {path}" in run.stderr
    assert path.read_bytes() == before
    assert recordings(isolated_home, "recover", "died", "--yes").returncode == 0
    assert not plan_activation(config).blocked
    whole = folder_of(isolated_home) / "whole.jsonl"
    make_recording(whole)
    assert not plan_activation({"record_replay": {"mode": "record", "file": "whole"}}).blocked


def test_a_call_left_open_further_up_blocks_status_and_the_runtime_alike(isolated_home):
    """Call 0 (one lane) never ended and streamed nothing after call 1 (another lane) began:
    the recorder's look at the file's end cannot see it, reading the whole file does."""
    from openprogram.recordings.file.sink import RecordingSink
    from openprogram.recordings.store.activation import plan_activation
    from tests.cli.test_recordings_cli import cli, folder_of, write_config

    path = folder_of(isolated_home) / "lanes.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with RecordingSink(path) as sink:
        for lane in ("a", "b"):
            sink.begin_call({"model": {}, "context": {}, "options": {}}, lane=lane)
        sink.write_row({"type": "call_end", "call_index": 1, "event_count": 0})
    RecordingSink(path).close()  # the end of the file looks whole
    config = {"record_replay": {"mode": "record", "file": "lanes"}}
    plan = plan_activation(config)
    assert plan.blocked and plan.problem == "interrupted_file"
    assert f"openprogram recordings recover {path}" in plan.reason
    write_config(isolated_home, config)
    before = path.read_bytes()
    run = cli(isolated_home, "run", "hello")
    assert run.returncode != 0 and f"openprogram recordings recover {path}" in run.stderr
    assert path.read_bytes() == before
