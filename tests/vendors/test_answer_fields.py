"""What a vendor says about its own answer (docs/vendors.md, "What the vendor says about its
answer"): the reasoning tokens inside the output count (``Usage.reasoning``), the vendor's id of
the answer and the model version that answered (``AssistantMessage.response_id`` and
``response_model``).

Each vendor provider reads them from the vendor's stream (the byte-exact transcripts of
``tests/transcripts/``, written from each vendor's documented format, served on 127.0.0.1); the
proxy's encoders write them back so that the vendor's own SDK reads the same numbers, id and
model from the encoded answer as from the vendor's; and replay never compares them (they are
answers, not requests), so a recording made before they existed replays, and two runs whose
answers differ only in them match.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from openprogram.cli.main import main
from openprogram.providers import register_api_provider
from openprogram.providers.faux import FauxProvider, faux_text
from openprogram.providers.scoped import use_recording
from openprogram.providers.stream import complete
from openprogram.providers.types import (
    AssistantMessage,
    Context,
    Model,
    SimpleStreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from openprogram.providers.vendors import (
    anthropic_messages,
    google_generative_ai,
    openai_completions,
    openai_responses,
    wire,
)
from openprogram.providers.vendors.builtin import VENDOR_APIS, VENDORS
from openprogram.recordings.file.reader import read_recording_file
from openprogram.recordings.replay.replayer import ReplayProvider
from openprogram.recordings.views.inspection import read_recording
from openprogram.recordings.views.view import render_recording_page
from tests.transcripts import anthropic_streams as a
from tests.transcripts import google_streams as g
from tests.transcripts import openai_completions_streams as c
from tests.transcripts import openai_responses_streams as r
from tests.transcripts.event_summary import collect
from tests.vendor_server import ScriptedResponse, VendorServer
from tests.vendors.test_vendor_contract import CASES, HELLO

FIXTURE = Path(__file__).parents[1] / "fixtures" / "format_v1_agent.jsonl"

# --------------------------------------------------------------------------- the vendors' streams


@dataclass(frozen=True)
class Answer:
    """A vendor stream and what its answer says about itself."""

    chunks: list[bytes]
    response_id: str
    response_model: str
    output: int
    reasoning: int
    total: int


#: An OpenAI reasoning model through Chat Completions: no reasoning text, but 192 of the 210
#: completion tokens were reasoning.
_COMPLETIONS_HEAD = "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG"
COMPLETIONS = Answer(
    c.sse_frames(
        c.ROLE,
        c.chunk('{"content":"Four."}'),
        c.STOP,
        c.usage_chunk(20, 210, reasoning=192),
        done=True,
    ),
    _COMPLETIONS_HEAD,
    "gpt-4o-mini-2024-07-18",
    output=210,
    reasoning=192,
    total=230,
)
#: A Responses reasoning model: a summary, then the answer; 100 of 120 output tokens reasoning.
RESPONSES = Answer(
    r.THINKING_THEN_TEXT, r.RESP_ID, "gpt-5-mini-2025-08-07", output=120, reasoning=100, total=150
)
#: Anthropic counts thinking inside ``output_tokens`` and reports no part of it apart; the
#: message names the dated model version that answered.
ANTHROPIC = Answer(
    [
        a.message_start(input_tokens=40, model="claude-haiku-4-5-20251001"),
        *a.THINKING_THEN_TEXT[1:],
    ],
    "msg_01XFDUDYJgAACzvnptvVoYEL",
    "claude-haiku-4-5-20251001",
    output=30,
    reasoning=0,
    total=70,
)
#: Gemini counts thoughts apart from the answer (27 candidates tokens and 284 thoughts, the
#: counts of the issue that reported them folded together); ours counts both as output.
GEMINI = Answer(
    [
        g.chunk({"text": "Counting.", "thought": True, "thoughtSignature": g.THOUGHT_SIGNATURE}),
        g.chunk({"text": "It is 4."}, finish="STOP", usage=g.usage(12, 27, thoughts=284)),
    ],
    g.RESPONSE_ID,
    g.MODEL_ID,
    output=311,
    reasoning=284,
    total=323,
)

ANSWERS = {
    "openai-completions": COMPLETIONS,
    "openai-responses": RESPONSES,
    "anthropic-messages": ANTHROPIC,
    "google-generative-ai": GEMINI,
}
CASE = {case.api: case for case in CASES}
MODULES: dict[str, Any] = {vendor.api: vendor.load() for vendor in VENDORS}


def test_every_vendor_of_the_list_has_its_answer():
    assert set(ANSWERS) == set(CASE) == set(VENDOR_APIS)


def _events(api: str) -> list[Any]:
    """The events the vendor provider of ``api`` makes of the vendor's answer."""
    case = CASE[api]
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=ANSWERS[api].chunks))
        return asyncio.run(
            collect(case.provider().stream(case.model(server.url), HELLO, case.options()))
        )


