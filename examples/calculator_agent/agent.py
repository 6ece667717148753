"""A small agent with one tool: it answers arithmetic questions with a calculator.

The model comes from AGENT_MODEL (default ``faux/echo``, which needs no key). Record the tests
against a real model with, for example::

    AGENT_MODEL=openai/gpt-4o-mini OPENAI_API_KEY=... pytest --llm-record-mode=record
"""

from __future__ import annotations

import os

from openprogram.agent import AgentContext, AgentLoopConfig, AgentTool, AgentToolResult, agent_loop
from openprogram.providers.models import get_model
from openprogram.providers.types import UserMessage
from openprogram.tools import evaluate_arithmetic


async def calculate(tool_call_id, args, signal, on_update) -> AgentToolResult:
    return AgentToolResult.text(str(evaluate_arithmetic(args["expression"])))


CALCULATOR = AgentTool(
    name="calculator",
    description="Evaluate an arithmetic expression such as (2 + 3) * 7.",
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
    },
    execute=calculate,
)


async def ask(question: str) -> tuple[str, list[str]]:
    """Run the agent; return its final answer and the expressions it computed."""
    model = get_model(os.environ.get("AGENT_MODEL", "faux/echo"))
    context = AgentContext(system_prompt="Use the calculator for arithmetic.", tools=[CALCULATOR])
    expressions: list[str] = []
    final = ""
    async for event in agent_loop(
        [UserMessage(content=question)], context, AgentLoopConfig(model=model, temperature=0)
    ):
        if event.type == "tool_execution_start":
            expressions.append(event.args["expression"])
        if event.type == "agent_end":
            answer = event.messages[-1]
            final = "".join(block.text for block in answer.content if block.type == "text")
    return final, expressions
