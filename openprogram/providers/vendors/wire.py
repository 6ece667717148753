"""What the two inbound directions share across the vendors: a vendor's wire request read into
our types (``parse_request_body`` in each vendor module) and our events written back in the
vendor's wire format (each module's ``StreamEncoder`` and ``response_body``).

These are the directions ``openprogram proxy`` needs (see docs/proxy.md): a client speaks a
vendor's wire format to the proxy, the request travels through ``stream_simple`` like any
other call, and the events go back in the format the client asked in. What every vendor needs
for that, and nothing vendor-specific, lives here: reading a JSON body defensively, keeping the
fields our types cannot hold in ``extra_body``, server-sent-event framing, the answer's id and
model version, and noticing the blocks that reach a snapshot without events of their own.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any, TypeAlias, TypeVar

import orjson

from ..types import (
    AssistantMessage,
    Context,
    Model,
    RawContent,
    ServerToolContent,
    SimpleStreamOptions,
    Usage,
    UserMessage,
)

#: What every ``parse_request_body`` returns: the request as ``stream_simple`` takes it.
ParsedRequest: TypeAlias = tuple[Model, Context, SimpleStreamOptions]

#: Every message parsed from a wire body carries this timestamp: the wire has none, and a
#: request read twice must be equal (replay compares requests; timestamps are skipped anyway).
WIRE_TIMESTAMP = 0

_T = TypeVar("_T")


class WireRequestError(ValueError):
    """A request body that ours cannot read, or cannot carry without changing what the model
    would see (an unknown content part, an image by URL). The proxy answers it in the vendor's
    own error shape, with this message, as a 400."""


# --------------------------------------------------------------------------- reading a body

#: How deep a request body may nest (objects and arrays): far beyond any real request (a tool's
#: JSON schema nests a few dozen levels at most), and far enough below the 255 levels that
#: serialising it again allows (a recording line wraps the body in a few levels of its own).
MAX_BODY_DEPTH = 128

#: A client's value an error message may quote: short, and of the characters of a name.
_QUOTABLE = re.compile(r"[A-Za-z0-9_.:/-]{1,32}\Z")


def check_depth(body: Any, where: str = "body", limit: int = MAX_BODY_DEPTH) -> None:
    """A :class:`WireRequestError` naming where ``body`` nests deeper than ``limit`` levels,
    before anything reads it recursively (a parser, the lane's digest, the recording)."""
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(body, 0, ())]
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, dict):
            children: Iterable[tuple[str | int, Any]] = value.items()
        elif isinstance(value, list):
            children = enumerate(value)
        else:
            continue
        if depth >= limit:
            shown = "".join(
                f"[{step}]"
                if isinstance(step, int)
                else f".{step}"
                if _QUOTABLE.match(step)
                else ".?"
                for step in path[:4]
            )
            raise WireRequestError(
                f"{where}{shown}... nests deeper than {limit} levels of objects and arrays; "
                "openprogram proxy reads no deeper"
            )
        stack.extend((child, depth + 1, (*path, key)) for key, child in children)


def shown_value(value: Any) -> str:
    """A client's value as an error message may quote it: a short name-like string as it is
    (``'input_audio'``), anything else described (``a string of 48 characters``), so an answer
    never hands back a secret the body held where a type or a role belonged."""
    if isinstance(value, str) and _QUOTABLE.match(value):
        return repr(value)
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    return _json_type(value)


def shown_names(value: dict[str, Any]) -> str:
    """The field names of an object, as an error message may list them (``fileData, text``):
    a name that is no short name-like string is described, as by :func:`shown_value`."""
    names = [
        name if isinstance(name, str) and _QUOTABLE.match(name) else shown_value(name)
        for name in sorted(value)
    ]
    return ", ".join(names) or "nothing"


