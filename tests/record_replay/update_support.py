"""What the update-mode tests share: a counted live provider that answers every prompt with
``live: PROMPT``, a run of prompts through it, and the prompts a recording holds."""

from __future__ import annotations

from openprogram.providers import api_registry
from openprogram.providers.faux import FauxProvider, faux_text
from openprogram.providers.replay import read_recording_file
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage

MODEL = Model(id="counted", api="update-test", provider="faux")


def register_live_provider() -> FauxProvider:
    """Register (in a fresh registry) the provider behind :data:`MODEL`; its ``calls`` count."""

    def answer(model, context, options):
        return faux_text(f"live: {context.messages[-1].content}")

    provider = FauxProvider([answer] * 500)
    api_registry.register_api_provider(MODEL.api, provider)
    return provider


async def run(prompts: list[str]) -> list[str]:
    answers = []
    for prompt in prompts:
        message = await complete(
            MODEL, Context(messages=[UserMessage(content=prompt, timestamp=0)])
        )
        answers.append(message.content[0].text)
    return answers


def requests_in(path) -> list[str]:
    return [call.context["messages"][0]["content"] for call in read_recording_file(path).calls]