# --------------------------------------------------------------------------- read by each provider


@pytest.mark.parametrize("api", list(ANSWERS))
def test_each_provider_reads_the_answer_s_id_model_version_and_reasoning_tokens(api):
    answer = ANSWERS[api]
    events = _events(api)
    message = events[-1].message
    assert events[-1].type == "done"
    assert (message.response_id, message.response_model) == (
        answer.response_id,
        answer.response_model,
    )
    # reasoning is part of the output, never added to it: the total and the cost keep their meaning
    usage = message.usage
    assert (usage.output, usage.reasoning, usage.total_tokens) == (
        answer.output,
        answer.reasoning,
        answer.total,
    )
    assert usage.cost.output == pytest.approx(
        answer.output * CASE[api].model("http://x").cost.output / 1e6
    )
    # start waits for the vendor's first chunk, which names the answer: every event carries it
    assert events[0].type == "start"
    named = {(event.partial.response_id, event.partial.response_model) for event in events[:-1]}
    assert named == {(answer.response_id, answer.response_model)}


def test_a_vendor_that_names_no_answer_leaves_the_fields_empty():
    """A compatible server may send chunks without ``id`` or ``model``."""
    frames = [
        frame.replace(b'"id":"' + _COMPLETIONS_HEAD.encode() + b'",', b"") for frame in c.PLAIN_TEXT
    ]
    frames = [frame.replace(b'"model":"gpt-4o-mini-2024-07-18",', b"") for frame in frames]
    case = CASE["openai-completions"]
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=frames))
        events = asyncio.run(
            collect(case.provider().stream(case.model(server.url), HELLO, case.options()))
        )
    assert b"chatcmpl-" not in b"".join(frames)
    message = events[-1].message
    assert (message.response_id, message.response_model, message.usage.reasoning) == (None, None, 0)
    assert "".join(b.text for b in message.content if isinstance(b, TextContent)) == "Hello world!"


# --------------------------------------------------------------------------- written back by the proxy's encoders


def _openai(url: str, key: str) -> Any:
    import openai

    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)


def _read_completions(url: str, key: str, streaming: bool) -> dict[str, Any]:
    client = _openai(url, key)
    request: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Say hello"}],
    }
    if streaming:
        chunks = list(
            client.chat.completions.create(
                **request, stream=True, stream_options={"include_usage": True}
            )
        )
        usage = next(chunk.usage for chunk in reversed(chunks) if chunk.usage)
        ids, models = {chunk.id for chunk in chunks}, {chunk.model for chunk in chunks}
    else:
        completion = client.chat.completions.create(**request)
        usage, ids, models = completion.usage, {completion.id}, {completion.model}
    details = usage.completion_tokens_details
    counts = (
        usage.completion_tokens,
        details.reasoning_tokens if details else None,
        usage.total_tokens,
    )
    return {"ids": ids, "models": models, "counts": counts}


def _read_responses(url: str, key: str, streaming: bool) -> dict[str, Any]:
    client = _openai(url, key)
    request = {"model": "gpt-5-mini", "input": "Say hello"}
    if streaming:
        with client.responses.stream(**request) as stream:
            named = [event.response for event in stream if hasattr(event, "response")]
            final = stream.get_final_response()
        responses = [*named, final]
    else:
        responses = [client.responses.create(**request)]
    usage = responses[-1].usage
    counts = (usage.output_tokens, usage.output_tokens_details.reasoning_tokens, usage.total_tokens)
    return {
        "ids": {one.id for one in responses},
        "models": {one.model for one in responses},
        "counts": counts,
    }


