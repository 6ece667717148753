"""Hostile and careless files and folders get a clear refusal (issue #12).

A FIFO, ``/dev/zero``, a folder or a symbolic link where a recording, ``config.json``, the
lock file, the state folder or the recordings folder should be: every reader and command
refuses it with one line naming it and the fix, never hangs, never reads without bound, never
prints a traceback, and never touches anything outside the state folder. Every read that could
hang if the bug came back runs in a subprocess with a timeout or in a thread with a deadline,
so a regression fails the test instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from tests.cli.test_recordings_cli import folder_of, make_recording, write_config
from tests.conftest import PYTHON, cli_env

#: Generous for a loaded machine; a reader blocked on a FIFO never finishes at all.
DEADLINE = 60
SECRET = "sk-HANDEDITEDsecret0123456789abcdef"


def run_cli(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``openprogram ARGS`` with a deadline: a hang is a failure, not a stuck suite."""
    result = subprocess.run(
        [PYTHON, "-m", "openprogram", *args],
        env=cli_env(home),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        timeout=DEADLINE,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def one_line_error(result: subprocess.CompletedProcess, *needles: str) -> str:
    """The failure is exactly one stderr line starting ``openprogram:`` that names each needle."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("openprogram: "), result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def finishes(function, fifo: Path | None = None):
    """Run ``function`` in a thread with a deadline and return what it returned or raised.
    If it hangs on ``fifo``, opening the FIFO's other end releases the thread before failing."""
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["value"] = function()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(DEADLINE)
    if thread.is_alive():
        if fifo is not None:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"{function} did not finish within {DEADLINE} s")
    return outcome


def a_fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


# ============================================================================ library readers


def _read_file(path):
    from openprogram.recordings.file.reader import read_recording_file

    return read_recording_file(path)


def _replay_provider(path):
    from openprogram.providers.replay import ReplayProvider

    return ReplayProvider(path)


def _recording_sink(path):
    from openprogram.recordings.file.sink import RecordingSink

    return RecordingSink(path)


@pytest.mark.parametrize("opener", [_read_file, _replay_provider, _recording_sink])
def test_every_opener_of_a_recording_refuses_a_fifo_without_blocking(tmp_path, opener):
    from openprogram.recordings.file.format import RecordingFileError

    fifo = a_fifo(tmp_path / "pipe.jsonl")
    outcome = finishes(lambda: opener(fifo), fifo)
    error = outcome.get("error")
    assert isinstance(error, RecordingFileError), outcome
    assert error.kind == "not_a_file"
    assert str(fifo) in str(error) and "not a regular file" in str(error)


def test_dev_zero_behind_a_symlinked_managed_id_is_refused_before_reading(isolated_home):
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.file.reader import read_recording_file

    link = folder_of(isolated_home) / "zero.jsonl"
    link.symlink_to("/dev/zero")
    outcome = finishes(lambda: read_recording_file(link))
    assert isinstance(outcome.get("error"), RecordingFileError), outcome
    assert outcome["error"].kind == "not_a_file"


def test_reader_refuses_a_folder_and_a_recording_above_the_limit(tmp_path, monkeypatch):
    from openprogram.recordings.file import reader
    from openprogram.recordings.file.format import RecordingFileError

    with pytest.raises(RecordingFileError) as folder:
        reader.read_recording_file(tmp_path)
    assert folder.value.kind == "not_a_file" and "is a folder" in str(folder.value)

    big = make_recording(tmp_path / "big.jsonl")
    monkeypatch.setattr(reader, "MAX_RECORDING_BYTES", big.stat().st_size - 1)
    with pytest.raises(RecordingFileError) as too_large:
        reader.read_recording_file(big)
    assert str(big) in str(too_large.value) and "above the limit" in str(too_large.value)


