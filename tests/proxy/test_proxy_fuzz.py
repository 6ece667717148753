"""Malformed bodies are the client's to fix (docs/proxy.md, "Errors" and "Security"): 6,400
mutations of real request bodies in the four wire formats (fields replaced by values of the
wrong type, keys deleted or added, values nested hundreds of levels deep, secret-shaped tokens
put in) are answered 400 in the vendor's shape with a diagnosis, never 500, never a logged
traceback, and no answer holds 8 characters in a row of a secret the body carried.

The proxy's ASGI application is called in process (``httpx.ASGITransport``: no socket), in a
replay of one recorded call per format, so a body that still reads as a request goes on to the
replay, whose mismatch message quotes the request too. Seeded: every run sends the same bodies.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import random
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from openprogram.proxy import ProxySettings
from openprogram.proxy.app import build_app
from openprogram.proxy.lanes import LaneBook
from openprogram.proxy.server import recording_session
from tests.transcripts import anthropic_streams as a
from tests.transcripts import google_streams as g
from tests.transcripts import openai_completions_streams as c
from tests.transcripts import openai_responses_streams as r
from tests.vendor_server import ScriptedResponse, VendorServer

SEED = 32
BODIES_PER_FORMAT = 1600
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
PNG = "iVBORw0KGgo="

#: One rich request per format: every kind of message, part, tool and option the parsers read.
VALID: dict[str, dict[str, Any]] = {
    "openai-completions": {
        "model": "gpt-4o-mini",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather in Paris?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "Use the tool.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "4 C"},
            {
                "role": "assistant",
                "content": "It is 4 C.",
                "reasoning_details": [{"type": "reasoning.text", "text": "hm"}],
            },
            {"role": "user", "content": "Thanks"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather",
                    "parameters": WEATHER,
                    "strict": True,
                },
            }
        ],
        "tool_choice": "auto",
        "temperature": 0.2,
        "max_completion_tokens": 300,
        "seed": 7,
        "stop": ["END"],
    },
    "openai-responses": {
        "model": "gpt-5-mini",
        "stream": True,
        "instructions": "Be brief.",
        "include": ["reasoning.encrypted_content"],
        "input": [
            {"role": "developer", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Weather in Paris?"},
                    {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
                ],
            },
            {
                "type": "reasoning",
                "id": "rs_1",
                "encrypted_content": "gAAAA",
                "summary": [{"type": "summary_text", "text": "hm"}],
            },
            {
                "type": "function_call",
                "call_id": "call_1",
                "id": "fc_1",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "4 C"},
            {
                "type": "web_search_call",
                "id": "ws_1",
                "status": "completed",
                "action": {"type": "search", "query": "paris"},
            },
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_1",
                "content": [
                    {
                        "type": "output_text",
                        "text": "4 C",
                        "annotations": [
                            {"type": "url_citation", "url": "https://x.example", "title": "x"}
                        ],
                    }
                ],
            },
            {"role": "user", "content": "Thanks"},
        ],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Weather",
                "parameters": WEATHER,
                "strict": False,
            },
            {"type": "web_search"},
        ],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "reasoning": {"effort": "low"},
        "max_output_tokens": 300,
        "prompt_cache_key": "s1",
        "store": False,
        "metadata": {"run": "7"},
    },
    "anthropic-messages": {
        "model": "claude-haiku-4-5",
        "max_tokens": 2048,
        "stream": True,
        "temperature": 1,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Use the tool.", "signature": "sig-1"},
                    {"type": "redacted_thinking", "data": "abc"},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [
                            {"type": "text", "text": "4 C"},
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": PNG,
                                },
                            },
                        ],
                        "cache_control": {"type": "ephemeral", "ttl": "1h"},
                    },
                    {"type": "text", "text": "And tomorrow?"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "server_tool_use",
                        "id": "srvtoolu_1",
                        "name": "web_search",
                        "input": {"query": "paris"},
                    },
                    {
                        "type": "web_search_tool_result",
                        "tool_use_id": "srvtoolu_1",
                        "content": [
                            {
                                "type": "web_search_result",
                                "url": "https://x.example",
                                "title": "x",
                                "encrypted_content": "EqQ",
                            }
                        ],
                    },
                    {
                        "type": "text",
                        "text": "5 C",
                        "citations": [
                            {
                                "type": "web_search_result_location",
                                "url": "https://x.example",
                                "cited_text": "5 C",
                            }
                        ],
                    },
                ],
            },
            {"role": "user", "content": "Thanks"},
        ],
        "tools": [{"name": "get_weather", "description": "Weather", "input_schema": WEATHER}],
        "tool_choice": {"type": "auto"},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "metadata": {"user_id": "u-1"},
        "stop_sequences": ["END"],
    },
    "google-generative-ai": {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "Weather in Paris?"},
                    {"inlineData": {"mimeType": "image/png", "data": PNG}},
                ],
            },
            {
                "role": "model",
                "parts": [
                    {"text": "hm", "thought": True, "thoughtSignature": "c2ln"},
                    {
                        "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                        "thoughtSignature": "c2ln",
                    },
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "get_weather", "response": {"output": "4 C"}}}
                ],
            },
            {
                "role": "model",
                "parts": [
                    {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
                    {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1"}},
                    {"text": "4 C"},
                ],
            },
            {"parts": [{"text": "Thanks"}]},
        ],
        "systemInstruction": {"role": "user", "parts": [{"text": "Be brief."}]},
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "get_weather",
                        "description": "Weather",
                        "parametersJsonSchema": WEATHER,
                    }
                ]
            },
            {"googleSearch": {}},
        ],
        "generationConfig": {
            "temperature": 0.2,
            "maxOutputTokens": 300,
            "stopSequences": ["END"],
            "thinkingConfig": {"thinkingBudget": 512},
        },
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
    },
}

PATHS = {
    "openai-completions": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
    "anthropic-messages": "/v1/messages",
    "google-generative-ai": "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
}
ANSWERS = {
    "openai-completions": c.PLAIN_TEXT,
    "openai-responses": r.PLAIN_TEXT,
    "anthropic-messages": a.PLAIN_TEXT,
    "google-generative-ai": g.PLAIN_TEXT,
}
HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-fuzz-client-0123456789"}

# --------------------------------------------------------------------------- the bodies

ALPHANUMERIC = string.ascii_letters + string.digits


def _secrets(rng: random.Random) -> list[str]:
    """Two credential-shaped tokens, new for every body."""
    return [
        "sk-proj-" + "".join(rng.choice(ALPHANUMERIC) for _ in range(40)),
        "ghp_" + "".join(rng.choice(ALPHANUMERIC) for _ in range(36)),
    ]


def _paths(value: Any, here: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a body (12 levels at most: below them lies only what a mutation nested)."""
    yield here
    if len(here) >= 12:
        return
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, (*here, key))
    elif isinstance(value, list):
        for position, inner in enumerate(value):
            yield from _paths(inner, (*here, position))