def _read_anthropic(url: str, key: str, streaming: bool) -> dict[str, Any]:
    import anthropic

    client = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)
    request: dict[str, Any] = {
        "model": a.MODEL_ID,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "Say hello"}],
    }
    if streaming:
        with client.messages.stream(**request) as stream:
            starts = [event.message for event in stream if event.type == "message_start"]
            final = stream.get_final_message()
        messages = [*starts, final]
    else:
        messages = [client.messages.create(**request)]
    usage = messages[-1].usage
    counts = (usage.output_tokens, None, usage.input_tokens + usage.output_tokens)
    return {
        "ids": {one.id for one in messages},
        "models": {one.model for one in messages},
        "counts": counts,
    }


def _read_gemini(url: str, key: str, streaming: bool) -> dict[str, Any]:
    from google import genai

    client = genai.Client(
        api_key=key, http_options={"base_url": url, "retry_options": {"attempts": 1}}
    )
    if streaming:
        responses = list(
            client.models.generate_content_stream(model=g.MODEL_ID, contents="Say hello")
        )
    else:
        responses = [client.models.generate_content(model=g.MODEL_ID, contents="Say hello")]
    usage = responses[-1].usage_metadata
    assert usage is not None
    counts = (usage.candidates_token_count, usage.thoughts_token_count, usage.total_token_count)
    return {
        "ids": {one.response_id for one in responses},
        "models": {one.model_version for one in responses},
        "counts": counts,
    }


READERS = {
    "openai-completions": _read_completions,
    "openai-responses": _read_responses,
    "anthropic-messages": _read_anthropic,
    "google-generative-ai": _read_gemini,
}
#: The request body each encoder is given (a Chat Completions stream carries usage only when
#: the client asked for it).
REQUEST_BODIES: dict[str, dict[str, Any]] = {
    "openai-completions": {"stream": True, "stream_options": {"include_usage": True}}
}


def _read(api: str, response: ScriptedResponse, streaming: bool) -> dict[str, Any]:
    with VendorServer() as server:
        server.queue(response)
        return READERS[api](server.url, CASE[api].key, streaming)


def _encoded(api: str, events: list[Any], streaming: bool) -> ScriptedResponse:
    module = MODULES[api]
    body = REQUEST_BODIES.get(api, {})
    if streaming:
        encoder = module.StreamEncoder(body)
        return ScriptedResponse(chunks=[frame for frame in map(encoder.encode, events) if frame])
    answer = module.response_body(events[-1].message, body)
    return ScriptedResponse(
        chunks=[json.dumps(answer).encode()], headers={"content-type": "application/json"}
    )


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("api", list(ANSWERS))
def test_the_encoded_answer_gives_the_client_the_vendor_s_id_model_and_token_counts(api, streaming):
    """The vendor's SDK reads the same id, model version and output, reasoning and total counts
    from the proxy's encoding of the events as from the vendor's own stream."""
    answer = ANSWERS[api]
    direct = _read(api, ScriptedResponse(chunks=answer.chunks), streaming=True)
    encoded = _read(api, _encoded(api, _events(api), streaming), streaming)
    assert encoded == direct
    assert direct["ids"] == {answer.response_id} and direct["models"] == {answer.response_model}


def test_gemini_thoughts_reach_the_client_apart_from_the_answer_s_tokens():
    encoded = _read(
        "google-generative-ai",
        _encoded("google-generative-ai", _events("google-generative-ai"), True),
        True,
    )
    assert encoded["counts"] == (27, 284, 323)


def _message(**fields: Any) -> AssistantMessage:
    return AssistantMessage(
        content=[TextContent(text="Four.")],
        api="x",
        provider="openai",
        model="asked-model",
        timestamp=1_700_000_000_000,
        **fields,
    )


def test_an_answer_recorded_without_them_is_encoded_as_before():
    """A message recorded before answers kept their id and model version: the stable id made
    from the message and the model asked for; no reasoning count where the format may leave it
    out, and Responses' required one as 0."""
    message = _message(usage=Usage(input=5, output=7, total_tokens=12))
    completion = openai_completions.response_body(message, {})
    assert (completion["id"], completion["model"]) == (
        wire.wire_id("chatcmpl-", message),
        "asked-model",
    )
    assert "completion_tokens_details" not in completion["usage"]
    response = openai_responses.response_body(message, {})
    assert (response["id"], response["model"]) == (wire.wire_id("resp_", message), "asked-model")
    assert response["usage"]["output_tokens_details"] == {"reasoning_tokens": 0}
    assert anthropic_messages.response_body(message, {})["id"] == wire.wire_id("msg_", message)
    gemini = google_generative_ai.response_body(message, {})
    assert (gemini["responseId"], gemini["modelVersion"]) == (
        wire.wire_id("", message),
        "asked-model",
    )
    assert (
        gemini["usageMetadata"]["candidatesTokenCount"] == 7
        and "thoughtsTokenCount" not in gemini["usageMetadata"]
    )


