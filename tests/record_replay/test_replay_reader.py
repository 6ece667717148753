"""The strict reader: every rule of the file format (docs/file-format.md), each rejection naming its line and
call, and a fuzzer showing that a damaged file raises RecordingFileError and nothing else."""

from __future__ import annotations

import asyncio
import gc

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openprogram.providers.faux import FauxProvider, faux_text, faux_tool_call
from openprogram.providers.recording import RecordingFileError, RecordingProvider
from openprogram.providers.replay import read_recording_file

from .test_recording_support import MODEL, collect, context_of


def _record_valid(path) -> list[bytes]:
    async def go():
        provider = RecordingProvider(
            FauxProvider(
                [faux_tool_call("echo", {"value": "hi"}), faux_text("two words")], timestamp=4
            ),
            path,
        )
        await collect(provider.stream(MODEL, context_of("a")))
        await collect(provider.stream_simple(MODEL, context_of("b")))
        provider.sink.close()

    asyncio.run(go())
    return path.read_bytes().split(b"\n")[:-1]


@pytest.fixture(scope="module")
def valid_lines(tmp_path_factory) -> list[bytes]:
    """Line 1 header; call 0 (tool call) on lines 2-8; call 1 (text) on lines 9-17."""
    lines = _record_valid(tmp_path_factory.mktemp("valid") / "rec.jsonl")
    kinds = [orjson.loads(line)["type"] for line in lines]
    assert kinds[:2] == ["header", "request"] and kinds[-1] == "call_end"
    return lines


def _row(line: bytes) -> dict:
    return orjson.loads(line)


def _dump(row: dict) -> bytes:
    return orjson.dumps(row)


def _edit(lines: list[bytes], number: int, change) -> list[bytes]:
    row = _row(lines[number - 1])
    change(row)
    return [*lines[: number - 1], _dump(row), *lines[number:]]


def _line_of(lines: list[bytes], kind: str, call: int, event_index: int | None = None) -> int:
    for number, line in enumerate(lines, start=1):
        row = _row(line)
        if (
            row["type"] == kind
            and row.get("call_index") == call
            and (event_index is None or row.get("event_index") == event_index)
        ):
            return number
    raise LookupError(kind)


def _expect(tmp_path, data: bytes, reason: str, line: int | None, call: int | None = None):
    path = tmp_path / "rec.jsonl"
    path.write_bytes(data)
    with pytest.raises(RecordingFileError) as caught:
        read_recording_file(path)
    error = caught.value
    assert reason in error.reason
    assert (error.line_number, error.call_index) == (line, call)
    where = f" at line {line}" if line is not None else ""
    which = f" for call {call}" if call is not None else ""
    assert str(error) == f"recording file {path}{where}{which}: {error.reason}"


def _join(lines: list[bytes]) -> bytes:
    return b"\n".join(lines) + b"\n"


def test_the_valid_file_is_accepted(tmp_path, valid_lines):
    path = tmp_path / "rec.jsonl"
    path.write_bytes(_join(valid_lines))
    recording = read_recording_file(path)
    assert [call.call_index for call in recording.calls] == [0, 1]
    assert recording.header["format_version"] == 2
    assert recording.calls[1].request_line == _line_of(valid_lines, "request", 1)
    assert recording.calls[0].end_line == _line_of(valid_lines, "call_end", 0)
    assert recording.calls[0].event_count == len(list(recording.calls[0].event_dumps()))


def test_reading_leaves_the_collector_as_it_was(tmp_path, valid_lines):
    """The reader pauses the collector and moves what it read to the oldest generation; the
    collector is on again afterwards, and objects the program froze itself stay frozen."""
    path = tmp_path / "rec.jsonl"
    path.write_bytes(_join(valid_lines))
    # Warm up first, as a pre-fork server does: reading redacts lane names, and a redaction
    # cache built for another environment is replaced (freeing its frozen objects) on first use.
    read_recording_file(path)
    assert gc.isenabled()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        read_recording_file(path)
        assert gc.isenabled()
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
    read_recording_file(path)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.disable()
    try:
        read_recording_file(path)
        assert not gc.isenabled()  # a program that runs without the collector keeps it off
    finally:
        gc.enable()


