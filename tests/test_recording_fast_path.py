"""The recorder's hot path for text growth writes exactly the lines the general path writes."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from openprogram.providers.event_encoding import EventEncoder
from openprogram.providers.faux import (
    FauxProvider,
    FauxResponse,
    FauxText,
    FauxThinking,
    FauxToolCall,
)
from openprogram.providers.redaction import current_redactor
from openprogram.providers.types import Context, Model, UserMessage

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


def general_only(encoder: EventEncoder) -> EventEncoder:
    encoder._encode_text_growth = lambda *args: None  # type: ignore[method-assign]
    return encoder


@settings(max_examples=60, deadline=None)
@given(
    thinking=TEXTS,
    text=TEXTS,
    second_text=TEXTS,
    words_per_chunk=st.integers(min_value=1, max_value=3),
    with_tool=st.booleans(),
)
def test_hot_path_lines_equal_general_path_lines(thinking, text, second_text, words_per_chunk, with_tool):
    blocks = [FauxThinking(thinking), FauxText(text)]
    if with_tool:
        blocks.append(FauxToolCall("lookup", {"q": text[:20]}))
    blocks.append(FauxText(second_text))
    events = stream_events(FauxResponse(blocks=tuple(blocks)), words_per_chunk)
    redactor = current_redactor()
    fast, general = EventEncoder(redactor), general_only(EventEncoder(redactor))
    hits = 0
    original = fast._encode_text_growth

    def counting(*args):
        nonlocal hits
        line = original(*args)
        hits += line is not None
        return line

    fast._encode_text_growth = counting  # type: ignore[method-assign]
    for number, event in enumerate(events):
        assert fast.line(event, number) == general.line(event, number), event.type
    deltas = sum(1 for e in events if e.type in ("text_delta", "thinking_delta"))
    assert hits == deltas  # the hot path served every delta, each block's first one included


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