def test_read_regular_file_reads_no_more_than_its_limit(tmp_path):
    """The bound holds even when the file grows past what ``fstat`` said (read counted, not
    timed): a 10-byte limit on a growing file never returns more than 10 bytes."""
    from openprogram.state import FileRefusal, read_regular_file

    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    assert read_regular_file(path, 10) == b"x" * 10
    path.write_bytes(b"x" * 11)
    with pytest.raises(FileRefusal) as refused:
        read_regular_file(path, 10)
    assert refused.value.kind == "too_large"


def test_load_config_refuses_a_fifo_without_blocking(isolated_home):
    from openprogram.state import ConfigError, load_config

    fifo = a_fifo(isolated_home / "config.json")
    outcome = finishes(load_config, fifo)
    error = outcome.get("error")
    assert isinstance(error, ConfigError), outcome
    assert str(fifo) in str(error) and "not a regular file" in str(error)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "is a folder"),
        (b"{", "is not valid JSON"),
        (b"[1, 2]", "must hold a JSON object, not list"),
        (b" " * (1024 * 1024 + 1), "above the limit"),
    ],
)
def test_load_config_names_the_file_and_the_fix(isolated_home, content, expected):
    from openprogram.state import ConfigError, load_config

    path = isolated_home / "config.json"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(ConfigError) as refused:
        load_config()
    message = str(refused.value)
    assert str(path) in message and expected in message
    if content is not None and expected != "above the limit":
        assert "move it away" in message


# ============================================================================ the CLI: FIFOs


def test_cli_readers_refuse_a_fifo_recording(isolated_home):
    fifo = a_fifo(folder_of(isolated_home) / "pipe.jsonl")
    good = make_recording(folder_of(isolated_home) / "good.jsonl")
    for args, code in (
        (("recordings", "show", "pipe"), 1),
        (("recordings", "show", "pipe", "--conversation"), 1),
        (("recordings", "diff", "pipe", "good"), 2),
        (("recordings", "replay", "pipe"), 1),
    ):
        result = run_cli(isolated_home, *args)
        assert result.returncode == code, (args, result.stderr)
        one_line_error(result, str(fifo), "not a regular file")
    assert not (isolated_home / "config.json").exists()  # replay refused: nothing was changed
    assert good.exists()


def test_status_and_run_refuse_a_fifo_selected_for_replay(isolated_home):
    fifo = a_fifo(folder_of(isolated_home) / "pipe.jsonl")
    write_config(isolated_home, {"record_replay": {"mode": "replay", "file": "pipe"}})
    status = run_cli(isolated_home, "recordings", "status", "--json")
    assert status.returncode == 1
    plan = json.loads(status.stdout)
    assert plan["problem"] == "not_a_file" and str(fifo) in plan["reason"]
    run = run_cli(isolated_home, "run", "--model", "faux/echo", "hello")
    assert run.returncode != 0
    assert "not a regular file" in run.stderr and str(fifo) in run.stderr


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("recordings", "status"), 1),
        (("recordings", "show", "good"), 1),
        (("recordings", "replay", "good"), 1),
        (("recordings", "off"), 1),
        (("recordings", "record", "--name", "new"), 1),
        (("config", "set", "run.max_turns", "3"), 2),
        (("run", "--model", "faux/echo", "hello"), 1),
    ],
)
def test_a_fifo_as_config_json_is_refused_by_every_command(isolated_home, args, code):
    make_recording(folder_of(isolated_home) / "good.jsonl")
    fifo = a_fifo(isolated_home / "config.json")
    result = run_cli(isolated_home, *args)
    assert result.returncode == code, result.stderr
    one_line_error(result, str(fifo), "not a regular file", "move it away")
    assert not (folder_of(isolated_home) / "new.jsonl").exists()


