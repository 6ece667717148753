"""Recording format version 2 (docs/file-format.md, "Linear size: context_patch"): a request's
context stored as its growth from an earlier call, read back exactly; version 1 files read,
replayed and appended to as version 1; a newer version refused by name."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openprogram.agent import AgentContext, AgentLoopConfig, AgentTool, AgentToolResult, agent_loop
from openprogram.providers import lane, register_api_provider
from openprogram.providers.faux import FauxProvider, faux_text, faux_tool_call
from openprogram.providers.recording import RECORDING_FORMAT_VERSION, RecordingFileError
from openprogram.providers.replay import ReplayMismatch, read_recording_file
from openprogram.providers.scoped import use_recording
from openprogram.providers.stream import complete
from openprogram.providers.types import AssistantMessage, Context, Model, TextContent, UserMessage
from openprogram.recordings.file.format import encode_line, header_row

FIXTURE = Path(__file__).parents[1] / "fixtures" / "format_v1_agent.jsonl"
MODEL = Model(id="scripted", api="v1-fixture", provider="faux")


def rows(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def requests(path: Path) -> list[dict]:
    return [row for row in rows(path) if row["type"] == "request"]


# ----------------------------------------------------------------------------- the agent of the fixture
# tests/fixtures/format_v1_agent.jsonl was written by this agent with the version 1 writer
# (openprogram at commit 1b8643b): two sessions, each an agent reading files and a summary
# in lane "summary".


async def _read(tool_call_id, args, signal, on_update):
    return AgentToolResult(
        content=[TextContent(text=f"contents of {args['path']}: " + "lorem ipsum " * 50)]
    )


def _tools() -> list[AgentTool]:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    return [AgentTool(name="read", description="read a file", parameters=schema, execute=_read)]


async def _session(prompt: str, paths: list[str]) -> list[str]:
    register_api_provider(
        MODEL.api,
        FauxProvider(
            [
                *(faux_tool_call("read", {"path": p}, id=f"call_{p}") for p in paths),
                faux_text(f"done: {prompt}"),
            ]
        ),
    )
    answers = []
    context = AgentContext(system_prompt="You read files.", tools=_tools())
    async for event in agent_loop(
        [UserMessage(content=prompt)], context, AgentLoopConfig(model=MODEL)
    ):
        if event.type == "message_end" and isinstance(event.message, AssistantMessage):
            answers.append(_text(event.message))
    register_api_provider(MODEL.api, FauxProvider([faux_text("a summary in its own lane")]))
    with lane("summary"):
        async for event in agent_loop(
            [UserMessage(content="summarise")], AgentContext(), AgentLoopConfig(model=MODEL)
        ):
            if event.type == "message_end" and isinstance(event.message, AssistantMessage):
                answers.append(_text(event.message))
    return answers


def _text(message: AssistantMessage) -> str:
    return "".join(block.text for block in message.content if isinstance(block, TextContent))


def _run_both_sessions(path: Path, mode: str) -> list[str]:
    answers = []
    with use_recording(path, mode) as scope:
        answers += asyncio.run(_session("read a and b", ["a.txt", "b.txt"]))
    with use_recording(path, mode) as scope:
        answers += asyncio.run(_session("read c", ["c.txt"]))
        if mode == "replay":
            scope.assert_consumed()
    return answers


EXPECTED_ANSWERS = [
    "",
    "",
    "done: read a and b",
    "a summary in its own lane",
    "",
    "done: read c",
    "a summary in its own lane",
]


# ----------------------------------------------------------------------------- version 2 files


def test_new_files_are_version_2_and_each_turn_stores_only_its_growth(tmp_path):
    path = tmp_path / "agent.jsonl"
    assert RECORDING_FORMAT_VERSION == 2
    assert _run_both_sessions(path, "record") == EXPECTED_ANSWERS
    assert rows(path)[0]["format_version"] == 2
    stored = requests(path)
    # Per session: the first call of each lane whole, every later one patched from the previous
    # call of its own lane (never from the other lane or the other session).
    by_key: dict[tuple, list[dict]] = {}
    for request in stored:
        by_key.setdefault((request["session"], request.get("lane", "")), []).append(request)
    assert len(by_key) == 4
    for calls in by_key.values():
        assert "context" in calls[0] and "context_patch" not in calls[0]
        for previous, request in zip(calls, calls[1:], strict=False):
            assert "context" not in request
            assert request["context_patch"]["from"] == previous["call_index"]
    # The patch pushes the new messages only: no tool output is stored twice.
    once = "contents of a.txt"
    assert path.read_text().count(once) == 1
    recording = read_recording_file(path)
    assert len(recording.calls[2].context["messages"]) == 5  # prompt, 2 x (call, result)
    assert _run_both_sessions(path, "replay") == EXPECTED_ANSWERS


def test_a_patched_request_still_names_the_drifted_field(tmp_path):
    path = tmp_path / "agent.jsonl"
    _run_both_sessions(path, "record")

    async def other_contents(tool_call_id, args, signal, on_update):
        return AgentToolResult(content=[TextContent(text="something else")])

    async def drifted() -> None:
        tools = [_tools()[0].model_copy(update={"execute": other_contents})]
        context = AgentContext(system_prompt="You read files.", tools=tools)
        async for _ in agent_loop(
            [UserMessage(content="read a and b")], context, AgentLoopConfig(model=MODEL)
        ):
            pass

    # The tool returns other contents now: the second call drifts in the message its patch added.
    with use_recording(path, "replay"), pytest.raises(ReplayMismatch) as caught:
        asyncio.run(drifted())
    assert "context.messages[2].content[0].text" in str(caught.value)
    assert "something else" in str(caught.value)


async def _ask(context: Context) -> AssistantMessage:
    return await complete(MODEL, context)


def _record_contexts(path: Path, contexts: list[Context]) -> None:
    register_api_provider(
        MODEL.api, FauxProvider([faux_text(f"answer {n}") for n in range(len(contexts))])
    )
    with use_recording(path, "record"):
        for context in contexts:
            asyncio.run(_ask(context))


def _replay_contexts(path: Path, contexts: list[Context]) -> list[str]:
    with use_recording(path, "replay") as scope:
        answers = [_text(asyncio.run(_ask(context))) for context in contexts]
        scope.assert_consumed()
    return answers


def test_a_context_that_shrinks_or_changes_in_the_middle_is_written_whole(tmp_path):
    first = Context(
        system_prompt="be brief", messages=[UserMessage(content="one"), UserMessage(content="two")]
    )
    grown = Context(
        system_prompt="be brief", messages=[*first.messages, UserMessage(content="three")]
    )
    compacted = Context(
        system_prompt="be brief", messages=[UserMessage(content="summary of one to three")]
    )
    edited = Context(system_prompt="be very brief", messages=compacted.messages)
    contexts = [first, grown, compacted, edited]
    path = tmp_path / "changes.jsonl"
    _record_contexts(path, contexts)
    stored = requests(path)
    assert ["context_patch" in request for request in stored] == [False, True, False, False]
    assert stored[1]["context_patch"] == {
        "from": 0,
        "ops": [["push", ["messages"], grown.messages[2].model_dump(mode="json")]],
    }
    assert _replay_contexts(path, contexts) == ["answer 0", "answer 1", "answer 2", "answer 3"]


def test_the_patch_holds_the_redacted_values(tmp_path):
    key = "sk-proj-" + "Ab3dE5fG7hJ9kL1mN3pQ5rS7"
    first = Context(messages=[UserMessage(content="hello")])
    second = Context(messages=[*first.messages, UserMessage(content=f"my key is {key} ok")])
    path = tmp_path / "secret.jsonl"
    _record_contexts(path, [first, second])
    text = path.read_text()
    assert "context_patch" in text and "[secret removed]" in text
    for start in range(len(key) - 7):
        assert key[start : start + 8] not in text


# ----------------------------------------------------------------------------- the strict reader


def _two_call_file(tmp_path: Path) -> tuple[Path, list[bytes]]:
    first = Context(messages=[UserMessage(content="one")])
    second = Context(messages=[*first.messages, UserMessage(content="two")])
    path = tmp_path / "two.jsonl"
    _record_contexts(path, [first, second])
    return path, path.read_bytes().splitlines(keepends=True)


def _with_second_request(tmp_path: Path, change) -> tuple[Path, int]:
    path, lines = _two_call_file(tmp_path)
    number = next(
        n for n, line in enumerate(lines, 1) if b'"call_index":1' in line and b'"request"' in line
    )
    row = orjson.loads(lines[number - 1])
    change(row)
    lines[number - 1] = orjson.dumps(row) + b"\n"
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"".join(lines))
    return broken, number


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            lambda row: row["context_patch"].update(
                ops=[["append", ["messages", 7, "content"], "x"]]
            ),
            "does not apply to call 0's context",
        ),
        (
            lambda row: row["context_patch"].update(ops=[["set", [], 5]]),
            "context must be a JSON object",
        ),
        (lambda row: row["context_patch"].update({"from": 1}), "does not name an earlier call"),
        (lambda row: row["context_patch"].update({"from": True}), "does not name an earlier call"),
        (lambda row: row["context_patch"].pop("ops"), 'context_patch must be {"from"'),
        (lambda row: row.update(context={"messages": []}), "both context and context_patch"),
        (lambda row: row.pop("context_patch"), "neither context nor context_patch"),
    ],
)
def test_a_patch_that_does_not_apply_is_refused_naming_its_line(tmp_path, change, reason):
    broken, number = _with_second_request(tmp_path, change)
    with pytest.raises(RecordingFileError) as caught:
        read_recording_file(broken)
    assert caught.value.line_number == number and caught.value.call_index == 1
    assert reason in caught.value.reason


def test_context_patch_in_a_version_1_file_is_refused(tmp_path):
    path, lines = _two_call_file(tmp_path)
    header = orjson.loads(lines[0])
    header["format_version"] = 1
    lines[0] = orjson.dumps(header) + b"\n"
    path.write_bytes(b"".join(lines))
    with pytest.raises(
        RecordingFileError, match="context_patch needs format_version 2, the file is version 1"
    ):
        read_recording_file(path)


def test_a_newer_version_is_refused_by_name_for_reading_and_appending(tmp_path):
    path = tmp_path / "future.jsonl"
    path.write_bytes(b'{"type":"header","format_version":3}\n')
    with pytest.raises(RecordingFileError) as caught:
        read_recording_file(path)
    assert caught.value.kind == "wrong_version"
    assert (
        "format_version 3 is newer than this openprogram reads (1 and 2); a newer openprogram is needed"
        in str(caught.value)
    )
    with (
        pytest.raises(RecordingFileError, match="format_version 3 is newer"),
        use_recording(path, "record"),
    ):
        pass
    assert path.read_bytes() == b'{"type":"header","format_version":3}\n'


# ----------------------------------------------------------------------------- version 1 files


def test_a_version_1_file_written_before_version_2_replays_unchanged(tmp_path):
    path = tmp_path / "v1.jsonl"
    shutil.copy(FIXTURE, path)
    before = path.read_bytes()
    assert rows(path)[0]["format_version"] == 1
    assert _run_both_sessions(path, "replay") == EXPECTED_ANSWERS
    assert path.read_bytes() == before


def test_appending_to_a_version_1_file_keeps_version_1(tmp_path):
    path = tmp_path / "v1.jsonl"
    shutil.copy(FIXTURE, path)
    before = path.read_bytes()
    with use_recording(path, "record"):
        asyncio.run(_session("read d", ["d.txt", "e.txt"]))
    assert path.read_bytes().startswith(before)
    assert rows(path)[0]["format_version"] == 1
    assert not any("context_patch" in request for request in requests(path))
    assert len(read_recording_file(path).calls) == 7 + 4


def test_update_of_a_version_1_file_keeps_version_1_and_of_version_2_repatches(tmp_path):
    v1 = tmp_path / "v1.jsonl"
    shutil.copy(FIXTURE, v1)
    v2 = tmp_path / "v2.jsonl"
    _run_both_sessions(v2, "record")
    for path, version in ((v1, 1), (v2, 2)):
        # The second session now asks for another file: its calls are new.
        with use_recording(path, "update"):
            asyncio.run(_session("read a and b", ["a.txt", "b.txt"]))
        with use_recording(path, "update"):
            asyncio.run(_session("read z", ["z.txt"]))
        assert rows(path)[0]["format_version"] == version
        stored = requests(path)
        assert [request["call_index"] for request in stored] == list(range(len(stored)))
        patched = [request for request in stored if "context_patch" in request]
        assert bool(patched) == (version == 2)
        for request in patched:  # every patch names an earlier call of its own lane and session
            base = stored[request["context_patch"]["from"]]
            assert base["call_index"] < request["call_index"]
            assert (base["session"], base.get("lane")) == (request["session"], request.get("lane"))
        recording = read_recording_file(path)
        assert "z.txt" in orjson.dumps(recording.calls[-2].context).decode()
        with use_recording(path, "replay"):
            assert asyncio.run(_session("read z", ["z.txt"]))[-2] == "done: read z"


# ----------------------------------------------------------------------------- the property


def _request_bytes(path: Path) -> int:
    return sum(len(line) for line in path.read_bytes().splitlines() if b'"type":"request"' in line)


def _message(text: str) -> UserMessage:
    return UserMessage(content=text)


#: One step of a conversation: grow it, edit a message in the middle, shrink it (compaction),
#: change the system prompt, or make the call in a lane of its own.
STEPS = st.lists(
    st.tuples(
        st.sampled_from(["grow", "grow", "grow", "edit", "shrink", "system", "lane"]),
        st.text(max_size=12),
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=STEPS, sessions=st.integers(min_value=1, max_value=2))
def test_random_conversations_record_and_replay_equal_and_never_larger_than_version_1(
    tmp_path_factory, steps, sessions
):
    folder = tmp_path_factory.mktemp("prop")
    plan: list[tuple[str, Context]] = []
    messages: list[UserMessage] = [_message("start")]
    system = "sys"
    for kind, text in steps:
        if kind == "grow":
            messages = [*messages, _message(text)]
        elif kind == "edit" and len(messages) > 1:
            messages = [*messages[:-2], _message(text + "!"), messages[-1]]
        elif kind == "shrink":
            messages = messages[-1:]
        elif kind == "system":
            system = text
        plan.append(
            (
                "side" if kind == "lane" else "",
                Context(system_prompt=system, messages=list(messages)),
            )
        )

    async def run_plan() -> list[str]:
        answers = []
        for lane_name, context in plan:
            if lane_name:
                with lane(lane_name):
                    answers.append(_text(await complete(MODEL, context)))
            else:
                answers.append(_text(await complete(MODEL, context)))
        return answers

    def record(path: Path) -> list[str]:
        answers = []
        for session in range(sessions):
            register_api_provider(
                MODEL.api, FauxProvider([faux_text(f"s{session} a{n}") for n in range(len(plan))])
            )
            with use_recording(path, "record"):
                answers += asyncio.run(run_plan())
        return answers

    version_2 = folder / "v2.jsonl"
    version_1 = folder / "v1.jsonl"
    version_1.write_bytes(encode_line(header_row(1)))
    live = record(version_2)
    assert record(version_1) == live
    # Request lines are all the versions write differently (event lines hold timings).
    assert _request_bytes(version_2) <= _request_bytes(version_1)
    replayed = []
    for _ in range(sessions):
        with use_recording(version_2, "replay"):
            replayed += asyncio.run(run_plan())
    # Each replay follows the first session whose first call matches: the same plan always
    # replays the first session's answers.
    assert replayed == live[: len(plan)] * sessions
    old, new = read_recording_file(version_1), read_recording_file(version_2)
    assert [call.request for call in new.calls] == [call.request for call in old.calls]
