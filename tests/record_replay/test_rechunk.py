"""Re-chunked replay (docs/tutorial.md, "Testing what goes wrong"): every text, thinking and
tool-argument stream re-split at seeded boundaries, each partial the message as those deltas
make it, the final message the recorded one."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from openprogram.providers.faux import (
    FauxProvider,
    FauxResponse,
    FauxText,
    FauxThinking,
    FauxToolCall,
)
from openprogram.providers.partial_json import parse_streaming_json
from openprogram.providers.replay import ReplayOptions
from openprogram.providers.scoped import use_recording
from openprogram.providers.stream import stream
from openprogram.providers.types import Context, Model, UserMessage
from openprogram.recordings.replay.rechunk import rechunked
from tests.event_checks import assert_well_formed, final_message
from tests.plugin.test_pytest_plugin import run_inner
from tests.transcripts.event_summary import collect
from tests.vendor_server import ScriptedResponse, VendorServer
from tests.vendors.test_vendor_contract import CASES, HELLO

SEEDS = range(200)
MODEL = Model(id="gpt-test", api="openai-completions", provider="openai")
ASK = Context(messages=[UserMessage(content="write it", timestamp=0)])


def resplit(events: list, seed: int) -> list:
    return [event for _, event in rechunked(enumerate(events), seed, 0)]


def check_rechunked(recorded: list, events: list) -> None:
    """Well formed; every partial what its deltas make; every event but the deltas recorded."""
    assert_well_formed(events)
    assert final_message(events) == final_message(recorded)
    assert [e for e in events if not e.type.endswith("_delta")] == [
        e for e in recorded if not e.type.endswith("_delta")
    ]
    streamed: dict[int, str] = {}
    for event in events:
        if event.type == "toolcall_delta":
            streamed[event.content_index] = streamed.get(event.content_index, "") + event.delta
            assert event.partial.content[event.content_index].arguments == parse_streaming_json(
                streamed[event.content_index]
            )
    for kind in ("text_delta", "thinking_delta", "toolcall_delta"):
        for index in {e.content_index for e in recorded if e.type == kind}:
            joined = "".join(
                e.delta for e in recorded if e.type == kind and e.content_index == index
            )
            assert (
                "".join(e.delta for e in events if e.type == kind and e.content_index == index)
                == joined
            )


def transcripts() -> Iterator[tuple[str, object, list[bytes], int | None]]:
    for case in CASES:
        yield f"{case.api}-plain", case, case.plain.chunks, None
        for name, scenario in case.scenarios.items():
            yield f"{case.api}-{name}", case, scenario.chunks, None
        for name in ("break_off", "cut_off", "malformed", "stream_error"):
            failure = getattr(case, name)
            if failure is not None:
                yield f"{case.api}-{name}", case, failure.chunks, failure.break_after


@pytest.mark.parametrize(
    ("case", "chunks", "break_after"),
    [pytest.param(case, chunks, cut, id=name) for name, case, chunks, cut in transcripts()],
)
async def test_every_vendor_transcript_replays_the_same_under_200_seeds(case, chunks, break_after):
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=chunks, break_after=break_after))
        recorded = await collect(
            case.provider().stream(case.model(server.url), HELLO, case.options())
        )
    for seed in SEEDS:
        check_rechunked(recorded, resplit(recorded, seed))


#: A long answer shaped like a real one: reasoning, markdown with code and every kind of
#: character, and a tool call whose arguments hold a file (newlines, quotes, backslashes).
LONG_THINKING = (
    "The user wants a module. Let me plan: parse, validate, then write — carefully. " * 6
)
LONG_TEXT = (
    "## Plan\n\nHere is the module (naïve first, then “fast”):\n\n```python\n"
    'def parse(text: str) -> dict:\n    return {"ok": True, "path": "C:\\\\tmp\\\\x"}\n```\n\n'
    "Notes: 日本語のテキスト, emoji 🙂👍🏽, accents àéîõü, math ∑∫√, and a tab\there.\n"
) * 8
LONG_ARGUMENTS = {
    "path": "src/módulo/parse.py",
    "content": 'def parse(text):\n    """Parse “quoted” text."""\n    return text.split("\\n")  # 🙂\n'
    * 12,
    "options": {
        "overwrite": True,
        "mode": 420,
        "tags": ["a", 'b"c', "d\\e"],
        "ratio": -1.5e-3,
        "none": None,
    },
}


@pytest.fixture
def long_answer(fresh_registry) -> FauxProvider:
    provider = FauxProvider()
    fresh_registry.register_api_provider("openai-completions", provider)
    provider.queue(
        FauxResponse(
            blocks=(
                FauxThinking(LONG_THINKING),
                FauxText(LONG_TEXT),
                FauxToolCall("write_file", LONG_ARGUMENTS, "call_1"),
            )
        )
    )
    return provider


def cuts_of(events: list, kind: str) -> list[int]:
    """Where the deltas of ``kind`` end, as offsets in their joined text."""
    offsets, total = [], 0
    for event in events:
        if event.type == kind:
            total += len(event.delta)
            offsets.append(total)
    return offsets


def json_strings(text: str) -> tuple[set[int], set[int]]:
    """The offsets strictly inside each JSON key and each string value of ``text``."""
    keys: set[int] = set()
    values: set[int] = set()
    position = 0
    while position < len(text):
        if text[position] != '"':
            position += 1
            continue
        end = position + 1
        while text[end] != '"':
            end += 2 if text[end] == "\\" else 1
        inside = set(range(position + 1, end))
        (keys if text[end + 1 :].lstrip().startswith(":") else values).update(inside)
        position = end + 1
    return keys, values


async def test_a_long_real_shaped_answer_replays_the_same_under_200_seeds_split_every_way(
    tmp_path, long_answer
):
    path = tmp_path / "long.jsonl"
    with use_recording(path, "record"):
        recorded = await collect(stream(MODEL, ASK))
    arguments = "".join(e.delta for e in recorded if e.type == "toolcall_delta")
    text = "".join(e.delta for e in recorded if e.type == "text_delta")
    keys, values = json_strings(arguments)
    recorded_cuts = set(cuts_of(recorded, "text_delta"))
    seen = {
        "one character": 0,
        "merged": 0,
        "beside multi-byte": 0,
        "inside a key": 0,
        "inside a string": 0,
        "after a backslash": 0,
    }
    for seed in SEEDS:
        events = resplit(recorded, seed)
        check_rechunked(recorded, events)
        deltas = [e.delta for e in events if e.type.endswith("_delta")]
        seen["one character"] += sum(len(d) == 1 for d in deltas)
        text_cuts = cuts_of(events, "text_delta")
        seen["merged"] += sum(
            1
            for a, b in zip([0, *text_cuts], text_cuts, strict=False)
            if any(a < c < b for c in recorded_cuts)
        )
        seen["beside multi-byte"] += sum(
            1 for c in text_cuts[:-1] if ord(text[c - 1]) > 0x7F or ord(text[c]) > 0x7F
        )
        tool_cuts = cuts_of(events, "toolcall_delta")[:-1]
        seen["inside a key"] += len(keys.intersection(tool_cuts))
        seen["inside a string"] += len(values.intersection(tool_cuts))
        seen["after a backslash"] += sum(1 for c in tool_cuts if arguments[c - 1] == "\\")
    assert all(seen.values()), seen
    # and through the replayer, as a test would meet it
    for seed in (0, 1):
        with use_recording(path, "replay", rechunk=seed) as scope:
            replayed = await collect(stream(MODEL, ASK))
            scope.assert_consumed()
        assert replayed == resplit(recorded, seed)
        assert replayed != recorded


def test_the_same_seed_splits_the_same_way_and_another_seed_differently():
    provider_events = _small_stream()
    first, again, other = (
        resplit(provider_events, 5),
        resplit(provider_events, 5),
        resplit(provider_events, 6),
    )
    assert first == again
    assert [e.delta for e in first if e.type == "text_delta"] != [
        e.delta for e in other if e.type == "text_delta"
    ]


def _small_stream() -> list:
    from openprogram.providers.assembly import AssistantStreamAssembler

    assembler = AssistantStreamAssembler(MODEL, timestamp=0)
    events = [assembler.start()]
    index, started = assembler.begin_text()
    events.append(started)
    events += [
        assembler.append_text(index, piece)
        for piece in ("Hello, ", "wonderful ", "world of streams!")
    ]
    events += assembler.finish("stop")
    return events


# ============================================================================ a consumer that assumes


async def naive_tool_consumer() -> dict:
    """Assumes a tool's arguments arrive in one delta (they did, the day it was recorded)."""
    arguments = None
    async for event in stream(MODEL, ASK):
        if event.type == "toolcall_delta" and arguments is None:
            arguments = json.loads(event.delta)
    return arguments


