"""ReplayProvider: faithful, strictly offline replay; request comparison and its exact
messages; exhaustion, retries, interrupted calls, shared counter; the two-turn agent loop."""

from __future__ import annotations

import asyncio
import pickle
import socket

import pytest

from openprogram.agent import AgentContext, AgentLoopConfig, AgentTool, AgentToolResult, agent_loop
from openprogram.providers import credentials, stream_simple
from openprogram.providers.api_registry import register_api_provider
from openprogram.providers.faux import FauxProvider, faux_text, faux_tool_call
from openprogram.providers.recording import RecordingFileError, RecordingProvider
from openprogram.providers.replay import (
    NON_DETERMINISTIC_FIELD_NAMES,
    RecordedCallInterrupted,
    ReplayMismatch,
    ReplayProvider,
    find_first_difference,
)
from openprogram.providers.types import (
    AssistantMessage,
    Context,
    Model,
    SimpleStreamOptions,
    StreamOptions,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

from .test_recording_support import MODEL, ScriptedProvider, collect, context_of, text_events


def test_reexported_difference_names():
    from openprogram.recordings.replay import differences

    assert find_first_difference is differences.find_first_difference
    assert ReplayMismatch is differences.ReplayMismatch
    assert NON_DETERMINISTIC_FIELD_NAMES == {"timestamp"}


async def record(path, responses, requests, *, method="stream"):
    """Record one call per (context, options) through a faux provider; return the events."""
    provider = RecordingProvider(FauxProvider(responses, timestamp=11), path)
    results = []
    for context, options in requests:
        results.append(await collect(getattr(provider, method)(MODEL, context, options)))
    provider.sink.close()
    return results


def tool_context(result_text: str) -> Context:
    """A second-turn context: user, assistant tool call, tool result."""
    return Context(
        messages=[
            UserMessage(content="use echo", timestamp=1),
            AssistantMessage(
                content=[ToolCall(id="c1", name="echo", arguments={"value": "hi"})],
                api="faux",
                provider="faux",
                model="m",
                stop_reason="toolUse",
                timestamp=2,
            ),
            ToolResultMessage(
                tool_call_id="c1",
                tool_name="echo",
                content=[TextContent(text=result_text)],
                timestamp=3,
            ),
        ]
    )


# ----------------------------------------------------------------------------- faithful


async def test_replay_returns_the_recorded_events_and_nothing_else(tmp_path):
    path = tmp_path / "rec.jsonl"
    live = await record(
        path,
        [faux_text("one two"), faux_tool_call("echo", {"value": "x"})],
        [(context_of("a"), None), (context_of("b"), StreamOptions(temperature=0.1))],
    )
    replay = ReplayProvider(path)
    assert replay.requires_credentials is False
    assert replay.recording_path == path
    assert await collect(replay.stream(MODEL, context_of("a"))) == live[0]
    assert replay.call_count == 1
    assert (
        await collect(replay.stream(MODEL, context_of("b"), StreamOptions(temperature=0.1)))
        == live[1]
    )
    assert replay.call_count == 2
    replay.assert_consumed()


async def test_a_changed_prompt_raises_the_contract_message_and_a_retry_succeeds(tmp_path):
    path = tmp_path / "rec.jsonl"
    await record(
        path,
        [faux_text("first"), faux_text("second")],
        [(context_of("start"), None), (tool_context("echo:hi"), None)],
    )
    replay = ReplayProvider(path)
    await collect(replay.stream(MODEL, context_of("start")))
    with pytest.raises(ReplayMismatch) as caught:
        await collect(replay.stream(MODEL, tool_context("echo:bye")))
    assert str(caught.value) == (
        "replay mismatch at call 1, field context.messages[2].content[0].text:\n"
        "recorded 'echo:hi', incoming 'echo:bye'"
    )
    assert (caught.value.call_index, caught.value.field_path) == (
        1,
        "context.messages[2].content[0].text",
    )
    assert caught.value.event_index is None
    assert replay.call_count == 1, "a mismatch does not consume the recorded call"
    events = await collect(replay.stream(MODEL, tool_context("echo:hi")))
    assert events[-1].message.content[0].text == "second"
    replay.assert_consumed()


async def test_model_is_compared_before_context_and_options(tmp_path):
    path = tmp_path / "rec.jsonl"
    await record(path, [faux_text("x")], [(context_of("a"), StreamOptions(temperature=0.5))])
    replay = ReplayProvider(path)
    other = MODEL.model_copy(update={"max_tokens": 1})
    with pytest.raises(ReplayMismatch) as caught:
        await collect(replay.stream(other, context_of("b"), StreamOptions(temperature=0.9)))
    assert caught.value.field_path == "model.max_tokens"
    with pytest.raises(ReplayMismatch) as caught:
        await collect(replay.stream(MODEL, context_of("b"), StreamOptions(temperature=0.9)))
    assert caught.value.field_path == "context.messages[0].content"
    with pytest.raises(ReplayMismatch) as caught:
        await collect(replay.stream(MODEL, context_of("a"), StreamOptions(temperature=0.9)))
    assert (caught.value.field_path, caught.value.recorded, caught.value.incoming) == (
        "options.temperature",
        0.5,
        0.9,
    )


async def test_timestamps_and_api_keys_do_not_make_a_mismatch(tmp_path):
    path = tmp_path / "rec.jsonl"
    recorded_context = Context(messages=[UserMessage(content="q", timestamp=1)])
    await record(
        path, [faux_text("x")], [(recorded_context, StreamOptions(api_key="sk-" + "a" * 30))]
    )
    replay = ReplayProvider(path)
    later = Context(messages=[UserMessage(content="q", timestamp=999)])
    await collect(replay.stream(MODEL, later, StreamOptions(api_key="another-key-123456")))
    assert "sk-" + "a" * 30 not in path.read_text()


async def test_exhaustion_names_how_many_calls_were_recorded(tmp_path):
    path = tmp_path / "rec.jsonl"
    await record(path, [faux_text("x")] * 2, [(context_of("a"), None)] * 2)
    replay = ReplayProvider(path)
    for _ in range(2):
        await collect(replay.stream(MODEL, context_of("a")))
    with pytest.raises(ReplayMismatch) as caught:
        await collect(replay.stream(MODEL, context_of("a")))
    assert caught.value.field_path == "call_index"
    assert caught.value.call_index == 2
    assert "2 recorded call(s)" in str(caught.value)
    assert replay.call_count == 2


async def test_assert_consumed_reports_unused_calls(tmp_path):
    path = tmp_path / "rec.jsonl"
    await record(path, [faux_text("x")] * 3, [(context_of("a"), None)] * 3)
    replay = ReplayProvider(path)
    await collect(replay.stream(MODEL, context_of("a")))
    with pytest.raises(ReplayMismatch) as caught:
        replay.assert_consumed()
    assert caught.value.field_path == "remaining_calls"
    assert (caught.value.recorded, caught.value.incoming) == (3, 1)
    assert str(caught.value).splitlines()[:2] == [
        "replay mismatch at call 1, field remaining_calls:",
        "made 1 of its 3 recorded calls (2 left unused)",
    ]
    assert str(pickle.loads(pickle.dumps(caught.value))) == str(caught.value)  # as xdist moves it
    for _ in range(2):
        await collect(replay.stream_simple(MODEL, context_of("a")))
    replay.assert_consumed()


async def test_a_stream_recording_replays_through_stream_simple_when_options_agree(tmp_path):
    path = tmp_path / "rec.jsonl"
    live = await record(
        path,
        [faux_text("x"), faux_text("y"), faux_text("z")],
        [
            (context_of("a"), StreamOptions(temperature=0.3, max_tokens=50)),
            (context_of("b"), None),
            (context_of("c"), StreamOptions()),
        ],
        method="stream",
    )
    replay = ReplayProvider(path)
    got = await collect(
        replay.stream_simple(
            MODEL, context_of("a"), SimpleStreamOptions(temperature=0.3, max_tokens=50)
        )
    )
    assert got == live[0]
    # No options and default options are the same request, in either direction.
    assert (
        await collect(replay.stream_simple(MODEL, context_of("b"), SimpleStreamOptions()))
        == live[1]
    )
    assert await collect(replay.stream_simple(MODEL, context_of("c"))) == live[2]


async def test_options_that_disagree_with_stream_simple_are_reported(tmp_path):
    path = tmp_path / "rec.jsonl"
    await record(path, [faux_text("x")], [(context_of("a"), StreamOptions(temperature=0.3))])
    replay = ReplayProvider(path)
    with pytest.raises(ReplayMismatch) as caught:
        await collect(
            replay.stream_simple(
                MODEL, context_of("a"), SimpleStreamOptions(temperature=0.3, reasoning="high")
            )
        )
    assert (caught.value.field_path, caught.value.recorded, caught.value.incoming) == (
        "options.reasoning",
        None,
        "high",
    )


@pytest.mark.parametrize("outcome_case", ["error", "abandoned"])
async def test_an_interrupted_call_replays_its_events_then_raises(tmp_path, outcome_case):
    path = tmp_path / "rec.jsonl"
    events = text_events(["a", "b"])
    recorder = RecordingProvider(ScriptedProvider(events, raise_after=3), path)
    if outcome_case == "error":
        with pytest.raises(RuntimeError):
            await collect(recorder.stream(MODEL, context_of("q")))
    else:
        live = recorder.stream(MODEL, context_of("q"))
        for _ in range(3):
            await anext(live)
        await live.aclose()
    replay = ReplayProvider(path)
    seen = []
    with pytest.raises(RecordedCallInterrupted) as caught:
        async for event in replay.stream(MODEL, context_of("q")):
            seen.append(event)
    assert seen == events[:3]
    assert (caught.value.call_index, caught.value.outcome) == (0, outcome_case)


async def test_concurrent_tasks_share_one_counter_and_each_call_is_served_once(tmp_path):
    path = tmp_path / "rec.jsonl"
    texts = [f"answer {i}" for i in range(8)]
    await record(path, [faux_text(t) for t in texts], [(context_of("same"), None)] * 8)
    replay = ReplayProvider(path)

    async def one(method):
        events = await collect(getattr(replay, method)(MODEL, context_of("same")))
        return events[-1].message.content[0].text

    answers = await asyncio.gather(*(one("stream" if i % 2 else "stream_simple") for i in range(8)))
    assert sorted(answers) == sorted(texts)
    assert replay.call_count == 8


def test_a_missing_or_invalid_file_fails_at_construction(tmp_path):
    with pytest.raises(RecordingFileError, match="cannot read"):
        ReplayProvider(tmp_path / "missing.jsonl")
    (tmp_path / "bad.jsonl").write_bytes(b"")
    with pytest.raises(RecordingFileError, match="empty"):
        ReplayProvider(tmp_path / "bad.jsonl")


def test_a_replay_provider_holds_no_provider_client_or_credential(tmp_path):
    path = tmp_path / "rec.jsonl"
    asyncio.run(
        record(path, [faux_text("x")], [(context_of("a"), StreamOptions(api_key="k" * 12))])
    )
    replay = ReplayProvider(path)
    held = list(vars(replay).values())
    assert {type(value).__name__ for value in held} <= {
        "Recording",
        "RequestFilter",
        "lock",
        "int",
        "bool",
        "list",
        "dict",
        "tuple",
        "NoneType",
        "_RecentRequests",
    }
    inside = [item for value in held if isinstance(value, list | dict) for item in value]
    assert {type(item).__name__ for item in inside} <= {"_Session", "tuple"}
    assert "k" * 12 not in path.read_text()


# ----------------------------------------------------------------------------- offline agent loop


@pytest.fixture
def no_network_no_credentials(monkeypatch):
    """Any attempt to reach the network or a credential fails the test loudly."""

    def refuse(*args, **kwargs):
        raise AssertionError("replay tried to reach the network or a credential")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(credentials, "resolve_provider_key", refuse)


def _without_timestamps(value):
    if isinstance(value, dict):
        return {k: _without_timestamps(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [_without_timestamps(v) for v in value]
    return value


async def _run_loop(api: str, executed: list) -> tuple[list, AssistantMessage]:
    async def echo(tool_call_id, args, signal, on_update):
        executed.append((tool_call_id, args))
        return AgentToolResult(content=[TextContent(text=f"echo:{args['value']}")])

    tool = AgentTool(
        name="echo",
        description="Echo a value",
        parameters={
            "type": "object",
            "properties": {"value": {"type": "string"}},
            "required": ["value"],
        },
        execute=echo,
    )
    context = AgentContext(system_prompt="You are terse.", messages=[], tools=[tool])
    model = Model(id="scripted", api=api, provider="faux")
    config = AgentLoopConfig(model=model, temperature=0.0)
    events = [e async for e in agent_loop([UserMessage(content="use echo")], context, config)]
    final = [e for e in events if e.type == "agent_end"][0].messages[-1]
    return [_without_timestamps(e.model_dump(mode="json")) for e in events], final


async def test_a_two_turn_tool_loop_replays_offline_to_the_same_end(
    tmp_path, fresh_registry, no_network_no_credentials
):
    path = tmp_path / "loop.jsonl"
    api = "replay-loop"
    faux = FauxProvider(
        [faux_tool_call("echo", {"value": "hi"}), faux_text("The tool said echo:hi.")]
    )
    register_api_provider(api, RecordingProvider(faux, path))
    recorded_tools: list = []
    recorded_events, recorded_final = await _run_loop(api, recorded_tools)
    assert recorded_tools == [("faux_call_0_0", {"value": "hi"})]
    assert len(faux.calls) == 2

    replay = ReplayProvider(path)
    register_api_provider(api, replay)
    replayed_tools: list = []
    replayed_events, replayed_final = await _run_loop(api, replayed_tools)
    assert replayed_tools == recorded_tools
    assert replayed_events == recorded_events
    assert replayed_final.model_dump(exclude={"timestamp"}) == recorded_final.model_dump(
        exclude={"timestamp"}
    )
    assert replayed_final.content[0].text == "The tool said echo:hi."
    assert len(faux.calls) == 2, "the live provider was not called again"
    replay.assert_consumed()


async def test_replay_through_the_facade_never_touches_credentials_or_sockets(
    tmp_path, fresh_registry, no_network_no_credentials
):
    path = tmp_path / "rec.jsonl"
    model = MODEL.model_copy(update={"provider": "openai"})  # a provider that needs a key
    recorder = RecordingProvider(FauxProvider([faux_text("offline")], timestamp=5), path)
    live = await collect(
        recorder.stream(model, context_of("a"), StreamOptions(api_key="sk-" + "z" * 40))
    )
    register_api_provider("faux", ReplayProvider(path))
    assert await collect(stream_simple(model, context_of("a"))) == live


async def test_snapshots_are_built_while_replaying_and_equal_the_recorded_ones(
    tmp_path, monkeypatch
):
    """Opening grows no text (streamed deltas are kept as values); serving builds each
    snapshot once, and the events equal the live ones, dump for dump, every time."""
    from openprogram.recordings.file import reader_fast

    path = tmp_path / "rec.jsonl"
    live = await record(
        path,
        [faux_text("one two three"), faux_text("four five six")],
        [(context_of("a"), None), (context_of("b"), None)],
    )
    grown = []
    original = (
        reader_fast.Snapshots.served
    )  # grows the snapshot by the append, then builds the event
    monkeypatch.setattr(
        reader_fast.Snapshots,
        "served",
        lambda self, kept, append: (append and grown.append(append), original(self, kept, append))[
            1
        ],
    )
    provider = ReplayProvider(path)
    assert grown == []  # nothing built at open
    assert all(
        any(type(entry) is tuple for entry in call.entries) for call in provider.recording.calls
    )
    assert await collect(provider.stream(MODEL, context_of("a"))) == live[0]
    assert await collect(provider.stream(MODEL, context_of("b"))) == live[1]
    assert len(grown) == sum(event.type == "text_delta" for events in live for event in events)
    for _ in range(2):  # served again: new objects, the same dumps
        dumps = [list(call.event_dumps()) for call in provider.recording.calls]
        assert dumps == [[event.model_dump(mode="json") for event in events] for events in live]


async def test_a_changed_model_is_reported_by_the_identity_field_that_changed(tmp_path):
    path = tmp_path / "rec.jsonl"
    await record(path, [faux_text("hi")], [(context_of("a"), None)])
    other = MODEL.model_copy(
        update={"id": "bigger-model", "context_window": MODEL.context_window * 2}
    )
    with pytest.raises(ReplayMismatch) as caught:
        await collect(ReplayProvider(path).stream(other, context_of("a")))
    assert caught.value.field_path == "model.id"
    assert (caught.value.recorded, caught.value.incoming) == (MODEL.id, "bigger-model")
    moved = MODEL.model_copy(update={"api": "other-api", "context_window": 5})
    with pytest.raises(ReplayMismatch) as caught:
        await collect(ReplayProvider(path).stream(moved, context_of("a")))
    assert caught.value.field_path == "model.api"
    resized = MODEL.model_copy(update={"context_window": 5, "max_tokens": 7})
    with pytest.raises(ReplayMismatch) as caught:
        await collect(ReplayProvider(path).stream(resized, context_of("a")))
    assert (
        caught.value.field_path == "model.max_tokens"
    )  # then the rest in sorted order (context_window is catalog metadata, not compared)
