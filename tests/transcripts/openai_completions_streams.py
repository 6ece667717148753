"""Byte-exact Chat Completions SSE transcripts, written from the documented stream format:
``chat.completion.chunk`` objects whose single choice carries a ``delta``, ``finish_reason`` on the
last choice chunk, then (with ``stream_options.include_usage``) a chunk with empty ``choices`` and
the ``usage``, then ``data: [DONE]``. Every chunk carries ``"usage":null`` until then, as OpenAI
sends it. The JSON text is written as given, not re-serialised."""

from __future__ import annotations

from tests.vendor_server import sse


def sse_frames(*payloads: str, done: bool = False) -> list[bytes]:
    return sse(*payloads, done=done)


_HEAD = (
    '{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk",'
    '"created":1741570283,"model":"gpt-4o-mini-2024-07-18","service_tier":"default",'
    '"system_fingerprint":"fp_06737a9306",'
)


def chunk(delta: str, finish: str = "null") -> str:
    """One choice chunk; ``delta`` and ``finish`` are JSON text, written as they are."""
    return (
        f'{_HEAD}"choices":[{{"index":0,"delta":{delta},"logprobs":null,'
        f'"finish_reason":{finish}}}],"usage":null}}'
    )


def usage_chunk(prompt: int, completion: int, cached: int = 0, reasoning: int = 0) -> str:
    """The usage chunk; ``reasoning`` of the ``completion`` tokens were reasoning."""
    return (
        f'{_HEAD}"choices":[],"usage":{{"prompt_tokens":{prompt},"completion_tokens":{completion},'
        f'"total_tokens":{prompt + completion},"prompt_tokens_details":{{"cached_tokens":{cached},'
        f'"audio_tokens":0}},"completion_tokens_details":{{"reasoning_tokens":{reasoning},"audio_tokens":0,'
        f'"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}}}}'
    )


ROLE = chunk('{"role":"assistant","content":"","refusal":null}')
STOP = chunk("{}", '"stop"')
TOOL_STOP = chunk("{}", '"tool_calls"')

PLAIN_TEXT = sse_frames(
    ROLE,
    chunk('{"content":"Hello"}'),
    chunk('{"content":" world"}'),
    chunk('{"content":"!"}'),
    STOP,
    usage_chunk(19, 10, cached=6),
    done=True,
)

# Interleaved reasoning (as DeepSeek and Kimi stream it between answers) makes several text blocks.
SEVERAL_TEXT_BLOCKS = sse_frames(
    ROLE,
    chunk('{"content":"First part."}'),
    chunk('{"reasoning_content":"Now the second."}'),
    chunk('{"content":"Second"}'),
    chunk('{"content":" part."}'),
    STOP,
    usage_chunk(12, 8),
    done=True,
)


def thinking_then_text(field: str) -> list[bytes]:
    return sse_frames(
        chunk(f'{{"role":"assistant","content":null,"{field}":""}}'),
        chunk(f'{{"content":null,"{field}":"The user"}}'),
        chunk(f'{{"content":null,"{field}":" greets me."}}'),
        chunk('{"content":"Hi there."}'),
        STOP,
        usage_chunk(9, 7),
        done=True,
    )


ONE_TOOL_CALL = sse_frames(
    chunk(
        '{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA",'
        '"type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null}'
    ),
    *[
        chunk(f'{{"tool_calls":[{{"index":0,"function":{{"arguments":{piece}}}}}]}}')
        for piece in [
            '"{\\""',
            '"city"',
            '"\\":\\""',
            '"Par"',
            '"is\\","',
            '"\\"unit"',
            '"\\":\\"c\\"}"',
        ]
    ],
    TOOL_STOP,
    usage_chunk(80, 20),
    done=True,
)

SEVERAL_TOOL_CALLS = sse_frames(
    chunk('{"role":"assistant","content":"Checking both."}'),
    chunk(
        '{"tool_calls":[{"index":0,"id":"call_paris","type":"function",'
        '"function":{"name":"get_weather","arguments":""}}]}'
    ),
    chunk('{"tool_calls":[{"index":0,"function":{"arguments":"{\\"city\\": "}}]}'),
    chunk('{"tool_calls":[{"index":0,"function":{"arguments":"\\"Paris\\"}"}}]}'),
    chunk(
        '{"tool_calls":[{"index":1,"id":"call_rome","type":"function",'
        '"function":{"name":"get_weather","arguments":""}}]}'
    ),
    chunk('{"tool_calls":[{"index":1,"function":{"arguments":"{\\"ci"}}]}'),
    chunk('{"tool_calls":[{"index":1,"function":{"arguments":"ty\\": \\"Rome\\"}"}}]}'),
    TOOL_STOP,
    usage_chunk(90, 40),
    done=True,
)

