"""The strict reader's shortcuts (``recordings/reader_fast.py``) held to its plain way.

``appended_snapshot`` must build exactly the snapshot that applying the patch to a dict and
validating it builds, and decline every patch it cannot (a malformed one included, so a bad
file is still rejected). The reader with the shortcut switched off must read the same events.
``collector_paused`` must leave the collector as it found it.
"""

from __future__ import annotations

import asyncio
import gc

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from openprogram.providers import faux
from openprogram.providers.recording import RecordingProvider
from openprogram.providers.types import (
    AssistantMessage,
    Context,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    UserMessage,
)
from openprogram.recordings.file import reader, reader_fast
from openprogram.recordings.file.patches import PatchError, apply_patch
from openprogram.recordings.file.reader_fast import appended_snapshot, collector_paused

MODEL = Model(id="m", api="faux", provider="faux")
_TEXT = st.text(max_size=8)

blocks = st.one_of(
    st.builds(TextContent, text=_TEXT, text_signature=st.none() | _TEXT),
    st.builds(
        ThinkingContent,
        thinking=_TEXT,
        thinking_signature=st.none() | _TEXT,
        redacted=st.booleans(),
    ),
    st.builds(
        ToolCall, id=_TEXT, name=_TEXT, arguments=st.dictionaries(_TEXT, st.integers(), max_size=2)
    ),
)
messages = st.builds(
    AssistantMessage,
    content=st.lists(blocks, max_size=3),
    api=st.just("faux"),
    provider=st.just("faux"),
    model=st.just("m"),
    usage=st.builds(Usage, input=st.integers(0, 9), output=st.integers(0, 9)),
    timestamp=st.integers(0, 10),
)
_FIELDS = st.sampled_from(
    [
        "text",
        "thinking",
        "id",
        "name",
        "text_signature",
        "thinking_signature",
        "type",
        "redacted",
        "arguments",
        "nope",
    ]
)
appends = st.builds(
    lambda index, field, suffix: ["append", ["content", index, field], suffix],
    st.integers(-1, 3) | st.booleans(),
    _FIELDS,
    _TEXT | st.integers(0, 3) | st.none(),
)
other_ops = st.one_of(
    st.builds(lambda suffix: ["append", ["content", 0], suffix], _TEXT),
    st.builds(lambda suffix: ["append", ["usage"], suffix], _TEXT),
    st.builds(lambda value: ["set", ["content", 0, "text"], value], _TEXT),
    st.just(["append", ["content", 0, "text"]]),
    st.just("append"),
)
patches = st.lists(appends | other_ops, min_size=0, max_size=2)


def plain_snapshot(previous: AssistantMessage, patch: list) -> AssistantMessage | None:
    """The reader's plain way: the patch applied to the dict, the result validated; None
    when the file would be rejected."""
    try:
        return AssistantMessage.model_validate(apply_patch(previous.model_dump(mode="json"), patch))
    except (PatchError, ValidationError):
        return None


@settings(max_examples=400, deadline=None)
@given(messages, patches)
def test_a_hand_built_snapshot_is_the_validated_one(previous, patch):
    # The reader's previous snapshot is always validated from a full dump (every field set).
    previous = type(previous).model_validate(previous.model_dump(mode="json"))
    before = previous.model_dump(mode="json")
    built = appended_snapshot(previous, patch)
    expected = plain_snapshot(previous, patch)
    assert previous.model_dump(mode="json") == before  # the previous snapshot is not changed
    if built is None:
        return  # declined: the reader takes the plain way
    snapshot, (index, field, suffix) = built
    assert expected is not None  # never accepts what the plain way rejects
    assert snapshot == expected
    assert snapshot.model_dump(mode="json") == expected.model_dump(mode="json")
    assert snapshot.model_fields_set == expected.model_fields_set
    assert patch == [["append", ["content", index, field], suffix]]


@settings(max_examples=200, deadline=None)
@given(messages.filter(lambda message: message.content), st.data())
def test_every_text_growth_takes_the_shortcut(previous, data):
    """The shortcut is really taken for what streaming writes: one append to a string."""
    index = data.draw(st.integers(0, len(previous.content) - 1))
    block = previous.content[index]
    field = {"text": "text", "thinking": "thinking", "toolCall": "name"}[block.type]
    patch = [["append", ["content", index, field], data.draw(_TEXT)]]
    built = appended_snapshot(previous, patch)
    assert built is not None
    assert built[0] == plain_snapshot(previous, patch)


