"""The good program's mistakes a typed package catches (tests/repo/test_typing.py expects mypy
to report each marked line, and nothing else)."""

from __future__ import annotations

from openprogram.agent import AgentLoopConfig
from openprogram.providers import complete, use_recording
from openprogram.providers.types import Context, Model, UserMessage

ECHO = Model(id="echo", api="faux", provider="faux")


async def wrong() -> str:
    message = await complete(ECHO, "hello")  # expect: arg-type
    config = AgentLoopConfig(model="echo")  # expect: arg-type
    with use_recording("calls.jsonl", "replya"):  # expect: arg-type
        pass
    text: int = message.content[0].type  # expect: assignment
    del config, text
    return Context(messages=[UserMessage(content="x")])  # expect: return-value