def field(
    value: Any, name: str, kind: type[_T] | tuple[type, ...], where: str, default: Any = None
) -> Any:
    """``value[name]`` checked to be of ``kind`` (absent or null gives ``default``), or a
    :class:`WireRequestError` naming where in the body it was."""
    if not isinstance(value, dict):
        raise WireRequestError(f"{where} must be a JSON object, not {_json_type(value)}")
    found = value.get(name)
    if found is None:
        return default
    if isinstance(found, bool) and kind in (int, float):
        raise WireRequestError(f"{where}.{name} must be a number, not a boolean")
    if not isinstance(found, kind):
        expected = (
            kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        )
        raise WireRequestError(
            f"{where}.{name} must be {_article(expected)}, not {_json_type(found)}"
        )
    return found


def required(value: Any, name: str, kind: type[_T] | tuple[type, ...], where: str) -> Any:
    found = field(value, name, kind, where)
    if found is None:
        raise WireRequestError(f"{where}.{name} is required")
    return found


def json_arguments(text: Any, where: str) -> dict[str, Any]:
    """A tool call's arguments, sent as JSON text (an empty text is no arguments)."""
    if isinstance(text, dict):
        return text
    if not isinstance(text, str):
        raise WireRequestError(f"{where} must be a JSON text, not {_json_type(text)}")
    if not text.strip():
        return {}
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError as error:
        raise WireRequestError(f"{where} is not valid JSON: {error}") from None
    if not isinstance(parsed, dict):
        raise WireRequestError(f"{where} must be a JSON object, not {_json_type(parsed)}")
    return parsed


def unsupported(kind: str, where: str) -> WireRequestError:
    """The error for a part ours cannot hold: carrying it silently changed would change what
    the model sees, so the request is refused with what to change."""
    return WireRequestError(
        f"{where}: openprogram proxy cannot carry a {kind} (it has no place in openprogram's "
        "types); send it another way or leave it out"
    )


def raw_part(api: str, part: Any, where: str) -> RawContent:
    """A part ours cannot hold, kept as the JSON the client sent (docs/proxy.md, "What the
    client gets"): compared as it is, sent back as it is to the same api."""
    if not isinstance(part, dict):
        raise WireRequestError(f"{where} must be a JSON object")
    return RawContent(api=api, payload=part)


def raw_message(api: str, message: Any, where: str) -> UserMessage:
    """A whole message or input item ours cannot hold (a system message in mid-conversation, a
    Responses ``item_reference``), kept as the JSON the client sent, alone in a user message."""
    if not isinstance(message, dict):
        raise WireRequestError(f"{where} must be a JSON object")
    return UserMessage(
        content=[RawContent(api=api, payload=message, message=True)], timestamp=WIRE_TIMESTAMP
    )


def raw_message_of(message: Any, api: str) -> dict[str, Any] | None:
    """The JSON of a message :func:`raw_message` made for ``api``, or None (any other message,
    or one of another api, which is left out)."""
    content = message.content if isinstance(message, UserMessage) else None
    if isinstance(content, list) and len(content) == 1:
        block = content[0]
        if isinstance(block, RawContent) and block.message:
            return block.payload if block.api == api else {}
    return None


