"""The two directions a proxy adds to each vendor module (docs/proxy.md): a wire body read into
our request (``parse_request_body``) gives back, through ``build_request_body``, every field of
that body; and through a running proxy, the body that reaches the vendor holds every field the
client's SDK sent.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openprogram.providers.types import (
    AssistantMessage,
    Context,
    Model,
    SimpleStreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from openprogram.providers.vendors import (
    anthropic_messages,
    google_generative_ai,
    openai_completions,
    openai_responses,
)
from openprogram.providers.vendors.builtin import VENDOR_APIS
from openprogram.providers.vendors.wire import WireRequestError
from openprogram.proxy import ProxySettings, start_proxy
from tests.transcripts import anthropic_streams as a
from tests.transcripts import google_streams as g
from tests.transcripts import openai_completions_streams as c
from tests.transcripts import openai_responses_streams as r
from tests.vendor_server import ScriptedResponse, VendorServer

# --------------------------------------------------------------------------- conversations

texts = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12
).filter(str.strip)
names = st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True)
arguments = st.dictionaries(names, st.one_of(st.integers(-5, 5), texts, st.booleans()), max_size=3)
tools = st.lists(
    st.builds(
        Tool,
        name=names,
        description=texts,
        parameters=st.just({"type": "object", "properties": {"x": {"type": "string"}}}),
    ),
    max_size=2,
    unique_by=lambda tool: tool.name,
)
#: Fields with no typed option that a client may send (each vendor keeps them in extra_body).
EXTRA_FIELDS = st.dictionaries(
    st.sampled_from(["seed", "top_p", "user", "service_tier", "custom_flag"]),
    st.one_of(st.integers(0, 99), st.sampled_from(["auto", "flex", "u-1"]), st.booleans()),
    max_size=3,
)


@st.composite
def conversations(draw: Any, api: str, signature: st.SearchStrategy[str | None]) -> list[Any]:
    """User turns, and assistant turns of thinking, text and tool calls answered by results,
    as the model being called would have produced them (so its signatures go back)."""
    model = {
        "openai-completions": "gpt-4o-mini",
        "openai-responses": "gpt-5-mini",
        "anthropic-messages": "claude-haiku-4-5",
    }[api]
    provider = "anthropic" if api == "anthropic-messages" else "openai"
    messages: list[Any] = [UserMessage(content=draw(texts), timestamp=0)]
    for turn in range(draw(st.integers(0, 3))):
        content: list[Any] = []
        if draw(st.booleans()):
            content.append(
                ThinkingContent(thinking=draw(texts), thinking_signature=draw(signature))
            )
        if draw(st.booleans()):
            content.append(TextContent(text=draw(texts)))
        calls = [
            ToolCall(id=f"call_{turn}_{n}", name=draw(names), arguments=draw(arguments))
            for n in range(draw(st.integers(0, 2)))
        ]
        content.extend(calls)
        if not any(isinstance(b, TextContent | ToolCall) for b in content):
            content.append(TextContent(text=draw(texts)))
        messages.append(
            AssistantMessage(content=content, api=api, provider=provider, model=model, timestamp=0)
        )
        for call in calls:
            messages.append(
                ToolResultMessage(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    content=[TextContent(text=draw(texts))],
                    is_error=draw(st.booleans()),
                    timestamp=0,
                )
            )
        messages.append(UserMessage(content=draw(texts), timestamp=0))
    return messages


def _reasoning_item(text: str) -> str:
    return json.dumps(
        {
            "id": "rs_1",
            "type": "reasoning",
            "encrypted_content": "gAAA" + text,
            "summary": [{"type": "summary_text", "text": text}],
        }
    )


CASES = {
    "openai-completions": (
        openai_completions,
        Model(
            id="gpt-4o-mini",
            api="openai-completions",
            provider="openai",
            input=["text", "image"],
            compat={"max_tokens_field": "max_tokens", "supports_developer_role": False},
        ),
        st.sampled_from(["reasoning_content", "reasoning"]),
    ),
    "openai-responses": (
        openai_responses,
        Model(
            id="gpt-5-mini",
            api="openai-responses",
            provider="openai",
            input=["text", "image"],
            compat={"supports_developer_role": True},
        ),
        texts.map(_reasoning_item),
    ),
    "anthropic-messages": (
        anthropic_messages,
        Model(
            id="claude-haiku-4-5",
            api="anthropic-messages",
            provider="anthropic",
            input=["text", "image"],
        ),
        texts,
    ),
}


@st.composite
def requests(draw: Any, api: str) -> tuple[Model, Context, SimpleStreamOptions]:
    module, model, signature = CASES[api]
    context = Context(
        system_prompt=draw(st.one_of(st.none(), texts)),
        messages=draw(conversations(api, signature)),
        tools=draw(tools) or None,
    )
    options = SimpleStreamOptions(
        temperature=draw(st.one_of(st.none(), st.sampled_from([0.0, 0.5, 1.0]))),
        max_tokens=draw(st.one_of(st.none(), st.integers(1, 4000)))
        if api != "anthropic-messages"
        else draw(st.integers(1, 4000)),
        cache_retention=draw(st.sampled_from(["none", "short"]))
        if api == "anthropic-messages"
        else "short",
    )
    return model, context, options


@pytest.mark.parametrize("api", list(CASES))
@given(data=st.data())
def test_a_wire_body_read_into_ours_is_built_back_whole(api, data):
    """wire body -> ours -> wire body: every field comes back with its value, the ones with no
    typed option (drawn from EXTRA_FIELDS) included; reading it again reads the same."""
    module = CASES[api][0]
    body = module.build_request_body(*data.draw(requests(api)))
    body.update(data.draw(EXTRA_FIELDS))
    model, context, options = module.parse_request_body(body)
    rebuilt = module.build_request_body(model, context, options)
    assert rebuilt == body
    assert module.parse_request_body(rebuilt) == (model, context, options)


def test_gemini_fields_without_a_typed_option_travel_in_the_wire_s_names():
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {"name": "f", "args": {"a": 1}},
                        "thoughtSignature": g.CALL_SIGNATURE,
                    }
                ],
            },
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "f", "response": {"output": "ok"}}}],
            },
        ],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "generationConfig": {
            "temperature": 0.5,
            "maxOutputTokens": 99,
            "seed": 7,
            "thinkingConfig": {"thinkingBudget": 0},
        },
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        "tools": [{"googleSearch": {}}],
    }
    model, context, options = google_generative_ai.parse_request_body(
        body, model_id="gemini-2.5-flash"
    )
    assert model.id == "gemini-2.5-flash" and context.system_prompt == "Be brief."
    assert (options.temperature, options.max_tokens) == (0.5, 99)
    assert options.extra_body == {
        "generationConfig": {"seed": 7, "thinkingConfig": {"thinkingBudget": 0}},
        "safetySettings": body["safetySettings"],
        "tools": [{"googleSearch": {}}],
    }
    call, result = context.messages[1].content[0], context.messages[2]
    assert call.thought_signature == g.CALL_SIGNATURE and result.tool_call_id == call.id
    assert result.content[0].text == "ok"


@pytest.mark.parametrize(
    ("module", "body", "message"),
    [
        (openai_completions, {"model": "m"}, "body.messages is required"),
        (
            openai_completions,
            {
                "model": "m",
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "[1]"}}],
                    }
                ],
            },
            "messages[0].tool_calls[0].function.arguments must be a JSON object",
        ),
        (
            openai_completions,
            {"model": "m", "messages": [{"role": "user", "content": [7]}]},
            "messages[0].content[0] must be a JSON object",
        ),
        (
            anthropic_messages,
            {"model": "m", "messages": [], "temperature": "hot"},
            "body.temperature must be a number, not a string",
        ),
    ],
)
def test_what_ours_cannot_read_is_refused_naming_where(module, body, message):
    with pytest.raises(WireRequestError) as raised:
        module.parse_request_body(
            body, model_id="gemini-2.5-flash" if module is google_generative_ai else None
        )
    assert message in str(raised.value)


AUDIO = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
IMAGE_URL = {
    "type": "image_url",
    "image_url": {"url": "https://example.com/cat.png", "detail": "high"},
}
FILE_PART = {"type": "input_file", "file_id": "file-abc123"}
DOCUMENT = {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}
IMAGE_BY_URL = {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}}
FILE_DATA = {"fileData": {"mimeType": "application/pdf", "fileUri": "https://example.com/a.pdf"}}


@pytest.mark.parametrize(
    ("module", "body"),
    [
        (
            openai_completions,
            {
                "model": "m",
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "Hear:"}, AUDIO, IMAGE_URL],
                    }
                ],
            },
        ),
        (
            openai_completions,
            {
                "model": "m",
                "messages": [
                    {"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "Hello"},
                    {"role": "system", "content": "From now on, answer in French."},
                    {"role": "user", "content": "Bye"},
                ],
            },
        ),
        (
            openai_responses,
            {
                "model": "m",
                "input": [
                    {
                        "role": "user",
                        "content": [{"type": "input_text", "text": "Read:"}, FILE_PART],
                    },
                    {"type": "item_reference", "id": "msg_123"},
                    {"role": "developer", "content": "Be brief."},
                ],
            },
        ),
        (
            anthropic_messages,
            {
                "model": "m",
                "max_tokens": 9,
                "messages": [
                    {
                        "role": "user",
                        "content": [DOCUMENT, IMAGE_BY_URL, {"type": "text", "text": "Compare."}],
                    }
                ],
            },
        ),
        (
            google_generative_ai,
            {"contents": [{"role": "user", "parts": [FILE_DATA, {"text": "Summarise."}]}]},
        ),
    ],
    ids=[
        "completions-parts",
        "completions-mid-system",
        "responses-items",
        "anthropic-blocks",
        "gemini-file",
    ],
)
def test_what_ours_cannot_hold_is_carried_as_the_client_sent_it(module, body):
    """An image by URL, audio, a file or document, a Responses item_reference, a system message
    in mid-conversation: carried as the JSON the client sent (``RawContent``), compared as such,
    and built back exactly (before, each was refused with a 400)."""
    from openprogram.providers.types import RawContent

    model_id = "gemini-2.5-flash" if module is google_generative_ai else None
    model, context, options = module.parse_request_body(body, model_id=model_id)
    raw = [
        block
        for message in context.messages
        if isinstance(message.content, list)
        for block in message.content
        if isinstance(block, RawContent)
    ]
    assert raw and all(block.api == model.api for block in raw)
    again = module.parse_request_body(body, model_id=model_id)
    assert again[1] == context  # the same request reads the same
    changed = json.loads(
        json.dumps(body)
        .replace("example.com", "example.org")
        .replace("msg_123", "msg_456")
        .replace("French", "German")
        .replace("file-abc123", "file-xyz")
    )
    assert (
        module.parse_request_body(changed, model_id=model_id)[1] != context
    )  # and another differs
    if module is not google_generative_ai:  # Gemini's builder speaks the SDK's form
        rebuilt = module.build_request_body(model, context, options)
        for key in ("messages", "input"):
            if key in body:
                assert rebuilt[key] == body[key]


# --------------------------------------------------------------------------- through a proxy

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _completions_request(client: Any) -> None:
    client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "4 C"},
        ],
        tools=[
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
        tool_choice="auto",
        temperature=0.2,
        max_completion_tokens=300,
        seed=7,
        top_p=0.9,
        stop=["END"],
        response_format={"type": "text"},
        parallel_tool_calls=False,
        stream=True,
        stream_options={"include_usage": True},
    ).close()


def _responses_request(client: Any) -> None:
    client.responses.create(
        model="gpt-5-mini",
        instructions="Be brief.",
        input=[
            {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "4 C"},
        ],
        tools=[
            {
                "type": "function",
                "name": "get_weather",
                "description": "Weather",
                "parameters": WEATHER,
                "strict": False,
            },
            {"type": "web_search"},
        ],
        reasoning={"effort": "low", "summary": "auto"},
        include=["reasoning.encrypted_content"],
        max_output_tokens=300,
        store=False,
        metadata={"run": "7"},
        stream=True,
    ).close()


def _anthropic_request(client: Any) -> None:
    client.messages.create(
        model=a.MODEL_ID,
        max_tokens=2048,
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        messages=[
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Use the tool.", "signature": "sig-1"},
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
                        "content": "4 C",
                        "is_error": False,
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            },
        ],
        tools=[{"name": "get_weather", "description": "Weather", "input_schema": WEATHER}],
        tool_choice={"type": "auto"},
        thinking={"type": "enabled", "budget_tokens": 1024},
        stop_sequences=["END"],
        metadata={"user_id": "u-1"},
        stream=True,
    ).close()


def _gemini_request(client: Any) -> None:
    from google.genai import types

    list(
        client.models.generate_content_stream(
            model=g.MODEL_ID,
            contents=[
                types.Content(role="user", parts=[types.Part(text="Weather in Paris?")]),
                types.Content(
                    role="model",
                    parts=[
                        types.Part(
                            function_call=types.FunctionCall(
                                name="get_weather", args={"city": "Paris"}
                            ),
                            thought_signature=b"sig",
                        )
                    ],
                ),
                types.Content(
                    role="user",
                    parts=[
                        types.Part(
                            function_response=types.FunctionResponse(
                                name="get_weather", response={"output": "4 C"}
                            )
                        )
                    ],
                ),
            ],
            config=types.GenerateContentConfig(
                system_instruction="Be brief.",
                temperature=0.2,
                max_output_tokens=300,
                seed=7,
                stop_sequences=["END"],
                thinking_config=types.ThinkingConfig(thinking_budget=512),
                tools=[
                    types.Tool(
                        function_declarations=[
                            types.FunctionDeclaration(
                                name="get_weather",
                                description="Weather",
                                parameters_json_schema=WEATHER,
                            )
                        ]
                    )
                ],
                safety_settings=[
                    types.SafetySetting(category="HARM_CATEGORY_HARASSMENT", threshold="BLOCK_NONE")
                ],
                automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            ),
        )
    )


def _client(api: str, url: str, key: str) -> Any:
    if api.startswith("openai"):
        import openai

        return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
    if api == "anthropic-messages":
        import anthropic

        return anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)
    from google import genai

    return genai.Client(
        api_key=key, http_options={"base_url": url, "retry_options": {"attempts": 1}}
    )


UPSTREAM = {
    "openai-completions": (_completions_request, c.PLAIN_TEXT, "/v1"),
    "openai-responses": (_responses_request, r.PLAIN_TEXT, "/v1"),
    "anthropic-messages": (_anthropic_request, a.PLAIN_TEXT, ""),
    "google-generative-ai": (_gemini_request, g.PLAIN_TEXT, ""),
}


def test_every_vendor_of_the_list_has_its_upstream_case_here():
    assert set(UPSTREAM) == set(VENDOR_APIS)


@pytest.mark.parametrize("api", list(UPSTREAM))
def test_the_vendor_gets_every_field_the_client_s_sdk_sent(api, tmp_path):
    """The same SDK request straight to the vendor's server and through a recording proxy: the
    proxied body holds every field of the direct one, with the same value."""
    request, chunks, suffix = UPSTREAM[api]
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=chunks), ScriptedResponse(chunks=chunks))
        request(_client(api, server.url, "sk-test-direct-0123456789"))
        settings = ProxySettings(
            upstreams={api: server.url + suffix}, recording=tmp_path / "w.jsonl", mode="record"
        )
        with start_proxy(settings) as proxy:
            request(_client(api, proxy.url, "sk-test-direct-0123456789"))
    direct, proxied = (request.json for request in server.requests)
    missing = {
        key: (value, proxied.get(key)) for key, value in direct.items() if proxied.get(key) != value
    }
    assert missing == {}
    assert (
        server.requests[0].path.split("?")[0] == server.requests[1].path.split("?")[0]
        or api == "google-generative-ai"
    )


def test_a_gemini_call_that_does_not_stream_stays_one_that_does_not_stream(tmp_path):
    """The upstream is asked what the client asked (before, a ``generateContent`` call went
    upstream as ``streamGenerateContent``), and its JSON body reaches the client as it came."""
    body = json.loads(g.PLAIN_TEXT[-1].decode().removeprefix("data: "))
    whole = json.dumps(body).encode()
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=[whole], headers={"content-type": "application/json"}))
        settings = ProxySettings(
            upstreams={"google-generative-ai": server.url},
            recording=tmp_path / "g.jsonl",
            mode="record",
        )
        with start_proxy(settings) as proxy:
            client = _client(
                "google-generative-ai", proxy.url, "AIzaSy-test-0123456789"
            )  # kept: it closes when collected
            response = client.models.generate_content(model=g.MODEL_ID, contents="hi")
    assert response.response_id == body["responseId"]
    assert server.requests[0].path.split("?")[0].endswith(f"/models/{g.MODEL_ID}:generateContent")


def test_a_request_read_in_any_thread_gives_the_same_lane():
    """The lane of a conversation depends only on how it starts."""
    from openprogram.proxy.lanes import conversation_lane

    body = {
        "model": "m",
        "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}],
    }
    first = openai_completions.parse_request_body(body)[1]
    later = openai_completions.parse_request_body(
        {
            **body,
            "messages": [
                *body["messages"],
                {"role": "assistant", "content": "A"},
                {"role": "user", "content": "Q2"},
            ],
        }
    )[1]
    other = openai_completions.parse_request_body(
        {**body, "messages": [body["messages"][0], {"role": "user", "content": "Q?"}]}
    )[1]
    lanes = asyncio.run(
        asyncio.to_thread(lambda: [conversation_lane(ctx) for ctx in (first, later, other)])
    )
    assert lanes[0] == lanes[1] != lanes[2]
