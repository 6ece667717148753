"""A long agent's recording against its own content: ``python -m bench.run long_agent``.

An agent resends its whole conversation on every turn. With the faux provider and one ``read``
tool returning 20 KB of distinct text per turn:

* file size: the recording of a 40-turn run vs its distinct content (the last request's context
  plus the final answer, JSON-encoded once): at most 1.5x;
* linear cost: how much more recording, opening and replaying 80 turns costs than 40 turns,
  against how much more the bare agent (faux provider, no recording) costs: at most 1.15x. The
  agent alone is quadratic in the turns (it resends and re-reads its conversation at every
  turn: about 2.7x for 80 vs 40), so record/replay can only promise to add no growth of its own.
"""

from __future__ import annotations

import asyncio
import functools
import random
import tempfile
from pathlib import Path
from typing import Any

import orjson

from bench.common import Row, paired_best
from openprogram.agent import AgentContext, AgentLoopConfig, AgentTool, AgentToolResult, agent_loop
from openprogram.providers import register_api_provider
from openprogram.providers.faux import FauxProvider, faux_text, faux_tool_call
from openprogram.providers.replay import read_recording_file
from openprogram.providers.scoped import use_recording
from openprogram.providers.types import Model, TextContent, UserMessage
from openprogram.recordings.file.format import encode_line, header_row

TURNS = 40
TOOL_OUTPUT_BYTES = 20_000
MODEL = Model(id="bench-agent", api="bench-long-agent", provider="faux")
_WORDS = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "theta", "lambda", "zeta"]


@functools.cache  # made once: the agent's tool, not what is measured
def file_text(number: int) -> str:
    """20 KB of text distinct for every file (so nothing is shared between turns by chance)."""
    chooser = random.Random(number)
    words: list[str] = []
    size = 0
    while size < TOOL_OUTPUT_BYTES:
        word = f"{chooser.choice(_WORDS)}{chooser.randrange(10_000)}"
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:TOOL_OUTPUT_BYTES]


async def _read(
    tool_call_id: str, args: dict[str, Any], signal: Any, on_update: Any
) -> AgentToolResult:
    return AgentToolResult(
        content=[TextContent(text=file_text(int(args["path"].removeprefix("file"))))]
    )


def _tools() -> list[AgentTool]:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    return [AgentTool(name="read", description="read a file", parameters=schema, execute=_read)]


async def _agent(turns: int) -> AgentContext:
    script = [
        faux_tool_call("read", {"path": f"file{turn}"}, id=f"call_{turn}") for turn in range(turns)
    ]
    register_api_provider(MODEL.api, FauxProvider([*script, faux_text("I read every file.")]))
    context = AgentContext(system_prompt="You read files.", tools=_tools())
    config = AgentLoopConfig(model=MODEL, max_turns=turns + 1)
    async for _event in agent_loop([UserMessage(content="read them all")], context, config):
        pass
    return context


def run_agent(path: Path, turns: int, mode: str) -> AgentContext:
    with use_recording(path, mode):  # type: ignore[arg-type]
        return asyncio.run(_agent(turns))


def distinct_bytes(context: AgentContext) -> int:
    """The conversation's content encoded once: every prompt, tool result and answer."""
    return len(
        orjson.dumps(
            [
                context.system_prompt,
                [message.model_dump(mode="json") for message in context.messages],
            ]
        )
    )


def _record_open_replay(folder: Path, turns: int) -> None:
    path = folder / f"agent{turns}.jsonl"
    path.unlink(missing_ok=True)
    run_agent(path, turns, "record")
    read_recording_file(path)
    run_agent(path, turns, "replay")


def _bare(turns: int) -> None:
    asyncio.run(_agent(turns))


def run() -> list[Row]:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        path = folder / "size.jsonl"
        context = run_agent(path, TURNS, "record")
        size, content = path.stat().st_size, distinct_bytes(context)
        ratio = size / content
        version_1 = (
            folder / "version1.jsonl"
        )  # appending keeps a file's version: every context whole
        version_1.write_bytes(encode_line(header_row(1)))
        run_agent(version_1, TURNS, "record")
        size_row = Row(
            f"long agent: {TURNS} turns x 20 KB tool output, file vs distinct content",
            f"{ratio:.2f}x ({size / 1e6:.2f} MB vs {content / 1e6:.2f} MB)",
            "<= 1.5x",
            ratio <= 1.5,
            f"format version 1 (every context whole): {version_1.stat().st_size / 1e6:.1f} MB, "
            f"{version_1.stat().st_size / content:.1f}x",
        )
        for turns in (TURNS, 2 * TURNS):  # the tool's texts are made once, before timing
            _bare(turns)
        short, long = paired_best(
            lambda: _record_open_replay(folder, TURNS),
            lambda: _record_open_replay(folder, 2 * TURNS),
            rounds=5,
        )
        bare_short, bare_long = paired_best(
            lambda: _bare(TURNS), lambda: _bare(2 * TURNS), rounds=5
        )
        recorded_growth, agent_growth = long / short, bare_long / bare_short
        relative = recorded_growth / agent_growth
        linear_row = Row(
            f"long agent: {2 * TURNS} turns vs {TURNS}, record + open + replay growth vs the agent's own",
            f"{relative:.2f}x (recorded {recorded_growth:.2f}x: {long * 1000:.0f} ms vs {short * 1000:.0f} ms; "
            f"agent alone {agent_growth:.2f}x)",
            "<= 1.15x",
            relative <= 1.15,
            "the issue asked for <= 2.2x absolute, but the agent alone (faux provider, no recording) "
            "grows faster than that: it resends and re-reads its whole conversation at every turn; "
            "what recording and replay must not do is add growth of their own",
        )
        return [size_row, linear_row]


if __name__ == "__main__":
    for row in run():
        print(row)
