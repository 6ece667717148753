"""``update`` never loses a call (docs/tutorial.md, "Re-recording only what drifted"): one
session per run, the file left as it was unless the run drifted and ended normally, one writer
at a time, abandoned calls recorded again, sessions chosen by every call, and a rewrite that
fails keeps both the old file and the new calls."""

from __future__ import annotations

import contextlib
import os
import time

import pytest

from openprogram.providers.faux import FauxProvider
from openprogram.providers.replay import ReplayMismatch, read_recording_file
from openprogram.providers.scoped import use_recording
from openprogram.recordings.file.writer_lock import RecordingBusyError
from tests.cli.test_recordings_cli import writer_holding
from tests.record_replay.update_support import register_live_provider, requests_in, run


@pytest.fixture
def live(fresh_registry) -> FauxProvider:
    """A provider that answers every prompt with 'live: PROMPT' and counts its calls."""
    return register_live_provider()


def sessions_in(path) -> list[list[str]]:
    """The prompts of each session of the file, sessions in file order."""
    sessions: dict[object, list[str]] = {}
    for call in read_recording_file(path).calls:
        sessions.setdefault(call.session, []).append(call.context["messages"][0]["content"])
    return list(sessions.values())


async def recorded(path, *runs: list[str]) -> None:
    """``path`` recorded by one update run per list of prompts (each a session)."""
    for prompts in runs:
        with use_recording(path, "record"):
            await run(prompts)


# ============================================================================ one session per run


async def test_an_updated_test_is_one_session_so_a_shorter_run_still_fails_its_replay(
    tmp_path, live
):
    path = tmp_path / "agent.jsonl"
    await recorded(path, ["a", "b", "c"])
    with use_recording(path, "update") as scope:
        await run(["a", "B", "c"])
    assert scope.update.report.changed
    assert scope.update.report.message.endswith("updated: kept 1 call, recorded 2, dropped 2")
    assert sessions_in(path) == [["a", "B", "c"]]  # replayed and new calls: one session

    with use_recording(path, "replay") as replay:
        await run(["a", "B"])
        with pytest.raises(ReplayMismatch, match="remaining_calls"):
            replay.assert_consumed()

    from openprogram.recordings.views.inspection import read_recording, summarize_calls

    assert {call.session for call in summarize_calls(read_recording(path).calls)} == {1}


async def test_a_drift_at_the_first_call_of_a_file_of_several_sessions_adds_a_session(
    tmp_path, live
):
    path = tmp_path / "agent.jsonl"
    await recorded(path, ["one", "two"], ["three"])
    with use_recording(path, "update"):
        await run(["four", "five"])
    assert sessions_in(path) == [["one", "two"], ["three"], ["four", "five"]]