async def test_a_consumer_that_assumes_whole_arguments_fails_under_some_seed(
    tmp_path, fresh_registry
):
    provider = FauxProvider()
    fresh_registry.register_api_provider("openai-completions", provider)
    provider.queue(FauxResponse(blocks=(FauxToolCall("f", {"a": 1}, "call_1"),)))
    path = tmp_path / "tool.jsonl"
    with use_recording(path, "record"):
        assert await naive_tool_consumer() == {"a": 1}  # one delta: '{"a":1}'
    failing = []
    for seed in range(20):
        with use_recording(path, "replay", rechunk=seed):
            try:
                await naive_tool_consumer()
            except json.JSONDecodeError:
                failing.append(seed)
    assert failing and len(failing) < 20


NAIVE_SUITE = """
import asyncio, json, pytest
from openprogram.providers.faux import DEFAULT_FAUX_PROVIDER, FauxResponse, FauxToolCall
from openprogram.providers.stream import stream
from openprogram.providers.types import Context, Model, UserMessage


async def first_arguments():
    DEFAULT_FAUX_PROVIDER.queue(FauxResponse(blocks=(FauxToolCall("f", {"a": 1}, "call_1"),)))
    context = Context(messages=[UserMessage(content="go", timestamp=0)])
    arguments = None
    async for event in stream(Model(id="scripted", api="faux", provider="faux"), context):
        if event.type == "toolcall_delta" and arguments is None:
            arguments = json.loads(event.delta)
    return arguments


@pytest.mark.llm_recording
def test_tool_arguments():
    assert asyncio.run(first_arguments()) == {"a": 1}
"""


