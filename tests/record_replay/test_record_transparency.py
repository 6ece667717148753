"""The recorder is transparent for any provider (docs/file-format.md, "Streamed deltas"): a
provider not built on the shared assembler may stream tool-call snapshots that are not the
parse of its deltas (a partial-JSON parser that lags a delta); a replay serves the snapshots it
streamed, not a rebuilt parse."""

from __future__ import annotations

import asyncio

import orjson

from openprogram.providers.base import streams_assembled_snapshots
from openprogram.providers.faux import FauxProvider
from openprogram.providers.partial_json import parse_streaming_json
from openprogram.providers.recording import RecordingProvider
from openprogram.providers.replay import ReplayProvider
from openprogram.providers.types import (
    AssistantMessage,
    Context,
    EventDone,
    EventStart,
    EventToolCallDelta,
    EventToolCallEnd,
    EventToolCallStart,
    Model,
    ToolCall,
    Usage,
    UserMessage,
)

MODEL = Model(id="own", api="own-provider", provider="own")
CONTEXT = Context(messages=[UserMessage(content="look it up", timestamp=1)])


class LaggingProvider:
    """A user's own provider: its tool-call snapshots show the arguments as they stood one
    delta earlier (its parser waits for the next delta before it shows one)."""

    requires_credentials = False

    def __init__(self, deltas: list[str]) -> None:
        self.deltas = deltas

    def stream(self, model, context, options=None):
        return self._events()

    def stream_simple(self, model, context, options=None):
        return self._events()

    def _message(self, arguments: dict) -> AssistantMessage:
        call = ToolCall(id="call_1", name="lookup", arguments=arguments)
        return AssistantMessage(
            content=[call],
            api=MODEL.api,
            provider=MODEL.provider,
            model=MODEL.id,
            usage=Usage(),
            stop_reason="toolUse",
            timestamp=5,
        )

    async def _events(self):
        yield EventStart(partial=self._message({}))
        yield EventToolCallStart(content_index=0, partial=self._message({}))
        text = ""
        for delta in self.deltas:
            lagging = parse_streaming_json(text) if text else {}
            text += delta
            yield EventToolCallDelta(content_index=0, delta=delta, partial=self._message(lagging))
        final = orjson.loads(text)
        message = self._message(final)
        yield EventToolCallEnd(content_index=0, tool_call=message.content[0], partial=message)
        yield EventDone(reason="toolUse", message=message)


async def _dumps(provider) -> list[dict]:
    return [event.model_dump(mode="json") async for event in provider.stream(MODEL, CONTEXT, None)]


def _record_then_replay(tmp_path, provider) -> tuple[list[dict], list[dict]]:
    path = tmp_path / "own.jsonl"
    recorder = RecordingProvider(provider, path)
    live = asyncio.run(_dumps(recorder))
    recorder.sink.close()
    replayed = asyncio.run(_dumps(ReplayProvider(path)))
    return live, replayed


def test_a_provider_whose_snapshots_lag_its_deltas_replays_its_own_snapshots(tmp_path):
    deltas = ['{"city": "Par', 'is", "days', '": 3, "units": "met', 'ric"}']
    live, replayed = _record_then_replay(tmp_path, LaggingProvider(deltas))
    snapshots = [
        event["partial"]["content"][0]["arguments"]
        for event in live
        if event["type"] == "toolcall_delta"
    ]
    # What the provider streamed: each snapshot one delta behind the deltas.
    assert snapshots[1] == {"city": "Par"} and snapshots[1] != parse_streaming_json(
        "".join(deltas[:2])
    )
    assert replayed == live


def test_a_lagging_provider_still_loses_a_secret_in_its_arguments(tmp_path):
    key = "sk-proj-" + "Qw3Er5Ty7Ui9Op1As3Df5Gh7"
    deltas = ['{"note": "x", "api_key": "', key[:10], key[10:], '"}']
    live, replayed = _record_then_replay(tmp_path, LaggingProvider(deltas))
    text = (tmp_path / "own.jsonl").read_text()
    for start in range(len(key) - 7):
        assert key[start : start + 8] not in text
    assert replayed[-1]["message"]["content"][0]["arguments"] == {
        "note": "x",
        "api_key": "[secret removed]",
    }


def test_only_providers_on_the_shared_assembler_are_trusted_to_stream_the_parse():
    assert streams_assembled_snapshots(FauxProvider([]))
    assert not streams_assembled_snapshots(LaggingProvider([]))

    class OwnStream(FauxProvider):
        def stream(self, model, context, options=None):
            return super().stream(model, context, options)

    assert not streams_assembled_snapshots(OwnStream([]))