def test_blank_lines_and_unknown_keys_are_tolerated(tmp_path, valid_lines):
    lines = _edit(valid_lines, 1, lambda r: r.update(future_field={"x": 1}))
    path = tmp_path / "rec.jsonl"
    path.write_bytes(b"\n  \n" + _join(lines[:3]) + b"\n" + _join(lines[3:]))
    assert len(read_recording_file(path).calls) == 2


def test_a_partial_on_an_event_without_one_is_an_unknown_key(tmp_path, valid_lines):
    """A ``done`` event carrying a ``partial`` is read like any unknown key: ignored, and the
    later events of its call still patch the last real snapshot."""
    done = _line_of(valid_lines, "call_end", 1) - 1
    edited = _edit(valid_lines, done, lambda r: r["event"].update(partial={"junk": 1}))
    plain, stray = tmp_path / "plain.jsonl", tmp_path / "stray.jsonl"
    plain.write_bytes(_join(valid_lines))
    stray.write_bytes(_join(edited))
    expected = [list(call.event_dumps()) for call in read_recording_file(plain).calls]
    assert [list(call.event_dumps()) for call in read_recording_file(stray).calls] == expected


def test_empty_and_headerless_files(tmp_path, valid_lines):
    _expect(tmp_path, b"", "empty", None)
    _expect(tmp_path, b"\n \n", "no header", None)
    _expect(tmp_path, _join(valid_lines[1:]), "first line must be the header", 1)


def test_a_truncated_last_line(tmp_path, valid_lines):
    data = _join(valid_lines)
    _expect(tmp_path, data[:-1], "incomplete", len(valid_lines))
    _expect(tmp_path, data[:-10], "incomplete", len(valid_lines))


def test_invalid_json_and_utf8(tmp_path, valid_lines):
    broken = [*valid_lines[:3], valid_lines[3][:-1] + b"\xff}", *valid_lines[4:]]
    _expect(tmp_path, _join(broken), "not valid JSON or UTF-8", 4)
    _expect(tmp_path, _join([*valid_lines[:2], b"[1, 2]", *valid_lines[2:]]), "JSON object", 3)
    _expect(tmp_path, _join([*valid_lines[:2], b"{nope", *valid_lines[2:]]), "not valid JSON", 3)


@pytest.mark.parametrize("value", [True, 3, 0, "1", 1.0, None])
def test_the_format_version_must_be_an_int_this_program_reads(tmp_path, valid_lines, value):
    lines = _edit(valid_lines, 1, lambda r: r.update(format_version=value))
    _expect(tmp_path, _join(lines), "format_version", 1)


def test_a_second_header(tmp_path, valid_lines):
    _expect(
        tmp_path, _join([*valid_lines[:5], valid_lines[0], *valid_lines[5:]]), "second header", 6
    )


def test_unknown_line_type(tmp_path, valid_lines):
    _expect(
        tmp_path,
        _join([*valid_lines[:2], b'{"type":"note"}', *valid_lines[2:]]),
        "unknown line type",
        3,
    )


@pytest.mark.parametrize("value", [True, "0", -1, 0.0])
def test_request_call_index_must_be_an_int(tmp_path, valid_lines, value):
    lines = _edit(valid_lines, 2, lambda r: r.update(call_index=value))
    _expect(tmp_path, _join(lines), "call_index", 2)


def test_duplicate_and_missing_call_indexes(tmp_path, valid_lines):
    second = _line_of(valid_lines, "request", 1)
    renumbered = []
    for number, line in enumerate(valid_lines, start=1):
        row = _row(line)
        if number >= second and row.get("call_index") == 1:
            row["call_index"] = 0 if row["type"] == "request" else 2
        renumbered.append(_dump(row))
    _expect(tmp_path, _join(renumbered), "a second request", second, 0)
    gap = []
    for line in valid_lines:
        row = _row(line)
        if row.get("call_index") == 1:
            row["call_index"] = 2
        gap.append(_dump(row))
    _expect(tmp_path, _join(gap), "call 1 is missing", None, 1)


def test_events_must_belong_to_an_open_call_in_order(tmp_path, valid_lines):
    first_event = _line_of(valid_lines, "event", 0, 0)
    orphan = _edit(valid_lines, first_event, lambda r: r.update(call_index=7))
    _expect(tmp_path, _join(orphan), "no request line", first_event, 7)
    skipped = _edit(valid_lines, first_event, lambda r: r.update(event_index=1))
    _expect(tmp_path, _join(skipped), "event_index 1 where 0 was expected", first_event, 0)
    boolean = _edit(valid_lines, first_event + 1, lambda r: r.update(event_index=True))
    _expect(tmp_path, _join(boolean), "event_index True", first_event + 1, 0)
    end = _line_of(valid_lines, "call_end", 0)
    late = [*valid_lines[:end], valid_lines[first_event - 1], *valid_lines[end:]]
    _expect(tmp_path, _join(late), "after the call_end", end + 1, 0)