def test_a_failure_under_rechunking_names_its_seed(pytester):
    pytester.makepyfile(test_suite=NAIVE_SUITE)
    run_inner(pytester, "--llm-record-mode=record").assert_outcomes(passed=1)
    failing = next(seed for seed in SEEDS if _splits_seven_characters(seed))
    failed = run_inner(pytester, f"--llm-rechunk={failing}")
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(
        [
            "*JSONDecodeError*",
            f"The test failed under replay with rechunk seed {failing}; run it so again with:",
            f"  pytest test_suite.py::test_tool_arguments --llm-rechunk={failing}",
        ]
    )
    picked = run_inner(pytester, "-v", "--llm-rechunk=random")
    picked.stdout.fnmatch_lines(["openprogram: replay with rechunk seed *"])


def _splits_seven_characters(seed: int) -> bool:
    """Whether ``seed`` splits the call's 7-character arguments (the inner suite's) in two."""
    from openprogram.providers.assembly import AssistantStreamAssembler

    assembler = AssistantStreamAssembler(MODEL, timestamp=0)
    events = [assembler.start()]
    index, started = assembler.begin_tool_call("call_1", "f")
    events += [started, assembler.append_tool_arguments(index, '{"a":1}')]
    events += assembler.finish("toolUse")
    return sum(e.type == "toolcall_delta" for e in resplit(events, seed)) > 1


def test_rechunk_is_a_replay_option_only():
    assert ReplayOptions.of(rechunk="12").rechunk == 12
