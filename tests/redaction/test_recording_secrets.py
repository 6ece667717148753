"""No secret byte reaches a recording file, wherever it is planted (field names, headers,
URLs, prose, streamed answers, tool arguments), and ordinary text is recorded unchanged."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from openprogram.providers.faux import FauxProvider, FauxResponse, FauxText, FauxToolCall
from openprogram.providers.recording import RecordingProvider
from openprogram.providers.replay import ReplayProvider
from openprogram.providers.types import Context, Model, SimpleStreamOptions, UserMessage
from tests.record_replay.test_recording_support import collect

ALPHANUMERIC = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
secrets = st.text(alphabet=ALPHANUMERIC, min_size=20, max_size=32).filter(
    lambda s: any(c.isdigit() for c in s) and len(set(s)) >= 6
)
ORDINARY = [
    "the",
    "key",
    "point",
    "is",
    "basic",
    "stuff",
    "bearer",
    "of",
    "news",
    "Token",
    "economics",
    "sk-learn",
    "password",
    "reset",
    "flow",
    "secret",
    "garden",
    "ok",
    "api",
    "café",
    "日本",
]
prose = st.lists(st.sampled_from(ORDINARY), min_size=1, max_size=8).map(" ".join)


@settings(max_examples=40, deadline=None)
@given(
    header_secret=secrets,
    url_secret=secrets,
    bearer_secret=secrets,
    sk_secret=secrets,
    env_secret=secrets,
    argument_secret=secrets,
    words=st.tuples(prose, prose, prose),
)
def test_planted_secrets_never_reach_the_file_and_prose_survives(
    header_secret, url_secret, bearer_secret, sk_secret, env_secret, argument_secret, words
):
    planted = [header_secret, url_secret, bearer_secret, sk_secret, env_secret, argument_secret]
    first, second, third = words
    answer = f"{first} Bearer {bearer_secret} {second} sk-{sk_secret} {third} {env_secret} end"
    model = Model(
        id="m",
        api="faux",
        provider="faux",
        base_url=f"https://user:{url_secret}@example.test/v1?api_key={url_secret}&mode=fast",
        headers={"X-Api-Key": header_secret, "X-Trace": first},
    )
    context = Context(
        system_prompt=f"{second}. Authorization: Bearer {bearer_secret}",
        messages=[
            UserMessage(
                content=f"{third} https://example.test/cb?token={url_secret} {env_secret}",
                timestamp=1,
            )
        ],
    )
    options = SimpleStreamOptions(
        api_key=f"sk-{sk_secret}",
        headers={
            "Authorization": f"Basic {header_secret}",
            "Cookie": header_secret,
            "Accept": first,
        },
        metadata={
            "clientSecret": header_secret,
            "nested": [{"refreshToken": header_secret, "note": third}],
        },
    )
    response = FauxResponse(
        blocks=(
            FauxText(answer),
            FauxToolCall(
                "search",
                {
                    "query": first,
                    "token": argument_secret,
                    "url": f"https://a.test/?key={argument_secret}",
                },
            ),
        )
    )
    previous = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = env_secret
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "rec.jsonl"
            provider = RecordingProvider(FauxProvider([response], timestamp=3), path)
            live = asyncio.run(collect(provider.stream_simple(model, context, options)))
            data = path.read_bytes()
            for secret in planted:
                assert secret.encode() not in data
            text = data.decode()
            for phrase in (first, second, third):
                assert phrase in text, "ordinary text was changed"
            events = asyncio.run(
                collect(ReplayProvider(path).stream_simple(model, context, options))
            )
    finally:
        if previous is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = previous
    final = events[-1].message
    recorded_text = final.content[0].text
    assert recorded_text.startswith(f"{first} ") and f" {second} " in recorded_text
    assert recorded_text.endswith(" end")
    assert final.content[1].arguments["query"] == first
    assert len(events) == len(live)
    assert [e.type for e in events] == [e.type for e in live]


def test_a_secret_free_answer_and_its_arguments_replay_byte_for_byte(tmp_path):
    text = "The bearer of news said: Token economics and basic stuff; sk-learn is fine. key=value?"
    arguments = {"query": "Basic English", "nested": {"list": [1, 2.5, True, None, "sk-learn"]}}
    response = FauxResponse(blocks=(FauxText(text), FauxToolCall("search", arguments)))
    path = tmp_path / "rec.jsonl"
    model = Model(id="m", api="faux", provider="faux")
    context = Context(messages=[UserMessage(content=text, timestamp=1)])
    live = asyncio.run(
        collect(
            RecordingProvider(FauxProvider([response], timestamp=3), path).stream(model, context)
        )
    )
    replayed = asyncio.run(collect(ReplayProvider(path).stream(model, context)))
    assert replayed == live
