"""Opening an existing recording for appending reads its tail, not the whole file (counted
through the bytes ``pread`` returns, never timed); a torn last line is refused with the
command that repairs it; a wrong header is still refused."""

from __future__ import annotations

import asyncio
import os

import orjson
import pytest

from openprogram.providers.faux import FauxProvider, faux_text
from openprogram.providers.recording import RecordingFileError, RecordingProvider, RecordingSink
from openprogram.providers.replay import read_recording_file
from openprogram.recordings.file import sink as sink_module

from .test_recording_support import MODEL, context_of


def record(path, calls: int, words: int = 20) -> None:
    answers = [faux_text(" ".join(f"w{n}x{i}" for i in range(words))) for n in range(calls)]
    provider = RecordingProvider(FauxProvider(answers, timestamp=1), RecordingSink(path))

    async def run() -> None:
        for number in range(calls):
            async for _ in provider.stream(MODEL, context_of(f"question {number}")):
                pass

    asyncio.run(run())
    provider.sink.close()


def count_read_bytes(monkeypatch) -> list[int]:
    sizes: list[int] = []
    real = os.pread

    def counting(fd, length, offset):
        data = real(fd, length, offset)
        sizes.append(len(data))
        return data

    monkeypatch.setattr(sink_module.os, "pread", counting)
    return sizes


def test_appending_continues_call_index_reading_only_the_tail(tmp_path, monkeypatch):
    path = tmp_path / "many.jsonl"
    record(path, 300)
    size = path.stat().st_size
    sizes = count_read_bytes(monkeypatch)
    sink = RecordingSink(path)
    try:
        assert sink.begin_call({"model": {}, "context": {}, "options": {}}) == 300
    finally:
        sink.close()
    assert sum(sizes) < size / 10  # the header line and the last call, not 300 calls
    requests = [
        orjson.loads(line) for line in path.read_bytes().splitlines() if b'"request"' in line
    ]
    assert [row["call_index"] for row in requests] == list(range(301))


def test_a_long_last_call_is_read_back_to_its_request_line(tmp_path):
    path = tmp_path / "long.jsonl"
    record(path, 2, words=3000)  # the last call spans many read chunks
    with RecordingSink(path) as sink:
        assert sink.begin_call({"model": {}, "context": {}, "options": {}}) == 2


def test_a_request_line_in_another_form_falls_back_to_a_full_scan(tmp_path):
    path = tmp_path / "hand.jsonl"
    record(path, 3)
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    reordered = [
        {k: row[k] for k in sorted(row)} if row["type"] == "request" else row for row in rows
    ]  # "call_index" before "type": not the sink's own form
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in reordered))
    with RecordingSink(path) as sink:
        assert sink.begin_call({"model": {}, "context": {}, "options": {}}) == 3


def test_a_file_with_only_a_header_starts_at_call_zero(tmp_path):
    path = tmp_path / "empty.jsonl"
    RecordingSink(path).close()
    with RecordingSink(path) as sink:
        assert sink.begin_call({"model": {}, "context": {}, "options": {}}) == 0


def test_a_torn_last_line_is_refused_naming_recover_and_the_file_is_unchanged(tmp_path):
    path = tmp_path / "torn.jsonl"
    record(path, 2)
    with path.open("ab") as handle:
        handle.write(b'{"type":"event","call_index":1,"event_in')
    before = path.read_bytes()
    with pytest.raises(RecordingFileError) as caught:
        RecordingSink(path)
    message = str(caught.value)
    assert "openprogram recordings recover" in message and str(path) in message
    assert caught.value.line_number == before.count(b"\n") + 1
    assert path.read_bytes() == before


def test_after_recover_the_file_takes_more_calls(tmp_path):
    from openprogram.recordings.store.recovery import apply_recovery, plan_recovery

    path = tmp_path / "torn.jsonl"
    record(path, 2)
    with path.open("ab") as handle:
        handle.write(b'{"type":"ev')
    apply_recovery(plan_recovery(path))
    record(path, 1)
    calls = read_recording_file(path).calls
    assert [call.call_index for call in calls] == [0, 1, 2]


def test_a_wrong_header_is_still_refused(tmp_path):
    path = tmp_path / "wrong.jsonl"
    path.write_bytes(b'{"type":"header","format_version":99}\n')
    with pytest.raises(RecordingFileError, match="format_version 99"):
        RecordingSink(path)
    assert path.read_bytes() == b'{"type":"header","format_version":99}\n'


def _cut_after(path, line_marker: bytes, keep_after: int) -> bytes:
    """``path`` cut ``keep_after`` lines after the first line holding ``line_marker`` (whole
    lines: the writer was killed between two writes). Returns the bytes left."""
    lines = path.read_bytes().splitlines(keepends=True)
    at = next(number for number, line in enumerate(lines) if line_marker in line)
    data = b"".join(lines[: at + 1 + keep_after])
    path.write_bytes(data)
    return data


def test_a_call_its_writer_left_without_call_end_is_refused_naming_recover(tmp_path):
    path = tmp_path / "died.jsonl"
    record(path, 3)
    before = _cut_after(path, b'"type":"request","call_index":2', 2)  # two events, no call_end
    with pytest.raises(RecordingFileError) as caught:
        RecordingSink(path)
    message = str(caught.value)
    assert caught.value.kind == "interrupted"
    assert "call 2 has no call_end" in message
    assert f"openprogram recordings recover {path}" in message
    assert path.read_bytes() == before

    from openprogram.recordings.store.recovery import apply_recovery, plan_recovery

    apply_recovery(plan_recovery(path))
    record(path, 1)
    assert [call.outcome for call in read_recording_file(path).calls] == [
        "complete",
        "complete",
        "abandoned",
        "complete",
    ]


def test_a_call_of_another_lane_left_open_before_the_last_request_is_refused(tmp_path):
    """Two lanes of one dead writer: call 0 streamed after call 1 began, and never ended."""
    path = tmp_path / "lanes.jsonl"
    with RecordingSink(path) as sink:
        for index in (0, 1):
            assert (
                sink.begin_call({"model": {}, "context": {}, "options": {}}, lane=f"tool-{index}")
                == index
            )
        sink.write_row(
            {"type": "event", "call_index": 0, "event_index": 0, "event": {"type": "start"}}
        )
        sink.write_row(
            {"type": "call_end", "call_index": 1, "event_count": 0, "outcome": "complete"}
        )
    with pytest.raises(RecordingFileError, match="call 0 has no call_end"):
        RecordingSink(path)


def test_a_call_another_live_writer_is_still_making_is_not_refused(tmp_path):
    path = tmp_path / "busy.jsonl"
    with RecordingSink(path) as first:
        first.begin_call({"model": {}, "context": {}, "options": {}})  # in flight in a live writer
        with RecordingSink(path) as second:
            assert second.begin_call({"model": {}, "context": {}, "options": {}}) == 1
