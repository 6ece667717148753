"""Lanes and sessions: concurrent sub-agents replay in any interleaving, several recording
sinks (commands, test runs) in one file replay each from its own session."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest

from openprogram.agent import AgentContext, AgentLoopConfig, AgentTool, AgentToolResult, agent_loop
from openprogram.providers import current_lane, lane
from openprogram.providers.models import get_model
from openprogram.providers.replay import ReplayMismatch
from openprogram.providers.scoped import use_recording
from openprogram.providers.stream import complete_simple
from openprogram.providers.types import Context, TextContent, UserMessage

TOPICS = ["alpha", "beta", "gamma", "delta"]


def test_a_lane_name_is_one_non_empty_segment():
    for bad in ["", "a/b", "/", None, 3]:
        with pytest.raises(ValueError, match="lane name"):
            with lane(bad):
                pass
    assert current_lane() == ""
    with lane("a") as outer, lane("b") as inner:
        assert (outer, inner, current_lane()) == ("a", "a/b", "a/b")
    assert current_lane() == ""


async def test_tasks_started_in_a_lane_inherit_it():
    async def where() -> str:
        return current_lane()

    with lane("parent"):
        task = asyncio.ensure_future(where())
    assert await task == "parent"


def subagent_tool(order: list[str], answers: dict[str, str]) -> AgentTool:
    """A tool that asks the model itself, in the turn ``order`` gives it: the test chooses
    the interleaving of the four sub-agents' model calls instead of leaving it to timing."""
    turns = {topic: asyncio.Event() for topic in TOPICS}
    turns[order[0]].set()

    async def execute(tool_call_id, args, signal, on_update):
        topic = args["topic"]
        await turns[topic].wait()
        try:
            reply = await complete_simple(
                get_model("faux/echo"),
                Context(messages=[UserMessage(content=f"research {topic}")]),
            )
        finally:
            position = order.index(topic)
            if position + 1 < len(order):
                turns[order[position + 1]].set()
        answers[topic] = reply.content[0].text
        return AgentToolResult(content=[TextContent(text=answers[topic])])

    return AgentTool(
        name="subagent",
        description="research a topic with a sub-agent",
        parameters={
            "type": "object",
            "properties": {"topic": {"type": "string"}},
            "required": ["topic"],
        },
        execute=execute,
    )


async def run_agent(order: list[str]) -> tuple[str, dict[str, str]]:
    answers: dict[str, str] = {}
    prompt = "\n".join(f"/subagent {topic}" for topic in TOPICS)
    context = AgentContext(tools=[subagent_tool(order, answers)])
    events = [
        e
        async for e in agent_loop(
            [UserMessage(content=prompt)], context, AgentLoopConfig(model=get_model("faux/echo"))
        )
    ]
    return events[-1].messages[-1].content[0].text, answers


ORDERS = [list(order) for order in itertools.permutations(TOPICS)]


async def test_concurrent_subagents_replay_in_every_interleaving(tmp_path):
    path = tmp_path / "agent.jsonl"
    with use_recording(path, "record"):
        recorded = await run_agent(list(reversed(TOPICS)))
    assert recorded[1] == {topic: f"echo: research {topic}" for topic in TOPICS}
    requests = [json.loads(line) for line in path.read_text().splitlines() if '"request"' in line]
    lanes = [request.get("lane", "") for request in requests]
    assert lanes.count("") == 2 and len(set(lanes)) == 5  # two turns at the root, one lane per tool

    failures = []
    for order in ORDERS + ORDERS[:26]:  # 50 replays, every interleaving at least twice
        with use_recording(path, "replay") as scope:
            try:
                assert await run_agent(order) == recorded
                scope.assert_consumed()
            except ReplayMismatch as error:
                failures.append((order, str(error)))
    assert failures == []


async def test_without_lanes_the_same_file_replays_in_strict_order(tmp_path):
    path = tmp_path / "agent.jsonl"
    recorded_order = list(reversed(TOPICS))
    with use_recording(path, "record"):
        await run_agent(recorded_order)
    stripped = tmp_path / "stripped.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        row.pop("lane", None)
    stripped.write_text("".join(json.dumps(row) + "\n" for row in rows))

    # A file without lanes (recorded before lanes existed) keeps one strict order whatever
    # lane the calls are made in now: the sub-agents' calls must come in recorded order.
    with use_recording(stripped, "replay") as scope:
        await run_agent(recorded_order)
        scope.assert_consumed()
    with pytest.raises(ReplayMismatch) as caught:
        with use_recording(stripped, "replay"):
            await run_agent(TOPICS)  # another interleaving
    assert caught.value.field_path == "context.messages[0].content"
    assert "research" in caught.value.recorded


async def test_a_call_in_a_lane_the_recording_never_used_names_the_lane(tmp_path):
    path = tmp_path / "laned.jsonl"
    model = get_model("faux/echo")
    with use_recording(path, "record"):
        await complete_simple(model, Context(messages=[UserMessage(content="hi")]))
        with lane("worker"):
            await complete_simple(model, Context(messages=[UserMessage(content="hi")]))
    with use_recording(path, "replay"), lane("elsewhere"):
        with pytest.raises(ReplayMismatch) as caught:
            await complete_simple(model, Context(messages=[UserMessage(content="hi")]))
    assert caught.value.field_path == "call_index"
    assert "lane 'elsewhere'" in caught.value.recorded


