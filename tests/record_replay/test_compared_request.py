"""What a replay compares (docs/file-format.md, "What a replay compares") and how a drift in a
long value reads."""

from __future__ import annotations

import asyncio
import pickle

import pytest

from openprogram.providers import register_api_provider
from openprogram.providers.faux import FauxProvider, faux_text
from openprogram.providers.replay import ReplayMismatch
from openprogram.providers.scoped import use_recording
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, ModelCost, UserMessage

MODEL = Model(
    id="local", api="compared-request", provider="llamacpp", base_url="http://127.0.0.1:8765/v1"
)
CONTEXT = Context(system_prompt="be brief", messages=[UserMessage(content="hi", timestamp=1)])


def _record(path, model=MODEL, context=CONTEXT) -> None:
    register_api_provider(model.api, FauxProvider([faux_text("hello")]))
    with use_recording(path, "record"):
        asyncio.run(complete(model, context))


def _replay(path, model=MODEL, context=CONTEXT) -> str:
    with use_recording(path, "replay"):
        message = asyncio.run(complete(model, context))
    return message.content[0].text


@pytest.mark.parametrize(
    "changed",
    [
        {"base_url": "http://127.0.0.1:9999/v1"},
        {"context_window": 2048},
        {"cost": ModelCost(input=3.0, output=15.0)},
        {"name": "SmolLM2 on my laptop"},
    ],
    ids=["base_url", "context_window", "cost", "name"],
)
def test_catalog_metadata_that_never_reaches_the_vendor_is_not_compared(tmp_path, changed):
    path = tmp_path / "rec.jsonl"
    _record(path)
    assert _replay(path, MODEL.model_copy(update=changed)) == "hello"
    assert '"base_url":"http://127.0.0.1:8765/v1"' in path.read_text()  # recorded all the same


@pytest.mark.parametrize(
    ("changed", "field"),
    [
        ({"id": "other"}, "model.id"),
        ({"max_tokens": 100}, "model.max_tokens"),
        ({"headers": {"x-team": "a"}}, "model.headers"),
        ({"reasoning": True}, "model.reasoning"),
    ],
)
def test_what_shapes_the_wire_body_is_compared(tmp_path, changed, field):
    path = tmp_path / "rec.jsonl"
    _record(path)
    with pytest.raises(ReplayMismatch) as caught:
        _replay(path, MODEL.model_copy(update=changed))
    assert caught.value.field_path == field


def test_a_long_value_that_drifts_shows_a_window_at_the_first_difference(tmp_path):
    prompt = " ".join(f"rule {number}: be polite and blue." for number in range(120))
    path = tmp_path / "rec.jsonl"
    _record(path, context=Context(system_prompt=prompt, messages=CONTEXT.messages))
    changed = prompt.replace("rule 99: be polite and blue", "rule 99: be polite and green")
    with pytest.raises(ReplayMismatch) as caught:
        _replay(path, context=Context(system_prompt=changed, messages=CONTEXT.messages))
    first_line, second_line = str(caught.value).splitlines()[:2]
    position = prompt.index("rule 99: be polite and blue") + len("rule 99: be polite and ")
    assert first_line.endswith(f"(first difference at character {position})")
    recorded, incoming = second_line.split(", incoming ")
    assert "rule 99: be polite and blue" in recorded and "rule 99: be polite and green" in incoming
    for shown in (recorded.removeprefix("recorded "), incoming):
        assert shown.startswith("...'") and shown.endswith("'...") and len(shown) <= 200
    # The window survives pickling (pytest-xdist carries the exception between processes).
    assert str(pickle.loads(pickle.dumps(caught.value))) == str(caught.value)


def test_a_short_difference_keeps_the_two_line_form():
    message = str(ReplayMismatch(1, "context.messages[2].content[0].text", "echo:hi", "echo:bye"))
    assert (
        message
        == "replay mismatch at call 1, field context.messages[2].content[0].text:\nrecorded 'echo:hi', incoming 'echo:bye'"
    )


def test_a_long_value_differing_early_keeps_the_plain_cut_form():
    recorded, incoming = "a" * 300, "b" + "a" * 299
    message = str(ReplayMismatch(0, "x", recorded, incoming))
    assert "first difference" not in message
    assert message.splitlines()[1].startswith("recorded 'aaaa") and "..., incoming 'baaa" in message


def test_a_replay_can_say_how_it_came_to_be_on_in_every_mismatch(tmp_path):
    """A profile's replay mode outlives the command that set it: its errors end with how to
    call models live again (the runtime passes the note)."""
    from openprogram.providers.replay import ReplayProvider

    path = tmp_path / "rec.jsonl"
    _record(path)
    note = "replay is on for this profile (record_replay.mode = replay); 'openprogram recordings off' calls models live again"
    provider = ReplayProvider(path, replay_note=note)

    async def ask(context):
        return [event async for event in provider.stream(MODEL, context)]

    with pytest.raises(ReplayMismatch) as drifted:
        asyncio.run(ask(Context(messages=[UserMessage(content="other", timestamp=1)])))
    assert str(drifted.value).endswith(note)
    asyncio.run(ask(CONTEXT))
    with pytest.raises(ReplayMismatch) as past_the_end:
        asyncio.run(ask(CONTEXT))
    assert str(past_the_end.value).endswith(note) and past_the_end.value.field_path == "call_index"
