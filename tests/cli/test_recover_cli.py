"""``openprogram recordings recover`` and the commands that point to it (docs/recordings-cli.md).

A recording whose writer died is made by cutting a real recording: mid-line (a torn last line)
or after an event line (a call without its call_end)."""

from __future__ import annotations

import json
import os

import pytest

from tests.cli.test_recordings_cli import (
    folder_of,
    make_recording,
    recordings,
    write_config,
    writer_holding,
)


def cut_recording(path, *, torn: bool, record: bool = True):
    """``path`` (recorded here unless ``record`` is False) as left by a writer killed
    mid-call: the second call's first events written, no call_end, and (``torn``) half of
    its next line."""
    if record:
        make_recording(path, prompts=("first prompt", "second prompt"))
    lines = path.read_bytes().splitlines(keepends=True)
    second_request = next(
        i
        for i, line in enumerate(lines)
        if b'"type":"request"' in line and b'"call_index":1' in line
    )
    kept = lines[: second_request + 3]  # the request and two events
    data = b"".join(kept) + (lines[second_request + 3][:20] if torn else b"")
    path.write_bytes(data)
    os.chmod(path, 0o640)
    return path


@pytest.fixture
def crashed(isolated_home):
    return cut_recording(folder_of(isolated_home) / "crashed.jsonl", torn=True)


def test_recover_repairs_a_crashed_recording_keeping_its_mode(isolated_home, crashed):
    result = recordings(isolated_home, "recover", "crashed", "--yes")
    assert result.returncode == 0, result.stderr
    assert "drop the torn last line" in result.stdout
    assert "close call 1 as abandoned after its 2 event(s)" in result.stdout
    assert oct(os.stat(crashed).st_mode & 0o777) == oct(0o640)
    from openprogram.recordings.file.reader import read_recording_file

    recording = read_recording_file(crashed)
    assert [call.outcome for call in recording.calls] == ["complete", "abandoned"]
    again = recordings(isolated_home, "recover", str(crashed), "--yes")
    assert again.returncode == 0 and "nothing needs recovering" in again.stdout