async def test_a_run_that_raises_or_is_interrupted_leaves_the_file_and_says_so(tmp_path, live):
    path = tmp_path / "agent.jsonl"
    await recorded(path, ["a", "b", "c"])
    before = path.read_bytes()
    for error, said in [
        (KeyboardInterrupt, "Ctrl-C (KeyboardInterrupt)"),
        (ValueError, "an exception (ValueError)"),
    ]:
        with pytest.raises(error), use_recording(path, "update") as scope:
            await run(["a", "changed"])
            raise error()
        assert path.read_bytes() == before
        assert scope.update.report.message == (
            f"{path}: left unchanged: the run ended with {said}; its 1 new call was not kept"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.jsonl"]


# ============================================================================ abandoned calls


async def test_update_records_an_abandoned_call_again_after_recover(tmp_path, live):
    from openprogram.recordings.store.recovery import apply_recovery, plan_recovery
    from tests.cli.test_recover_cli import cut_recording

    path = tmp_path / "agent.jsonl"
    await recorded(path, ["first prompt", "second prompt"])
    cut_recording(path, torn=False, record=False)  # the writer died inside the second call
    apply_recovery(plan_recovery(path))
    assert [call.outcome for call in read_recording_file(path).calls] == ["complete", "abandoned"]
    calls_before = len(live.calls)

    with use_recording(path, "update") as scope:
        answers = await run(["first prompt", "second prompt"])
    assert answers == ["live: first prompt", "live: second prompt"]
    assert len(live.calls) == calls_before + 1  # only the abandoned call went live
    assert scope.update.report.message.endswith("updated: kept 1 call, recorded 1, dropped 1")
    recording = read_recording_file(path)
    assert [call.outcome for call in recording.calls] == ["complete", "complete"]
    assert sessions_in(path) == [["first prompt", "second prompt"]]
    with use_recording(path, "replay") as replay:
        await run(["first prompt", "second prompt"])
        replay.assert_consumed()


# ============================================================================ sessions by every call


async def test_sessions_are_chosen_by_every_call_not_only_the_first(tmp_path, live):
    path = tmp_path / "two-runs.jsonl"
    await recorded(path, ["same start", "then left"], ["same start", "then right"])
    calls_before = len(live.calls)
    for prompts in (["same start", "then right"], ["same start", "then left"]):
        with use_recording(path, "replay") as replay:
            assert await run(prompts) == [f"live: {prompt}" for prompt in prompts]
            replay.assert_consumed()
    assert len(live.calls) == calls_before

    before = path.read_bytes()
    with use_recording(path, "update") as scope:
        await run(["same start", "then right"])  # the second session, whole: nothing drifted
    assert path.read_bytes() == before and not scope.update.report.changed

    with use_recording(path, "update"):
        await run(["same start", "then right", "and on"])
    assert sessions_in(path) == [
        ["same start", "then left"],
        ["same start", "then right", "and on"],
    ]


async def test_a_drift_in_every_session_is_reported_against_the_followed_one(tmp_path, live):
    path = tmp_path / "two-runs.jsonl"
    await recorded(path, ["same start", "then left"], ["same start", "then right"])
    with use_recording(path, "replay"):
        await run(["same start"])
        with pytest.raises(ReplayMismatch) as raised:
            await run(["neither"])
    assert raised.value.call_index == 1 and "session 1 of 2" in str(raised.value)


# ============================================================================ one writer at a time


async def test_a_second_update_or_a_recorder_is_refused_while_an_update_runs(tmp_path, live):
    from openprogram.recordings.file.sink import RecordingSink

    path = tmp_path / "agent.jsonl"
    await recorded(path, ["a"])
    with use_recording(path, "update"):
        with pytest.raises(
            RecordingBusyError,
            match=r"is being updated by this process \(\d+\), in another scope; two updates",
        ):
            with use_recording(path, "update"):
                pass
        with pytest.raises(
            RecordingBusyError,
            match="is being updated by this process .*calls recorded into it now would be lost",
        ):
            RecordingSink(path)
        with pytest.raises(RecordingBusyError):
            with use_recording(path, "record"):
                pass
        await run(["a", "b"])
    assert requests_in(path) == ["a", "b"]  # the first update was not disturbed
    with use_recording(path, "update"):  # and the file is free again
        await run(["a", "b"])


async def test_a_sink_refused_by_another_process_s_update_closes_what_it_opened(tmp_path, live):
    import subprocess
    import sys

    from openprogram.recordings.file.sink import RecordingSink

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("counts open descriptors through /proc")
    path = tmp_path / "agent.jsonl"
    await recorded(path, ["a"])
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys; from pathlib import Path; "
                "from openprogram.recordings.file.writer_lock import claim_for_update; "
                f"claim = claim_for_update(Path({str(path)!r})); print('held', flush=True); sys.stdin.read()"
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        open_before = len(os.listdir("/proc/self/fd"))
        for _ in range(3):
            with pytest.raises(RecordingBusyError):
                RecordingSink(path)
        assert len(os.listdir("/proc/self/fd")) == open_before
    finally:
        holder.communicate("", timeout=30)


async def test_an_update_is_refused_while_another_process_records_into_the_file(tmp_path, live):
    path = tmp_path / "agent.jsonl"
    await recorded(path, ["a"])
    before = path.read_bytes()
    with writer_holding(path) as writer:
        with pytest.raises(RecordingBusyError) as raised:
            with use_recording(path, "update"):
                pass
    message = str(raised.value)
    assert f"is being recorded into by process {writer.pid} (" in message
    assert "an update would replace the file under it and lose its calls" in message
    assert path.read_bytes() == before


async def test_two_runs_that_create_one_recording_lose_neither(tmp_path, live):
    path = tmp_path / "new.jsonl"
    with contextlib.ExitStack() as first:
        first_scope = first.enter_context(use_recording(path, "update"))
        await run(["from the first"])
        with use_recording(path, "update") as second_scope:
            await run(["from the second"])
        assert second_scope.update.report.changed  # it ended first: it created the file
    report = first_scope.update.report
    assert (
        not report.changed
        and report.failed == "another run created it while this run was recording it"
    )
    assert requests_in(path) == ["from the second"]
    assert report.saved_to is not None and requests_in(report.saved_to) == ["from the first"]
    assert report.message.endswith(
        f"it is left as it was, and its 1 new call is kept in {report.saved_to}"
    )
    assert oct(os.stat(report.saved_to).st_mode & 0o777) == oct(0o600)


async def test_a_file_replaced_while_updating_is_never_overwritten(tmp_path, live):
    path = tmp_path / "agent.jsonl"
    await recorded(path, ["a"])
    other = tmp_path / "checked-out.jsonl"
    await recorded(other, ["from git"])
    with use_recording(path, "update") as scope:
        await run(["a", "b"])
        os.replace(other, path)  # a checkout replaced the file meanwhile
    assert requests_in(path) == ["from git"]
    assert (
        scope.update.report.failed
        == "another program changed or replaced it while this run was updating it"
    )
    assert requests_in(scope.update.report.saved_to) == ["b"]


# ============================================================================ failures


async def test_a_rewrite_that_fails_keeps_the_old_file_and_the_new_calls(
    tmp_path, live, monkeypatch
):
    from openprogram.recordings.store import updating

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    path = tmp_path / "agent.jsonl"
    await recorded(path, ["a", "b"])
    before = path.read_bytes()
    monkeypatch.setattr(updating, "replace_atomically", disk_full)
    with use_recording(path, "update") as scope:
        await run(["a", "B"])
    report = scope.update.report
    assert path.read_bytes() == before
    assert report.failed == "cannot write it: No space left on device"
    assert report.saved_to.name.startswith("agent.unsaved-") and requests_in(report.saved_to) == [
        "B"
    ]
    assert not list(tmp_path.glob(".agent.jsonl.*"))  # no hidden leftover


async def test_a_folder_that_cannot_be_written_fails_the_drifted_call_with_one_line(
    tmp_path, live, monkeypatch
):
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.store import updating

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    path = tmp_path / "agent.jsonl"
    await recorded(path, ["a"])
    before = path.read_bytes()
    monkeypatch.setattr(updating.tempfile, "mkstemp", refused)
    with pytest.raises(RecordingFileError) as raised, use_recording(path, "update"):
        await run(["a", "b"])
    assert f"the folder {tmp_path} cannot be written (Permission denied)" in str(raised.value)
    assert "\n" not in str(raised.value) and path.read_bytes() == before


async def test_a_rewrite_removes_the_temporaries_killed_rewrites_left_and_nothing_else(
    tmp_path, live
):
    from openprogram.recordings.file.writer_lock import hold_writer_lock

    path = tmp_path / "agent.jsonl"
    await recorded(path, ["a"])
    old = time.time() - 600
    killed = tmp_path / ".agent.jsonl.k1ll3d.tmp"
    fresh = tmp_path / ".agent.jsonl.fresh.tmp"
    held = tmp_path / ".agent.jsonl.held.tmp"
    for leftover in (killed, fresh, held):
        leftover.write_text("half a rewrite\n")
    os.utime(killed, (old, old))
    descriptor = os.open(held, os.O_RDWR)
    hold_writer_lock(descriptor)  # a rewrite being written now
    os.utime(held, (old, old))
    target = tmp_path / "elsewhere.txt"
    target.write_text("not ours")
    link = tmp_path / ".agent.jsonl.link.tmp"
    link.symlink_to(target)
    os.utime(link, (old, old), follow_symlinks=False)
    try:
        with use_recording(path, "update"):
            await run(["a", "b"])
    finally:
        os.close(descriptor)
    assert not killed.exists()
    assert (
        fresh.exists() and held.exists() and link.is_symlink() and target.read_text() == "not ours"
    )
    assert requests_in(path) == ["a", "b"]
