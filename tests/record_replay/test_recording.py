"""RecordingSink and RecordingProvider: file creation, transparency, every exit path of a call,
write failures, and the linear-size encoding."""

from __future__ import annotations

import asyncio
import errno
import os
import stat

import orjson
import pytest

from openprogram.providers.faux import FauxProvider, faux_error, faux_text, faux_tool_call
from openprogram.providers.recording import (
    PLACEHOLDER,
    RECORDING_FORMAT_VERSION,
    SECRET_FIELD_NAMES,
    RecordingFileError,
    RecordingProvider,
    RecordingSink,
    remove_secret_values,
)
from openprogram.providers.replay import read_recording_file
from openprogram.providers.types import SimpleStreamOptions, StreamOptions
from openprogram.recordings.file import sink as sink_module
from openprogram.recordings.redaction import REDACTION_VERSION

from .test_recording_support import (
    MODEL,
    ScriptedProvider,
    call_ends,
    collect,
    context_of,
    rows_of,
    text_events,
)


def test_reexported_redaction_names():
    from openprogram.recordings import redaction

    assert PLACEHOLDER == "[secret removed]"
    assert SECRET_FIELD_NAMES is redaction.SECRET_FIELD_NAMES
    assert remove_secret_values is redaction.remove_secret_values
    assert RECORDING_FORMAT_VERSION == 2


# ----------------------------------------------------------------------------- the sink


