"""``openprogram recordings ...`` as a user runs it: each command in a subprocess with its own
OPENPROGRAM_HOME, stdin not a terminal unless a test gives it a pseudo-terminal."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import PYTHON, cli_env

PROMPT_MARKER = "PROMPT-TEXT-that-must-not-leak"
DAY = 86400


def cli(home: Path, *args: str, stdin=subprocess.DEVNULL, cwd=None) -> subprocess.CompletedProcess:
    """Run ``openprogram ARGS``; every run must be free of tracebacks, whatever its exit code."""
    result = subprocess.run(
        [PYTHON, "-m", "openprogram", *args],
        env=cli_env(home),
        capture_output=True,
        text=True,
        stdin=stdin,
        cwd=cwd,
        timeout=120,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def recordings(home: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return cli(home, "recordings", *args, **kwargs)


def write_config(home: Path, config: dict) -> bytes:
    data = json.dumps(config).encode()
    (home / "config.json").write_bytes(data)
    return data


def read_config(home: Path) -> dict:
    return json.loads((home / "config.json").read_text())


def folder_of(home: Path) -> Path:
    folder = home / "recordings"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def make_recording(path: Path, prompts=(PROMPT_MARKER,), *, error: str | None = None) -> Path:
    """A valid recording of faux/echo calls (and optionally one that ends in an error event),
    written by the real recorder."""
    from openprogram.providers.faux import FauxProvider, faux_error
    from openprogram.providers.recording import RecordingProvider
    from openprogram.providers.types import Context, Model, UserMessage

    faux = FauxProvider(timestamp=0)
    provider = RecordingProvider(faux, path)
    model = Model(id="echo", api="faux", provider="faux")

    async def go():
        for prompt in prompts:
            context = Context(messages=[UserMessage(content=prompt, timestamp=0)])
            async for _ in provider.stream_simple(model, context):
                pass
        if error is not None:
            faux.queue(faux_error(error))
            context = Context(messages=[UserMessage(content="fail please", timestamp=0)])
            async for _ in provider.stream_simple(model, context):
                pass

    asyncio.run(go())
    provider.sink.close()
    return path


CORRUPT = '{"type": "header", "format_version": 1}\n{"type": "request", "call_'
FUTURE = '{"type": "header", "format_version": 3}\n'


@contextmanager
def writer_holding(path: Path):
    """Another process recording into ``path`` (a real sink) until the block ends."""
    script = textwrap.dedent(
        f"""
        import sys
        from openprogram.providers.recording import RecordingSink
        sink = RecordingSink({str(path)!r})
        print("ready", flush=True)
        sys.stdin.read()
        """
    )
    process = subprocess.Popen(
        [PYTHON, "-c", script],
        env=cli_env(path.parent),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout.readline().strip() == "ready"
        yield process
    finally:
        process.stdin.close()
        process.wait(timeout=60)


# ============================================================================ activation failures

ACTIVATION_FAILURES = [
    pytest.param(
        {"mode": "replay", "file": "missing-one"},
        None,
        "missing_file",
        "missing-one.jsonl: does not exist",
        id="missing-file",
    ),
    pytest.param(
        {"mode": "replay", "file": "corrupt"},
        CORRUPT,
        "interrupted_file",
        "corrupt.jsonl at line 2",
        id="torn-last-line",
    ),
    pytest.param(
        {"mode": "replay", "file": "corrupt"},
        CORRUPT.replace("call_", "call_\n"),
        "corrupt_file",
        "corrupt.jsonl at line 2",
        id="corrupt-file",
    ),
    pytest.param(
        {"mode": "replay", "file": "future"},
        FUTURE,
        "wrong_version",
        "format_version 3 is newer than this openprogram reads (1 and 2); a newer openprogram is needed",
        id="wrong-version",
    ),
    pytest.param(
        {"mode": "rewind", "file": "x"},
        None,
        "unknown_mode",
        "unknown record_replay.mode 'rewind'",
        id="unknown-mode",
    ),
    pytest.param(
        {"mode": "replay", "file": ""},
        None,
        "empty_selector",
        "record_replay.file is empty",
        id="empty-selector",
    ),
    pytest.param(
        {"mode": "record"},
        None,
        "empty_selector",
        "record_replay.file is empty",
        id="record-without-selector",
    ),
    pytest.param(
        {"mode": "record", "file": "/tmp/x.jsonl"},
        None,
        "path_selector_in_record_mode",
        "record mode needs a managed recording ID, not a path ('/tmp/x.jsonl')",
        id="record-path-selector",
    ),
    pytest.param(
        {"mode": "record", "file": "future"},
        FUTURE,
        "wrong_version",
        "future.jsonl at line 1: format_version 3 is newer",
        id="record-into-wrong-version",
    ),
]


@pytest.mark.parametrize(("settings", "content", "problem", "reason"), ACTIVATION_FAILURES)
def test_status_diagnoses_each_activation_failure_and_off_recovers(
    isolated_home, settings, content, problem, reason
):
    if content is not None:
        (folder_of(isolated_home) / f"{settings['file']}.jsonl").write_text(content)
    write_config(isolated_home, {"record_replay": settings, "default_model": "faux/echo"})

    text = recordings(isolated_home, "status")
    assert text.returncode == 1
    assert reason in text.stdout
    assert "BLOCKED" in text.stdout and "openprogram recordings off" in text.stdout

    report = json.loads(recordings(isolated_home, "status", "--json").stdout)
    assert report["blocked"] is True and report["problem"] == problem
    assert reason in report["reason"] and "openprogram recordings off" in report["fix"]

    off = recordings(isolated_home, "off")
    assert off.returncode == 0, off.stderr
    assert "takes effect at the next start" in off.stdout
    config = read_config(isolated_home)
    assert config["record_replay"]["mode"] == "off"
    assert config["record_replay"].get("file") == settings.get("file")  # the last selector is kept
    assert config["default_model"] == "faux/echo"  # nothing else touched

    after = recordings(isolated_home, "status", "--json")
    assert after.returncode == 0
    assert json.loads(after.stdout)["blocked"] is False


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_status_diagnoses_an_unreadable_replay_file(isolated_home):
    path = make_recording(folder_of(isolated_home) / "locked.jsonl")
    path.chmod(0)
    write_config(isolated_home, {"record_replay": {"mode": "replay", "file": "locked"}})
    report = json.loads(recordings(isolated_home, "status", "--json").stdout)
    assert report["problem"] == "unreadable_file" and "cannot read" in report["reason"]
    assert f"chmod 600 {path}" in report["fix"]


def test_status_reports_a_usable_configuration(isolated_home):
    path = make_recording(folder_of(isolated_home) / "good.jsonl", prompts=("a", "b"))
    write_config(isolated_home, {"record_replay": {"mode": "replay", "file": "good"}})
    result = recordings(isolated_home, "status", "--json")
    assert result.returncode == 0
    assert json.loads(result.stdout) == {
        "schema_version": 1,
        "config_path": str(isolated_home / "config.json"),
        "mode": "replay",
        "selector": "good",
        "managed_id": "good",
        "path": str(path),
        "file_usable": True,
        "blocked": False,
        "problem": None,
        "reason": None,
        "fix": [],
        "calls": 2,
        "events": json.loads(recordings(isolated_home, "show", "good", "--json").stdout)[
            "event_count"
        ],
        "warning": None,
        "project": {"path": None, "passed_by": [], "problem": None},
    }
    text = recordings(isolated_home, "status").stdout
    assert "mode      replay" in text and str(path) in text and "usable: 2 calls" in text


def test_status_with_no_configuration_is_off_and_creates_nothing(isolated_home):
    result = recordings(isolated_home, "status")
    assert result.returncode == 0
    assert "mode      off" in result.stdout
    assert list(isolated_home.iterdir()) == []


# ============================================================================ record


def test_record_creates_a_header_only_private_file_and_the_configuration(isolated_home):
    result = recordings(isolated_home, "record", "--name", "demo")
    assert result.returncode == 0, result.stderr
    assert "takes effect at the next start" in result.stdout
    path = isolated_home / "recordings" / "demo.jsonl"
    assert path.stat().st_mode & 0o777 == 0o600
    assert (isolated_home / "recordings").stat().st_mode & 0o777 == 0o700
    lines = path.read_text().splitlines()
    assert len(lines) == 1
    header = json.loads(lines[0])
    assert header["type"] == "header" and header["format_version"] == 2
    assert read_config(isolated_home)["record_replay"] == {"mode": "record", "file": "demo"}
    assert recordings(isolated_home, "status").returncode == 0


def test_record_refuses_to_overwrite_and_changes_nothing(isolated_home):
    assert recordings(isolated_home, "record", "--name", "demo").returncode == 0
    assert recordings(isolated_home, "off").returncode == 0
    path = isolated_home / "recordings" / "demo.jsonl"
    before_file, before_config = path.read_bytes(), (isolated_home / "config.json").read_bytes()

    again = recordings(isolated_home, "record", "--name", "demo")
    assert again.returncode == 1
    assert f"recording file {path}: already exists" in again.stderr
    assert path.read_bytes() == before_file
    assert (isolated_home / "config.json").read_bytes() == before_config


def test_record_never_writes_through_a_symlink(isolated_home, tmp_path):
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("precious\n")
    (folder_of(isolated_home) / "demo.jsonl").symlink_to(target)
    result = recordings(isolated_home, "record", "--name", "demo")
    assert result.returncode == 1 and "already exists" in result.stderr
    assert target.read_text() == "precious\n"
    assert not (isolated_home / "config.json").exists()


def test_record_without_a_name_generates_an_id(isolated_home):
    result = recordings(isolated_home, "record")
    assert result.returncode == 0, result.stderr
    recording_id = read_config(isolated_home)["record_replay"]["file"]
    assert re.fullmatch(r"rec-\d{8}-\d{6}(-\d+)?", recording_id)
    assert (isolated_home / "recordings" / f"{recording_id}.jsonl").is_file()


def test_record_with_an_invalid_name_is_a_usage_error(isolated_home):
    result = recordings(isolated_home, "record", "--name", "no spaces please")
    assert result.returncode == 2
    assert "invalid recording ID 'no spaces please'" in result.stderr
    assert list(isolated_home.iterdir()) == []


def test_record_leaves_neither_file_nor_configuration_when_the_transaction_fails(
    isolated_home, tmp_path
):
    # config.json is a symlink: it reads fine, but the atomic write refuses to go through it,
    # after the recording file was already created inside the transaction.
    real = tmp_path / "real-config.json"
    real.write_text('{"default_model": "faux/echo"}')
    (isolated_home / "config.json").symlink_to(real)
    result = recordings(isolated_home, "record", "--name", "demo")
    assert result.returncode == 1
    assert "symbolic link" in result.stderr and "nothing was changed" in result.stderr
    assert not (isolated_home / "recordings" / "demo.jsonl").exists()
    assert not (isolated_home / "recordings").exists()
    assert real.read_text() == '{"default_model": "faux/echo"}'


# ============================================================================ replay / off


def test_replay_validates_before_changing_anything(isolated_home):
    folder = folder_of(isolated_home)
    (folder / "corrupt.jsonl").write_text(CORRUPT)
    before = write_config(isolated_home, {"record_replay": {"mode": "off", "file": "old"}})

    corrupt = recordings(isolated_home, "replay", "corrupt")
    assert corrupt.returncode == 1
    assert f"recording file {folder / 'corrupt.jsonl'} at line 2" in corrupt.stderr
    assert "nothing was changed" in corrupt.stderr
    missing = recordings(isolated_home, "replay", "nope")
    assert missing.returncode == 1 and f"{folder / 'nope.jsonl'}: does not exist" in missing.stderr
    bad_id = recordings(isolated_home, "replay", "-dash-first")
    assert bad_id.returncode == 2
    assert (isolated_home / "config.json").read_bytes() == before


def test_replay_selects_a_managed_id_or_an_absolute_path(isolated_home, tmp_path):
    make_recording(folder_of(isolated_home) / "good.jsonl")
    result = recordings(isolated_home, "replay", "good")
    assert result.returncode == 0, result.stderr
    assert "1 calls" in result.stdout and "takes effect at the next start" in result.stdout
    assert read_config(isolated_home)["record_replay"] == {"mode": "replay", "file": "good"}

    outside = make_recording(tmp_path / "outside.jsonl")
    relative = recordings(isolated_home, "replay", "./outside.jsonl", cwd=tmp_path)
    assert relative.returncode == 0, relative.stderr
    assert read_config(isolated_home)["record_replay"]["file"] == str(outside)
    assert recordings(isolated_home, "status").returncode == 0


def test_off_keeps_the_last_selector_and_is_idempotent(isolated_home):
    make_recording(folder_of(isolated_home) / "good.jsonl")
    assert recordings(isolated_home, "replay", "good").returncode == 0
    first = recordings(isolated_home, "off")
    assert (
        "now off (was replay)" in first.stdout and "record_replay.file=good is kept" in first.stdout
    )
    second = recordings(isolated_home, "off")
    assert second.returncode == 0 and "already off" in second.stdout
    assert read_config(isolated_home)["record_replay"] == {"mode": "off", "file": "good"}


# ============================================================================ list / show


@pytest.fixture
def mixed_folder(isolated_home, tmp_path):
    """valid, corrupt, active, symlinked, old, badly named and a non-recording file."""
    folder = folder_of(isolated_home)
    make_recording(
        folder / "valid.jsonl", prompts=(PROMPT_MARKER, "second"), error="boom: the vendor said no"
    )
    (folder / "corrupt.jsonl").write_text(CORRUPT)
    make_recording(folder / "active.jsonl")
    make_recording(folder / "old.jsonl")
    make_recording(tmp_path / "target.jsonl")
    (folder / "link.jsonl").symlink_to(tmp_path / "target.jsonl")
    (folder / "notes.txt").write_text("not a recording")
    ten_days_ago = time.time() - 10 * DAY
    os.utime(folder / "old.jsonl", (ten_days_ago, ten_days_ago))
    write_config(isolated_home, {"record_replay": {"mode": "replay", "file": "active"}})
    return folder


def test_list_shows_every_recording_with_its_state_and_never_its_content(
    isolated_home, mixed_folder
):
    result = recordings(isolated_home, "list")
    assert result.returncode == 0, result.stderr
    assert PROMPT_MARKER not in result.stdout and "boom" not in result.stdout
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["ID", "STATE", "CALLS", "EVENTS", "SIZE", "AGE", "NOTE"]
    rows = {
        line.split()[1] if line.startswith("*") else line.split()[0]: line for line in lines[1:-1]
    }
    assert set(rows) == {"active", "corrupt", "link", "old", "valid"}
    assert rows["active"].startswith("*")
    assert "invalid" in rows["corrupt"] and "line 2" in rows["corrupt"]
    assert "symlink" in rows["link"]
    assert re.search(r"valid\s+3\s+\d+\s+[\d.]+ KiB\s+\d+[smh]", rows["valid"])
    assert re.search(r"\s10d\b", rows["old"])
    assert lines[-1] == "(* = the active recording)"
    # columns are aligned: every row's STATE starts where the header's does
    column = lines[0].index("STATE")
    assert all(line[column - 1] == " " and line[column] != " " for line in lines[1:-1])


def test_list_json_schema(isolated_home, mixed_folder):
    result = recordings(isolated_home, "list", "--json")
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert PROMPT_MARKER not in result.stdout
    assert set(data) == {"schema_version", "folder", "mode", "selector", "recordings"}
    assert data["schema_version"] == 1 and data["mode"] == "replay" and data["selector"] == "active"
    by_id = {entry["id"]: entry for entry in data["recordings"]}
    assert set(by_id) == {"active", "corrupt", "link", "old", "valid"}
    assert set(by_id["valid"]) == {
        "id",
        "path",
        "managed",
        "active",
        "state",
        "reason",
        "size_bytes",
        "modified_at",
        "age_seconds",
        "calls",
        "events",
    }
    assert by_id["valid"]["state"] == "valid" and by_id["valid"]["calls"] == 3
    assert by_id["active"]["active"] is True and sum(e["active"] for e in data["recordings"]) == 1
    assert by_id["corrupt"]["state"] == "invalid" and by_id["corrupt"]["calls"] is None
    assert "the last line is incomplete" in by_id["corrupt"]["reason"]
    assert by_id["link"]["state"] == "symlink"
    assert by_id["old"]["age_seconds"] >= 10 * DAY - 60
    assert by_id["old"]["modified_at"].endswith("Z")


def test_list_marks_a_recording_being_written(isolated_home):
    path = make_recording(folder_of(isolated_home) / "busy.jsonl")
    with writer_holding(path):
        busy = json.loads(recordings(isolated_home, "list", "--json").stdout)["recordings"]
    assert [entry["state"] for entry in busy] == ["recording"]
    idle = json.loads(recordings(isolated_home, "list", "--json").stdout)["recordings"]
    assert [entry["state"] for entry in idle] == ["valid"]


def test_list_of_an_empty_or_missing_folder(isolated_home):
    result = recordings(isolated_home, "list")
    assert result.returncode == 0 and "no recordings in" in result.stdout
    assert json.loads(recordings(isolated_home, "list", "--json").stdout)["recordings"] == []


def test_list_includes_an_active_replay_file_outside_the_folder(isolated_home, tmp_path):
    outside = make_recording(tmp_path / "outside.jsonl")
    write_config(isolated_home, {"record_replay": {"mode": "replay", "file": str(outside)}})
    entries = json.loads(recordings(isolated_home, "list", "--json").stdout)["recordings"]
    assert entries == [
        {
            **entries[0],
            "id": None,
            "path": str(outside),
            "managed": False,
            "active": True,
            "state": "valid",
        }
    ]


def test_show_describes_calls_without_content(isolated_home, mixed_folder):
    result = recordings(isolated_home, "show", "valid")
    assert result.returncode == 0, result.stderr
    assert PROMPT_MARKER not in result.stdout and "second" not in result.stdout
    lines = result.stdout.splitlines()
    table_start = next(i for i, line in enumerate(lines) if line.startswith("CALL"))
    assert lines[table_start].split() == [
        "CALL",
        "API",
        "PROVIDER",
        "MODEL",
        "EVENTS",
        "OUTCOME",
        "FIRST",
        "DURATION",
        "TOKENS",
        "COST",
        "ERROR",
    ]
    calls = lines[table_start + 1 :]
    assert len(calls) == 3
    assert calls[0].split()[:4] == ["0", "faux", "faux", "echo"]
    assert re.search(r"complete\s+\d+ ms\s+\d+ ms\s+\d+ in / \d+ out\s+\$0\.000000", calls[0])
    assert re.search(
        r"^usage      \d+ in / 0 cache read / \d+ out, \$0\.000000 \(what a replay does not pay\)$",
        result.stdout,
        re.M,
    )
    assert calls[2].endswith("boom: the vendor said no")

    data = json.loads(recordings(isolated_home, "show", "valid", "--json").stdout)
    assert data["call_count"] == 3 and data["id"] == "valid" and data["active"] is False
    assert data["event_count"] == sum(call["event_count"] for call in data["calls"])
    first = data["calls"][0]
    assert set(first) == {
        "call_index",
        "api",
        "provider",
        "model",
        "event_count",
        "outcome",
        "usage",
        "error_message",
        "first_event_ms",
        "duration_ms",
        "session",
        "lane",
        "redactions",
        "response_id",
        "response_model",
        "replays_from",
        "cost",
        "answer_withheld",
    }
    assert type(first["first_event_ms"]) is int and first["duration_ms"] >= first["first_event_ms"]
    assert set(first["usage"]) == {
        "input",
        "output",
        "reasoning",
        "cache_read",
        "cache_write",
        "total_tokens",
    }
    assert (first["replays_from"], first["answer_withheld"]) == (
        None,
        None,
    )  # not recorded through the proxy
    assert data["calls"][2]["error_message"] == "boom: the vendor said no"
    assert first["error_message"] is None
    assert first["redactions"] == []  # nothing in the answers was a secret


def test_show_content_warns_then_prints_the_redacted_jsonl(isolated_home, mixed_folder):
    result = recordings(isolated_home, "show", "valid", "--content")
    assert result.returncode == 0
    assert "recordings hold prompts" in result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows[0]["type"] == "header"
    assert PROMPT_MARKER in result.stdout

    as_json = json.loads(recordings(isolated_home, "show", "valid", "--json", "--content").stdout)
    assert as_json["content"] == rows


def test_show_content_redacts_a_secret_in_a_hand_made_file(isolated_home):
    folder = folder_of(isolated_home)
    path = make_recording(folder / "copied.jsonl")
    lines = path.read_text().splitlines()
    request = json.loads(lines[1])
    request["options"] = {"headers": {"Authorization": "Bearer abcdef123456789"}}
    lines[1] = json.dumps(request)
    path.write_text("\n".join(lines) + "\n")
    result = recordings(isolated_home, "show", "copied", "--content")
    assert result.returncode == 0, result.stderr
    assert "abcdef123456789" not in result.stdout and "[secret removed]" in result.stdout


def test_show_of_a_corrupt_or_missing_file_names_it(isolated_home, mixed_folder):
    corrupt = recordings(isolated_home, "show", "corrupt")
    assert corrupt.returncode == 1
    assert f"recording file {mixed_folder / 'corrupt.jsonl'} at line 2" in corrupt.stderr
    missing = recordings(isolated_home, "show", "nope", "--json")
    assert missing.returncode == 1 and missing.stdout == ""
    assert f"{mixed_folder / 'nope.jsonl'}: does not exist" in missing.stderr


# ============================================================================ delete


def test_delete_needs_yes_without_a_terminal(isolated_home, mixed_folder):
    result = recordings(isolated_home, "delete", "valid")
    assert result.returncode == 2
    assert "stdin is not a terminal; add --yes" in result.stderr
    assert (mixed_folder / "valid.jsonl").exists()
    done = recordings(isolated_home, "delete", "valid", "--yes")
    assert done.returncode == 0, done.stderr
    assert not (mixed_folder / "valid.jsonl").exists()


@pytest.mark.parametrize(
    ("target", "code", "message"),
    [
        ("active", 1, "is the active recording; run 'openprogram recordings off'"),
        ("link", 1, "is a symbolic link; refusing to delete it"),
        ("nope", 1, "nope.jsonl: does not exist"),
        ("../escape", 2, "is a path; delete acts only on managed recordings"),
        ("bad id", 2, "invalid recording ID"),
    ],
)
def test_delete_refuses(isolated_home, mixed_folder, tmp_path, target, code, message):
    before = sorted(p.name for p in mixed_folder.iterdir())
    result = recordings(isolated_home, "delete", target, "--yes")
    assert result.returncode == code
    assert message in result.stderr
    assert sorted(p.name for p in mixed_folder.iterdir()) == before
    assert (tmp_path / "target.jsonl").exists()


def test_delete_refuses_a_recording_being_written_until_its_writer_exits(isolated_home):
    path = make_recording(folder_of(isolated_home) / "busy.jsonl")
    with writer_holding(path):
        refused = recordings(isolated_home, "delete", "busy", "--yes")
    assert refused.returncode == 1
    assert f"recording file {path}: is being recorded into by a running process" in refused.stderr
    assert path.exists()
    assert recordings(isolated_home, "delete", "busy", "--yes").returncode == 0
    assert not path.exists()


def run_on_terminal(home: Path, args: list[str], typed: str) -> subprocess.CompletedProcess:
    """Run with a pseudo-terminal as stdin and ``typed`` already waiting in it."""
    master, slave = os.openpty()
    try:
        os.write(master, typed.encode())
        process = subprocess.Popen(
            [PYTHON, "-m", "openprogram", *args],
            env=cli_env(home),
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(slave)
        slave = -1
        stdout, stderr = process.communicate(timeout=120)
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


@pytest.mark.skipif(sys.platform != "linux", reason="pseudo-terminal behaviour checked on Linux")
def test_delete_on_a_terminal_asks_for_the_id(isolated_home, mixed_folder):
    wrong = run_on_terminal(isolated_home, ["recordings", "delete", "valid"], "yes\n")
    assert wrong.returncode == 2
    assert "type its ID to confirm" in wrong.stderr and "not confirmed" in wrong.stderr
    assert (mixed_folder / "valid.jsonl").exists()
    right = run_on_terminal(isolated_home, ["recordings", "delete", "valid"], "valid\n")
    assert right.returncode == 0, right.stderr
    assert not (mixed_folder / "valid.jsonl").exists()


# ============================================================================ prune


@pytest.fixture
def aged_folder(mixed_folder, isolated_home):
    """Everything in the mixed folder made 10 days old, except ``valid``."""
    ten_days_ago = time.time() - 10 * DAY
    for name in ("corrupt.jsonl", "active.jsonl", "old.jsonl"):
        os.utime(mixed_folder / name, (ten_days_ago, ten_days_ago))
    os.utime(mixed_folder / "link.jsonl", (ten_days_ago, ten_days_ago), follow_symlinks=False)
    return mixed_folder


def test_prune_dry_run_lists_and_deletes_nothing(isolated_home, aged_folder):
    before = sorted(p.name for p in aged_folder.iterdir())
    result = recordings(isolated_home, "prune", "--older-than-days", "7", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "would delete 2 recording(s)" in result.stdout
    assert re.search(r"^  corrupt\b", result.stdout, re.M) and re.search(
        r"^  old\b", result.stdout, re.M
    )
    assert "is the active recording" in result.stderr and "symbolic link" in result.stderr
    assert sorted(p.name for p in aged_folder.iterdir()) == before


def test_prune_needs_yes_and_then_deletes_only_old_deletable_recordings(
    isolated_home, aged_folder, tmp_path
):
    before = sorted(p.name for p in aged_folder.iterdir())
    refused = recordings(isolated_home, "prune", "--older-than-days", "7")
    assert refused.returncode == 2 and "add --yes" in refused.stderr
    assert sorted(p.name for p in aged_folder.iterdir()) == before

    done = recordings(isolated_home, "prune", "--older-than-days", "7", "--yes")
    assert done.returncode == 0, done.stderr
    assert "deleted 2 recording(s)" in done.stdout
    assert sorted(p.name for p in aged_folder.iterdir()) == [
        "active.jsonl",
        "link.jsonl",
        "notes.txt",
        "valid.jsonl",
    ]
    assert (tmp_path / "target.jsonl").exists()


def test_prune_skips_a_recording_being_written(isolated_home):
    path = make_recording(folder_of(isolated_home) / "busy.jsonl")
    os.utime(path, (time.time() - 30 * DAY,) * 2)
    with writer_holding(path):
        result = recordings(isolated_home, "prune", "--older-than-days", "1", "--yes")
    assert result.returncode == 0
    assert "nothing to prune" in result.stdout and "being recorded into" in result.stderr
    assert path.exists()


def test_prune_with_nothing_old(isolated_home, mixed_folder):
    os.utime(mixed_folder / "old.jsonl")  # now
    result = recordings(isolated_home, "prune", "--older-than-days", "7")
    assert result.returncode == 0 and "nothing to prune" in result.stdout


# ============================================================================ usage errors


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["bogus"],
        ["prune"],
        ["prune", "--older-than-days", "-1"],
        ["prune", "--older-than-days", "soon"],
        ["show"],
        ["delete"],
        ["replay"],
    ],
)
def test_usage_errors_exit_2(isolated_home, args):
    result = recordings(isolated_home, *args)
    assert result.returncode == 2
    assert "usage:" in result.stderr


def test_a_broken_config_file_is_named_without_a_traceback(isolated_home):
    (isolated_home / "config.json").write_text("{not json")
    for args in (["status"], ["off"], ["list"]):
        result = recordings(isolated_home, *args)
        assert result.returncode == 1
        assert (
            str(isolated_home / "config.json") in result.stderr
            and "not valid JSON" in result.stderr
        )


# ============================================================================ light start


def test_recordings_commands_import_no_vendor_sdk_and_never_initialise_the_runtime(isolated_home):
    make_recording(folder_of(isolated_home) / "good.jsonl")
    (folder_of(isolated_home) / "corrupt.jsonl").write_text(CORRUPT)
    write_config(isolated_home, {"record_replay": {"mode": "replay", "file": "good"}})
    script = textwrap.dedent(
        """
        import contextlib, io, json, sys
        from openprogram.cli.main import main
        codes = {}
        for args in (["status"], ["list"], ["show", "good"], ["show", "good", "--json"],
                     ["replay", "good"], ["off"], ["record", "--name", "fresh"], ["status"]):
            with contextlib.redirect_stdout(io.StringIO()):
                codes[" ".join(args)] = main(["recordings", *args])
        vendors = sorted(name for name in sys.modules
                         if name.split(".")[0] in ("openai", "anthropic", "httpx", "google"))
        runtime = sys.modules.get("openprogram.providers.initialization")
        state = runtime.runtime_state() if runtime else "not imported"
        print(json.dumps({"codes": codes, "vendors": vendors, "state": state}))
        """
    )
    result = subprocess.run(
        [PYTHON, "-c", script],
        env=cli_env(isolated_home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(report["codes"].values()) == {0}
    assert report["vendors"] == []
    assert report["state"] in ("NEW", "not imported")


def test_status_in_off_mode_does_not_even_import_pydantic(isolated_home):
    script = (
        "import sys, contextlib, io\n"
        "from openprogram.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['recordings', 'status']) == 0\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'openai', 'anthropic', 'httpx')))\n"
    )
    result = subprocess.run(
        [PYTHON, "-c", script],
        env=cli_env(isolated_home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# ============================================================================ liveness


def test_liveness_lock_follows_the_writer_process(tmp_path):
    from openprogram.recordings.file.writer_lock import is_being_recorded

    path = make_recording(tmp_path / "r.jsonl")
    assert is_being_recorded(path) is False
    with writer_holding(path) as writer:
        assert is_being_recorded(path) is True
    assert writer.returncode == 0
    assert is_being_recorded(path) is False
    assert is_being_recorded(tmp_path / "missing.jsonl") is False


def test_liveness_lock_in_process_survives_other_descriptors_and_flock(tmp_path):
    import fcntl

    from openprogram.recordings.file.writer_lock import (
        hold_writer_lock,
        is_being_recorded,
        release_writer_lock,
    )

    path = tmp_path / "r.jsonl"
    path.write_text("x\n")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)  # the sink's kind of descriptor
    try:
        hold_writer_lock(fd)
        fcntl.flock(fd, fcntl.LOCK_EX)  # the sink's write lock does not interact
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(os.open(path, os.O_RDONLY))  # closing another descriptor keeps the mark
        assert is_being_recorded(path) is True
        release_writer_lock(fd)
        assert is_being_recorded(path) is False
    finally:
        os.close(fd)
    readable = os.open(path, os.O_RDWR | os.O_APPEND)
    hold_writer_lock(readable)
    assert is_being_recorded(path) is True
    os.close(readable)  # the mark goes with the descriptor
    assert is_being_recorded(path) is False


def test_liveness_never_follows_a_symlink(tmp_path):
    from openprogram.recordings.file.writer_lock import is_being_recorded

    path = make_recording(tmp_path / "r.jsonl")
    link = tmp_path / "link.jsonl"
    link.symlink_to(path)
    with writer_holding(path):
        assert is_being_recorded(path) is True
        assert is_being_recorded(link) is False
