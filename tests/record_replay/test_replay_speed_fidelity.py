"""Replay's speed shortcuts change nothing a consumer can see.

Every event a replay serves is held, to the end of the replay, against the event that pydantic
validation of its dict gives, the dict rebuilt from the file here independently of the reader
(each ``partial_patch`` applied by the small applier below): equal, the same dump, the same
fields set at every level. A consumer keeps every event and changes each one it receives
(its message, its content list), and none of this reaches another event: the snapshots share
only content blocks and usage, which are frozen values (a change replaces them, as the
streaming assembler does).
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import BaseModel, ValidationError

from openprogram.providers import faux
from openprogram.providers.recording import RecordingProvider, RecordingSink
from openprogram.providers.replay import ReplayProvider
from openprogram.providers.types import Context, Model, TextContent, UserMessage
from openprogram.recordings.file.format import EVENT_CLASSES

MODEL = Model(id="m", api="faux", provider="faux")


def _context(number: int) -> Context:
    return Context(messages=[UserMessage(content=f"question {number}", timestamp=1)])


def _answers() -> list[faux.FauxResponse]:
    """Answers with every kind of block, streamed in deltas of several sizes."""
    return [
        faux.faux_text("one two three four five six seven"),
        faux.FauxResponse(
            blocks=(
                faux.FauxThinking("let me think about it " * 4),
                faux.FauxText("the answer is forty two " * 5),
                faux.FauxToolCall("lookup", {"q": "forty two", "n": 2}),
            )
        ),
        faux.faux_text(
            '\u00e9l\u00e8ve "quoted" back\\slash tab\t new\nline \u2028 \U0001f600 end'
        ),
        faux.FauxResponse(
            blocks=(faux.FauxText("first block"), faux.FauxText("second block here"))
        ),
    ]


def _record(path: Path, words_per_chunk: int) -> None:
    answers = _answers()
    provider = RecordingProvider(
        faux.FauxProvider(answers, words_per_chunk=words_per_chunk, timestamp=1), path
    )

    async def go() -> None:
        for number in range(len(answers)):
            async for _ in provider.stream(MODEL, _context(number)):
                pass

    asyncio.run(go())
    provider.sink.close()


def _apply(value: Any, patch: list[Any]) -> Any:
    """``patch`` applied to a deep copy of ``value`` (the format's three operations)."""
    value = copy.deepcopy(value)
    for name, path, argument in patch:
        if not path:
            value = argument if name == "set" else [*value, argument]
            continue
        parent = value
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        if name == "set":
            parent[last] = argument
        elif name == "append":
            parent[last] = parent[last] + argument
        else:
            parent[last].append(argument)
    return value


def _expected_events(path: Path) -> list[list[BaseModel]]:
    """Each call's events as pydantic validates their dicts, rebuilt from the file here."""
    calls: dict[int, list[BaseModel]] = {}
    previous: dict[int, Any] = {}
    for line in path.read_bytes().splitlines():
        row = orjson.loads(line)
        if row["type"] != "event":
            continue
        index, dump = row["call_index"], dict(row["event"])
        if "partial_patch" in dump:
            dump["partial"] = _apply(previous[index], dump.pop("partial_patch"))
        if "partial" in dump:
            previous[index] = dump["partial"]
        calls.setdefault(index, []).append(EVENT_CLASSES[dump["type"]].model_validate(dump))
    return [calls[index] for index in sorted(calls)]


def _fields_sets(value: Any) -> Any:
    """The fields set of a model and of every model inside it, as a nested structure."""
    if isinstance(value, BaseModel):
        return (
            type(value).__name__,
            sorted(value.model_fields_set),
            {name: _fields_sets(item) for name, item in value.__dict__.items()},
        )
    if isinstance(value, list):
        return [_fields_sets(item) for item in value]
    return None


def _replayed(path: Path, calls: int, change: bool) -> list[list[BaseModel]]:
    """Every event of a replay of ``path``, all kept; with ``change``, the consumer changes
    each event it receives (its message and its content list) before asking for the next."""

    async def go() -> list[list[BaseModel]]:
        provider = ReplayProvider(path)
        served = []
        for number in range(calls):
            events = []
            async for event in provider.stream(MODEL, _context(number)):
                events.append(event)
                if change:
                    _change(event)
            served.append(events)
        return served

    return asyncio.run(go())


def _change(event: Any) -> None:
    partial = getattr(event, "partial", None)
    message = partial if partial is not None else getattr(event, "message", None)
    if message is None:
        return
    message.content.append(TextContent(text="consumer"))
    if len(message.content) > 1:
        message.content[0] = TextContent(text="replaced")
    message.stop_reason = "error"
    message.timestamp = 999


@pytest.mark.parametrize("words_per_chunk", [1, 3])
def test_every_served_event_equals_its_validated_dict_after_the_whole_replay(
    tmp_path, words_per_chunk
):
    path = tmp_path / "r.jsonl"
    _record(path, words_per_chunk)
    expected = _expected_events(path)
    served = _replayed(path, len(expected), change=False)
    assert sum(len(events) for events in served) > 40
    for got, want in zip(served, expected, strict=True):
        assert got == want  # compared only now: every event was kept through the replay
        assert [event.model_dump(mode="json") for event in got] == [
            event.model_dump(mode="json") for event in want
        ]
        assert [_fields_sets(event) for event in got] == [_fields_sets(event) for event in want]
        assert [type(event) for event in got] == [type(event) for event in want]


def test_a_consumer_changing_each_event_changes_no_other_event(tmp_path):
    path = tmp_path / "r.jsonl"
    _record(path, 1)
    expected = _expected_events(path)
    changed = _replayed(path, len(expected), change=True)
    for got, want in zip(changed, expected, strict=True):
        for event, validated in zip(got, want, strict=True):
            _change(validated)  # the same change applied to the independent event
            assert event == validated
    # And a replay after that consumer serves the recorded events unchanged.
    assert _replayed(path, len(expected), change=False) == _expected_events(path)


def test_snapshots_share_no_mutable_object_only_frozen_blocks(tmp_path):
    path = tmp_path / "r.jsonl"
    _record(path, 1)
    served = [
        event for events in _replayed(path, len(_answers()), change=False) for event in events
    ]
    messages = [event.partial for event in served if "partial" in type(event).model_fields]
    assert len({id(message) for message in messages}) == len(messages)
    assert len({id(message.content) for message in messages}) == len(messages)
    for model in [*messages, *served]:  # a fields set is shared only when it names every field
        shared = [
            other
            for other in [*messages, *served]
            if other.model_fields_set is model.model_fields_set
        ]
        if len(shared) > 1:
            assert model.model_fields_set == set(type(model).model_fields)
    assert len({id(event.__dict__) for event in served}) == len(served)
    shared = {id(block): block for message in messages for block in message.content}
    assert len(shared) < sum(len(message.content) for message in messages)  # blocks are shared
    for block in [*shared.values(), *(message.usage for message in messages)]:
        assert type(block).model_config.get("frozen") is True
        name = next(iter(type(block).model_fields))
        with pytest.raises(ValidationError):
            setattr(block, name, getattr(block, name))


def test_interleaved_calls_of_two_sinks_replay_exactly(tmp_path):
    """Lines of two calls interleaved in one file (two sinks writing at once)."""
    path = tmp_path / "r.jsonl"
    first = RecordingProvider(
        faux.FauxProvider([faux.faux_text("a b c d e f g h")], timestamp=1), RecordingSink(path)
    )
    second = RecordingProvider(
        faux.FauxProvider([faux.faux_text("one two three four five")], timestamp=2),
        RecordingSink(path),
    )

    async def go() -> None:
        streams = [first.stream(MODEL, _context(0)), second.stream(MODEL, _context(1))]
        done = [False, False]
        while not all(done):
            for number, stream in enumerate(streams):
                if not done[number]:
                    try:
                        await stream.__anext__()
                    except StopAsyncIteration:
                        done[number] = True

    asyncio.run(go())
    first.sink.close()
    second.sink.close()
    expected = _expected_events(path)
    lines = path.read_bytes().splitlines()
    assert [orjson.loads(line).get("call_index") for line in lines[2:6]] != [
        0,
        0,
        0,
        0,
    ]  # interleaved
    from openprogram.recordings.file.reader import read_recording_file

    recording = read_recording_file(path)
    assert [list(call.events()) for call in recording.calls] == expected
    assert [list(call.events()) for call in recording.calls] == expected  # served twice alike


def test_a_shared_complete_fields_set_never_changes(tmp_path):
    """Served messages and deltas whose fields set names every field share one set per
    class: pydantic only adds field names to it (an assignment adds the one assigned), so
    assigning every field of one event leaves every other event's set as it was."""
    from openprogram.recordings.file import reader_fast

    for kind in ("text_delta", "thinking_delta"):
        assert set(EVENT_CLASSES[kind].model_fields) == reader_fast._DELTA_FIELDS_SET
    path = tmp_path / "r.jsonl"
    _record(path, 1)
    served = [
        event for events in _replayed(path, len(_answers()), change=False) for event in events
    ]
    before = [_fields_sets(event) for event in served]
    for event in served:
        for model in (event, getattr(event, "partial", None)):
            if model is None:
                continue
            for name in type(model).model_fields:
                setattr(model, name, getattr(model, name))
            name = next(iter(type(model).model_fields))
            copied = model.model_copy(
                update={name: getattr(model, name)}
            )  # copies the set, then adds
            assert copied.model_fields_set is not model.model_fields_set
    assert [_fields_sets(event) for event in served] == before
    assert served == [event for events in _expected_events(path) for event in events]
