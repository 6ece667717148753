"""find_first_difference on two 2,000-message contexts that differ only in the last message.

Replay compares the whole incoming context with the recorded one on every call, so this must
stay a small fraction of what producing the incoming payload already costs: the baseline is
dumping the two contexts with ``model_dump(mode="json")``; the target is at most a tenth of it.

Two rows: timestamps equal on both sides (deterministic test clocks): the contract's case,
target 0.1x; and every timestamp different (a real replay run, where ``timestamp`` is skipped
in each message). The second must copy every message without its timestamp before comparing
at C speed, and that copy alone costs about 0.07x, so its target is 0.25x.
"""

from __future__ import annotations

import orjson

from bench.common import Row, best_time, ratio_row
from openprogram.providers.types import (
    AssistantMessage,
    Context,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from openprogram.recordings.differences import find_first_difference

MESSAGES = 2000
LIMIT = 0.1
LIMIT_OTHER_CLOCK = 0.25
REPEAT = 15


def _messages(count: int, clock: int, last_text: str) -> list:
    messages = []
    for index in range(count):
        timestamp = clock + index
        turn = index // 3
        if index % 3 == 0:
            messages.append(
                UserMessage(content=f"Please look up item {turn} and summarise it.", timestamp=timestamp)
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
                    content=[TextContent(text=f"item {turn}: name=widget-{turn}, price={turn * 1.5}")],
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
        parameters={"type": "object", "properties": {"item": {"type": "integer"}}, "required": ["item"]},
    )
    return Context(system_prompt="You are terse.", messages=_messages(MESSAGES, clock, last_text), tools=[tool])


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
    return ratio_row(name, measured, baseline, limit, "baseline: model_dump(mode='json') of both contexts")


def run() -> list[Row]:
    recorded = _context(1_700_000_000_000, "and finally: echo hi")
    same_clock = _context(1_700_000_000_000, "and finally: echo bye")
    other_clock = _context(1_800_000_000_000, "and finally: echo bye")
    return [
        _row("difference: 2,000 messages, same timestamps", recorded, same_clock, LIMIT),
        _row("difference: 2,000 messages, other timestamps", recorded, other_clock, LIMIT_OTHER_CLOCK),
    ]
