"""The agent loop shares the conversation's immutable messages with each model call instead
of copying them: counted (no deep copy at all during a run, the same objects reach the
provider), never timed."""

from __future__ import annotations

import asyncio
import copy

from openprogram.agent import AgentContext, AgentLoopConfig, agent_loop
from openprogram.providers import faux
from openprogram.providers.types import Model, UserMessage
from openprogram.tools import builtin_tools

ECHO = Model(id="echo", api="faux", provider="faux")


async def run_turns(context: AgentContext, prompts: list[str]) -> None:
    for prompt in prompts:
        async for _ in agent_loop(
            [UserMessage(content=prompt)], context, AgentLoopConfig(model=ECHO)
        ):
            pass


def test_a_multi_turn_run_makes_no_deep_copy(monkeypatch):
    calls = []
    real = copy.deepcopy

    def counting(value, memo=None):
        calls.append(type(value).__name__)
        return real(value, memo)

    monkeypatch.setattr(copy, "deepcopy", counting)
    context = AgentContext(tools=builtin_tools(["calculator"]))
    asyncio.run(run_turns(context, [f"/calculator {n}*7" for n in range(4)]))
    assert len(context.messages) == 4 * 4  # prompt, tool call, tool result, answer
    assert calls == []


def test_each_call_receives_the_conversations_own_message_objects(monkeypatch):
    seen: list[list[int]] = []
    real = faux.echo_response

    def spying(context):
        seen.append([id(message) for message in context.messages])
        return real(context)

    monkeypatch.setattr(faux, "echo_response", spying)
    context = AgentContext(tools=builtin_tools(["calculator"]))
    asyncio.run(run_turns(context, ["/calculator 6*7", "/calculator 2*3"]))
    assert len(seen) == 4
    own = [id(message) for message in context.messages]
    for ids in seen:
        assert ids == own[: len(ids)]  # the very objects, not copies
