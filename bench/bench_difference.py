"""find_first_difference on two 2,000-message contexts that differ only in the last message.

Replay compares the whole incoming context with the recorded one on every call, so this must
stay a small fraction of what producing the incoming payload already costs: the baseline is
dumping the two contexts with ``model_dump(mode="json")``; the target is at most a tenth of it.

Three rows. End to end, what a user waits for: open a recording of one 2,000-message call
and replay a request whose last message differs, up to the ``ReplayMismatch`` (its report
included), vs one ``model_dump(mode="json")`` of the incoming context, which any comparison of
that context pays anyway; the target of at most 0.02 s on this machine's ~6.5 ms dump is 3x.

Then the comparison alone, as regression guards. Timestamps equal on both sides
(deterministic test clocks): ~0.12x, kept because equality stays exact and type-strict (the
end-to-end row is the target users feel), guarded at 0.15x; and every timestamp different (a real replay run, where ``timestamp`` is skipped
in each message). The second must copy every message without its timestamp before comparing
at C speed, and that copy alone costs about 0.07x, so its target is 0.25x.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import orjson

from bench.common import Row, best_time, paired_best, ratio_row
from openprogram.providers.faux import FauxProvider, faux_text
from openprogram.providers.recording import RecordingProvider
from openprogram.providers.replay import ReplayMismatch, ReplayProvider
from openprogram.providers.types import (
    AssistantMessage,
    Context,
    Model,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from openprogram.recordings.replay.differences import find_first_difference

MESSAGES = 2000
LIMIT = 0.15  # ~0.12x accepted: exact, type-strict equality is kept (a regression guard)
LIMIT_OTHER_CLOCK = 0.25
REPEAT = 15


def _messages(count: int, clock: int, last_text: str) -> list:
    messages = []
    for index in range(count):
        timestamp = clock + index
        turn = index // 3
        if index % 3 == 0:
            messages.append(
                UserMessage(
                    content=f"Please look up item {turn} and summarise it.", timestamp=timestamp
                )
            )
        elif index % 3 == 1:
            messages.append(
                AssistantMessage(
                    content=[
                        TextContent(text=f"Looking up item {turn} in the catalogue now."),
                        ToolCall(
                            id=f"call_{turn:05d}",
                            name="lookup",
                            arguments={"item": turn, "fields": ["name", "price"], "exact": True},
                        ),
                    ],
                    api="openai-completions",
                    provider="openai",
                    model="gpt-4o-mini",
                    usage=Usage(input=120 + turn, output=30, total_tokens=150 + turn),
                    stop_reason="toolUse",
                    timestamp=timestamp,
                )
            )
        else:
            messages.append(
                ToolResultMessage(
                    tool_call_id=f"call_{turn:05d}",
                    tool_name="lookup",
                    content=[
                        TextContent(text=f"item {turn}: name=widget-{turn}, price={turn * 1.5}")
                    ],
                    details={"rows": 1, "cached": False},
                    timestamp=timestamp,
                )
            )
    messages[-1] = UserMessage(content=last_text, timestamp=clock + count - 1)
    return messages


def _context(clock: int, last_text: str) -> Context:
    tool = Tool(
        name="lookup",
        description="Look an item up in the catalogue.",
        parameters={
            "type": "object",
            "properties": {"item": {"type": "integer"}},
            "required": ["item"],
        },
    )
    return Context(
        system_prompt="You are terse.", messages=_messages(MESSAGES, clock, last_text), tools=[tool]
    )


def _row(name: str, recorded_context: Context, incoming_context: Context, limit: float) -> Row:
    # The recorded side comes back from a file: no object is shared with the incoming side.
    recorded = orjson.loads(orjson.dumps(recorded_context.model_dump(mode="json")))
    incoming = incoming_context.model_dump(mode="json")
    expected = f"messages[{MESSAGES - 1}].content"
    found = find_first_difference(recorded, incoming)
    if found is None or found[0] != expected:
        return Row(name, f"wrong result {found!r}", f"<= {limit:g}x", False, f"expected {expected}")

    def dump_both() -> None:
        recorded_context.model_dump(mode="json")
        incoming_context.model_dump(mode="json")

    baseline = best_time(dump_both, repeat=REPEAT)
    measured = best_time(lambda: find_first_difference(recorded, incoming), repeat=REPEAT)
    return ratio_row(
        name, measured, baseline, limit, "baseline: model_dump(mode='json') of both contexts"
    )


END_TO_END_LIMIT = 3.0
_MODEL = Model(id="bench", api="faux", provider="faux")


async def _stream(provider, context: Context) -> None:
    async for _ in provider.stream(_MODEL, context):
        pass


def _end_to_end_row(recorded_context: Context, incoming_context: Context) -> Row:
    name = f"first difference end to end, {MESSAGES:,}-message contexts"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "long-context.jsonl"
        recorder = RecordingProvider(FauxProvider([faux_text("ok")], timestamp=1), path)
        asyncio.run(_stream(recorder, recorded_context))
        recorder.sink.close()

        def open_and_mismatch() -> ReplayMismatch:
            try:
                asyncio.run(_stream(ReplayProvider(path), incoming_context))
            except ReplayMismatch as mismatch:
                return mismatch
            raise AssertionError("the replay did not notice the changed last message")

        expected = f"context.messages[{MESSAGES - 1}].content"
        found = open_and_mismatch().field_path
        if found != expected:
            return Row(
                name,
                f"wrong field {found!r}",
                f"<= {END_TO_END_LIMIT:g}x",
                False,
                f"expected {expected}",
            )
        baseline, measured = paired_best(
            lambda: incoming_context.model_dump(mode="json"), open_and_mismatch
        )
    return ratio_row(
        name,
        measured,
        baseline,
        END_TO_END_LIMIT,
        "open the file + replay until ReplayMismatch; baseline: one model_dump(mode='json') of the "
        "incoming context; the issue's target is <= 0.02 s",
    )


def run() -> list[Row]:
    recorded = _context(1_700_000_000_000, "and finally: echo hi")
    same_clock = _context(1_700_000_000_000, "and finally: echo bye")
    other_clock = _context(1_800_000_000_000, "and finally: echo bye")
    return [
        _end_to_end_row(recorded, same_clock),
        _row("difference: 2,000 messages, same timestamps", recorded, same_clock, LIMIT),
        _row(
            "difference: 2,000 messages, other timestamps", recorded, other_clock, LIMIT_OTHER_CLOCK
        ),
    ]