def test_a_patch_growing_a_literal_field_is_left_to_validation():
    previous = AssistantMessage(
        content=[TextContent(text="a")], api="faux", provider="faux", model="m"
    )
    assert appended_snapshot(previous, [["append", ["content", 0, "type"], "x"]]) is None
    assert plain_snapshot(previous, [["append", ["content", 0, "type"], "x"]]) is None


def _record(path, words_per_chunk: int) -> list:
    blocks = (
        faux.FauxThinking("let me think about it " * 5),
        faux.FauxText("the answer is forty two " * 8),
        faux.FauxToolCall("f", {"q": 1}),
    )
    answer = faux.FauxResponse(blocks=blocks)
    provider = RecordingProvider(
        faux.FauxProvider([answer], words_per_chunk=words_per_chunk, timestamp=1), path
    )

    async def go() -> list:
        return [
            event
            async for event in provider.stream(
                MODEL, Context(messages=[UserMessage(content="q", timestamp=1)])
            )
        ]

    events = asyncio.run(go())
    provider.sink.close()
    return events


def _live_and_served(path, words_per_chunk: int, monkeypatch, shortcut: bool) -> tuple[list, list]:
    """The events a recording's provider streamed, and the reader's events of that file,
    each as the bytes of its JSON dump."""
    live = _record(path, words_per_chunk)
    if not shortcut:  # neither the line form's shortcut nor the patch's: dicts and validation
        monkeypatch.setattr(reader, "_DELTA_LINE", lambda line: None)
        monkeypatch.setattr(
            reader_fast.Snapshots, "append_to", lambda self, index, field, suffix: None
        )
    served = reader.read_recording_file(path).calls[0].events()
    return [orjson.dumps(event.model_dump(mode="json")) for event in live], [
        orjson.dumps(event.model_dump(mode="json")) for event in served
    ]


@pytest.mark.parametrize("words_per_chunk", [1, 3])
def test_the_reader_reads_the_same_events_without_the_shortcut(
    tmp_path, monkeypatch, words_per_chunk
):
    taken = []
    append_to = reader_fast.Snapshots.append_to

    def counted(self, index, field, suffix):
        found = append_to(self, index, field, suffix)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(reader_fast.Snapshots, "append_to", counted)
    live, fast = _live_and_served(
        tmp_path / "fast.jsonl", words_per_chunk, monkeypatch, shortcut=True
    )
    assert sum(taken) > 20  # the shortcut was taken for the text growth
    monkeypatch.undo()
    live_again, plain = _live_and_served(
        tmp_path / "plain.jsonl", words_per_chunk, monkeypatch, shortcut=False
    )
    assert fast == plain == live == live_again  # byte for byte


def test_events_whose_check_took_the_shortcut_may_still_be_kept_as_stored(tmp_path, monkeypatch):
    """When an event cannot be kept for later (``kept_for_later`` declines), its stored form
    is kept and served the plain way, while the appends before it were only checked: the
    snapshots still come out the same."""
    declined = []

    def decline(event, append, fields_sets):
        declined.append(append)
        return None

    monkeypatch.setattr(reader, "kept_for_later", decline)
    monkeypatch.setattr(
        reader, "_DELTA_LINE", lambda line: None
    )  # every delta through the general path
    live, served = _live_and_served(tmp_path / "r.jsonl", 1, monkeypatch, shortcut=True)
    assert len(declined) > 20
    assert served == live


def test_events_served_lazily_are_new_objects_a_consumer_may_change(tmp_path):
    """Snapshots are built from private state: changing an event received (its message,
    its content list) changes neither the later events nor a second serving."""
    path = tmp_path / "r.jsonl"
    live = _record(path, 1)
    call = reader.read_recording_file(path).calls[0]
    expected = [event.model_dump(mode="json") for event in live]
    served = []
    for event in call.events():
        served.append(event.model_dump(mode="json"))
        partial = getattr(event, "partial", None)
        if partial is not None:
            partial.content.append(TextContent(text="consumer"))
            partial.stop_reason = "error"
    assert served == expected
    assert [event.model_dump(mode="json") for event in call.events()] == expected


