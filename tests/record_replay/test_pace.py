"""Paced replay (docs/tutorial.md, "Testing what goes wrong"): ``pace="recorded"`` waits the
recorded time before the first event and between events, a number scales those waits.

Elapsed times are checked from below only: a replay that waits at least the recorded time is
correct however busy the machine is (how much faster an unpaced replay is, is measured in the
bench, not here)."""

from __future__ import annotations

import time

import orjson
import pytest

from openprogram.providers.faux import FauxProvider, faux_text
from openprogram.providers.scoped import use_recording
from openprogram.providers.stream import stream
from openprogram.providers.types import Context, Model, UserMessage
from openprogram.recordings.file.reader import read_event_times, read_recording_file
from tests.transcripts.event_summary import collect

MODEL = Model(id="gpt-test", api="openai-completions", provider="openai")
ASK = Context(messages=[UserMessage(content="hi", timestamp=0)])
FIRST_MS, GAP_MS = 300, 20


@pytest.fixture
def slow_first_event(tmp_path, fresh_registry):
    """A call recorded with its first event 300 ms after the request and 20 ms between the
    others (the recorder's ``t`` set so; recording it in real time would prove nothing more)."""
    provider = FauxProvider()
    fresh_registry.register_api_provider("openai-completions", provider)
    provider.queue(faux_text("one two three four five"))
    path = tmp_path / "slow.jsonl"

    async def record() -> list[int]:
        with use_recording(path, "record"):
            await collect(stream(MODEL, ASK))
        lines = []
        times = []
        for line in path.read_bytes().splitlines():
            row = orjson.loads(line)
            if "event_index" in row:
                row["t"] = FIRST_MS + GAP_MS * row["event_index"]
                times.append(row["t"])
            lines.append(orjson.dumps(row))
        path.write_bytes(b"\n".join(lines) + b"\n")
        return times

    return path, record


async def replay_seconds(path, **options) -> tuple[float, list]:
    with use_recording(path, "replay", **options) as scope:
        started = time.monotonic()
        events = await collect(stream(MODEL, ASK))
        elapsed = time.monotonic() - started
        scope.assert_consumed()
    return elapsed, events


async def test_recorded_pace_waits_at_least_the_recorded_times(slow_first_event):
    path, record = slow_first_event
    times = await record()
    assert read_event_times(read_recording_file(path)) == {0: times}
    elapsed, paced = await replay_seconds(path, pace="recorded")
    assert elapsed >= times[-1] / 1000  # 300 ms, then 20 ms per event after the first
    _, unpaced = await replay_seconds(path)
    assert paced == unpaced


async def test_each_event_waits_for_its_own_time(slow_first_event):
    path, record = slow_first_event
    times = await record()
    with use_recording(path, "replay", pace="recorded"):
        started = time.monotonic()
        arrivals = [time.monotonic() - started async for _ in stream(MODEL, ASK)]
    assert all(
        arrival >= recorded / 1000 for arrival, recorded in zip(arrivals, times, strict=True)
    )


async def test_a_factor_scales_the_waits(slow_first_event):
    path, record = slow_first_event
    times = await record()
    elapsed, _ = await replay_seconds(path, pace=0.5)
    assert elapsed >= times[-1] / 2000


async def test_a_rechunked_and_paced_replay_waits_by_the_recorded_events(slow_first_event):
    path, record = slow_first_event
    times = await record()
    elapsed, events = await replay_seconds(path, pace="recorded", rechunk=3)
    assert elapsed >= times[-1] / 1000
    assert "".join(e.delta for e in events if e.type == "text_delta") == "one two three four five"


def test_a_file_without_times_reads_none(tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_bytes(
        b'{"type":"header","format_version":1}\n'
        b'{"type":"request","call_index":0,"model":{"id":"m","name":"m","api":"faux","provider":"faux","base_url":""},'
        b'"context":{"messages":[]},"options":null}\n'
        b'{"type":"event","call_index":0,"event_index":0,"event":{"type":"done","reason":"stop","message":'
        b'{"role":"assistant","content":[],"api":"faux","provider":"faux","model":"m","timestamp":0}}}\n'
        b'{"type":"call_end","call_index":0,"event_count":1}\n'
    )
    assert read_event_times(read_recording_file(path)) == {0: [None]}