def test_every_call_needs_one_matching_call_end(tmp_path, valid_lines):
    end = _line_of(valid_lines, "call_end", 0)
    missing = [*valid_lines[: end - 1], *valid_lines[end:]]
    _expect(tmp_path, _join(missing), "no call_end", 2, 0)
    doubled = [*valid_lines[:end], valid_lines[end - 1], *valid_lines[end:]]
    _expect(tmp_path, _join(doubled), "after the call_end", end + 1, 0)
    wrong = _edit(valid_lines, end, lambda r: r.update(event_count=r["event_count"] + 1))
    _expect(tmp_path, _join(wrong), "event_count", end, 0)
    boolean = _edit(valid_lines, end, lambda r: r.update(event_count=True))
    _expect(tmp_path, _join(boolean), "event_count", end, 0)
    outcome = _edit(valid_lines, end, lambda r: r.update(outcome="exploded"))
    _expect(tmp_path, _join(outcome), "unknown outcome", end, 0)


def test_events_must_parse_into_their_class(tmp_path, valid_lines):
    number = _line_of(valid_lines, "event", 1, 2)  # a text_delta
    unknown = _edit(valid_lines, number, lambda r: r["event"].update(type="text_shout"))
    _expect(tmp_path, _join(unknown), "unknown event type", number, 1)
    no_delta = _edit(valid_lines, number, lambda r: r["event"].pop("delta"))
    _expect(tmp_path, _join(no_delta), "does not parse as EventTextDelta: delta", number, 1)
    bad_partial = _edit(
        valid_lines,
        _line_of(valid_lines, "event", 1, 0),
        lambda r: r["event"]["partial"].update(usage=5),
    )
    _expect(
        tmp_path,
        _join(bad_partial),
        "does not parse as EventStart",
        _line_of(valid_lines, "event", 1, 0),
        1,
    )
    not_object = _edit(valid_lines, number, lambda r: r.update(event=[1]))
    _expect(tmp_path, _join(not_object), "JSON object", number, 1)


def test_partial_patches_must_apply(tmp_path, valid_lines):
    number = _line_of(valid_lines, "event", 1, 2)
    row = _row(valid_lines[number - 1])
    assert row["event"]["partial_patch"][0][0] == "append"
    wrong_path = _edit(
        valid_lines,
        number,
        lambda r: r["event"].update(partial_patch=[["append", ["content", 5, "text"], "x"]]),
    )
    _expect(tmp_path, _join(wrong_path), "partial_patch does not apply", number, 1)
    wrong_type = _edit(
        valid_lines, number, lambda r: r["event"].update(partial_patch=[["append", ["usage"], "x"]])
    )
    _expect(tmp_path, _join(wrong_type), "partial_patch does not apply", number, 1)
    # A field name that is not a string (here a list, which cannot even be a dict key) is a
    # file error like any other, never a TypeError from the reader.
    list_field = _edit(
        valid_lines,
        number,
        lambda r: r["event"].update(partial_patch=[["append", ["content", 0, ["text"]], "x"]]),
    )
    _expect(tmp_path, _join(list_field), "partial_patch does not apply", number, 1)
    first = _line_of(valid_lines, "event", 1, 0)
    first_patched = _edit(
        valid_lines, first, lambda r: r.update(event={"type": "start", "partial_patch": []})
    )
    _expect(tmp_path, _join(first_patched), "no earlier partial", first, 1)
    both = _edit(valid_lines, number, lambda r: r["event"].update(partial={}))
    _expect(tmp_path, _join(both), "both partial and partial_patch", number, 1)
    done = _line_of(valid_lines, "call_end", 1) - 1
    assert _row(valid_lines[done - 1])["event"]["type"] == "done"
    on_done = _edit(valid_lines, done, lambda r: r["event"].update(partial_patch=[]))
    _expect(tmp_path, _join(on_done), "no partial to patch", done, 1)
    invalid_result = _edit(
        valid_lines, number, lambda r: r["event"].update(partial_patch=[["set", ["content"], 3]])
    )
    _expect(tmp_path, _join(invalid_result), "does not parse", number, 1)


