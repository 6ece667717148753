"""The recorder's hot path for text growth writes exactly the lines the general path writes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openprogram.providers.faux import (
    FauxProvider,
    FauxResponse,
    FauxText,
    FauxThinking,
    FauxToolCall,
)
from openprogram.providers.types import (
    AssistantMessage,
    Context,
    EventStart,
    EventTextDelta,
    Model,
    TextContent,
    Usage,
    UserMessage,
)
from openprogram.recordings.encoder import EventEncoder
from openprogram.recordings.redaction import current_redactor
from openprogram.recordings.stream_redaction import Growth, StreamRedaction

from .test_stream_redaction import streamed

MODEL = Model(id="m", api="faux", provider="faux")
WORDS = st.sampled_from(
    ["hello", "Bearer", "abc123def456", "sk-", "ABCDEFGHIJKLMNOPQRSTUVWX12", "https://u:p4ssw0rd@h/x",
     "?key=s3cr3tvalue1", "token", " ", "\n", "é", "\u2028", "x" * 120]
)
TEXTS = st.lists(WORDS, max_size=40).map(" ".join)


def stream_events(response: FauxResponse, words_per_chunk: int) -> list:
    provider = FauxProvider([response], words_per_chunk=words_per_chunk, timestamp=1)

    async def collect() -> list:
        return [e async for e in provider.stream(MODEL, Context(messages=[UserMessage(content="q", timestamp=1)]))]

    return asyncio.run(collect())


def general_lines(encoder: EventEncoder, events: list) -> list[bytes]:
    """The lines of the general path alone: the encoder's own fallback, never the hot path."""
    return [encoder._line % (number, 0, encoder._encode_general(event)) for number, event in enumerate(events)]


@settings(max_examples=60, deadline=None)
@given(
    thinking=TEXTS,
    text=TEXTS,
    second_text=TEXTS,
    words_per_chunk=st.integers(min_value=1, max_value=3),
    with_tool=st.booleans(),
    texts_redacted=st.booleans(),
)
def test_hot_path_lines_equal_general_path_lines(thinking, text, second_text, words_per_chunk, with_tool, texts_redacted):
    """Both encoder modes: redacting texts itself, and texts already redacted by the stream
    redaction stage (as in a recording), where no text is redacted again."""
    blocks = [FauxThinking(thinking), FauxText(text)]
    if with_tool:
        blocks.append(FauxToolCall("lookup", {"q": text[:20]}))
    blocks.append(FauxText(second_text))
    events = stream_events(FauxResponse(blocks=tuple(blocks)), words_per_chunk)
    redactor = current_redactor()
    fast = EventEncoder(redactor, texts_redacted=texts_redacted)
    general_calls = 0
    original = fast._encode_general

    def counting(event):
        nonlocal general_calls
        general_calls += 1
        return original(event)

    fast._encode_general = counting  # type: ignore[method-assign]
    expected = general_lines(EventEncoder(redactor, texts_redacted=texts_redacted), events)
    assert [fast.line(event, number, 0) for number, event in enumerate(events)] == expected
    # Tool-call deltas have a fast path where their arguments are parsed from stored deltas.
    served = ("text_delta", "thinking_delta", *(("toolcall_delta",) if texts_redacted else ()))
    deltas = sum(1 for e in events if e.type in served)
    assert general_calls == len(events) - deltas  # the hot path served every delta, each block's first one included


def _message(text: str, usage: Usage | None = None) -> AssistantMessage:
    return AssistantMessage(
        content=[TextContent(text=text)], api="faux", provider="faux", model="m", usage=usage or Usage(), timestamp=1
    )


def _deltas_after(start: AssistantMessage, *steps: tuple[str, AssistantMessage]) -> list:
    events = [EventStart(partial=start)]
    events += [EventTextDelta(content_index=0, delta=delta, partial=partial) for delta, partial in steps]
    return events


@pytest.mark.parametrize(
    "case",
    ["usage changes too", "earlier text rewritten", "a bool content_index", "a new but equal usage"],
)
def test_what_the_hot_path_must_not_take_is_written_by_the_general_path(case):
    """Partials that are not simply "the previous one plus the delta": whichever path takes
    them, the line is the general path's, which writes what really changed."""
    first = _message("Hello")
    second = first.model_copy(update={"content": [TextContent(text="Hello wor")]})
    if case == "usage changes too":
        third = second.model_copy(update={"content": [TextContent(text="Hello world")], "usage": Usage(input=7)})
    elif case == "earlier text rewritten":
        third = second.model_copy(update={"content": [TextContent(text="Jello world")]})
    elif case == "a bool content_index":
        third = second.model_copy(update={"content": [TextContent(text="Hello world")]})
    else:
        third = second.model_copy(update={"content": [TextContent(text="Hello world")], "usage": Usage()})
    events = _deltas_after(first, (" wor", second), ("ld", third))
    if case == "a bool content_index":
        events[2] = EventTextDelta.model_construct(content_index=True, delta="ld", partial=third)
    redactor = current_redactor()
    fast = EventEncoder(redactor)
    lines = [fast.line(event, number, 0) for number, event in enumerate(events)]
    assert lines == general_lines(EventEncoder(redactor), events)
    written = {
        "usage changes too": b'["set",["usage","input"],7]',
        "earlier text rewritten": b'"Jello world"',
        "a bool content_index": b'"content_index":1,"delta":"ld"',  # the serializer's int
        "a new but equal usage": b'"partial_patch":[["append",["content",0,"text"],"ld"]]',
    }[case]
    assert written in lines[2]