def _nested(value: Any, depth: int, rng: random.Random) -> Any:
    for _ in range(depth):
        value = [value] if rng.random() < 0.5 else {"a": value}
    return value


def _mutated(body: dict[str, Any], rng: random.Random, secrets: list[str]) -> dict[str, Any]:
    """``body`` with one to three places changed: deleted, replaced by a value of another type
    (nested 3 to 600 levels deep), a secret put in a text as a word of its own, a key added."""
    body = copy.deepcopy(body)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice([p for p in _paths(body) if p])
        parent = body
        for step in path[:-1]:
            parent = parent[step]
        last, secret = path[-1], rng.choice(secrets)
        wrong = [
            None,
            0,
            -1,
            1.5,
            True,
            "",
            "x",
            secret,
            f"key {secret}",
            [],
            {},
            [secret],
            {"type": secret},
            {secret: secret},
            [[1]],
            {"text": 5},
            {"type": "text"},
            {"role": secret, "content": secret},
        ]
        kind = rng.randrange(5)
        if kind == 0 and isinstance(parent, dict):
            del parent[last]
        elif kind == 1:
            parent[last] = _nested(
                rng.choice(wrong), rng.choice([3, 64, 127, 254, 256, 300, 600]), rng
            )
        elif kind == 2 and isinstance(parent[last], str):
            words = parent[last].split(" ")
            words.insert(rng.randint(0, len(words)), secret)
            parent[last] = " ".join(words)
        elif kind == 3 and isinstance(parent, dict):
            parent[rng.choice([secret, "type", "role", "text", "content"])] = rng.choice(wrong)
        else:
            parent[last] = rng.choice(wrong)
    return body


def fuzzed_bodies(
    seed: int = SEED, per_format: int = BODIES_PER_FORMAT
) -> list[tuple[str, bytes, list[str]]]:
    """``(api, body bytes, the secrets put in)``, the same list for the same seed."""
    rng = random.Random(seed)
    bodies = []
    for api, valid in VALID.items():
        for _ in range(per_format):
            secrets = _secrets(rng)
            # the standard library writes what orjson (255 levels) would refuse to
            bodies.append((api, json.dumps(_mutated(valid, rng, secrets)).encode(), secrets))
    return bodies


# --------------------------------------------------------------------------- the run


async def _send_all(app: Any, bodies: list[tuple[str, bytes, list[str]]]) -> list[httpx.Response]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as client:
        return [
            await client.post(PATHS[api], content=body, headers=HEADERS) for api, body, _ in bodies
        ]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One recorded call of each valid body, made through the proxy."""
    path = tmp_path_factory.mktemp("fuzz") / "valid.jsonl"
    with VendorServer() as server:
        server.queue(*(ScriptedResponse(chunks=ANSWERS[api]) for api in VALID))
        upstreams = {api: server.url + ("/v1" if api.startswith("openai") else "") for api in VALID}
        settings = ProxySettings(upstreams=upstreams, recording=path, mode="record")
        with recording_session(settings):
            answers = asyncio.run(
                _send_all(
                    build_app(settings),
                    [(api, json.dumps(b).encode(), []) for api, b in VALID.items()],
                )
            )
    assert [answer.status_code for answer in answers] == [200, 200, 200, 200]
    return path


def _depth(value: Any) -> int:
    """How many levels of objects and arrays ``value`` nests."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        inner, level = stack.pop()
        children = (
            inner.values()
            if isinstance(inner, dict)
            else inner
            if isinstance(inner, list)
            else None
        )
        if children is not None:
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children)
    return deepest


