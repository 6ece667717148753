"""Byte-exact Gemini ``streamGenerateContent?alt=sse`` transcripts, written from the documented
format (https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent): each
event is ``data: <GenerateContentResponse JSON>`` followed by a CRLF blank line; text streams as
parts that continue each other, thought summaries are parts with ``thought: true``, function
calls arrive whole, ``thoughtSignature`` is base64, and usage metadata is cumulative."""

from __future__ import annotations

import base64
import json

MODEL_ID = "gemini-2.5-flash"
RESPONSE_ID = "tTCwacuEBMvnitYP06qsgQY"

THOUGHT_SIGNATURE = base64.b64encode(b"thought-signature-bytes").decode()
TEXT_SIGNATURE = base64.b64encode(b"text-signature-bytes").decode()
CALL_SIGNATURE = base64.b64encode(b"call-signature-bytes").decode()
#: Signatures whose base64 uses ``+`` and ``/``: kept in Gemini's standard alphabet, not the
#: URL-safe one the SDK renders bytes in.
CODE_SIGNATURE = base64.b64encode(b"\xfb\xef\xbe code-signature \xff\xfe").decode()
SEARCH_SIGNATURE = base64.b64encode(b"\xfb\xff search-signature \xfe\xbf").decode()


def frame(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\r\n\r\n"


def chunk(
    *parts: dict, finish: str | None = None, usage: dict | None = None, metadata: dict | None = None
) -> bytes:
    """One response chunk; ``metadata`` adds candidate fields after ``finishReason``
    (``groundingMetadata``, ``urlContextMetadata``)."""
    candidate: dict = {"content": {"parts": list(parts), "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    candidate.update(metadata or {})
    payload: dict = {"candidates": [candidate]}
    if usage is not None:
        payload["usageMetadata"] = usage
    payload["modelVersion"] = MODEL_ID
    payload["responseId"] = RESPONSE_ID
    return frame(payload)


def usage(prompt: int, candidates: int, *, cached: int = 0, thoughts: int = 0) -> dict:
    body = {"promptTokenCount": prompt, "candidatesTokenCount": candidates}
    if cached:
        body["cachedContentTokenCount"] = cached
    if thoughts:
        body["thoughtsTokenCount"] = thoughts
    body["totalTokenCount"] = prompt + candidates + thoughts
    return body


def call(name: str, args: dict, **extra) -> dict:
    return {"functionCall": {"name": name, "args": args}, **extra}


PLAIN_TEXT = [
    chunk({"text": "Hello"}, usage={"promptTokenCount": 120, "totalTokenCount": 120}),
    chunk({"text": ", world"}),
    chunk({"text": "!"}, finish="STOP", usage=usage(120, 4, cached=100)),
]

# A function call separates two text blocks.
SEVERAL_TEXT_BLOCKS = [
    chunk({"text": "Before "}),
    chunk({"text": "the call."}, call("ping", {})),
    chunk({"text": "After the call."}, finish="STOP", usage=usage(10, 9)),
]

THINKING_THEN_TEXT = [
    chunk({"text": "Considering", "thought": True}),
    chunk({"text": " the sum.", "thought": True, "thoughtSignature": THOUGHT_SIGNATURE}),
    chunk({"text": "It is ", "thoughtSignature": TEXT_SIGNATURE}),
    chunk({"text": "4."}, finish="STOP", usage=usage(30, 3, thoughts=20)),
]

ONE_TOOL_CALL = [
    chunk(
        call(
            "get_weather",
            {"location": "San Francisco, CA", "unit": "celsius"},
            thoughtSignature=CALL_SIGNATURE,
        ),
        finish="STOP",
        usage=usage(300, 12),
    ),
]

SEVERAL_TOOL_CALLS = [
    chunk({"text": "Checking both."}),
    chunk(call("get_weather", {"city": "Paris"})),
    chunk(call("get_weather", {"city": "Rome"}), call("get_time", {"tz": "Europe/Rome"})),
    chunk({"text": ""}, finish="STOP", usage=usage(310, 40)),
]

USAGE_ONLY_FINAL = [
    chunk({"text": "ok"}),
    chunk({"text": ""}, finish="MAX_TOKENS"),
    frame(
        {
            "usageMetadata": usage(50, 1, cached=20),
            "modelVersion": MODEL_ID,
            "responseId": RESPONSE_ID,
        }
    ),
]

BREAKS_OFF = [
    chunk({"text": "Partial "}),
    chunk({"text": "answer"}),
    chunk({"text": " never finished"}, finish="STOP"),
]
BREAK_AFTER = 1

SAFETY_STOP = [
    chunk({"text": "Some"}),
    chunk({"text": ""}, finish="SAFETY"),
]

NO_FINISH_REASON = [chunk({"text": "Cut"})]

MALFORMED = [chunk({"text": "Hi"}), b'data: {"candidates": [{"content":\r\n\r\n']


def error_body(code: int, status: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message, "status": status}}).encode()


AGENT_TOOL_TURN = [chunk(call("echo", {"value": "hi"}), finish="STOP", usage=usage(50, 5))]
AGENT_TEXT_TURN = [
    chunk({"text": "The tool said "}),
    chunk({"text": "echo:hi."}, finish="STOP", usage=usage(80, 6)),
]


# --------------------------------------------------------------------------- server-side tools
# Written from the Gemini code execution and URL context documentation.

CODE_EXECUTION = [
    chunk({"text": "Let me compute."}),
    chunk(
        {
            "executableCode": {"language": "PYTHON", "code": "print(2 + 2)\n"},
            "thoughtSignature": CODE_SIGNATURE,
        }
    ),
    chunk({"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "4\n"}}),
    chunk({"text": "It is 4."}, finish="STOP", usage=usage(40, 30)),
]

URL_CONTEXT_METADATA = {
    "urlMetadata": [
        {
            "retrievedUrl": "https://example.com/hello",
            "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_SUCCESS",
        }
    ]
}

#: A URL-context (web fetch) answer: the fetched page's tokens are toolUsePromptTokenCount.
TOOL_USE_PROMPT = [
    chunk({"text": "The page says hi."}),
    chunk(
        {"text": ""},
        finish="STOP",
        usage={
            "promptTokenCount": 32,
            "candidatesTokenCount": 62,
            "toolUsePromptTokenCount": 4610,
            "totalTokenCount": 4704,
        },
        metadata={"urlContextMetadata": URL_CONTEXT_METADATA},
    ),
]

# --------------------------------------------------------------------------- Gemini 3
# Written from the google-genai types (Part.tool_call / Part.tool_response, ToolType,
# GroundingMetadata): Gemini 3 shows its own Google Search as a signed toolCall part and the
# search's toolResponse part, then the answer, with the grounding on the last chunk.

GEMINI_3_ID = "gemini-3-pro-preview"

SEARCH_CALL_PART = {
    "toolCall": {
        "id": "srch_1",
        "toolType": "GOOGLE_SEARCH_WEB",
        "args": {"queries": ["Oslo weather"]},
    },
    "thoughtSignature": SEARCH_SIGNATURE,
}
SEARCH_RESPONSE_PART = {
    "toolResponse": {
        "id": "srch_1",
        "toolType": "GOOGLE_SEARCH_WEB",
        "response": {
            "results": [{"title": "Oslo forecast", "url": "https://weather.example/oslo"}]
        },
    }
}
GROUNDING_METADATA = {
    "webSearchQueries": ["Oslo weather"],
    "searchEntryPoint": {"renderedContent": "<div>Oslo weather</div>"},
    "groundingChunks": [{"web": {"uri": "https://weather.example/oslo", "title": "Oslo forecast"}}],
    "groundingSupports": [
        {"segment": {"endIndex": 18, "text": "It is 4 C in Oslo."}, "groundingChunkIndices": [0]}
    ],
}
GOOGLE_SEARCH = [
    chunk(SEARCH_CALL_PART),
    chunk(SEARCH_RESPONSE_PART),
    chunk({"text": "It is 4 C in Oslo."}),
    chunk(
        {"text": ""},
        finish="STOP",
        usage=usage(40, 12),
        metadata={"groundingMetadata": GROUNDING_METADATA},
    ),
]

#: Gemini 3 signs its function calls: each call of this turn has its own signature.
ECHO_SIGNATURES = (
    base64.b64encode(b"\xfa echo-hi signature \xfb").decode(),
    base64.b64encode(b"\xfc echo-ho signature \xfd").decode(),
)
AGENT_SIGNED_TOOL_TURN = [
    chunk(
        call("echo", {"value": "hi"}, thoughtSignature=ECHO_SIGNATURES[0]),
        call("echo", {"value": "ho"}, thoughtSignature=ECHO_SIGNATURES[1]),
        finish="STOP",
        usage=usage(50, 9),
    )
]
AGENT_SIGNED_TEXT_TURN = [chunk({"text": "Both echoed."}, finish="STOP", usage=usage(90, 4))]

#: Parallel calls as Gemini signs them: only the first carries a signature.
PARALLEL_FIRST_SIGNED = [
    chunk(
        call("get_weather", {"city": "Paris"}, thoughtSignature=CALL_SIGNATURE),
        call("get_weather", {"city": "Rome"}),
        finish="STOP",
        usage=usage(60, 10),
    )
]

#: maxOutputTokens reached.
MAX_TOKENS = [chunk({"text": "It was a dark"}, finish="MAX_TOKENS", usage=usage(8, 4))]