def test_an_unchanged_snapshot_and_a_grown_one_take_the_shortcut():
    previous = AssistantMessage(
        content=[TextContent(text="a")], api="faux", provider="faux", model="m"
    )
    snapshots = reader_fast.Snapshots(previous)
    assert snapshots.append_of([]) == ()
    assert snapshots.append_of([["append", ["content", 0, "text"], "b"]]) == (0, "text", "b")
    snapshots.grow(())
    assert snapshots.snapshot() == previous and snapshots.snapshot() is not previous
    snapshots.grow((0, "text", "b"))
    assert snapshots.snapshot().content[0].text == "ab" and previous.content[0].text == "a"


def test_collector_paused_restores_the_collector_and_promotes_what_was_made():
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        made = [[index] for index in range(10)]
    assert gc.isenabled() and gc.get_freeze_count() == 0
    oldest = {id(item) for item in gc.get_objects(generation=2)}
    assert all(id(item) in oldest for item in made)


def test_collector_paused_leaves_a_disabled_collector_off_and_skips_promotion_on_error(monkeypatch):
    promoted = []
    monkeypatch.setattr(reader_fast, "promote_to_oldest_generation", lambda: promoted.append(True))
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled() and promoted == [True]
    finally:
        gc.enable()
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("a bad file")
    assert gc.isenabled() and promoted == [True]  # a failed read promotes nothing


def test_promotion_keeps_what_the_program_froze_frozen():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        reader_fast.promote_to_oldest_generation()
        # Promotion would have unfrozen everything (a count of 0); a frozen object freed
        # meanwhile (by another thread of the test worker) may lower the count.
        assert 0 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def test_the_line_form_shortcut_reads_what_the_general_path_reads(tmp_path, monkeypatch):
    """Deltas in the writer's line form are read by one regular expression, no dict and no
    validation (``reader.delta_line``); the calls it builds serve the same events as the
    general path, and it leaves every line not exactly in that form to the general path."""
    path = tmp_path / "r.jsonl"
    live = _record(path, 1)
    taken = []
    delta_line = reader._Reader.delta_line

    def counted(self, number, line):
        found = delta_line(self, number, line)
        taken.append(found)
        return found

    monkeypatch.setattr(reader._Reader, "delta_line", counted)
    fast = [
        event.model_dump(mode="json")
        for event in reader.read_recording_file(path).calls[0].events()
    ]
    assert sum(taken) > 20
    monkeypatch.setattr(reader, "_DELTA_LINE", lambda line: None)
    plain = [
        event.model_dump(mode="json")
        for event in reader.read_recording_file(path).calls[0].events()
    ]
    assert fast == plain == [event.model_dump(mode="json") for event in live]


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"event","call_index":0,"event_index":1,"t":0,"event":{"type":"text_delta","content_index":0,"delta":"ab","partial_patch":[["append",["content",0,"text"],"ac"]]}}\n',
        b'{"type":"event","call_index":0,"event_index":1,"t":0,"event":{"type":"text_delta","content_index":0,"delta":"ab","partial_patch":[["append",["content",1,"text"],"ab"]]}}\n',
        b'{"type":"event","call_index":0,"event_index":1,"t":01,"event":{"type":"text_delta","content_index":0,"delta":"ab","partial_patch":[["append",["content",0,"text"],"ab"]]}}\n',
        b'{"type":"event","call_index":0,"event_index":1,"t":0,"event":{"type":"text_delta","content_index":0,"delta":"a\nb","partial_patch":[["append",["content",0,"text"],"a\nb"]]}}\n',
        b'{"type":"event","call_index":0,"event_index":1,"t":0,"event":{"type":"text_delta","content_index":0,"delta":"ab","partial_patch":[["append",["content",0,"text"],"ab"]]}} \n',
    ],
    ids=["two-deltas", "two-indexes", "leading-zero", "raw-newline", "trailing-space"],
)
def test_the_line_form_matches_only_the_writers_exact_form(line):
    assert reader._DELTA_LINE(line) is None