def test_the_encoders_use_the_answer_s_own_id_and_model():
    message = _message(
        response_id="resp_own",
        response_model="model-2025-01-01",
        usage=Usage(output=9, reasoning=4, total_tokens=9),
    )
    for module in MODULES.values():
        body = module.response_body(message, {})
        assert orjson.dumps(body).count(b"resp_own") == 1
        assert b"model-2025-01-01" in orjson.dumps(body) and b"asked-model" not in orjson.dumps(
            body
        )
    assert openai_completions.response_body(message, {})["usage"]["completion_tokens_details"] == {
        "reasoning_tokens": 4
    }
    assert openai_responses.response_body(message, {})["usage"]["output_tokens_details"] == {
        "reasoning_tokens": 4
    }
    gemini = google_generative_ai.response_body(message, {})["usageMetadata"]
    assert (gemini["candidatesTokenCount"], gemini["thoughtsTokenCount"]) == (5, 4)


# --------------------------------------------------------------------------- never sent, never compared


def _conversation(**answer_fields: Any) -> Context:
    """A tool round trip whose assistant turn carries ``answer_fields``."""
    call = ToolCall(id="call_1", name="echo", arguments={"value": "hi"})
    answer = AssistantMessage(
        content=[
            ThinkingContent(thinking="Use echo.", thinking_signature="reasoning_content"),
            call,
        ],
        api="openai-completions",
        provider="openai",
        model="gpt-4o-mini",
        stop_reason="toolUse",
        timestamp=2,
        **answer_fields,
    )
    result = ToolResultMessage(
        tool_call_id="call_1", tool_name="echo", content=[TextContent(text="hi")], timestamp=3
    )
    return Context(
        system_prompt="Be brief.",
        messages=[UserMessage(content="Echo hi", timestamp=1), answer, result],
    )


ANSWERED = {
    "response_id": "chatcmpl-first-run",
    "response_model": "gpt-4o-mini-2024-07-18",
    "usage": Usage(input=9, output=30, reasoning=21, total_tokens=39),
}
ANSWERED_AGAIN = {
    "response_id": "chatcmpl-second-run",
    "response_model": "gpt-4o-mini-2024-08-06",
    "usage": Usage(input=9, output=30, reasoning=18, total_tokens=39),
}


@pytest.mark.parametrize("api", list(MODULES))
def test_no_vendor_is_sent_the_answer_s_id_model_or_reasoning_count(api):
    model = Model(**{**CASE[api].model_fields, "id": "gpt-4o-mini", "provider": "openai"})
    bare = _conversation(usage=Usage(input=9, output=30, total_tokens=39))
    answered = _conversation(**ANSWERED)
    for message in (*bare.messages, *answered.messages):
        if isinstance(message, AssistantMessage):
            message.api = api
    build = MODULES[api].build_request_body
    assert build(model, answered, None) == build(model, bare, None)
    assert b"chatcmpl-first-run" not in orjson.dumps(build(model, answered, None))


def _record_echo(path: Path, context: Context) -> None:
    model = Model(id="scripted", api="answer-fields-test", provider="faux")
    register_api_provider(model.api, FauxProvider([faux_text("done")]))
    with use_recording(path, "record"):
        asyncio.run(complete(model, context, SimpleStreamOptions()))


def _replays(path: Path, context: Context) -> None:
    model = Model(id="scripted", api="answer-fields-test", provider="faux")
    with use_recording(path, "replay") as scope:
        message = asyncio.run(complete(model, context, SimpleStreamOptions()))
        scope.assert_consumed()
    assert message.content == [TextContent(text="done")]


