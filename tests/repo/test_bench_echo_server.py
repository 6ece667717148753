"""The suite benchmark's echo server (``bench/echo_server.py``) holds the conversation
``faux/echo`` holds: the benchmark compares vcrpy cassettes recorded from it with openprogram
replay of ``faux/echo`` recordings, which is only fair if the agent makes the same calls and
gets the same answers on both sides."""

from __future__ import annotations

from bench.echo_server import EchoServer
from openprogram.agent import AgentContext, AgentLoopConfig, agent_loop
from openprogram.providers.models import get_model
from openprogram.providers.types import Model, UserMessage
from openprogram.tools import builtin_tools


async def conversation(model: Model) -> list[list[tuple]]:
    """Per prompt: what each assistant message said (text or tool calls)."""
    context = AgentContext(tools=builtin_tools(["calculator"]))
    config = AgentLoopConfig(model=model)
    said = []
    for turn, prompt in enumerate(["/calculator 6*7", "/calculator 2+3\n/calculator 4", "hello"]):
        events = [
            e
            async for e in agent_loop(
                [UserMessage(content=prompt, timestamp=turn)], context, config
            )
        ]
        said.append(
            [
                tuple(getattr(b, "text", None) or (b.name, b.arguments) for b in message.content)
                for message in events[-1].messages
                if message.role == "assistant"
            ]
        )
    return said


async def test_the_echo_server_answers_as_faux_echo_does():
    with EchoServer() as server:
        served = Model(
            id="echo", api="openai-completions", provider="local", base_url=server.base_url
        )
        over_http = await conversation(served)
    assert over_http == await conversation(get_model("faux/echo"))
    assert over_http[0] == [(("calculator", {"expression": "6*7"}),), ("calculator returned: 42",)]
    assert over_http[2] == [("echo: hello",)]