def test_pytest_plugin_refuses_a_fifo_recording(pytester):
    from tests.plugin.test_pytest_plugin import INNER_CONFTEST, INNER_TEST, recording_file

    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_agent_suite=INNER_TEST)
    a_fifo(recording_file(pytester, "direct"))
    result = pytester.runpytest_subprocess(
        "-q", "test_agent_suite.py::test_sync_facade_call", timeout=DEADLINE
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*not a regular file*"])


def test_show_of_dev_zero_behind_a_symlinked_managed_id_is_refused(isolated_home):
    (folder_of(isolated_home) / "zero.jsonl").symlink_to("/dev/zero")
    result = run_cli(isolated_home, "recordings", "show", "zero")
    assert result.returncode == 1
    one_line_error(result, "zero.jsonl", "not a regular file")


# ============================================================================ the CLI: folders


def test_a_symlinked_recordings_folder_is_refused_and_its_target_survives(isolated_home, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = make_recording(elsewhere / "victim.jsonl")
    os.utime(victim, (0, 0))  # old enough for any prune
    (isolated_home / "recordings").symlink_to(elsewhere)
    for args in (
        ("recordings", "prune", "--older-than-days", "0", "--yes"),
        ("recordings", "delete", "victim", "--yes"),
        ("recordings", "record", "--name", "new"),
    ):
        result = run_cli(isolated_home, *args)
        assert result.returncode == 1, (args, result.stderr)
        one_line_error(result, str(isolated_home / "recordings"), "symbolic link", "real folder")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["victim.jsonl"]
    assert not (isolated_home / "config.json").exists()


#: Commands that change the configuration, with the exit code of a refusal.
CHANGING_COMMANDS = [
    (("recordings", "record", "--name", "a"), 1),
    (("recordings", "off"), 1),
    (("config", "set", "run.max_turns", "3"), 2),
]


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_recordings_folder_of_another_user_is_refused(isolated_home):
    folder = folder_of(isolated_home)
    kept = make_recording(folder / "kept.jsonl")
    os.utime(kept, (0, 0))
    os.chown(folder, 65534, 65534)
    result = run_cli(isolated_home, "recordings", "prune", "--older-than-days", "0", "--yes")
    assert result.returncode == 1
    one_line_error(result, str(folder), "belongs to user id 65534")
    assert kept.exists()


@pytest.mark.parametrize("layout", ["home_is_a_file", "parent_is_a_file"])
@pytest.mark.parametrize(("args", "code"), [*CHANGING_COMMANDS, (("recordings", "status"), 1)])
def test_a_home_that_is_not_a_folder_is_one_line(tmp_path, layout, args, code):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    home = blocker if layout == "home_is_a_file" else blocker / "home"
    result = run_cli(home, *args)
    assert result.returncode == code, result.stderr
    one_line_error(result, str(blocker), "is a file, not a folder")
    assert blocker.read_text() == "not a folder"


@pytest.mark.parametrize("kind", ["symlink", "folder"])
@pytest.mark.parametrize(("args", "code"), CHANGING_COMMANDS)
def test_a_lock_file_that_is_not_a_file_is_one_line_and_nothing_changes(
    isolated_home, tmp_path, kind, args, code
):
    lock = isolated_home / ".config.lock"
    target = tmp_path / "target"
    if kind == "symlink":
        lock.symlink_to(target)
    else:
        lock.mkdir()
    before = write_config(isolated_home, {"run": {"max_turns": 7}})
    result = run_cli(isolated_home, *args)
    assert result.returncode == code, result.stderr
    one_line_error(result, str(lock), "remove it")
    assert (isolated_home / "config.json").read_bytes() == before
    assert not target.exists()
    assert not (isolated_home / "recordings" / "a.jsonl").exists()


# ============================================================================ escapes and redaction


ESC_MODEL = "echo\x1b]0;pwned\x07\x1b[2J\x9b31m"


def _edit_requests(path: Path, old: str, new: str) -> None:
    """Hand-edit the request lines of a recording (the events stay consistent)."""
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(
        "".join(
            line.replace(old, new) if line.startswith('{"type":"request"') else line
            for line in lines
        )
    )


def test_terminal_output_escapes_control_characters_from_files_and_names(isolated_home):
    folder = folder_of(isolated_home)
    hostile = make_recording(folder / "hostile.jsonl", error="boom \x1b[31mred")
    _edit_requests(hostile, '"id":"echo"', json.dumps({"id": ESC_MODEL})[1:-1])
    make_recording(folder / "plain.jsonl")
    named = folder / "evil\x1b[2Jname.jsonl"
    named.write_text("not json\n")
    outputs = {
        "list": run_cli(isolated_home, "recordings", "list"),
        "show": run_cli(isolated_home, "recordings", "show", "hostile"),
        "conversation": run_cli(isolated_home, "recordings", "show", "hostile", "--conversation"),
        "diff": run_cli(isolated_home, "recordings", "diff", "hostile", "plain"),
        "error": run_cli(isolated_home, "recordings", "show", str(named)),
    }
    for name, result in outputs.items():
        text = result.stdout + result.stderr
        for raw in ("\x1b", "\x07", "\x9b"):
            assert raw not in text, (name, text)
    assert "\\x1b" in outputs["show"].stdout and "\\x9b" in outputs["show"].stdout
    assert "\\x1b[2J" in outputs["list"].stdout
    assert "\\x1b[2J" in outputs["error"].stderr
    json_show = json.loads(run_cli(isolated_home, "recordings", "show", "hostile", "--json").stdout)
    assert ESC_MODEL in {call["model"] for call in json_show["calls"]}  # JSON keeps the value


def test_every_view_redacts_a_hand_edited_secret(isolated_home):
    folder = folder_of(isolated_home)
    original = make_recording(folder / "original.jsonl", prompts=("PLACEHOLDER-PROMPT",))
    edited = folder / "edited.jsonl"
    edited.write_bytes(original.read_bytes())
    _edit_requests(edited, "PLACEHOLDER-PROMPT", f"my key is {SECRET}")
    views = [
        ("show", "edited", "--conversation"),
        ("show", "edited", "--content"),
        ("show", "edited", "--json"),
        ("diff", "original", "edited"),
        ("diff", "original", "edited", "--json"),
    ]
    for view in views:
        result = run_cli(isolated_home, "recordings", *view)
        assert result.returncode in (0, 1), (view, result.stderr)
        assert SECRET not in result.stdout + result.stderr, view
    diff = run_cli(isolated_home, "recordings", "diff", "original", "edited")
    assert "context.messages" in diff.stdout  # the difference is still shown, redacted
    conversation = run_cli(isolated_home, "recordings", "show", "edited", "--conversation")
    assert "my key is" in conversation.stdout


def test_terminal_safe_escapes_c0_del_c1_and_keeps_newlines_only_when_asked():
    from openprogram.cli.terminal import terminal_safe

    assert terminal_safe("a\x1b[2Jb\x7fc\x9bd\u202ee") == "a\\x1b[2Jb\\x7fc\\x9bd\\u202ee"
    assert terminal_safe("one\ntwo\ttab") == "one\\x0atwo\\x09tab"
    assert terminal_safe("one\ntwo\r", multiline=True) == "one\ntwo\\x0d"
    assert terminal_safe("plain text, ünïcode") == "plain text, ünïcode"


# ============================================================================ misleading messages


def test_a_number_as_record_replay_file_is_reported_as_such(isolated_home):
    write_config(isolated_home, {"record_replay": {"mode": "replay", "file": 42}})
    result = run_cli(isolated_home, "recordings", "status", "--json")
    assert result.returncode == 1
    plan = json.loads(result.stdout)
    assert plan["problem"] == "invalid_id"
    assert "not 42" in plan["reason"] and "empty" not in plan["reason"]
    text = run_cli(isolated_home, "recordings", "status").stdout
    assert "42 (not a string)" in text


def test_an_unsearchable_folder_is_not_reported_as_missing(tmp_path, monkeypatch):
    """As root, mode 000 does not stop a search: the permission error is simulated."""
    from openprogram.recordings.store import activation
    from openprogram.recordings.store.store import UNREACHABLE, absence_of

    target = tmp_path / "locked" / "r.jsonl"
    real_lstat = os.lstat

    def lstat(path, *args, **kwargs):
        if Path(path) == target:
            raise PermissionError(13, "Permission denied", str(path))
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", lstat)
    kind, reason = absence_of(target)
    assert kind == UNREACHABLE and "does not exist" not in reason and "permission denied" in reason
    plan = activation.plan_activation({"record_replay": {"mode": "replay", "file": str(target)}})
    assert plan.problem == "unreadable_file" and "cannot be reached" in plan.reason
    assert absence_of(tmp_path / "nothing-here") == ("missing", "does not exist")


def test_builtin_tools_refuses_a_string_instead_of_listing_its_letters():
    from openprogram.tools import builtin_tools

    with pytest.raises(ValueError) as refused:
        builtin_tools("calculator")
    assert "must be a list" in str(refused.value) and "c, a, l" not in str(refused.value)


def test_views_read_as_strictly_but_keep_only_the_last_event_of_each_call(tmp_path):
    """What ``show`` keeps is counted, not timed: one event row per call, however many it
    streamed; and a bad event in the middle of a call is still refused."""
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.file.reader import read_recording_file

    path = make_recording(tmp_path / "r.jsonl", prompts=("one two three four five six",) * 3)
    full = read_recording_file(path)
    summary = read_recording_file(path, summary_only=True)
    assert [c.event_count for c in summary.calls] == [c.event_count for c in full.calls]
    assert all(c.event_count > 5 for c in summary.calls)
    assert all(len(c.rows) == 1 and c.rows[0]["type"] == "done" for c in summary.calls)
    with pytest.raises(RuntimeError):
        next(summary.calls[0].events())

    lines = path.read_text().splitlines(keepends=True)
    middle = next(i for i, line in enumerate(lines) if '"text_delta"' in line)
    lines[middle] = lines[middle].replace('"text_delta"', '"text_deltaX"')
    path.write_text("".join(lines))
    with pytest.raises(RecordingFileError) as refused:
        read_recording_file(path, summary_only=True)
    assert refused.value.line_number == middle + 1


# ============================================================================ hostile version 2 files

_MODEL = {"id": "m", "api": "faux", "provider": "faux"}
_ANSWER = {"role": "assistant", "content": [], "api": "faux", "provider": "faux", "model": "m"}
_CONTEXT = {"messages": [{"role": "user", "content": "hi", "timestamp": 0}]}
_DONE = {"type": "done", "reason": "stop", "message": _ANSWER}


def _nested(levels: int) -> str:
    """JSON text of ``{"a": {"a": ... "x"}}``, ``levels`` objects deep (json.dumps would recurse)."""
    return '{"a":' * levels + '"x"' + "}" * levels


def _v2_calls(*requests: tuple[dict, list[dict] | None]) -> list[dict]:
    """Request rows (context or context_patch fields), each with its events and call_end."""
    rows: list[dict] = [{"type": "header", "format_version": 2}]
    for index, (fields, events) in enumerate(requests):
        rows.append(
            {"type": "request", "call_index": index, "model": _MODEL, "options": None, **fields}
        )
        for number, event in enumerate(events or [_DONE]):
            rows.append(
                {"type": "event", "call_index": index, "event_index": number, "event": event}
            )
        rows.append(
            {"type": "call_end", "call_index": index, "event_count": len(events or [_DONE])}
        )
    return rows


def _write_v2(path: Path, rows: list[dict], deep: dict[str, int] | None = None) -> Path:
    """Write ``rows``, each string ``"@DEEP:NAME@"`` replaced by :func:`_nested` of ``deep[NAME]``."""
    text = "".join(json.dumps(row, separators=(",", ":")) + "\n" for row in rows)
    for name, levels in (deep or {}).items():
        text = text.replace(f'"@DEEP:{name}@"', _nested(levels))
    path.write_text(text)
    return path


def _patch(base: int, *ops: list) -> dict:
    return {"context_patch": {"from": base, "ops": list(ops)}}


#: name -> (rows, deep values, the line refused, words of the reason). The first is the issue's
#: 12 KB file: a context nested 1,000 levels and a patch whose PATH walks 1,000 steps into it.
HOSTILE_V2 = {
    "thousand_step_path": (
        _v2_calls(
            ({"context": {**_CONTEXT, "d": "@DEEP:d@"}}, None),
            (_patch(0, ["set", ["d", *["a"] * 999], 1]), None),
        ),
        {"d": 1000},
        2,
        "deeper than 100 levels",
    ),
    "thousand_step_path_into_a_shallow_context": (
        _v2_calls(
            ({"context": {**_CONTEXT, "d": "@DEEP:d@"}}, None),
            (_patch(0, ["set", ["d", *["a"] * 999], 1]), None),
        ),
        {"d": 90},
        5,
        "operation 0 nests the context deeper than 100 levels",
    ),
    "too_deep_for_the_json_parser": (
        _v2_calls(({"context": {**_CONTEXT, "d": "@DEEP:d@"}}, None)),
        {"d": 1100},
        2,
        "deeper than 100 levels",
    ),
    "a_chain_of_patches_each_one_level_deeper": (
        _v2_calls(
            ({"context": {**_CONTEXT, "d": {}}}, None),
            *[(_patch(k - 1, ["set", ["d", *["a"] * (k - 1)], {}]), None) for k in range(1, 120)],
        ),
        {},
        3 * 99 + 2,
        "operation 0 nests the context deeper than 100 levels",
    ),
    "a_partial_patch_walking_1000_steps": (
        _v2_calls(
            (
                {"context": _CONTEXT},
                [
                    {
                        "type": "start",
                        "partial": {
                            **_ANSWER,
                            "content": [
                                {
                                    "type": "toolCall",
                                    "id": "c",
                                    "name": "t",
                                    "arguments": "@DEEP:d@",
                                }
                            ],
                        },
                    },
                    {
                        "type": "toolcall_delta",
                        "content_index": 0,
                        "delta": "",
                        "partial_patch": [["set", ["content", 0, "arguments", *["a"] * 999], 1]],
                    },
                    _DONE,
                ],
            )
        ),
        {"d": 90},
        4,
        "operation 0 nests the partial deeper than 100 levels",
    ),
    "a_partial_growing_deeper_event_by_event": (
        _v2_calls(
            (
                {"context": _CONTEXT},
                [
                    {
                        "type": "start",
                        "partial": {
                            **_ANSWER,
                            "content": [
                                {"type": "toolCall", "id": "c", "name": "t", "arguments": {}}
                            ],
                        },
                    },
                    *[
                        {
                            "type": "toolcall_delta",
                            "content_index": 0,
                            "delta": "",
                            "partial_patch": [["set", ["content", 0, "arguments", *["a"] * k], {}]],
                        }
                        for k in range(120)
                    ],
                    _DONE,
                ],
            )
        ),
        {},
        4 + 95,
        "operation 0 nests the partial deeper than 100 levels",
    ),
    "messages_that_are_a_string": (
        _v2_calls(({"context": {"messages": "hello"}}, None)),
        {},
        2,
        "messages: Input should be a valid list",
    ),
    "a_message_that_is_a_number": (
        _v2_calls(({"context": {"messages": [1]}}, None)),
        {},
        2,
        "messages.0:",
    ),
    "a_pushed_message_without_a_role": (
        _v2_calls(
            ({"context": _CONTEXT}, None),
            (_patch(0, ["push", ["messages"], {"content": "x"}]), None),
        ),
        {},
        5,
        "messages.1:",
    ),
    "a_role_edited_by_a_patch": (
        _v2_calls(
            ({"context": _CONTEXT}, None),
            (_patch(0, ["set", ["messages", 0, "role"], "robot"]), None),
        ),
        {},
        5,
        "messages.0:",
    ),
    "a_system_prompt_set_to_a_number": (
        _v2_calls(({"context": _CONTEXT}, None), (_patch(0, ["set", ["system_prompt"], 5]), None)),
        {},
        5,
        "system_prompt:",
    ),
    "a_pushed_tool_that_is_a_number": (
        _v2_calls(
            ({"context": {**_CONTEXT, "tools": []}}, None),
            (_patch(0, ["push", ["tools"], 1]), None),
        ),
        {},
        5,
        "tools.0:",
    ),
    "content_blocks_that_are_not_blocks": (
        _v2_calls(
            (
                {
                    "context": {
                        "messages": [{"role": "user", "content": [1, {"type": "text", "text": 5}]}]
                    }
                },
                None,
            )
        ),
        {},
        2,
        "messages.0.",
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_V2))
def test_a_hostile_version_2_file_is_refused_naming_its_line(tmp_path, name):
    from openprogram.providers.replay import ReplayProvider
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.file.reader import read_recording_file

    rows, deep, line, reason = HOSTILE_V2[name]
    path = _write_v2(tmp_path / f"{name}.jsonl", rows, deep)
    for summary_only in (False, True):
        with pytest.raises(RecordingFileError) as refused:
            read_recording_file(path, summary_only=summary_only)
        assert refused.value.line_number == line, str(refused.value)
        assert reason in str(refused.value) and "Traceback" not in str(refused.value)
    with pytest.raises(RecordingFileError):
        ReplayProvider(path)


#: Every command that reads a recording, with its exit code when the file is refused.
READING_COMMANDS = [
    (("show", "FILE"), 1),
    (("show", "FILE", "--conversation"), 1),
    (("show", "FILE", "--content"), 1),
    (("show", "FILE", "--json"), 1),
    (("view", "FILE", "--output", "PAGE"), 1),
    (("diff", "FILE", "GOOD"), 2),
    (("replay", "FILE"), 1),
    (("recover", "FILE"), 1),
]


@pytest.mark.parametrize(
    "name",
    [
        "thousand_step_path",
        "a_chain_of_patches_each_one_level_deeper",
        "a_pushed_message_without_a_role",
        "content_blocks_that_are_not_blocks",
    ],
)
def test_every_command_refuses_a_hostile_version_2_file_in_one_line(
    isolated_home, tmp_path, capsys, name
):
    """In process: a RecursionError or an AttributeError from a view would fail the test."""
    from openprogram.cli.main import main

    rows, deep, line, reason = HOSTILE_V2[name]
    path = _write_v2(folder_of(isolated_home) / "hostile.jsonl", rows, deep)
    before = path.read_bytes()
    good = make_recording(folder_of(isolated_home) / "good.jsonl")
    for args, code in READING_COMMANDS:
        argv = [
            "recordings",
            *(
                str(path)
                if a == "FILE"
                else str(good)
                if a == "GOOD"
                else str(tmp_path / "p.html")
                if a == "PAGE"
                else a
                for a in args
            ),
        ]
        assert main(argv) == code, argv
        error = [
            text for text in capsys.readouterr().err.splitlines() if not text.startswith("warning:")
        ]
        assert len(error) == 1 and error[0].startswith("openprogram: "), (argv, error)
        assert f"recording file {path} at line {line}" in error[0] and reason in error[0], (
            argv,
            error,
        )
    assert path.read_bytes() == before  # recover changed nothing
    assert not (tmp_path / "p.html").exists()
    assert not (isolated_home / "config.json").exists()  # replay was refused


def test_the_proxy_refuses_the_thousand_step_path_file_in_one_line(isolated_home, tmp_path):
    rows, deep, line, reason = HOSTILE_V2["thousand_step_path"]
    path = _write_v2(tmp_path / "hostile.jsonl", rows, deep)
    result = run_cli(
        isolated_home, "proxy", "--mode", "replay", "--recording", str(path), "--port", "0"
    )
    assert result.returncode != 0
    one_line_error(result, f"recording file {path} at line {line}", reason)