AGENT_TOOL_TURN = sse_frames(
    chunk(
        '{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_echo","type":"function",'
        '"function":{"name":"echo","arguments":""}}]}'
    ),
    chunk('{"tool_calls":[{"index":0,"function":{"arguments":"{\\"value\\":"}}]}'),
    chunk('{"tool_calls":[{"index":0,"function":{"arguments":"\\"hi\\"}"}}]}'),
    TOOL_STOP,
    usage_chunk(30, 10),
    done=True,
)
AGENT_TEXT_TURN = sse_frames(
    ROLE, chunk('{"content":"It said hi."}'), STOP, usage_chunk(50, 5), done=True
)

# --------------------------------------------------------------------------- compatible servers
# Shapes of compatible servers, written from their documentation (see docs/vendors.md).

#: OpenRouter routing to some hosts, Snowflake Cortex: usage and [DONE], never a finish_reason.
NO_FINISH_REASON_TEXT = sse_frames(
    ROLE, chunk('{"content":"Hello"}'), chunk('{"content":" there"}'), usage_chunk(11, 2), done=True
)
NO_FINISH_REASON_TOOL = sse_frames(
    chunk(
        '{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_nf","type":"function",'
        '"function":{"name":"get_weather","arguments":""}}]}'
    ),
    chunk('{"tool_calls":[{"index":0,"function":{"arguments":"{\\"city\\":"}}]}'),
    chunk('{"tool_calls":[{"index":0,"function":{"arguments":"\\"Oslo\\"}"}}]}'),
    usage_chunk(40, 9),
    done=True,
)
#: The same stream cut off: no finish_reason and no [DONE].
NO_FINISH_REASON_CUT = sse_frames(ROLE, chunk('{"content":"Hel"}'))

#: OpenRouter's reasoning_details (beside its plain ``reasoning`` field): text items streamed by
#: index, their signature last, then an encrypted item a later request must send back.
ENCRYPTED_DETAIL = "gAAAAABoRz1encryptedreasoning"
REASONING_DETAILS = sse_frames(
    chunk(
        '{"role":"assistant","content":"","reasoning":"The user",'
        '"reasoning_details":[{"type":"reasoning.text","text":"The user","format":"anthropic-claude-v1","index":0}]}'
    ),
    chunk(
        '{"content":"","reasoning":" greets me.",'
        '"reasoning_details":[{"type":"reasoning.text","text":" greets me.","format":"anthropic-claude-v1","index":0}]}'
    ),
    chunk(
        '{"content":"","reasoning_details":[{"type":"reasoning.text","signature":"sig-0","format":"anthropic-claude-v1","index":0},'
        f'{{"type":"reasoning.encrypted","data":"{ENCRYPTED_DETAIL}","format":"anthropic-claude-v1","index":1}}]}}'
    ),
    chunk('{"content":"Hi there."}'),
    STOP,
    usage_chunk(9, 7),
    done=True,
)

#: Mistral reasoning models (Magistral): content is a list of typed parts.
MISTRAL_LIST_CONTENT = sse_frames(
    chunk('{"role":"assistant","content":""}'),
    chunk('{"content":[{"type":"thinking","thinking":[{"type":"text","text":"Two plus"}]}]}'),
    chunk('{"content":[{"type":"thinking","thinking":[{"type":"text","text":" two."}]}]}'),
    chunk('{"content":[{"type":"text","text":"It is 4."}]}'),
    STOP,
    usage_chunk(10, 6),
    done=True,
)

#: Groq compound models report the tools they ran in ``executed_tools``.
GROQ_EXECUTED_TOOLS = sse_frames(
    ROLE,
    chunk(
        '{"executed_tools":[{"index":0,"type":"search","arguments":"{\\"query\\": \\"Oslo weather\\"}",'
        '"output":"Title: Oslo forecast\\nURL: https://weather.example/oslo\\nContent: 4 C, rain"}]}'
    ),
    chunk('{"content":"It is 4 C in Oslo."}'),
    # Groq puts the usage under x_groq in the last chunk
    chunk("{}", '"stop"')[:-1]
    + ',"x_groq":{"id":"req_01","usage":{"prompt_tokens":120,"completion_tokens":8,"total_tokens":128}}}',
    done=True,
)

#: OpenRouter web search: url_citation annotations on the delta.
OPENROUTER_ANNOTATIONS = sse_frames(
    ROLE,
    chunk('{"content":"Rain in Oslo."}'),
    chunk(
        '{"content":"","annotations":[{"type":"url_citation","url_citation":{"url":"https://weather.example/oslo",'
        '"title":"Oslo forecast","content":"4 C, rain","start_index":0,"end_index":13}}]}'
    ),
    STOP,
    usage_chunk(50, 4),
    done=True,
)

#: ``PLAIN_TEXT`` as the vendor answers a call that does not stream: one JSON body.
PLAIN_TEXT_WHOLE = (
    b'{"id":"chatcmpl-test","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini",'
    b'"choices":[{"index":0,"message":{"role":"assistant","content":"Hello world!","refusal":null},'
    b'"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,'
    b'"prompt_tokens_details":{"cached_tokens":6}}}'
)
