"""Mode ``update``: replay what matches, go live from the first drift, rewrite the file with
both; leave it byte for byte alone when nothing drifted."""

from __future__ import annotations

import os

import pytest

from openprogram.providers.faux import FauxProvider
from openprogram.providers.replay import read_recording_file
from openprogram.providers.scoped import use_recording
from tests.record_replay.update_support import register_live_provider, requests_in, run


@pytest.fixture
def live(fresh_registry) -> FauxProvider:
    """A provider that answers every prompt with 'live: PROMPT' and counts its calls."""
    return register_live_provider()


async def test_a_changed_third_prompt_makes_one_live_call(tmp_path, live):
    path = tmp_path / "agent.jsonl"
    with use_recording(path, "update"):  # no file yet: everything is live and recorded
        assert await run(["one", "two", "three"]) == ["live: one", "live: two", "live: three"]
    assert len(live.calls) == 3 and requests_in(path) == ["one", "two", "three"]
    os.chmod(path, 0o640)

    with use_recording(path, "update") as scope:
        answers = await run(["one", "two", "THREE"])
    assert len(live.calls) == 4  # exactly one live call: the drifted third
    assert answers == ["live: one", "live: two", "live: THREE"]
    assert scope.call_count == 3
    assert requests_in(path) == ["one", "two", "THREE"]
    assert [call.call_index for call in read_recording_file(path).calls] == [0, 1, 2]
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o640)

    before = path.read_bytes()
    with use_recording(path, "update"):
        await run(["one", "two", "THREE"])
    assert len(live.calls) == 4  # nothing drifted: no live call
    assert path.read_bytes() == before


async def test_calls_after_the_drift_go_live_and_unreached_calls_are_dropped(tmp_path, live):
    path = tmp_path / "agent.jsonl"
    with use_recording(path, "update"):
        await run(["a", "b", "c", "d"])
    with use_recording(path, "update"):
        await run(["a", "B", "c"])  # drift at the second; "c" goes live too; "d" is never reached
    assert len(live.calls) == 4 + 2
    assert requests_in(path) == ["a", "B", "c"]
    with use_recording(path, "replay") as scope:
        assert await run(["a", "B", "c"]) == ["live: a", "live: B", "live: c"]
        scope.assert_consumed()


async def test_fewer_calls_without_a_drift_keep_the_file_and_an_exception_changes_nothing(
    tmp_path, live
):
    from openprogram.providers.replay import ReplayMismatch

    path = tmp_path / "agent.jsonl"
    with use_recording(path, "update"):
        await run(["a", "b"])
    before = path.read_bytes()
    with use_recording(path, "update") as scope:
        await run(["a"])  # stops early (--max-turns, an early return): nothing drifted
        with pytest.raises(ReplayMismatch, match="remaining_calls"):
            scope.assert_consumed()  # the unused call is still said
    assert path.read_bytes() == before and len(live.calls) == 2
    assert scope.update.report.message.endswith("left unchanged: nothing drifted (1 call replayed)")

    with pytest.raises(RuntimeError), use_recording(path, "update") as scope:
        await run(["a", "new"])
        raise RuntimeError("the test failed")
    assert path.read_bytes() == before
    assert scope.update.report.message.endswith(
        "left unchanged: the run ended with an exception (RuntimeError); its 1 new call was not kept"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.jsonl"]  # no temporary left


async def test_an_update_run_removes_what_killed_update_runs_left_and_nothing_else(tmp_path, live):
    from openprogram.recordings.file.sink import RecordingSink
    from openprogram.recordings.store.updating import ABANDONED_AFTER_SECONDS

    path = tmp_path / "agent.jsonl"
    with use_recording(path, "update"):
        await run(["one"])
    old = os.stat(path).st_mtime - ABANDONED_AFTER_SECONDS - 5

    def left(name: str, *, age: float | None = old) -> object:
        leftover = tmp_path / name
        leftover.write_text("half an update\n")
        if age is not None:
            os.utime(leftover, (age, age))
        return leftover

    abandoned = left(".agent.jsonl.k1ll3d.update")
    fresh = left(".agent.jsonl.just_now.update", age=None)  # a run that may be starting
    other_recording = left(".other.jsonl.k1ll3d.update")
    live_one = tmp_path / ".agent.jsonl.running.update"
    running = RecordingSink(live_one)  # a live update run: holds its writer lock
    os.utime(live_one, (old, old))
    target = tmp_path / "elsewhere.txt"
    target.write_text("not ours to delete")
    os.symlink(target, tmp_path / ".agent.jsonl.link.update")
    try:
        with use_recording(path, "update"):
            await run(["one", "two"])  # drifts: an update file of its own is created
    finally:
        running.close()
    assert not abandoned.exists()
    assert fresh.exists() and other_recording.exists() and live_one.exists()
    assert (
        tmp_path / ".agent.jsonl.link.update"
    ).is_symlink() and target.read_text() == "not ours to delete"
    assert requests_in(path) == ["one", "two"]
