"""Version 2 contexts are resolved sharing structure, so opening, showing, viewing and comparing
a long agent's recording costs memory and time linear in the file (issue #35).

What is asserted is structure, never time: resolved contexts share their message objects,
opening builds no context for an agent's turns, the views show each turn's growth (so a page
grows with the turns, not their square), and contexts built in any order are the same.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from openprogram.cli.main import main
from openprogram.providers import types
from openprogram.providers.faux import FauxProvider, faux_text, faux_tool_call
from openprogram.providers.recording import RecordingProvider
from openprogram.recordings.file import contexts as contexts_module
from openprogram.recordings.file.patches import PatchError, apply_patch, nesting, strictly_equal
from openprogram.recordings.file.reader import read_recording_file
from openprogram.recordings.views.comparison import diff_recordings
from openprogram.recordings.views.conversation import render_conversation
from openprogram.recordings.views.inspection import read_recording
from openprogram.recordings.views.view import render_recording_page

MODEL = types.Model(id="echo", api="faux", provider="faux")


def record_agent(path: Path, turns: int, result: str = "result") -> list[dict]:
    """An agent of ``turns`` tool calls and a final answer, recorded by the real recorder; the
    contexts it sent, as the file should give them back."""
    faux = FauxProvider(timestamp=0)
    provider = RecordingProvider(faux, path)
    sent: list[dict] = []

    async def go() -> None:
        messages: list = [types.UserMessage(content="Add the numbers up.", timestamp=0)]
        for turn in range(turns + 1):
            faux.queue(
                faux_tool_call("calculator", {"expression": f"{turn}+1"}, id=f"c{turn}")
                if turn < turns
                else faux_text("Done.")
            )
            context = types.Context(system_prompt="You add.", messages=list(messages))
            sent.append(
                context.model_dump(
                    mode="json", exclude={"messages": {"__all__": types.ANSWER_ONLY_FIELDS}}
                )
            )
            answer = None
            async for event in provider.stream_simple(MODEL, context):
                answer = getattr(event, "message", answer)
            messages.append(answer)
            text = types.TextContent(text=f"{result} {turn:04d}")
            messages.append(
                types.ToolResultMessage(
                    tool_call_id=f"c{turn}", tool_name="calculator", content=[text], timestamp=0
                )
            )

    asyncio.run(go())
    provider.sink.close()
    return sent


@pytest.fixture(scope="module")
def agent(tmp_path_factory) -> tuple[Path, list[dict]]:
    path = tmp_path_factory.mktemp("agent") / "agent.jsonl"
    return path, record_agent(path, 30)


def test_the_writer_stores_each_turn_as_its_growth(agent):
    path, _ = agent
    requests = [
        json.loads(line) for line in path.read_text().splitlines() if '"type":"request"' in line
    ]
    assert "context" in requests[0] and all("context_patch" in row for row in requests[1:])


def test_resolved_contexts_share_their_messages_with_the_turn_before(agent):
    path, sent = agent
    calls = read_recording_file(path).calls
    for call, expected in zip(calls, sent, strict=True):
        assert strictly_equal(call.context, expected)
    for before, call in zip(calls, calls[1:], strict=False):
        earlier, messages = before.context["messages"], call.context["messages"]
        assert call.context_growth == (before.call_index, len(earlier))
        assert all(mine is theirs for mine, theirs in zip(messages, earlier, strict=False))
        assert call.message_count == len(messages) == len(earlier) + 2


def test_opening_builds_no_context_for_an_agents_turns(agent, monkeypatch):
    """An agent's turn only pushes messages: it is checked on the pushed messages, and built
    only when asked for."""
    path, sent = agent
    applied: list[object] = []

    def counting(value, patch):
        applied.append(patch)
        return apply_patch(value, patch)

    monkeypatch.setattr(contexts_module, "apply_patch", counting)
    recording = read_recording_file(path)
    assert applied == []
    last = recording.calls[-1]
    assert strictly_equal(
        last.messages_from(len(sent[-1]["messages"]) - 2), sent[-1]["messages"][-2:]
    )
    assert applied == []  # the growth is read from the patch itself
    assert strictly_equal(last.context, sent[-1])
    assert len(applied) == len(sent) - 1  # built from the first context, turn by turn


def test_contexts_built_in_any_order_with_few_kept_are_the_same(agent, monkeypatch):
    path, sent = agent
    monkeypatch.setattr(contexts_module.CallContexts, "KEPT", 2)
    calls = read_recording_file(path).calls
    for call in reversed(calls):
        assert strictly_equal(call.context, sent[call.call_index])
    for call in calls[::7]:
        for start in (0, 1, call.message_count - 1, call.message_count, call.message_count + 3):
            assert strictly_equal(
                call.messages_from(start), sent[call.call_index]["messages"][start:]
            )
        assert call.system_prompt == "You add."


def test_a_patch_other_than_pushes_is_checked_and_shares_the_untouched_messages(tmp_path):
    rows = [
        {"type": "header", "format_version": 2},
        {
            "type": "request",
            "call_index": 0,
            "model": {"id": "m", "api": "faux", "provider": "faux"},
            "options": None,
            "context": {
                "system_prompt": "a",
                "messages": [
                    {"role": "user", "content": "one"},
                    {"role": "user", "content": "two"},
                ],
            },
        },
        {
            "type": "request",
            "call_index": 1,
            "model": {"id": "m", "api": "faux", "provider": "faux"},
            "options": None,
            "context_patch": {
                "from": 0,
                "ops": [
                    ["append", ["system_prompt"], "b"],
                    ["append", ["messages", 1, "content"], "!"],
                    ["push", ["messages"], {"role": "user", "content": "three"}],
                ],
            },
        },
    ]
    done = {
        "type": "done",
        "reason": "stop",
        "message": {
            "role": "assistant",
            "content": [],
            "api": "faux",
            "provider": "faux",
            "model": "m",
        },
    }
    lines = [rows[0]]
    for row in rows[1:]:
        index = row["call_index"]
        lines += [
            row,
            {"type": "event", "call_index": index, "event_index": 0, "event": done},
            {"type": "call_end", "call_index": index, "event_count": 1},
        ]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    first, second = read_recording_file(path).calls
    assert second.context["system_prompt"] == second.system_prompt == "ab"
    assert [m["content"] for m in second.context["messages"]] == ["one", "two!", "three"]
    assert second.context_growth == (0, 1)  # message 1 was changed: only message 0 is shared
    assert second.context["messages"][0] is first.context["messages"][0]
    assert first.context["messages"][1]["content"] == "two"  # the base is not changed


def test_the_page_and_the_conversation_grow_with_the_turns_not_their_square(tmp_path):
    """Bytes are deterministic: twice the turns make at most a little more than twice the
    page (showing every context whole would make about four times)."""
    sizes = {}
    for turns in (40, 80):
        path = tmp_path / f"agent{turns}.jsonl"
        record_agent(path, turns)
        recording = read_recording(path)
        sizes[turns] = (len(render_recording_page(recording)), len(render_conversation(recording)))
    (page_40, text_40), (page_80, text_80) = sizes[40], sizes[80]
    assert page_80 < 2.2 * page_40 and text_80 < 2.2 * text_40, sizes
    text = render_conversation(read_recording(tmp_path / "agent80.jsonl"))
    assert text.count("user:") == 1 and text.count("result 0079") == 1  # each message told once
    assert "new conversation" not in text and "earlier messages" not in text


def _write(path: Path, requests: list[dict]) -> Path:
    """A version 2 file of ``requests`` (each its context fields), each answered ``echo: N``."""
    lines = [{"type": "header", "format_version": 2}]
    for index, fields in enumerate(requests):
        answer = {
            "role": "assistant",
            "content": [{"type": "text", "text": f"echo: {index}"}],
            "api": "faux",
            "provider": "faux",
            "model": "m",
            "timestamp": 0,
        }
        lines += [
            {
                "type": "request",
                "call_index": index,
                "model": {"id": "m", "api": "faux", "provider": "faux"},
                "options": None,
                **fields,
            },
            {
                "type": "event",
                "call_index": index,
                "event_index": 0,
                "event": {"type": "done", "reason": "stop", "message": answer},
            },
            {"type": "call_end", "call_index": index, "event_count": 1},
        ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _user(text: str) -> dict:
    return {"role": "user", "content": text, "timestamp": 0}


def test_a_call_that_grew_from_an_earlier_one_but_not_from_its_answer_names_it(tmp_path, capsys):
    """A retry of call 0 and a client that resends call 1's answer in its own words: each
    shows what it added after a note, not the conversation again."""
    rewritten = {
        "role": "assistant",
        "content": [{"type": "text", "text": "ECHO 1"}],
        "api": "faux",
        "provider": "faux",
        "model": "m",
    }
    path = _write(
        tmp_path / "r.jsonl",
        [
            {"context": {"system_prompt": "be brief", "messages": [_user("first question")]}},
            {
                "context_patch": {
                    "from": 0,
                    "ops": [["push", ["messages"], _user("second question")]],
                }
            },
            {
                "context_patch": {
                    "from": 1,
                    "ops": [
                        ["push", ["messages"], rewritten],
                        ["push", ["messages"], _user("third question")],
                    ],
                }
            },
        ],
    )
    recording = read_recording(path)
    text = render_conversation(recording)
    assert text.count("first question") == 1 and text.count("second question") == 1
    assert "(+ 1 earlier messages as in call 0)" in text
    assert "(+ 2 earlier messages as in call 1)" in text and "ECHO 1" in text
    assert text.count("system:") == 1 and "new conversation" not in text
    page = render_recording_page(recording)
    assert "+ 2 earlier messages as in call 1" in page and page.count("first question") == 1
    assert main(["recordings", "show", str(path), "--conversation"]) == 0
    assert "(+ 1 earlier messages as in call 0)" in capsys.readouterr().out


def test_whole_contexts_that_resend_an_answer_in_other_words_name_the_call_too(tmp_path):
    """Files that store every context whole (version 1, or a rewritten context) are compared
    message by message with the call before."""
    first = [_user("question")]
    second = [
        *first,
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "rewritten"}],
            "api": "faux",
            "provider": "faux",
            "model": "m",
        },
        _user("more"),
    ]
    path = _write(
        tmp_path / "r.jsonl", [{"context": {"messages": first}}, {"context": {"messages": second}}]
    )
    text = render_conversation(read_recording(path))
    assert (
        text.count("question") == 1
        and "(+ 1 earlier messages as in call 0)" in text
        and "rewritten" in text
    )
    other = _write(
        tmp_path / "other.jsonl",
        [{"context": {"messages": first}}, {"context": {"messages": [_user("unrelated")]}}],
    )
    assert "--- new conversation ---" in render_conversation(read_recording(other))


def test_diff_of_long_recordings_finds_the_first_different_turn(tmp_path):
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    record_agent(a, 20)
    record_agent(b, 20)
    record_agent(c, 20, result="other")
    assert diff_recordings(read_recording(a), read_recording(b)).identical
    result = diff_recordings(read_recording(a), read_recording(c))
    first = next(call for call in result.calls if call.status != "same")
    assert first.call_index == 1
    assert first.request_difference["field_path"] == "context.messages[2].content[0].text"
    assert (
        first.request_difference["a"] == "result 0000"
        and first.request_difference["b"] == "other 0000"
    )
    assert result.different_calls == 20  # every later turn resends the difference


def test_apply_patch_walks_any_path_without_recursion():
    deep: dict = {}
    node = deep
    for _ in range(3000):
        node["a"] = {}
        node = node["a"]
    patched = apply_patch(deep, [["set", ["a"] * 3000, "leaf"]])
    for _ in range(3000):
        patched = patched["a"]
    assert patched == "leaf" and node == {}  # the input is not changed
    with pytest.raises(PatchError, match="no key"):
        apply_patch({"a": {}}, [["set", ["a", "b", *["c"] * 5000], 1]])


def test_nesting_counts_levels_and_stops_past_the_limit():
    assert nesting("x", 10) == 0 and nesting([], 10) == 1 and nesting({"a": [{}]}, 10) == 3
    deep: list = []
    for _ in range(10_000):
        deep = [deep]
    assert nesting(deep, 100) == 101  # stops at the first level past the limit


def test_a_filtered_replay_keeps_only_the_recent_filtered_requests_and_still_matches(
    tmp_path, monkeypatch
):
    """With ``ignore`` or ``normalize`` each recorded request is compared filtered; the
    filtered copies (each a whole conversation) are not all kept, and a call filtered again
    after it was dropped matches as before."""
    from openprogram.providers.models import get_model
    from openprogram.providers.scoped import use_recording
    from openprogram.providers.stream import complete_simple
    from openprogram.recordings.replay import replayer

    monkeypatch.setattr(replayer._RecentRequests, "KEPT", 3)
    path = tmp_path / "dated.jsonl"
    model = get_model("faux/echo")

    async def conversation(stamp: str) -> list:
        messages: list = []
        answers = []
        for turn in range(8):
            messages.append(types.UserMessage(content=f"turn {turn} at {stamp}", timestamp=0))
            answer = await complete_simple(
                model, types.Context(system_prompt=f"Now: {stamp}", messages=list(messages))
            )
            messages.append(answer)
            answers.append(answer.content)
        return answers

    with use_recording(path, "record"):
        recorded = asyncio.run(conversation("2026-12-01"))
    rule = [(r"\d{4}-\d\d-\d\d", "<day>")]
    with use_recording(path, "replay", normalize=rule) as scope:
        assert asyncio.run(conversation("2026-12-02")) == recorded
        scope.assert_consumed()
    kept = replayer._RecentRequests()
    for index in range(5):
        kept[index] = {"call": index}
    assert list(kept) == [2, 3, 4]
