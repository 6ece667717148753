"""Volatile values in requests: ``ignore`` patterns and ``normalize`` rules."""

from __future__ import annotations

import pytest

from openprogram.providers.models import get_model
from openprogram.providers.replay import ReplayMismatch
from openprogram.providers.scoped import use_recording
from openprogram.providers.stream import complete_simple
from openprogram.providers.types import Context, StreamOptions, UserMessage
from openprogram.recordings.replay.volatile import ANY, RequestFilter, parse_field_pattern


def test_patterns_read_the_path_language_of_the_mismatch_report():
    assert parse_field_pattern("context.system_prompt") == ("context", "system_prompt")
    assert parse_field_pattern("context.messages[*].content[0].text") == (
        "context",
        "messages",
        ANY,
        "content",
        0,
        "text",
    )
    assert parse_field_pattern("options.metadata.*") == ("options", "metadata", ANY)
    assert parse_field_pattern('model.headers["X.Trace"]') == ("model", "headers", "X.Trace")


@pytest.mark.parametrize(
    "bad", ["", "system_prompt", "context..x", "context.messages[", ".context", "context.a b", 3]
)
def test_a_bad_pattern_is_refused_with_its_text(bad):
    with pytest.raises(ValueError, match="pattern"):
        parse_field_pattern(bad)


def test_a_bad_normalize_rule_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"normalize rule 1: invalid regex '\('"):
        RequestFilter(normalize=[("a", "b"), ("(", "x")])
    with pytest.raises(ValueError, match="normalize rule 0 must be a"):
        RequestFilter(normalize=["just-a-string"])


def test_ignore_blanks_every_match_and_leaves_the_input_alone():
    payloads = {
        "model": {"id": "m"},
        "context": {
            "messages": [{"content": [{"text": "a"}, {"text": "b"}]}, {"content": "plain"}]
        },
        "options": {"metadata": {"run": "1", "user": "x"}},
    }
    view = RequestFilter(
        ignore=["context.messages[*].content[*].text", "options.metadata.*"]
    ).apply(payloads)
    assert view["context"]["messages"][0]["content"] == [{"text": None}, {"text": None}]
    assert view["context"]["messages"][1]["content"] == "plain"  # a string has no [*]
    assert view["options"]["metadata"] == {"run": None, "user": None}
    assert payloads["context"]["messages"][0]["content"][0]["text"] == "a"
    assert payloads["options"]["metadata"]["run"] == "1"


def test_normalize_rewrites_every_string_on_both_sides():
    rule = RequestFilter(normalize=[(r"\d{4}-\d\d-\d\d", "<date>")])
    view = rule.apply(
        {
            "model": {},
            "context": {"system_prompt": "today is 2026-12-01", "x": ["2025-01-01"]},
            "options": None,
        }
    )
    assert view["context"] == {"system_prompt": "today is <date>", "x": ["<date>"]}


def ask(system_prompt: str) -> Context:
    return Context(system_prompt=system_prompt, messages=[UserMessage(content="what day is it?")])


async def test_a_prompt_with_the_time_replays_with_a_normalize_rule_and_fails_without(tmp_path):
    path = tmp_path / "dated.jsonl"
    model = get_model("faux/echo")
    with use_recording(path, "record"):
        recorded = await complete_simple(model, ask("Now: 2026-12-01T02:30:58.123"))
    later = ask("Now: 2026-12-02T09:15:00.001")

    with use_recording(path, "replay"), pytest.raises(ReplayMismatch) as caught:
        await complete_simple(model, later)
    assert caught.value.field_path == "context.system_prompt"

    with use_recording(path, "replay", normalize=[(r"\d{4}-\d\d-\d\dT[\d:.]+", "<now>")]) as scope:
        assert (await complete_simple(model, later)).content == recorded.content
        scope.assert_consumed()
    with use_recording(path, "replay", ignore=["context.system_prompt"]) as scope:
        assert (await complete_simple(model, later)).content == recorded.content
        scope.assert_consumed()
    # What is not ignored is still compared.
    with (
        use_recording(path, "replay", ignore=["context.system_prompt"]),
        pytest.raises(ReplayMismatch) as caught,
    ):
        await complete_simple(model, later, StreamOptions(temperature=0.5))
    assert caught.value.field_path == "options.temperature"


def test_use_recording_refuses_a_bad_pattern_before_touching_the_file(tmp_path):
    path = tmp_path / "never.jsonl"
    with pytest.raises(ValueError, match="ignore pattern"):
        with use_recording(path, "record", ignore=["nowhere"]):
            pass
    assert not path.exists()


@pytest.mark.parametrize("ignored", ["options", "model", "context", "options.*"])
async def test_ignoring_a_whole_part_of_the_request_replays_a_match(tmp_path, ignored):
    path = tmp_path / "whole.jsonl"
    model = get_model("faux/echo")
    with use_recording(path, "record"):
        recorded = await complete_simple(model, ask("hello"), StreamOptions(temperature=0.5))
    with use_recording(path, "replay", ignore=[ignored]) as scope:
        assert (
            await complete_simple(model, ask("hello"), StreamOptions(temperature=0.5))
        ).content == recorded.content
        scope.assert_consumed()