def test_dry_run_and_a_missing_yes_change_nothing(isolated_home, crashed):
    before = crashed.read_bytes()
    dry = recordings(isolated_home, "recover", "crashed", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would recover" in dry.stdout and "nothing was changed" in dry.stdout
    assert crashed.read_bytes() == before
    unconfirmed = recordings(isolated_home, "recover", "crashed")  # stdin is not a terminal
    assert unconfirmed.returncode == 2
    assert "add --yes" in unconfirmed.stderr
    assert crashed.read_bytes() == before
    assert sorted(os.listdir(crashed.parent)) == ["crashed.jsonl"]  # no temporary file left


OTHER_DEFECTS = [
    pytest.param(lambda lines: lines[:2] + [b"{not json\n"] + lines[2:], 3, id="bad-json-mid-file"),
    pytest.param(lambda lines: lines[:2] + lines[3:], 3, id="event-index-gap"),
    pytest.param(
        lambda lines: lines[:1] + [b'{"type":"bogus"}\n'] + lines[1:], 2, id="unknown-line-type"
    ),
]


@pytest.mark.parametrize(("damage", "line"), OTHER_DEFECTS)
def test_any_other_defect_is_refused_naming_the_line_and_the_file_stays_byte_identical(
    isolated_home, damage, line
):
    path = cut_recording(folder_of(isolated_home) / "damaged.jsonl", torn=True)
    path.write_bytes(b"".join(damage(path.read_bytes().splitlines(keepends=True))))
    before = path.read_bytes()
    result = recordings(isolated_home, "recover", "damaged", "--yes")
    assert result.returncode == 1
    assert f"damaged.jsonl at line {line}" in result.stderr
    assert "nothing was changed" in result.stderr
    assert path.read_bytes() == before


def test_a_file_being_recorded_into_is_refused(isolated_home):
    path = folder_of(isolated_home) / "live.jsonl"
    with writer_holding(path):
        with open(path, "ab") as handle:  # a call in flight, as the live writer would leave it
            handle.write(
                b'{"type":"request","call_index":0,"model":{},"context":{},"options":null}\n'
            )
        before = path.read_bytes()
        result = recordings(isolated_home, "recover", "live", "--yes")
    assert result.returncode == 1
    assert "is being recorded into by a running process" in result.stderr
    assert path.read_bytes() == before


def test_a_symlink_is_refused(isolated_home, tmp_path):
    target = cut_recording(tmp_path / "target.jsonl", torn=False)
    link = folder_of(isolated_home) / "link.jsonl"
    link.symlink_to(target)
    before = target.read_bytes()
    result = recordings(isolated_home, "recover", "link", "--yes")
    assert result.returncode == 1
    assert "is a symbolic link" in result.stderr
    assert target.read_bytes() == before and link.is_symlink()


def test_status_replay_and_show_name_recover_for_a_crashed_recording(isolated_home, crashed):
    recover = f"openprogram recordings recover {crashed}"
    shown = recordings(isolated_home, "show", "crashed")
    assert shown.returncode == 1 and recover in shown.stderr
    replayed = recordings(isolated_home, "replay", "crashed")
    assert replayed.returncode == 1 and recover in replayed.stderr
    assert not (isolated_home / "config.json").exists()
    write_config(isolated_home, {"record_replay": {"mode": "replay", "file": "crashed"}})
    status = recordings(isolated_home, "status", "--json")
    assert status.returncode == 1
    data = json.loads(status.stdout)
    assert data["problem"] == "interrupted_file"
    assert recover in data["fix"]


def test_a_corrupt_file_does_not_suggest_recover(isolated_home):
    path = folder_of(isolated_home) / "corrupt.jsonl"
    make_recording(path)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:1] + [b"{nope\n"] + lines[1:]))
    shown = recordings(isolated_home, "show", "corrupt")
    assert shown.returncode == 1 and "at line 2" in shown.stderr
    assert "recover" not in shown.stderr


def test_a_dry_run_writes_nothing_beside_the_recording(isolated_home, crashed, monkeypatch):
    """The repair is checked in a private temporary folder, so a dry run works where the
    recording's folder cannot be written, and leaves nothing there even while it runs."""
    from openprogram.recordings.store import recovery

    folder = crashed.parent
    real_open = os.open

    def no_new_file_in_the_folder(path, flags, *args, **kwargs):
        if flags & os.O_CREAT and os.path.dirname(os.path.abspath(path)) == str(folder):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", no_new_file_in_the_folder)
    plan = recovery.plan_recovery(crashed)
    assert plan.needed and plan.describe()[-1] == "close call 1 as abandoned after its 2 event(s)"
    assert plan.describe()[0].startswith("drop the torn last line")


def test_a_folder_that_cannot_be_written_is_one_line_and_the_file_is_unchanged(
    isolated_home, crashed, monkeypatch, capsys
):
    from openprogram.cli.main import main
    from openprogram.recordings.store import recovery

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(recovery, "replace_atomically", refused)
    before = crashed.read_bytes()
    assert main(["recordings", "recover", str(crashed), "--yes"]) == 1
    stderr = capsys.readouterr().err
    assert f"the folder {crashed.parent} cannot be written (Permission denied)" in stderr
    assert "nothing was changed" in stderr and "Traceback" not in stderr
    assert crashed.read_bytes() == before


def test_recover_removes_what_killed_rewrites_left(isolated_home, crashed):
    import time

    leftover = crashed.with_name(".crashed.jsonl.k1ll3d.tmp")
    leftover.write_text("half a rewrite\n")
    old = time.time() - 600
    os.utime(leftover, (old, old))
    assert recordings(isolated_home, "recover", "crashed", "--yes").returncode == 0
    assert sorted(os.listdir(crashed.parent)) == ["crashed.jsonl"]
