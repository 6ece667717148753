"""Timings in recordings: every event line carries ``t`` (docs/file-format.md)."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from openprogram.providers.faux import FauxProvider, faux_text, faux_tool_call
from openprogram.providers.recording import RecordingProvider
from openprogram.providers.types import Context, Model, UserMessage
from openprogram.recordings.file.format import RecordingFileError
from openprogram.recordings.file.reader import read_recording_file
from openprogram.recordings.record import recorder
from openprogram.recordings.views.inspection import summarize_call

MODEL = Model(id="echo", api="faux", provider="faux")


class ClockedProvider:
    """The faux provider, with a fake clock that advances 250 ms before each event arrives."""

    def __init__(self, faux: FauxProvider, clock: list[int]) -> None:
        self.faux, self.clock = faux, clock
        self.requires_credentials = False

    async def stream_simple(self, model, context, options=None):
        async for event in self.faux.stream_simple(model, context, options):
            self.clock[0] += 250_000_000
            yield event


def record(path, *responses, clock=None):
    faux = FauxProvider(timestamp=0).queue(*responses)
    provider = RecordingProvider(ClockedProvider(faux, clock) if clock else faux, path)

    async def go():
        for number in range(len(responses)):
            context = Context(messages=[UserMessage(content=f"prompt {number}", timestamp=0)])
            async for _ in provider.stream_simple(MODEL, context):
                pass

    asyncio.run(go())
    provider.sink.close()
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def events_by_call(rows):
    calls: dict[int, list[dict]] = {}
    for row in rows:
        if row["type"] == "event":
            calls.setdefault(row["call_index"], []).append(row)
    return calls


def test_every_event_line_has_an_integer_t_non_decreasing_within_its_call(tmp_path):
    rows = record(
        tmp_path / "r.jsonl",
        faux_text("one two three four five"),
        faux_tool_call("lookup", {"query": "x" * 100}),
    )
    calls = events_by_call(rows)
    assert len(calls) == 2
    for events in calls.values():
        times = [row["t"] for row in events]
        assert all(type(t) is int and t >= 0 for t in times)
        assert times == sorted(times)


def test_held_back_deltas_keep_the_time_they_arrived(tmp_path, monkeypatch):
    clock = [10**12]  # nanoseconds
    monkeypatch.setattr(recorder, "monotonic_ns", lambda: clock[0])
    # Tool-call argument deltas are held back until toolcall_end, yet each keeps its own time.
    rows = record(tmp_path / "r.jsonl", faux_tool_call("lookup", {"query": "y" * 60}), clock=clock)
    events = events_by_call(rows)[0]
    assert sum(row["event"]["type"] == "toolcall_delta" for row in events) > 3
    assert [row["t"] for row in events] == [250 * (number + 1) for number in range(len(events))]

    recording = read_recording_file(tmp_path / "r.jsonl")
    summary = summarize_call(recording.calls[0])
    assert summary.first_event_ms == 250
    assert summary.duration_ms == 250 * len(events)


def test_a_file_without_t_still_reads_and_shows_no_timings(tmp_path):
    path = tmp_path / "old.jsonl"
    rows = record(path, faux_text("hello there"))
    for row in rows:
        row.pop("t", None)
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    recording = read_recording_file(path)
    call = recording.calls[0]
    assert call.event_count > 0 and call.first_event_ms is None and call.duration_ms is None
    summary = summarize_call(read_recording_file(path, summary_only=True).calls[0])
    assert summary.to_json()["first_event_ms"] is None and summary.to_json()["duration_ms"] is None


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3", None, [1]])
def test_a_t_that_is_not_a_non_negative_int_is_rejected_naming_the_line(tmp_path, bad):
    path = tmp_path / "bad.jsonl"
    rows = record(path, faux_text("hello there"))
    number = next(
        i for i, row in enumerate(rows) if row["type"] == "event" and row["event_index"] == 1
    )
    rows[number]["t"] = bad
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    with pytest.raises(RecordingFileError) as caught:
        read_recording_file(path)
    assert caught.value.line_number == number + 1
    assert "t must be a non-negative integer" in caught.value.reason
