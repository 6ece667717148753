"""Conversations a client runs at once replay in any interleaving (docs/proxy.md, "Lanes").

Three conversations of three turns each are recorded through the proxy, one call after the
other; the recording has one lane per conversation, derived from how it starts. The replay
then receives the nine calls in 50 orders drawn with a fixed seed (each conversation's own
turns in order, as a client can only send a turn after the answer before it), and 50 times
with the three conversations truly concurrent; every call gets its own recorded answer.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest

from openprogram.proxy import ProxySettings, start_proxy
from tests.transcripts import openai_completions_streams as c
from tests.vendor_server import ScriptedResponse, VendorServer

CONVERSATIONS = ("alpha", "beta", "gamma")
TURNS = 3
INTERLEAVINGS = 50
SEED = 20260


def answer_text(name: str, turn: int) -> str:
    return f"answer {turn} of {name}"


def turn_chunks(name: str, turn: int) -> list[bytes]:
    text = json.dumps({"content": answer_text(name, turn)})
    return c.sse_frames(c.ROLE, c.chunk(text), c.STOP, c.usage_chunk(10, 5), done=True)


def messages(name: str, turn: int) -> list[dict[str, str]]:
    """The conversation up to its ``turn``-th question, as a client resends it every turn."""
    history = [{"role": "system", "content": "You answer briefly."}]
    for earlier in range(turn):
        history.append({"role": "user", "content": f"question {earlier} about {name}"})
        history.append({"role": "assistant", "content": answer_text(name, earlier)})
    history.append({"role": "user", "content": f"question {turn} about {name}"})
    return history


async def ask(client, name: str, turn: int, streaming: bool) -> str:
    request = {"model": "gpt-4o-mini", "messages": messages(name, turn)}
    if not streaming:
        completion = await client.chat.completions.create(**request)
        return completion.choices[0].message.content
    stream = await client.chat.completions.create(**request, stream=True)
    return "".join(
        [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
    )


def client_for(url: str):
    import openai

    return openai.AsyncOpenAI(
        base_url=url + "/v1", api_key="sk-test-lanes-0123456789", max_retries=0
    )


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("lanes") / "three-conversations.jsonl"
    order = [(name, turn) for turn in range(TURNS) for name in CONVERSATIONS]
    with VendorServer() as server:
        server.queue(*(ScriptedResponse(chunks=turn_chunks(name, turn)) for name, turn in order))
        settings = ProxySettings(
            upstreams={"openai-completions": server.url + "/v1"}, recording=path, mode="record"
        )
        with start_proxy(settings) as proxy:

            async def record() -> list[str]:
                client = client_for(proxy.url)
                return [await ask(client, name, turn, streaming=True) for name, turn in order]

            assert asyncio.run(record()) == [answer_text(name, turn) for name, turn in order]
    return path


def random_order(rng: random.Random) -> list[tuple[str, int]]:
    """A random interleaving of the conversations, each keeping its own turns in order."""
    pending = {name: 0 for name in CONVERSATIONS}
    order = []
    while pending:
        name = rng.choice(sorted(pending))
        order.append((name, pending[name]))
        pending[name] += 1
        if pending[name] == TURNS:
            del pending[name]
    return order


def test_the_recording_has_one_lane_per_conversation(recording):
    lanes = [
        json.loads(line)["lane"]
        for line in recording.read_text().splitlines()
        if line.startswith('{"type":"request"')
    ]
    assert len(lanes) == len(CONVERSATIONS) * TURNS
    assert len(set(lanes)) == len(CONVERSATIONS)
    assert lanes[: len(CONVERSATIONS)] == lanes[len(CONVERSATIONS) : 2 * len(CONVERSATIONS)]


def test_interleavings_in_any_order_replay_with_no_failure(recording):
    rng = random.Random(SEED)
    orders = [random_order(rng) for _ in range(INTERLEAVINGS)]
    assert len({tuple(order) for order in orders}) > INTERLEAVINGS // 2  # they do differ

    async def replay_all() -> list:
        base = client_for("http://127.0.0.1:9")  # one client (its connection pool) for every run
        failures = []
        for number, order in enumerate(orders):
            with start_proxy(ProxySettings(recording=recording, mode="replay")) as proxy:
                client = base.with_options(base_url=proxy.url + "/v1")
                got = [
                    await ask(client, name, turn, streaming=number % 2 == 0) for name, turn in order
                ]
                assert proxy.scope is not None
                proxy.scope.assert_consumed()
            if got != [answer_text(name, turn) for name, turn in order]:
                failures.append((number, order, got))
        return failures

    assert asyncio.run(replay_all()) == []


def test_conversations_sent_concurrently_replay_with_no_failure(recording):
    rng = random.Random(SEED + 1)

    async def conversation(client, name: str, streaming: bool) -> list[str]:
        return [await ask(client, name, turn, streaming) for turn in range(TURNS)]

    async def replay_all() -> list:
        base = client_for("http://127.0.0.1:9")
        failures = []
        for number in range(INTERLEAVINGS):
            names = list(CONVERSATIONS)
            rng.shuffle(names)  # which conversation's task starts first
            streaming = {name: rng.random() < 0.5 for name in names}
            with start_proxy(ProxySettings(recording=recording, mode="replay")) as proxy:
                client = base.with_options(base_url=proxy.url + "/v1")
                got = await asyncio.gather(
                    *(conversation(client, name, streaming[name]) for name in names)
                )
                assert proxy.scope is not None
                proxy.scope.assert_consumed()
            if got != [[answer_text(name, turn) for turn in range(TURNS)] for name in names]:
                failures.append((number, names, got))
        return failures

    assert asyncio.run(replay_all()) == []