async def test_each_sink_is_a_session_and_a_replay_picks_its_own(tmp_path):
    path = tmp_path / "two.jsonl"
    model = get_model("faux/echo")

    async def command(*prompts: str) -> list[list[dict]]:
        return [
            [
                block.model_dump()
                for block in (
                    await complete_simple(model, Context(messages=[UserMessage(content=p)]))
                ).content
            ]
            for p in prompts
        ]

    with use_recording(path, "record"):
        first = await command("hello one", "hello again")
    with use_recording(path, "record"):
        second = await command("/calculator 6*7")
    sessions = [
        json.loads(line).get("session")
        for line in path.read_text().splitlines()
        if '"request"' in line
    ]
    assert len(set(sessions)) == 2 and None not in sessions

    for run in (["second", "first"], ["first", "second"]):
        for name in run:
            prompts = ("hello one", "hello again") if name == "first" else ("/calculator 6*7",)
            with use_recording(path, "replay") as scope:
                assert await command(*prompts) == (first if name == "first" else second)
                scope.assert_consumed()

    with use_recording(path, "replay"):
        with pytest.raises(ReplayMismatch) as caught:
            await command("something else")
    message = str(caught.value).splitlines()
    assert len(message) == 2
    assert (
        message[0]
        == "replay mismatch at call 0 (session 1 of 2), field context.messages[0].content:"
    )
    assert message[1] == "recorded 'hello one', incoming 'something else'"


async def test_a_session_used_up_moves_on_to_an_unused_matching_one(tmp_path):
    path = tmp_path / "runs.jsonl"
    model = get_model("faux/echo")
    for prompt in ("run", "run"):
        with use_recording(path, "record"):
            await complete_simple(model, Context(messages=[UserMessage(content=prompt)]))
    with use_recording(path, "replay") as scope:
        for _ in range(2):
            await complete_simple(model, Context(messages=[UserMessage(content="run")]))
        scope.assert_consumed()
        with pytest.raises(ReplayMismatch) as caught:
            await complete_simple(model, Context(messages=[UserMessage(content="run")]))
    assert caught.value.field_path == "call_index"


def test_two_commands_recorded_into_one_recording_replay_in_either_order(isolated_home):
    import subprocess

    from tests.conftest import PYTHON, cli_env

    def openprogram(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [PYTHON, "-m", "openprogram", *args],
            env=cli_env(isolated_home),
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert openprogram("recordings", "record", "--name", "s").returncode == 0
    recorded = {prompt: openprogram("run", prompt) for prompt in ("hello one", "/calculator 6*7")}
    assert all(result.returncode == 0 for result in recorded.values())
    assert openprogram("recordings", "replay", "s").returncode == 0
    for prompt in ("/calculator 6*7", "hello one"):  # the other order
        replayed = openprogram("run", prompt)
        assert replayed.returncode == 0, replayed.stderr
        assert replayed.stdout == recorded[prompt].stdout
    third = openprogram("run", "something else")
    assert third.returncode == 1
    assert third.stderr.splitlines() == [
        "openprogram: replay mismatch at call 0 (session 1 of 2), field context.messages[0].content:",
        "recorded 'hello one', incoming 'something else'",
        "(replay is on: the record_replay configuration replays 's' for every model call; "
        "'openprogram recordings off' calls models live again, 'openprogram recordings status' shows the settings)",
    ]


def test_show_and_the_conversation_tell_sessions_and_lanes(isolated_home, tmp_path):
    import subprocess

    from tests.conftest import PYTHON, cli_env

    path = tmp_path / "strands.jsonl"
    model = get_model("faux/echo")

    async def record() -> None:
        for prompt in ("first command", "second command"):
            with use_recording(path, "record"):
                await complete_simple(model, Context(messages=[UserMessage(content=prompt)]))
                with lane("helper"):
                    await complete_simple(
                        model, Context(messages=[UserMessage(content=f"{prompt} helper")])
                    )

    asyncio.run(record())

    def show(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [PYTHON, "-m", "openprogram", "recordings", "show", str(path), *args],
            env=cli_env(isolated_home),
            capture_output=True,
            text=True,
            timeout=120,
        )

    table = show().stdout.splitlines()
    heading = next(line for line in table if line.startswith("CALL"))
    assert heading.split()[:3] == ["CALL", "SESSION", "LANE"]
    rows = [
        line.split()
        for line in table[table.index(heading) + 1 :]
        if line.strip() and not set(line) <= {"-", " "}
    ]
    assert [(row[1], row[2]) for row in rows] == [
        ("1", "-"),
        ("1", "helper"),
        ("2", "-"),
        ("2", "helper"),
    ]
    summary = json.loads(show("--json").stdout)["calls"]
    assert [(c["session"], c["lane"]) for c in summary] == [
        (1, ""),
        (1, "helper"),
        (2, ""),
        (2, "helper"),
    ]
    conversation = show("--conversation").stdout
    assert "=== session 1 of 2 ===" in conversation and "=== session 2 of 2 ===" in conversation
    assert conversation.count("--- lane helper ---") == 2
    assert conversation.index("first command helper") < conversation.index("=== session 2 of 2 ===")
