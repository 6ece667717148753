"""The record pipeline runs one way (docs/architecture.md, "The record pipeline"): the stream
stage hands the encoder redacted records, the encoder writes lines. Whatever shape a provider's
stream takes (deltas that grow the snapshot, snapshots that change beside a delta, blocks a
provider shows without streaming them), the file replays exactly the live events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openprogram.providers.assembly import AssistantStreamAssembler
from openprogram.providers.replay import read_recording_file
from openprogram.providers.types import ServerToolContent, Usage
from openprogram.recordings.record.encoder import ArgumentsGrowth, TextGrowth, Whole
from openprogram.recordings.record.stream_redaction import StreamRedaction
from openprogram.recordings.redaction import current_redactor
from tests.redaction.test_stream_redaction import pieces, record

from .test_recording_support import MODEL

WORDS = st.sampled_from(
    ["the", "plan", " ", "\n", "é", "日本", "x" * 30, "k=v&", "{", '"q"', "ok."]
)
TEXTS = st.lists(WORDS, min_size=0, max_size=12).map("".join)
BLOCKS = st.lists(
    st.tuples(st.sampled_from(["text", "thinking", "tool", "server"]), TEXTS),
    min_size=1,
    max_size=4,
)
# What a provider may do beside its deltas: nothing, change the usage mid-stream, sign a block.
QUIRKS = st.sampled_from(["none", "usage", "signature"])


def quirky_stream(blocks: list[tuple[str, str]], size: int, quirk: str) -> list[Any]:
    assembler = AssistantStreamAssembler(MODEL, timestamp=5)
    events = [assembler.start()]
    for number, (kind, body) in enumerate(blocks):
        if kind == "server":
            assembler.add_server_tool(
                ServerToolContent(
                    vendor="v",
                    api="faux",
                    kind="web_search_call",
                    payload={"id": f"ws_{number}", "q": body},
                )
            )
            continue
        if kind == "tool":
            index, event = assembler.begin_tool_call(f"call_{number}", "lookup")
            events.append(event)
            for piece in pieces(orjson.dumps({"q": body}).decode(), size):
                events.append(assembler.append_tool_arguments(index, piece))
                if quirk == "usage":
                    assembler.set_usage(Usage(input=3, output=len(events)))
            events.append(assembler.end_tool_call(index))
            continue
        begin, append = (
            (assembler.begin_thinking, assembler.append_thinking)
            if kind == "thinking"
            else (assembler.begin_text, assembler.append_text)
        )
        index, event = begin()
        events.append(event)
        for piece in pieces(body, size):
            events.append(append(index, piece))
            if quirk == "usage":
                assembler.set_usage(Usage(input=3, output=len(events)))
        if quirk == "signature":
            if kind == "thinking":
                assembler.set_thinking_signature(index, "EqQBCkgIARABGAIiQL" + "sk-" + "a1B2" * 8)
            else:
                assembler.set_text_signature(index, "msg_00e7" + "AIza" + "Zz9_" * 10)
        events.append(
            assembler.end_thinking(index) if kind == "thinking" else assembler.end_text(index)
        )
    events.extend(assembler.finish())
    return events


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(blocks=BLOCKS, size=st.integers(min_value=1, max_value=16), quirk=QUIRKS)
def test_every_stream_shape_replays_exactly(tmp_path_factory, blocks, size, quirk):
    path = tmp_path_factory.mktemp("rec") / "rec.jsonl"
    live = record(path, quirky_stream(blocks, size, quirk))
    (call,) = read_recording_file(path).calls
    assert [event.model_dump(mode="json") for event in call.events()] == [
        event.model_dump(mode="json") for event in live
    ]


def test_the_usual_delta_goes_on_as_a_growth_record():
    """A delta that grows the previous snapshot is handed on as its delta alone; a snapshot
    that also changed elsewhere (the usage, here) is written whole."""
    stage = StreamRedaction(current_redactor())
    events = quirky_stream([("text", "one two three "), ("tool", "x y")], 4, "none")
    records = [record for event in events for record in stage.feed(event)]
    kinds = [type(record) for record in records]
    assert kinds.count(TextGrowth) == len(pieces("one two three ", 4))
    assert kinds.count(ArgumentsGrowth) == len(pieces(orjson.dumps({"q": "x y"}).decode(), 4))
    quirky = StreamRedaction(current_redactor())
    records = [
        record
        for event in quirky_stream([("text", "one two three ")], 4, "usage")
        for record in quirky.feed(event)
    ]

    # The usage changes after each delta: only the first delta's snapshot grew by it alone.
    assert [type(record) for record in records].count(TextGrowth) == 1
    assert [type(record) for record in records].count(Whole) == len(records) - 1


def test_a_file_of_growths_holds_one_full_snapshot(tmp_path: Path):
    """Linear size: only the first event carries the snapshot in full."""
    path = tmp_path / "rec.jsonl"
    record(
        path,
        quirky_stream(
            [("thinking", "a b c " * 50), ("text", "d e f " * 50), ("tool", "g h " * 20)], 3, "none"
        ),
    )
    assert path.read_bytes().count(b'"partial":{') == 1