def test_a_new_file_gets_a_header_owner_only_modes_and_private_parents(tmp_path):
    path = tmp_path / "new" / "deeper" / "rec.jsonl"
    RecordingSink(path).close()
    (header,) = rows_of(path)
    assert header["type"] == "header" and header["format_version"] == 2
    assert header["redaction_version"] == REDACTION_VERSION
    assert len(header["recording_id"]) == 32 and header["created_at"].endswith("Z")
    from openprogram import __version__

    assert header["openprogram_version"] == __version__
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "new" / "deeper").stat().st_mode) == 0o700


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o277])
def test_private_folders_are_owner_only_at_every_level_made_and_leave_others_alone(tmp_path, umask):
    import os

    from openprogram.recordings.file.folders import make_private_folders

    tmp_path.chmod(0o755)  # a folder of the user's: not ours to change
    previous = os.umask(umask)
    try:
        created = make_private_folders(tmp_path / "a" / "b" / "c")
        assert make_private_folders(tmp_path / "a" / "b" / "c") == []
    finally:
        os.umask(previous)
    assert created == [tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"]
    assert [stat.S_IMODE(path.stat().st_mode) for path in created] == [0o700] * 3
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o755
    (tmp_path / "file").write_text("")
    with pytest.raises(FileExistsError):
        make_private_folders(tmp_path / "file")


def test_a_symlink_is_refused(tmp_path):
    target = tmp_path / "target.jsonl"
    RecordingSink(target).close()
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    before = target.read_bytes()
    with pytest.raises(RecordingFileError, match="symbolic link"):
        RecordingSink(link)
    assert target.read_bytes() == before


async def test_appending_checks_the_header_and_continues_the_call_index(tmp_path):
    path = tmp_path / "rec.jsonl"
    for round_number in range(2):
        provider = RecordingProvider(FauxProvider([faux_text("a"), faux_text("b")]), path)
        for text in ("x", "y"):
            await collect(provider.stream(MODEL, context_of(f"{round_number}{text}")))
        provider.sink.close()
    requests = [row for row in rows_of(path) if row["type"] == "request"]
    assert [row["call_index"] for row in requests] == [0, 1, 2, 3]
    assert sum(row["type"] == "header" for row in rows_of(path)) == 1
    assert len(read_recording_file(path).calls) == 4


@pytest.mark.parametrize(
    "content, reason",
    [
        (b'{"type":"request","call_index":0}\n', "header"),
        (b'{"type":"header","format_version":3}\n', "format_version"),
        (b'{"type":"header","format_version":true}\n', "format_version"),
        (b"not json\n", "header"),
        (b'{"type":"header","format_version":1', "incomplete"),
    ],
)
def test_appending_to_a_foreign_or_damaged_file_is_refused(tmp_path, content, reason):
    path = tmp_path / "rec.jsonl"
    path.write_bytes(content)
    with pytest.raises(RecordingFileError, match=reason):
        RecordingSink(path)
    assert path.read_bytes() == content


async def test_a_line_left_unfinished_by_a_dead_writer_is_refused_by_the_next_sink(tmp_path):
    path = tmp_path / "rec.jsonl"
    RecordingSink(path).close()
    with open(path, "ab") as file:
        file.write(b'{"type":"event","call_in')  # a writer killed in the middle of a line
    before = path.read_bytes()
    with pytest.raises(RecordingFileError) as caught:
        RecordingProvider(FauxProvider([faux_text("a")]), path)
    assert caught.value.line_number == 2 and "openprogram recordings recover" in caught.value.reason
    assert path.read_bytes() == before  # nothing glued onto the torn line
    with pytest.raises(RecordingFileError) as caught:
        read_recording_file(path)
    assert caught.value.line_number == 2 and "incomplete" in caught.value.reason


async def test_two_sinks_on_one_file_share_one_call_order(tmp_path):
    path = tmp_path / "rec.jsonl"
    first = RecordingProvider(FauxProvider([faux_text("one")] * 3), path)
    second = RecordingProvider(FauxProvider([faux_text("two")] * 3), RecordingSink(path))
    for _ in range(3):
        await collect(first.stream(MODEL, context_of("a")))
        await collect(second.stream(MODEL, context_of("b")))
    recording = read_recording_file(path)
    assert [call.request["context"]["messages"][0]["content"] for call in recording.calls] == [
        "a",
        "b",
    ] * 3


# ----------------------------------------------------------------------------- transparency


async def test_recording_is_transparent_and_writes_before_yielding(tmp_path):
    path = tmp_path / "rec.jsonl"
    faux = FauxProvider([faux_tool_call("echo", {"value": "hi"}, text="calling")], timestamp=3)
    reference = await collect(
        FauxProvider([faux_tool_call("echo", {"value": "hi"}, text="calling")], timestamp=3).stream(
            MODEL, context_of("go")
        )
    )
    provider = RecordingProvider(faux, path)
    seen = []
    held_kinds = {"text_delta", "toolcall_delta"}
    async for event in provider.stream(MODEL, context_of("go")):
        written = [row for row in rows_of(path) if row["type"] == "event"]
        if event.type in held_kinds:
            # A delta's line may wait until the text past it is known safe (its block's end at
            # the latest): "calling" has no safe point, the arguments wait for toolcall_end.
            assert len(written) <= len(seen) + 1
        else:
            assert len(written) == len(seen) + 1, (
                "every other event is written before it is yielded"
            )
        if event.type == "done":
            assert call_ends(path) == [
                {"type": "call_end", "call_index": 0, "event_count": len(seen) + 1}
            ]
        seen.append(event)
    assert seen == reference
    replayed = list(read_recording_file(path).calls[0].events())
    assert replayed == reference


async def test_the_request_line_is_written_before_the_wrapped_provider_is_called(tmp_path):
    path = tmp_path / "rec.jsonl"
    observed = []

    class Probe(FauxProvider):
        def stream(self, model, context, options=None):
            observed.append([row["type"] for row in rows_of(path)])
            return super().stream(model, context, options)

    await collect(RecordingProvider(Probe([faux_text("x")]), path).stream(MODEL, context_of("q")))
    assert observed == [["header", "request"]]


async def test_runtime_only_options_reach_the_wrapped_provider_untouched(tmp_path):
    faux = FauxProvider([faux_text("x")])
    signal = asyncio.Event()
    hook = lambda payload: payload  # noqa: E731
    options = SimpleStreamOptions(
        temperature=0.2, signal=signal, on_payload=hook, api_key="sk-" + "k" * 24
    )
    provider = RecordingProvider(faux, tmp_path / "rec.jsonl")
    await collect(provider.stream_simple(MODEL, context_of("q"), options))
    assert faux.calls[0][2] is options
    assert options.signal is signal and options.on_payload is hook
    request = rows_of(tmp_path / "rec.jsonl")[1]
    assert request["options"]["temperature"] == 0.2
    assert request["options"]["api_key"] == PLACEHOLDER
    assert "signal" not in request["options"] and "on_payload" not in request["options"]


def test_properties(tmp_path):
    path = tmp_path / "rec.jsonl"
    keyless = RecordingProvider(FauxProvider(), path)
    assert keyless.requires_credentials is False
    assert keyless.recording_path == path

    class Bare:
        def stream(self, model, context, options=None): ...

        stream_simple = stream

    assert RecordingProvider(Bare(), RecordingSink(path)).requires_credentials is True


# ----------------------------------------------------------------------------- exit paths


async def test_a_provider_exception_is_recorded_and_propagates_unchanged(tmp_path):
    path = tmp_path / "rec.jsonl"
    boom = RuntimeError("boom")
    scripted = ScriptedProvider(
        text_events(["a", "b"]), raise_after=3, error=boom, with_aclose=True
    )
    with pytest.raises(RuntimeError) as caught:
        await collect(RecordingProvider(scripted, path).stream(MODEL, context_of("q")))
    assert caught.value is boom
    assert call_ends(path) == [
        {"type": "call_end", "call_index": 0, "event_count": 3, "outcome": "error"}
    ]
    assert scripted.streams[0].closed
    assert read_recording_file(path).calls[0].outcome == "error"


async def test_a_synchronous_start_failure_is_recorded(tmp_path):
    path = tmp_path / "rec.jsonl"

    class Failing:
        def stream(self, model, context, options=None):
            raise ValueError("bad request")

        stream_simple = stream

    with pytest.raises(ValueError, match="bad request"):
        await collect(RecordingProvider(Failing(), path).stream_simple(MODEL, context_of("q")))
    assert call_ends(path) == [
        {"type": "call_end", "call_index": 0, "event_count": 0, "outcome": "error"}
    ]


async def test_cancellation_of_the_consuming_task_is_recorded(tmp_path):
    path = tmp_path / "rec.jsonl"
    scripted = ScriptedProvider(text_events(["a", "b"]), hang_after=2, with_aclose=True)
    started = asyncio.Event()

    async def consume():
        async for event in RecordingProvider(scripted, path).stream(MODEL, context_of("q")):
            if event.type == "text_start":
                started.set()

    task = asyncio.create_task(consume())
    await started.wait()
    await asyncio.sleep(0)  # let the consumer reach the provider's endless wait
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert call_ends(path) == [
        {"type": "call_end", "call_index": 0, "event_count": 2, "outcome": "cancelled"}
    ]
    assert scripted.streams[0].closed


async def test_closing_the_stream_early_is_recorded_as_abandoned(tmp_path):
    path = tmp_path / "rec.jsonl"
    scripted = ScriptedProvider(text_events(["a", "b", "c"]), with_aclose=True)
    stream = RecordingProvider(scripted, path).stream(MODEL, context_of("q"))
    assert (await anext(stream)).type == "start"
    assert (await anext(stream)).type == "text_start"
    await stream.aclose()
    assert call_ends(path) == [
        {"type": "call_end", "call_index": 0, "event_count": 2, "outcome": "abandoned"}
    ]
    assert scripted.streams[0].closed
    assert read_recording_file(path).calls[0].outcome == "abandoned"


async def test_a_consumer_that_stops_at_the_terminal_event_leaves_a_complete_call(tmp_path):
    path = tmp_path / "rec.jsonl"
    scripted = ScriptedProvider(text_events(["a"]), with_aclose=True)
    stream = RecordingProvider(scripted, path).stream(MODEL, context_of("q"))
    events = []
    while not events or events[-1].type != "done":
        events.append(await anext(stream))
    # No aclose, no further iteration: the call is already complete and the inner stream closed.
    assert call_ends(path) == [{"type": "call_end", "call_index": 0, "event_count": len(events)}]
    assert scripted.streams[0].closed
    assert read_recording_file(path).calls[0].outcome == "complete"
    await stream.aclose()
    assert len(call_ends(path)) == 1


async def test_a_plain_async_iterator_without_aclose_is_recorded(tmp_path):
    path = tmp_path / "rec.jsonl"
    events = text_events(["a", "b"])
    scripted = ScriptedProvider(events)  # no aclose at all
    assert await collect(RecordingProvider(scripted, path).stream(MODEL, context_of("q"))) == events
    stream = RecordingProvider(scripted, path).stream(MODEL, context_of("q"))
    await anext(stream)
    await stream.aclose()
    assert [row.get("outcome", "complete") for row in call_ends(path)] == ["complete", "abandoned"]


async def test_a_stream_that_ends_without_a_terminal_event_is_an_error(tmp_path):
    path = tmp_path / "rec.jsonl"
    events = text_events(["a"])[:-1]
    assert (
        await collect(
            RecordingProvider(ScriptedProvider(events), path).stream(MODEL, context_of("q"))
        )
        == events
    )
    assert call_ends(path)[0]["outcome"] == "error"


async def test_an_error_event_is_a_complete_call(tmp_path):
    path = tmp_path / "rec.jsonl"
    provider = RecordingProvider(
        FauxProvider([faux_error("overloaded", partial_text="so far")]), path
    )
    events = await collect(provider.stream(MODEL, context_of("q")))
    assert events[-1].type == "error"
    assert call_ends(path)[0].get("outcome", "complete") == "complete"
    assert list(read_recording_file(path).calls[0].events()) == events


# ----------------------------------------------------------------------------- write failures


async def test_a_removed_file_fails_the_call(tmp_path):
    path = tmp_path / "rec.jsonl"
    provider = RecordingProvider(FauxProvider([faux_text("a b c")] * 2), path)
    await collect(provider.stream(MODEL, context_of("q")))
    path.unlink()
    with pytest.raises(RecordingFileError, match="removed"):
        await collect(provider.stream(MODEL, context_of("q")))


@pytest.mark.parametrize("fail_at", [0, 3])
async def test_a_failing_write_fails_the_call_with_a_clear_error(tmp_path, monkeypatch, fail_at):
    path = tmp_path / "rec.jsonl"
    faux = FauxProvider([faux_text("a b c")])
    provider = RecordingProvider(faux, path)
    real_write = os.write
    writes = {"count": 0}

    def failing_write(fd, data):
        writes["count"] += 1
        if writes["count"] > fail_at:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(sink_module.os, "write", failing_write)
    with pytest.raises(RecordingFileError, match="No space left on device") as caught:
        await collect(provider.stream(MODEL, context_of("q")))
    assert str(path) in str(caught.value)
    monkeypatch.undo()
    if fail_at:  # events were lost: the sink refuses further calls rather than record less
        with pytest.raises(RecordingFileError, match="incomplete"):
            await collect(provider.stream(MODEL, context_of("q")))
        with pytest.raises(RecordingFileError, match="no call_end"):
            read_recording_file(path)
    else:  # the request line was never written: nothing is lost, the file stays valid
        assert faux.calls == []
        assert read_recording_file(path).calls == []


async def test_closing_the_sink_mid_stream_fails_the_call_with_a_clear_error(tmp_path):
    """An event after the sink was closed is refused by name, not with a bad descriptor."""
    path = tmp_path / "rec.jsonl"
    provider = RecordingProvider(FauxProvider([faux_text("a b c d")]), path)
    stream = provider.stream(MODEL, context_of("q"))
    await anext(stream)
    provider.sink.close()
    with pytest.raises(RecordingFileError, match="the recording sink is closed") as caught:
        await anext(stream)
    assert str(path) in str(caught.value)
    await stream.aclose()


async def test_a_short_write_is_completed_into_one_whole_line(tmp_path, monkeypatch):
    """A write that takes only part of a line (the kernel may do that on a nearly full disk)
    is continued, so the line still lands whole and the recording stays valid."""
    path = tmp_path / "rec.jsonl"
    provider = RecordingProvider(FauxProvider([faux_text("a b c")]), path)
    real_write = os.write
    short = {"done": 0}

    def short_write(fd, data):
        if b'"type":"event"' in bytes(data) and short["done"] < 3:
            short["done"] += 1
            return real_write(fd, bytes(data)[:7])
        return real_write(fd, data)

    monkeypatch.setattr(sink_module.os, "write", short_write)
    events = await collect(provider.stream(MODEL, context_of("q")))
    monkeypatch.undo()
    assert short["done"] == 3
    (call,) = read_recording_file(path).calls
    assert list(call.events()) == events
    # The sink's count of what it wrote still matches the file: the next call appends cleanly.
    provider_two = RecordingProvider(FauxProvider([faux_text("d e")]), provider.sink)
    await collect(provider_two.stream(MODEL, context_of("q")))
    assert [c.call_index for c in read_recording_file(path).calls] == [0, 1]


# ----------------------------------------------------------------------------- encoding


async def test_a_long_answer_is_recorded_in_linear_size_and_replays_exactly(tmp_path):
    path = tmp_path / "rec.jsonl"
    pieces = [f"word{i} " for i in range(2000)]
    events = text_events(pieces)
    await collect(RecordingProvider(ScriptedProvider(events), path).stream(MODEL, context_of("q")))
    bare = sum(len(orjson.dumps(e.model_dump(mode="json", exclude={"partial"}))) for e in events)
    assert path.stat().st_size < 3 * bare
    event_rows = [row["event"] for row in rows_of(path) if row["type"] == "event"]
    assert "partial" in event_rows[0] and all("partial" not in row for row in event_rows[1:-1])
    assert event_rows[5]["partial_patch"] == [["append", ["content", 0, "text"], "word3 "]]
    assert list(read_recording_file(path).calls[0].events()) == events


async def test_line_separators_inside_strings_round_trip(tmp_path):
    path = tmp_path / "rec.jsonl"
    text = "a\u2028b\u2029c\u0085d\re\n f\x00g"
    events = text_events([text[:5], text[5:]])
    await collect(RecordingProvider(ScriptedProvider(events), path).stream(MODEL, context_of(text)))
    recording = read_recording_file(path)
    assert list(recording.calls[0].events()) == events
    assert recording.calls[0].request["context"]["messages"][0]["content"] == text


async def test_stream_and_stream_simple_options_are_recorded_as_dumped(tmp_path):
    path = tmp_path / "rec.jsonl"
    provider = RecordingProvider(FauxProvider([faux_text("a")] * 2), path)
    await collect(provider.stream(MODEL, context_of("q"), StreamOptions(max_tokens=5)))
    await collect(provider.stream_simple(MODEL, context_of("q")))
    first, second = (call.request["options"] for call in read_recording_file(path).calls)
    assert first["max_tokens"] == 5 and "reasoning" not in first
    assert second is None
