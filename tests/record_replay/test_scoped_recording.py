"""use_recording: scoped to the block and to the tasks it starts, never crossing between
concurrent users, and independent of the process-wide transform."""

from __future__ import annotations

import asyncio

import pytest

from openprogram.providers import api_registry
from openprogram.providers.faux import FauxProvider, faux_text
from openprogram.providers.replay import ReplayMismatch
from openprogram.providers.scoped import use_recording
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage

MODEL = Model(id="scripted", api="scoped-test", provider="faux")


def ask(text: str) -> Context:
    return Context(messages=[UserMessage(content=text, timestamp=0)])


@pytest.fixture
def scripted(fresh_registry) -> FauxProvider:
    provider = FauxProvider()
    api_registry.register_api_provider("scoped-test", provider)
    return provider


async def test_record_then_replay_inside_blocks_only(tmp_path, scripted):
    path = tmp_path / "r.jsonl"
    scripted.queue(faux_text("recorded answer"))
    with use_recording(path, "record") as scope:
        first = await complete(MODEL, ask("q"))
    assert scope.call_count == 1
    assert first.content[0].text == "recorded answer"

    with use_recording(path, "replay") as scope:
        again = await complete(MODEL, ask("q"))
        scope.assert_consumed()
    assert again == first
    assert len(scripted.calls) == 1  # the replay did not reach the provider
    # outside any block, lookups go to the provider again
    scripted.queue(faux_text("live"))
    assert (await complete(MODEL, ask("q"))).content[0].text == "live"


async def test_two_interleaving_tasks_keep_their_own_recordings(tmp_path, scripted):
    paths = {name: tmp_path / f"{name}.jsonl" for name in ("a", "b")}
    for name, path in paths.items():
        scripted.queue(faux_text(f"answer {name}1"), faux_text(f"answer {name}2"))
        with use_recording(path, "record"):
            await complete(MODEL, ask(f"{name}1"))
            await complete(MODEL, ask(f"{name}2"))

    turn = {"a": asyncio.Event(), "b": asyncio.Event()}
    answers: dict[str, list[str]] = {"a": [], "b": []}

    async def session(name: str, other: str) -> None:
        with use_recording(paths[name], "replay") as scope:
            for step in (1, 2):
                await turn[name].wait()
                turn[name].clear()
                message = await complete(MODEL, ask(f"{name}{step}"))
                answers[name].append(message.content[0].text)
                turn[other].set()  # hand over: the two replays strictly alternate
            scope.assert_consumed()

    turn["a"].set()
    await asyncio.wait_for(asyncio.gather(session("a", "b"), session("b", "a")), timeout=30)
    assert answers == {"a": ["answer a1", "answer a2"], "b": ["answer b1", "answer b2"]}


async def test_tasks_started_inside_the_block_inherit_the_route(tmp_path, scripted):
    path = tmp_path / "r.jsonl"
    scripted.queue(faux_text("x"), faux_text("y"))
    with use_recording(path, "record"):
        await asyncio.gather(
            asyncio.ensure_future(complete(MODEL, ask("one"))),
            asyncio.ensure_future(complete(MODEL, ask("two"))),
        )
    text = path.read_text()
    assert '"one"' in text and '"two"' in text


async def test_replay_mismatch_inside_a_block(tmp_path, scripted):
    path = tmp_path / "r.jsonl"
    scripted.queue(faux_text("a"))
    with use_recording(path, "record"):
        await complete(MODEL, ask("original"))
    with use_recording(path, "replay"), pytest.raises(ReplayMismatch) as caught:
        await complete(MODEL, ask("changed"))
    assert caught.value.field_path == "context.messages[0].content"


def test_scoped_routing_ignores_the_process_transform(tmp_path, scripted):
    api_registry.configure_provider_transform(lambda api, original: None)  # would hide everything
    assert api_registry.lookup_registered_provider("scoped-test") is None
    path = tmp_path / "r.jsonl"
    scripted.queue(faux_text("still works"))
    with use_recording(path, "record"):
        message = asyncio.run(complete(MODEL, ask("q")))
    assert message.content[0].text == "still works"


def test_bad_mode_is_refused(tmp_path):
    with (
        pytest.raises(ValueError, match="must be one of record, replay, update, not 'rewrite'"),
        use_recording(tmp_path / "x.jsonl", "rewrite"),
    ):
        pass
