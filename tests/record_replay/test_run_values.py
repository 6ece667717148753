"""Run values: a run-specific text (a temporary folder) is stored as ``{{name}}`` everywhere,
streamed deltas included, and replay compares with and serves the current run's text."""

from __future__ import annotations

import pytest

from openprogram.agent import AgentContext, AgentLoopConfig, AgentTool, AgentToolResult, agent_loop
from openprogram.providers.models import get_model
from openprogram.providers.replay import ReplayMismatch
from openprogram.providers.scoped import use_recording
from openprogram.providers.stream import stream_simple
from openprogram.providers.types import Context, TextContent, UserMessage
from openprogram.recordings.redaction import check_run_values, use_run_values


def lister(seen: list[str]) -> AgentTool:
    async def execute(tool_call_id, args, signal, on_update):
        seen.append(args["path"])
        return AgentToolResult(content=[TextContent(text="3 files")])

    return AgentTool(
        name="lister",
        description="list a folder",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
        execute=execute,
    )


async def run_agent(folder, seen: list[str]) -> str:
    context = AgentContext(tools=[lister(seen)])
    prompt = f"/lister {folder}/data"
    events = [
        e
        async for e in agent_loop(
            [UserMessage(content=prompt)], context, AgentLoopConfig(model=get_model("faux/echo"))
        )
    ]
    return events[-1].messages[-1].content[0].text


async def test_a_recorded_folder_is_replaced_by_the_current_runs_folder(tmp_path):
    first, second = tmp_path / "run-one" / "work", tmp_path / "run-two" / "elsewhere"
    path = tmp_path / "agent.jsonl"
    seen: list[str] = []
    with use_recording(path, "record", values={"workdir": str(first)}):
        assert await run_agent(first, seen) == "lister returned: 3 files"
    text = path.read_text()
    assert str(first) not in text and "run-one" not in text
    assert "{{workdir}}/data" in text

    with use_recording(path, "replay", values={"workdir": str(second)}) as scope:
        assert await run_agent(second, seen) == "lister returned: 3 files"
        scope.assert_consumed()
    assert seen == [f"{first}/data", f"{second}/data"]  # the tool got this run's folder

    with (
        use_recording(path, "replay", values={"workdir": str(second)}),
        pytest.raises(ReplayMismatch) as caught,
    ):
        await run_agent(first, seen)  # the other run's folder is not this run's value
    assert caught.value.field_path == "context.messages[0].content"


@pytest.mark.parametrize("words_per_chunk", [1, 2, 3])
async def test_streamed_deltas_hold_no_piece_of_the_value_and_join_to_the_served_text(
    tmp_path, words_per_chunk
):
    from openprogram.providers.faux import FauxProvider, faux_text
    from openprogram.providers.recording import RecordingProvider
    from openprogram.providers.replay import ReplayProvider
    from openprogram.providers.types import Model

    folder = "/home/alice/projects/secret-plans"
    model = Model(id="m", api="faux", provider="faux")
    answer = f"I looked in {folder}/notes and {folder} itself; nothing else."
    path = tmp_path / "deltas.jsonl"
    recorder = RecordingProvider(
        FauxProvider([faux_text(answer)], words_per_chunk=words_per_chunk), path
    )
    context = Context(messages=[UserMessage(content="where did you look?", timestamp=0)])
    with use_run_values({"workdir": folder}):
        live = [event async for event in recorder.stream(model, context)]
    recorder.sink.close()
    assert (
        "".join(e.delta for e in live if e.type == "text_delta") == answer
    )  # the live run saw it all
    data = path.read_text()
    for start in range(len(folder) - 7):
        assert folder[start : start + 8] not in data

    now = "/srv/ci/build-42"
    replayed = [
        e async for e in ReplayProvider(path, values={"workdir": now}).stream(model, context)
    ]
    deltas = "".join(e.delta for e in replayed if e.type == "text_delta")
    assert deltas == answer.replace(folder, now) == replayed[-1].message.content[0].text