def _echoes(text: str, secret: str) -> bool:
    return any(secret[start : start + 8] in text for start in range(len(secret) - 7))


@pytest.mark.slow
def test_malformed_bodies_are_answered_400_without_a_traceback_or_a_secret(recorded, caplog):
    bodies = fuzzed_bodies()
    assert len(bodies) == 6400
    settings = ProxySettings(recording=recorded, mode="replay")
    caplog.set_level(logging.DEBUG)
    with recording_session(settings):
        answers = asyncio.run(
            _send_all(build_app(settings, LaneBook.for_replay(str(recorded))), bodies)
        )
    statuses = [answer.status_code for answer in answers]
    assert [s for s in statuses if s >= 500] == []
    assert statuses.count(400) >= 6000  # a few mutations leave a body that replays (200)
    # The proxy's own logs (asyncio may report a client another test left to the collector).
    proxy_records = [record for record in caplog.records if record.name.startswith("openprogram")]
    assert [
        record.getMessage()
        for record in proxy_records
        if record.exc_info or record.levelno >= logging.ERROR
    ] == []
    echoed = [
        answer.text
        for answer, (_, _, secrets) in zip(answers, bodies, strict=True)
        if any(_echoes(answer.text, s) for s in secrets)
    ]
    assert echoed == []
    # each 400 is a diagnosis naming the body's fault, never the fallback for what no check foresaw
    unforeseen = [answer.text for answer in answers if "could not be read" in answer.text]
    assert unforeseen == []
    deep = [
        answer
        for answer, (_, body, _) in zip(answers, bodies, strict=True)
        if _depth(json.loads(body)) > 128
    ]
    assert len(deep) > 500
    assert all(
        answer.status_code == 400 and "nests deeper than 128 levels" in answer.text
        for answer in deep
    )


def test_a_body_nested_deeper_than_the_limit_is_refused_naming_where(recorded):
    body = copy.deepcopy(VALID["openai-completions"])
    body["metadata"] = _nested("x", 200, random.Random(0))
    settings = ProxySettings(recording=recorded, mode="replay")
    with recording_session(settings):
        (answer,) = asyncio.run(
            _send_all(build_app(settings), [("openai-completions", json.dumps(body).encode(), [])])
        )
    assert answer.status_code == 400
    assert (
        "body.metadata" in answer.json()["error"]["message"]
        and "nests deeper than 128 levels" in answer.text
    )


def test_a_value_where_a_name_belongs_is_described_not_quoted():
    from openprogram.providers.vendors import anthropic_messages, google_generative_ai
    from openprogram.providers.vendors.wire import WireRequestError

    secret = "sk-proj-" + "A1b2C3d4" * 5
    with pytest.raises(WireRequestError) as role:
        anthropic_messages.parse_request_body(
            {"model": "m", "max_tokens": 1, "messages": [{"role": secret, "content": "hi"}]}
        )
    with pytest.raises(WireRequestError) as part:
        # a user's part of any shape travels as sent (raw); a model's part must be one Gemini answers with
        google_generative_ai.parse_request_body(
            {"contents": [{"role": "model", "parts": [{secret: 1, "fileData": {}}]}]}, model_id="g"
        )
    assert str(role.value).startswith(
        "messages[0]: openprogram proxy cannot carry a message of role a string of 48 characters"
    )
    assert "model part with fileData, a string of 48 characters (" in str(part.value)
    assert "A1b2C3d4" not in str(role.value) + str(part.value)


def test_what_reading_a_body_raises_unforeseen_is_still_a_400(recorded, caplog, monkeypatch):
    """The net under the checks: a body that makes a parser fail in a way no check foresaw is
    the client's to fix all the same (a 400 naming the failure), not a 500 with a traceback."""
    from openprogram.providers.vendors import openai_completions

    def broken(body: dict[str, Any], *, model_id: str | None = None) -> Any:
        raise KeyError("messages")

    monkeypatch.setattr(openai_completions, "parse_request_body", broken)
    settings = ProxySettings(recording=recorded, mode="replay")
    with recording_session(settings):
        (answer,) = asyncio.run(_send_all(build_app(settings), [("openai-completions", b"{}", [])]))
    assert answer.status_code == 400
    assert (
        "the request body could not be read (KeyError: 'messages')"
        in answer.json()["error"]["message"]
    )
    assert [record for record in caplog.records if record.exc_info] == []