def test_request_payloads_must_be_objects(tmp_path, valid_lines):
    _expect(tmp_path, _join(_edit(valid_lines, 2, lambda r: r.update(model="m"))), "model", 2, 0)
    _expect(tmp_path, _join(_edit(valid_lines, 2, lambda r: r.pop("context"))), "context", 2, 0)
    _expect(
        tmp_path, _join(_edit(valid_lines, 2, lambda r: r.update(options=[1]))), "options", 2, 0
    )


def test_only_newline_splits_lines(tmp_path, valid_lines):
    text_line = _line_of(valid_lines, "request", 1)
    lines = _edit(
        valid_lines,
        text_line,
        lambda r: r["context"]["messages"][0].update(content="x\u2028y\u2029z\u0085w\r"),
    )
    path = tmp_path / "rec.jsonl"
    path.write_bytes(_join(lines))
    assert (
        read_recording_file(path).calls[1].request["context"]["messages"][0]["content"]
        == "x\u2028y\u2029z\u0085w\r"
    )


# ----------------------------------------------------------------------------- fuzzing

corruptions = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("duplicate"), st.floats(0, 1)),
    st.tuples(st.just("delete"), st.floats(0, 1)),
    st.tuples(st.just("swap"), st.floats(0, 1), st.floats(0, 1)),
    st.tuples(st.just("flip"), st.floats(0, 1), st.integers(1, 255)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.binary(max_size=12)),
)


def _corrupt(lines: list[bytes], operation: tuple) -> bytes:
    lines = list(lines)
    pick = lambda fraction: min(int(fraction * len(lines)), len(lines) - 1)  # noqa: E731
    kind = operation[0]
    if kind == "truncate":
        data = _join(lines)
        return data[: int(operation[1] * len(data))]
    if kind == "duplicate":
        index = pick(operation[1])
        lines.insert(index, lines[index])
    elif kind == "delete":
        del lines[pick(operation[1])]
    elif kind == "swap":
        a, b = pick(operation[1]), pick(operation[2])
        lines[a], lines[b] = lines[b], lines[a]
    else:
        data = bytearray(_join(lines))
        position = min(int(operation[1] * len(data)), len(data) - 1)
        if kind == "flip":
            data[position] ^= operation[2]
        else:
            data[position:position] = operation[2]
        return bytes(data)
    return _join(lines)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(corruptions, min_size=1, max_size=3))
def test_a_damaged_file_raises_only_recording_file_error(tmp_path, valid_lines, operations):
    data = _join(valid_lines)
    for operation in operations:
        data = _corrupt(
            data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n"), operation
        )
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(data)
    try:
        recording = read_recording_file(path)
    except RecordingFileError as error:
        assert error.path == str(path)
        assert error.line_number is None or 1 <= error.line_number <= data.count(b"\n") + 1
        return
    for call in recording.calls:  # accepted: then every event must really be there
        assert len(list(call.events())) == call.event_count


def test_the_last_event_dump_is_the_terminal_event_without_building_the_others(
    tmp_path, monkeypatch
):
    """``recordings diff``, ``show --conversation`` and the drift page read each call's final
    message: from the kept terminal event, never by serving every snapshot before it."""
    import asyncio

    from openprogram.providers.faux import FauxProvider, faux_text
    from openprogram.providers.recording import RecordingProvider
    from openprogram.recordings.file import reader as reader_module

    from .test_recording_support import MODEL, collect, context_of

    path = tmp_path / "r.jsonl"
    provider = RecordingProvider(
        FauxProvider([faux_text(" ".join(f"w{n}" for n in range(300)))], timestamp=1), path
    )
    live = asyncio.run(collect(provider.stream(MODEL, context_of("go"))))
    provider.sink.close()
    call = reader_module.read_recording_file(path).calls[0]
    expected = live[-1].model_dump(mode="json")

    def no_serving(entries):
        raise AssertionError("every event was served to find the last")

    monkeypatch.setattr(reader_module, "_served", no_serving)
    assert call.last_event_dump() == expected
    assert (
        reader_module.read_recording_file(path, summary_only=True).calls[0].last_event_dump()
        == expected
    )