def test_a_literal_split_in_one_block_replays_exactly_while_another_block_grows_between(
    tmp_path,
):
    """Two text blocks whose deltas interleave, a literal split between two deltas of one of
    them each time: a held delta written whole is written from its own moment's snapshot,
    the other block's text included (not from one taken before that block grew)."""
    import asyncio

    from openprogram.providers.assembly import AssistantStreamAssembler
    from openprogram.providers.replay import ReplayProvider
    from tests.redaction.test_stream_redaction import record

    from .test_recording_support import MODEL, collect, context_of

    assembler = AssistantStreamAssembler(MODEL, timestamp=5)
    events = [assembler.start()]
    first, event = assembler.begin_text()
    events.append(event)
    second, event = assembler.begin_text()
    events.append(event)
    for index, delta in [
        (second, "x{{work"),
        (second, "dir}} "),  # the literal ends: both deltas are settled and written
        (first, "hello "),  # the other block grows, its delta written at once
        (second, "y{{wo"),
        (second, "rkdir}} "),
        (first, "world "),
    ]:
        events.append(assembler.append_text(index, delta))
    events += [assembler.end_text(first), assembler.end_text(second)]
    events += assembler.finish("stop")
    path = tmp_path / "interleaved.jsonl"
    with use_run_values({"workdir": "/home/alice/work"}):
        live = record(path, events)
    assert path.read_text().count("{{!workdir}}") >= 1  # stored escaped
    replay = ReplayProvider(path, values={"workdir": "/srv/ci/build-7"})
    replayed = asyncio.run(collect(replay.stream(MODEL, context_of("go"))))
    assert replayed == live  # snapshots included


def test_run_values_are_checked():
    assert check_run_values({"b": "two-2", "a": "one-1"}) == (("a", "one-1"), ("b", "two-2"))
    for bad in [{"a b": "xyz"}, {"": "xyz"}, {"ok": ""}, {"ok": "ab"}, {"ok": 12345}]:
        with pytest.raises(ValueError, match="run value"):
            check_run_values(bad)


async def test_values_of_a_block_do_not_leak_into_other_tasks(tmp_path):
    path = tmp_path / "scoped.jsonl"
    model = get_model("faux/echo")
    with use_recording(path, "record", values={"name": "Alice Example"}):
        [
            e
            async for e in stream_simple(
                model, Context(messages=[UserMessage(content="hi Alice Example")])
            )
        ]
    outside = tmp_path / "outside.jsonl"
    with use_recording(outside, "record"):
        [
            e
            async for e in stream_simple(
                model, Context(messages=[UserMessage(content="hi Alice Example")])
            )
        ]
    assert "Alice Example" not in path.read_text() and "{{name}}" in path.read_text()
    assert "Alice Example" in outside.read_text()


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_a_literal_token_split_between_deltas_replays_with_the_boundaries_it_streamed(
    tmp_path, size
):
    """The model writing ``{{workdir}}`` itself (a template, say) is stored escaped; a delta
    boundary inside it stays where it was: replay serves the events as they streamed."""
    import asyncio

    from openprogram.providers.replay import ReplayProvider
    from tests.redaction.test_stream_redaction import record, streamed

    from .test_recording_support import MODEL, collect, context_of

    text = "the template says {{workdir}} and {{!workdir}}; {{workdir}}{{workdir}} done"
    events = streamed([("text", text), ("thinking", text)], size)
    assert not any(
        "{{workdir}}" in e.delta for e in events if e.type == "text_delta"
    )  # every token split
    path = tmp_path / "literal.jsonl"
    with use_run_values({"workdir": "/home/alice/work"}):
        live = record(path, events)
    assert "{{!workdir}}" in path.read_text()  # stored escaped, told from the run value
    replay = ReplayProvider(path, values={"workdir": "/srv/ci/build-7"})
    replayed = asyncio.run(collect(replay.stream(MODEL, context_of("go"))))
    assert [e.delta for e in replayed if e.type == "text_delta"] == [
        e.delta for e in live if e.type == "text_delta"
    ]
    assert replayed == live  # snapshots included