def text_of_parts(content: Any, where: str, kinds: tuple[str, ...]) -> str:
    """A request's message content as text: a string, or an array of text parts of ``kinds``
    (``("text",)`` for Chat Completions, ``("input_text",)`` for a Responses input) joined;
    any other part is refused naming where it is."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise WireRequestError(f"{where} must be a string or an array of parts")
    texts = []
    for position, part in enumerate(content):
        kind = field(part, "type", str, f"{where}[{position}]")
        if kind not in kinds:
            raise unsupported(f"{shown_value(kind)} part here", f"{where}[{position}]")
        texts.append(required(part, "text", str, f"{where}[{position}]"))
    return "".join(texts)


def leading_system(
    messages: list[Any], field: str, kinds: tuple[str, ...]
) -> tuple[str | None, int]:
    """The system (or developer) messages a request's ``field`` starts with, as one system
    prompt (their texts joined by a blank line), and the position of the first other message.
    Chat Completions and Responses both open a conversation this way."""
    texts: list[str] = []
    for position, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("system", "developer"):
            return ("\n\n".join(texts) if texts else None), position
        texts.append(text_of_parts(message.get("content"), f"{field}[{position}].content", kinds))
    return ("\n\n".join(texts) if texts else None), len(messages)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _article(name: str) -> str:
    words = {
        "dict": "an object",
        "list": "an array",
        "str": "a string",
        "int": "a number",
        "float": "a number",
    }
    return " or ".join(dict.fromkeys(words.get(part, part) for part in name.split(" or ")))


def carried_fields(
    body: dict[str, Any], rebuilt: dict[str, Any], typed: Iterable[str]
) -> dict[str, Any] | None:
    """The fields of ``body`` that the typed request does not reproduce, for ``extra_body``.

    ``rebuilt`` is the vendor's ``build_request_body`` of what was parsed. A top-level field
    whose value it does not give back exactly (one with no typed option, such as ``seed``; a
    tool list with fields a :class:`~openprogram.providers.types.Tool` cannot hold; an option
    the vendor module words differently) travels as the client sent it, and since every vendor
    merges ``extra_body`` last, the body that leaves for the vendor holds every field of the
    client's. ``typed`` names the fields parsed into the conversation itself (``messages``,
    ``system``), which the request carries once."""
    skip = set(typed)
    extra = {
        key: value for key, value in body.items() if key not in skip and rebuilt.get(key) != value
    }
    return extra or None


# --------------------------------------------------------------------------- writing a stream


def sse_frame(data: Any, event: str | None = None) -> bytes:
    """One server-sent event: ``event:`` when the format names its events, then the JSON."""
    payload = data if isinstance(data, bytes) else orjson.dumps(data)
    head = b"event: " + event.encode() + b"\n" if event else b""
    return head + b"data: " + payload + b"\n\n"


def wire_id(prefix: str, message: AssistantMessage) -> str:
    """A response id for a message: stable for the same call (a replay answers with the id
    the recorded run gave), so the SDK objects of a replay equal those of the live run."""
    seed = f"{message.timestamp}:{message.api}:{message.model}".encode()
    return prefix + hashlib.sha256(seed).hexdigest()[:24]


def answer_id(prefix: str, message: AssistantMessage) -> str:
    """The id an answer reaches a client with: the vendor's own (``response_id``) where the
    message has it, else the stable :func:`wire_id` (a message recorded before answers kept
    their ids)."""
    return message.response_id or wire_id(prefix, message)


def answer_model(message: AssistantMessage) -> str:
    """The model an answer names: the version that answered (``response_model``) where the
    message has it, else the model that was asked."""
    return message.response_model or message.model


def reasoning_tokens(usage: Usage) -> int:
    """Of the output tokens, those the vendor reported as reasoning (0 when unknown)."""
    return usage.reasoning


def prompt_tokens(usage: Usage) -> int:
    """The prompt count as OpenAI, Gemini and our usage split it: ours keeps cached and
    cache-written tokens apart from ``input``; the vendors count them inside the prompt."""
    return usage.input + usage.cache_read + usage.cache_write


class ServerBlockWatch:
    """Finds the server tool blocks a snapshot holds that no event announced. Server-side tool
    activity has no events in our protocol (see docs/vendors.md): it appears in the next
    ``partial`` and in the final message, and an encoder writes it when it first sees it."""

    def __init__(self) -> None:
        self.seen: dict[int, ServerToolContent] = {}

    def new_blocks(self, message: AssistantMessage) -> list[tuple[int, ServerToolContent]]:
        found = []
        for index, block in enumerate(message.content):
            if isinstance(block, ServerToolContent) and index not in self.seen:
                self.seen[index] = block
                found.append((index, block))
        return found

    def changed_blocks(self, message: AssistantMessage) -> list[tuple[int, ServerToolContent]]:
        """Blocks already seen whose final form differs (a Responses item completed later)."""
        changed = []
        for index, old in list(self.seen.items()):
            block = message.content[index] if index < len(message.content) else None
            if isinstance(block, ServerToolContent) and block != old:
                self.seen[index] = block
                changed.append((index, block))
        return changed


# --------------------------------------------------------------------------- reading an answer


class JsonView(dict[str, Any]):
    """A JSON object the vendor sent, readable the way the vendor's SDK object is: ``view.name``
    is the field (a nested object again a view, a list a list of views), None when absent.

    The stream translators were written against the SDKs' objects; the proxy's passthrough
    reads the vendor's answer from the bytes it forwards, and builds no SDK object for it (one
    costs 50-300 microseconds a chunk, more than the rest of the proxy's work). Being a dict,
    a view passes wherever the SDK hands out plain dicts (fields its model does not declare)
    and is its own ``model_dump``. Every attribute is looked up here first (a translator asks
    for many fields a chunk does not have, and a miss through ``__getattr__`` costs an
    exception each); a dict's own methods stay methods. Subclasses map names to the wire's
    (:meth:`field_value`)."""

    __slots__ = ()

    def __getattribute__(self, name: str) -> Any:
        if name in _OWN_NAMES or name[:2] == "__":
            return _object_attribute(self, name)
        return _object_attribute(self, "field_value")(name)

    def field_value(self, name: str) -> Any:
        return self.view_of(_dict_get(self, name))

    def view_of(self, value: Any) -> Any:
        kind = type(value)
        if kind is dict:
            return type(self)(value)
        if kind is list:
            view = type(self)
            return [view(item) if type(item) is dict else item for item in value]
        return value

    @property
    def model_extra(self) -> dict[str, Any]:
        return self

    def model_dump(self, **_: Any) -> dict[str, Any]:
        return dict(self)


_dict_get = dict.get
_object_attribute = object.__getattribute__
#: The names a view answers itself: a dict's methods and what it imitates of an SDK object.
_OWN_NAMES = frozenset(dir(dict)) | {"field_value", "view_of", "model_extra", "model_dump"}


class SseDecoder:
    """Server-sent events from bytes in whatever pieces they arrive (the event-stream format:
    lines end with ``\n``, ``\r\n`` or ``\r``; an empty line ends an event; ``data:`` lines
    join with ``\n``; comments and other fields are skipped but ``event:``). ``feed`` returns
    the ``(event, data)`` of every event completed so far; ``flush`` the one the end of the
    stream completes."""

    __slots__ = ("_buffer", "_event", "_data")

    def __init__(self) -> None:
        self._buffer = b""
        self._event: str | None = None
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[tuple[str | None, str]]:
        buffer = self._buffer + chunk if self._buffer else chunk
        if b"\r" in buffer:
            if buffer.endswith(b"\r"):  # a \r\n may be split across pieces
                self._buffer = b"\r"
                buffer = buffer[:-1]
            else:
                self._buffer = b""
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        else:
            self._buffer = b""
        lines = buffer.split(b"\n")
        self._buffer = lines.pop() + self._buffer
        events: list[tuple[str | None, str]] = []
        for line in lines:
            self._line(line, events)
        return events

    def flush(self) -> list[tuple[str | None, str]]:
        events: list[tuple[str | None, str]] = []
        if self._buffer:
            self._line(self._buffer.rstrip(b"\r"), events)
            self._buffer = b""
        self._line(b"", events)
        return events

    def _line(self, line: bytes, events: list[tuple[str | None, str]]) -> None:
        if not line:
            if self._data:
                events.append((self._event, "\n".join(self._data)))
            self._event, self._data = None, []
            return
        name, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value.decode("utf-8", "replace"))
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")


__all__ = [
    "JsonView",
    "answer_id",
    "answer_model",
    "reasoning_tokens",
    "ParsedRequest",
    "ServerBlockWatch",
    "SseDecoder",
    "WIRE_TIMESTAMP",
    "WireRequestError",
    "answer_id",
    "answer_model",
    "carried_fields",
    "check_depth",
    "field",
    "json_arguments",
    "prompt_tokens",
    "raw_message",
    "raw_message_of",
    "raw_part",
    "required",
    "shown_names",
    "shown_value",
    "sse_frame",
    "unsupported",
    "wire_id",
]
