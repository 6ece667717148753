"""One session rule, however a replay starts: the runtime (``record_replay.mode=replay``),
``use_recording(path)`` and a ``ReplayProvider(path)`` built by hand follow the same one
(docs/file-format.md, "Sessions"): on a file holding two runs that share their first call,
each run replays whole, in either order, and a run that matches neither fails at the call
where it parts, the same way through all three."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from openprogram.providers import api_registry
from openprogram.providers.replay import ReplayMismatch, ReplayProvider
from openprogram.providers.scoped import use_recording
from tests.record_replay.update_support import MODEL, register_live_provider, run

LEFT = ["same start", "then left"]
RIGHT = ["same start", "then right"]


@pytest.fixture
def two_runs(tmp_path, fresh_registry) -> Path:
    """A file of two sessions (two recorded runs) that share their first call."""
    live = register_live_provider()
    path = tmp_path / "two-runs.jsonl"
    for prompts in (LEFT, RIGHT):
        with use_recording(path, "record"):
            assert [answer for answer in run_sync(prompts)] == [
                f"live: {prompt}" for prompt in prompts
            ]
    api_registry.unregister_api_provider(MODEL.api)  # from here on nothing may call it
    assert len(live.calls) == 4
    return path


def run_sync(prompts: list[str]) -> list[str]:
    import asyncio

    return asyncio.run(run(prompts))


@contextlib.contextmanager
def through_the_runtime(path: Path) -> Iterator[ReplayProvider]:
    """What ``record_replay.mode=replay`` installs at the start of a process (the transform of
    the activation plan; the registry fixture puts the old transform back)."""
    from openprogram.providers.initialization import _install_for
    from openprogram.recordings.modes.activation import plan_activation

    plan = plan_activation({"record_replay": {"mode": "replay", "file": str(path)}})
    assert not plan.blocked, plan.reason
    _install_for(plan)
    register_live_provider()  # registered after: the transform serves the replay for it too
    provider = api_registry.lookup_registered_provider(MODEL.api)
    assert isinstance(provider, ReplayProvider)
    yield provider


@contextlib.contextmanager
def through_use_recording(path: Path) -> Iterator[ReplayProvider]:
    register_live_provider()
    with use_recording(path, "replay") as scope:
        assert scope.replay_provider is not None
        yield scope.replay_provider


@contextlib.contextmanager
def through_a_replay_provider(path: Path) -> Iterator[ReplayProvider]:
    provider = ReplayProvider(path)
    api_registry.register_api_provider(MODEL.api, provider)
    yield provider


STARTS = {
    "runtime": through_the_runtime,
    "use_recording": through_use_recording,
    "ReplayProvider": through_a_replay_provider,
}


@pytest.mark.parametrize("start", sorted(STARTS))
@pytest.mark.parametrize("prompts", [RIGHT, LEFT], ids=["second run", "first run"])
def test_each_run_of_the_file_replays_whole(two_runs, start, prompts):
    with STARTS[start](two_runs) as replay:
        assert run_sync(prompts) == [f"live: {prompt}" for prompt in prompts]
        replay.assert_consumed()
        assert replay.call_count == 2
        followed = replay.followed_sessions()
    assert len(followed) == 1  # one session followed: the one the run matches


@pytest.mark.parametrize("start", sorted(STARTS))
def test_a_run_that_matches_neither_fails_where_it_parts_the_same_way(two_runs, start):
    with STARTS[start](two_runs), pytest.raises(ReplayMismatch) as raised:
        run_sync(["same start", "then neither"])
    mismatch = raised.value
    assert (mismatch.call_index, mismatch.field_path) == (1, "context.messages[0].content")
    # Reported against the session followed so far: the first one, in file order.
    assert "session 1 of 2" in str(mismatch)
    assert mismatch.recorded == "then left" and mismatch.incoming == "then neither"