@settings(max_examples=40, deadline=None)
@given(thinking=TEXTS, text=TEXTS, words_per_chunk=st.integers(min_value=1, max_value=3), with_tool=st.booleans())
def test_replayed_snapshots_equal_fully_validated_ones(tmp_path_factory, thinking, text, words_per_chunk, with_tool):
    """The reader builds text-growth snapshots from the previous object; they must equal the
    events validated from the restored dicts, dump for dump."""
    from openprogram.providers.recording import RecordingProvider
    from openprogram.providers.replay import read_recording_file
    from openprogram.providers.types import EVENT_CLASSES

    blocks = [FauxThinking(thinking), FauxText(text)]
    if with_tool:
        blocks.append(FauxToolCall("lookup", {"q": text[:20]}))
    path = tmp_path_factory.mktemp("fast") / "r.jsonl"
    recorder = RecordingProvider(
        FauxProvider([FauxResponse(blocks=tuple(blocks))], words_per_chunk=words_per_chunk, timestamp=1), path
    )

    async def record() -> list:
        return [e async for e in recorder.stream(MODEL, Context(messages=[UserMessage(content="q", timestamp=1)]))]

    live = asyncio.run(record())
    recorder.sink.close()
    (call,) = read_recording_file(path).calls
    kept = list(call.events())
    rebuilt = [EVENT_CLASSES[dump["type"]].model_validate(dump) for dump in call.event_dumps()]
    assert [e.model_dump(mode="json") for e in kept] == [e.model_dump(mode="json") for e in rebuilt]
    assert kept == rebuilt
    redact = current_redactor().redact_text
    if all(redact(part) == part for part in (text, thinking, text[:20])):
        assert kept == live  # nothing redacted: the replay is the live stream
    partials = [e.partial for e in kept if hasattr(e, "partial")]
    assert len({id(p) for p in partials}) == len(partials)  # every snapshot is its own message


# ============================================================================ growths the stage hands on


def _stage_lines(events: list[Any], *, materialize: bool, trusting: bool = True) -> tuple[list[bytes], int]:
    """The lines a recording writes for ``events`` (stage then encoder, as the recorder wires
    them), and how many ``Growth`` the stage handed on; ``materialize``: the encoder is
    given each growth's event instead; not ``trusting``: an encoder that redacts texts itself
    (as after ``redact_texts_again``), which takes no growth on trust."""
    stage = StreamRedaction(current_redactor())
    if trusting:
        encoder = EventEncoder(
            current_redactor(), 0, texts_redacted=True, parse_of=stage.arguments_parse, extends=stage.extends
        )
    else:
        encoder = EventEncoder(current_redactor(), 0)
    lines: list[bytes] = []
    growths = 0
    for event in events:
        for ready in stage.feed(event):
            if type(ready) is Growth:
                growths += 1
                if materialize:
                    ready = ready.event()
            lines.append(encoder.line(ready, len(lines), 0))
    return lines, growths


@pytest.mark.parametrize("blocks", [
    [("text", "k=v&" * 300)],
    [("thinking", "x" * 500), ("text", "a=b;" * 200 + " tail" + "c" * 300)],
    [("tool", '{"q":"' + "k=v&" * 200 + '","n":[1,2,{"a":"b"}]}'), ("text", "x" * 300)],
    [("text", "Bearer abcdefghijklmnopqrstuvwxyz0123456789" * 5)],
    [("tool", '{"password":"' + "hunter2-" * 30 + '"}')],
])
def test_growths_write_the_lines_their_events_would(blocks):
    """A held run released at once goes to the encoder as growths (no snapshot rebuilt); its
    lines are byte for byte those of the rebuilt events. A rewritten run goes as events."""
    events = streamed(blocks, 4)
    lines, growths = _stage_lines(events, materialize=False)
    expected, _ = _stage_lines(events, materialize=True)
    assert lines == expected
    deltas = sum(1 for event in events if event.type.endswith("_delta"))
    if any(word in blocks[0][1] for word in ("Bearer", "password")):
        assert growths == 0  # rewritten: every event shows the stored text, rebuilt
    else:
        assert growths >= deltas - 4  # all but a run's first delta


@pytest.mark.parametrize("blocks", [
    [("text", "k=v&" * 300)],
    [("tool", '{"q":"' + "k=v&" * 200 + '"}'), ("thinking", "y" * 300)],
])
def test_an_encoder_that_does_not_follow_a_growth_writes_its_event(blocks):
    """A growth the encoder cannot take on trust is written from its rebuilt event: the
    same lines as when the events themselves come."""
    events = streamed(blocks, 4)
    lines, growths = _stage_lines(events, materialize=False, trusting=False)
    expected, _ = _stage_lines(events, materialize=True, trusting=False)
    assert growths > 100
    assert lines == expected
