"""``openprogram recordings diff`` and ``show --conversation`` over recordings made here."""

from __future__ import annotations

import asyncio
import json

import pytest

from openprogram.cli.main import main
from openprogram.providers import api_registry
from openprogram.providers.faux import FauxProvider, FauxResponse, faux_text, faux_tool_call
from openprogram.providers.scoped import use_recording
from openprogram.providers.stream import complete
from openprogram.providers.types import (
    AssistantMessage,
    Context,
    Model,
    TextContent,
    ToolResultMessage,
    UserMessage,
)

MODEL = Model(id="scripted", api="diff-test", provider="faux")


def record(path, prompt: str, answers: list[FauxResponse]) -> None:
    """Record a two-call session: the model calls a tool, then answers."""
    provider = FauxProvider(answers, timestamp=1)
    api_registry.register_api_provider("diff-test", provider)

    async def session() -> None:
        context = Context(
            system_prompt="be brief", messages=[UserMessage(content=prompt, timestamp=1)]
        )
        first = await complete(MODEL, context)
        context.messages.append(first)
        context.messages.append(
            ToolResultMessage(
                tool_call_id=first.content[0].id,
                tool_name="calc",
                content=[TextContent(text="42")],
                timestamp=1,
            )
        )
        await complete(MODEL, context)

    with use_recording(path, "record"):
        asyncio.run(session())


@pytest.fixture
def recordings(tmp_path, fresh_registry):
    base = [faux_tool_call("calc", {"e": "6*7"}), faux_text("it is 42")]
    paths = {name: tmp_path / f"{name}.jsonl" for name in ("a", "same", "prompt", "output")}
    record(paths["a"], "what is 6*7?", base)
    record(paths["same"], "what is 6*7?", base)
    record(paths["prompt"], "what is 6*8?", base)
    record(
        paths["output"],
        "what is 6*7?",
        [faux_tool_call("calc", {"e": "7*6"}), faux_text("forty-two")],
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "header", "format_version": 1}\n{"type": "event"')
    paths["bad"] = bad
    return paths


def diff(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["recordings", "diff", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_identical_recordings_apart_from_timestamps(recordings, capsys):
    assert recordings["a"].read_bytes() != recordings["same"].read_bytes()  # ids and times differ
    code, out, _ = diff(capsys, recordings["a"], recordings["same"])
    assert code == 0
    assert out.splitlines()[-1] == "identical: 2 calls, apart from non-deterministic fields"


def test_request_drift_names_the_first_field(recordings, capsys):
    code, out, _ = diff(capsys, recordings["a"], recordings["prompt"], "--json")
    assert code == 1
    report = json.loads(out)
    assert report["identical"] is False
    first = report["calls"][0]
    assert first["request_difference"] == {
        "field_path": "context.messages[0].content",
        "a": "what is 6*7?",
        "b": "what is 6*8?",
    }
    assert first["response_differences"] == []  # the scripted answers were the same


def test_output_drift_lists_text_and_tool_call_differences(recordings, capsys):
    code, out, _ = diff(capsys, recordings["a"], recordings["output"])
    assert code == 1
    assert "call 0: different" in out and "response tool_calls:" in out
    assert "'e': '6*7'" in out and "'e': '7*6'" in out
    assert "response text:" in out and "'it is 42'" in out and "'forty-two'" in out
    assert out.splitlines()[-1] == "2 of 2 calls differ (2 calls in A, 2 in B)"


def test_invalid_or_missing_file_exits_2_naming_it(recordings, capsys, tmp_path):
    code, _, err = diff(capsys, recordings["a"], recordings["bad"])
    assert code == 2 and f"recording file {recordings['bad']} at line 2" in err
    code, _, err = diff(capsys, tmp_path / "none.jsonl", recordings["a"])
    assert code == 2 and "none.jsonl" in err and "does not exist" in err


def test_conversation_view(recordings, capsys):
    assert main(["recordings", "show", str(recordings["a"]), "--conversation"]) == 0
    captured = capsys.readouterr()
    assert "recordings hold prompts" in captured.err
    lines = captured.out.splitlines()
    assert lines[:4] == ["system:", "  be brief", "user:", "  what is 6*7?"]
    assert '  -> calc({"e":"6*7"})' in lines
    assert "tool result calc:" in lines and "  it is 42" in lines
    assert lines[-1].startswith("2 calls; replaying this recording saves $")
    assert sum(1 for line in lines if line.startswith("  (call ")) == 2
    assert "user:" not in lines[4:]  # the second call's context is not repeated


def test_conversation_marks_a_new_session(tmp_path, fresh_registry, capsys):
    path = tmp_path / "two.jsonl"
    api_registry.register_api_provider("diff-test", FauxProvider([faux_text("a"), faux_text("b")]))

    async def two_sessions() -> None:
        await complete(MODEL, Context(messages=[UserMessage(content="first", timestamp=1)]))
        await complete(MODEL, Context(messages=[UserMessage(content="second", timestamp=1)]))

    with use_recording(path, "record"):
        asyncio.run(two_sessions())
    main(["recordings", "show", str(path), "--conversation"])
    out = capsys.readouterr().out
    assert "--- new conversation ---" in out
    assert out.index("first") < out.index("--- new conversation ---") < out.index("second")


def test_final_message_reads_error_outcomes(tmp_path, fresh_registry):
    from openprogram.providers.faux import faux_error
    from openprogram.providers.replay import read_recording_file
    from openprogram.recordings.views.comparison import final_message

    path = tmp_path / "err.jsonl"
    api_registry.register_api_provider("diff-test", FauxProvider([faux_error("overloaded")]))
    with use_recording(path, "record"):
        message = asyncio.run(complete(MODEL, Context(messages=[UserMessage(content="x")])))
    assert isinstance(message, AssistantMessage)
    assert final_message(read_recording_file(path).calls[0])["error_message"] == "overloaded"


def test_every_json_document_of_recordings_has_its_schema_version(
    recordings, capsys, isolated_home
):
    """docs/recordings-cli.md promises ``schema_version`` on every ``--json``: each verb that
    takes the flag is run with it."""
    import argparse

    from openprogram.cli.recordings_cmd import VERBS

    with_json = []
    for name, entry in VERBS.items():
        parser = argparse.ArgumentParser()
        entry.arguments(parser)
        if any("--json" in action.option_strings for action in parser._actions):
            with_json.append(name)
    arguments = {
        "status": [],
        "list": [],
        "show": [recordings["a"]],
        "diff": [recordings["a"], recordings["prompt"]],
        "doctor": [recordings["a"], recordings["prompt"]],
    }
    assert sorted(with_json) == sorted(arguments)  # a new --json verb is added here
    for name, extra in arguments.items():
        main(["recordings", name, *map(str, extra), "--json"])
        document = json.loads(capsys.readouterr().out)
        assert document["schema_version"] == 1, name