def test_two_runs_whose_answers_differ_only_in_id_model_and_reasoning_count_match(tmp_path):
    path = tmp_path / "echo.jsonl"
    _record_echo(path, _conversation(**ANSWERED))
    _replays(path, _conversation(**ANSWERED_AGAIN))
    request = next(
        orjson.loads(line) for line in path.read_bytes().splitlines() if b'"request"' in line
    )
    answer = request["context"]["messages"][1]
    # the request as recorded is the request as compared: what no vendor was sent is not in it
    assert {"response_id", "response_model"}.isdisjoint(answer) and "reasoning" not in answer[
        "usage"
    ]
    assert answer["usage"]["output"] == 30  # the rest of the usage is compared, as before


def test_a_changed_usage_count_is_still_a_drift(tmp_path):
    """Only what the vendor says about its answer is left out; the usage as before is compared."""
    path = tmp_path / "echo.jsonl"
    _record_echo(path, _conversation(**ANSWERED))
    changed = {**ANSWERED, "usage": Usage(input=9, output=31, reasoning=21, total_tokens=40)}
    with pytest.raises(AssertionError, match=r"context\.messages\[1\]\.usage\.output"):
        _replays(path, _conversation(**changed))


def test_a_recording_made_before_the_fields_existed_replays_with_messages_that_carry_them():
    """tests/fixtures/format_v1_agent.jsonl was written before ``Usage.reasoning`` and the
    answer's id existed. Its second call's context, read into today's types (which fill in
    ``reasoning: 0``) and given the id and model version a live answer now carries, matches."""
    rows = [orjson.loads(line) for line in FIXTURE.read_bytes().splitlines()]
    requests = [row for row in rows if row["type"] == "request"]
    contexts: dict[int, Any] = {
        call.call_index: call.context for call in read_recording_file(FIXTURE).calls[:2]
    }
    second = requests[1]
    recorded_answer = contexts[1]["messages"][1]
    assert recorded_answer["role"] == "assistant" and "reasoning" not in recorded_answer["usage"]
    context = Context.model_validate(contexts[1])
    live_answer = context.messages[1]
    assert isinstance(live_answer, AssistantMessage)
    live_answer.response_id, live_answer.response_model = "chatcmpl-live", "scripted-2026-01-01"
    replay = ReplayProvider(FIXTURE)
    model, options = (
        Model.model_validate(second["model"]),
        SimpleStreamOptions.model_validate(second["options"]),
    )
    replay.take(
        Model.model_validate(requests[0]["model"]), Context.model_validate(contexts[0]), options
    )
    assert replay.take(model, context, options).call_index == 1


# --------------------------------------------------------------------------- shown


def test_show_and_view_give_each_call_its_reasoning_tokens_and_who_answered(
    tmp_path, isolated_home, capsys
):
    path = tmp_path / "reasoning.jsonl"
    case = CASE["openai-completions"]
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=COMPLETIONS.chunks))
        with use_recording(path, "record"):
            asyncio.run(complete(case.model(server.url), HELLO, case.options()))
    answered = f"gpt-4o-mini-2024-07-18 {_COMPLETIONS_HEAD}"

    assert main(["recordings", "show", str(path)]) == 0
    shown = capsys.readouterr().out.splitlines()
    heading = next(line for line in shown if line.startswith("CALL"))
    assert heading.split()[-3:] == ["ANSWERED", "BY", "ERROR"]
    assert "20 in / 210 out (192 reasoning)" in shown[-1] and answered in shown[-1]

    assert main(["recordings", "show", str(path), "--json"]) == 0
    call = json.loads(capsys.readouterr().out)["calls"][0]
    assert call["usage"]["reasoning"] == 192 and call["usage"]["output"] == 210
    assert (call["response_model"], call["response_id"]) == (
        "gpt-4o-mini-2024-07-18",
        _COMPLETIONS_HEAD,
    )

    page = render_recording_page(read_recording(path))
    assert "20 in / 210 out tokens (192 reasoning)" in page and f"answered by {answered}" in page


def test_show_reads_a_file_written_before_answers_kept_their_names(isolated_home, capsys):
    assert main(["recordings", "show", str(FIXTURE), "--json"]) == 0
    calls = json.loads(capsys.readouterr().out)["calls"]
    assert {
        (call["response_id"], call["response_model"], call["usage"]["reasoning"]) for call in calls
    } == {(None, None, 0)}
    assert main(["recordings", "show", str(FIXTURE)]) == 0
    shown = capsys.readouterr().out
    assert "ANSWERED BY" not in shown and "reasoning" not in shown
    assert "answered by" not in render_recording_page(read_recording(FIXTURE))
