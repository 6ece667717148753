"""Best-effort parsing of JSON that is still arriving.

Tool-call arguments stream in as string fragments; the ``partial`` snapshot of a
``toolcall_delta`` event shows the arguments parsed so far. The complete text is always parsed
strictly at ``toolcall_end``; this module only has to be useful and never raise.
"""

from __future__ import annotations

from typing import Any

import orjson


def parse_streaming_json(text: str) -> dict[str, Any]:
    """Parse possibly incomplete JSON object text; returns ``{}`` when nothing usable is there."""
    if not text or not text.strip():
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        value = _parse_incomplete(text)
    return value if isinstance(value, dict) else {}


def _parse_incomplete(text: str) -> Any:
    """Close the open strings and containers of a JSON prefix, dropping a dangling token."""
    closers: list[str] = []
    in_string = False
    escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            closers.append("}" if char == "{" else "]")
        elif char in "}]" and closers:
            closers.pop()

    candidate = text
    if in_string:
        if escaped:
            candidate = candidate[:-1]
        candidate += '"'
    # Try closing as is, then progressively drop the unfinished tail (a dangling key, a
    # half-written number or literal, a trailing comma or colon).
    for attempt in _trimmed_candidates(candidate):
        try:
            return orjson.loads(attempt + "".join(reversed(closers)))
        except orjson.JSONDecodeError:
            continue
    return {}


def _trimmed_candidates(candidate: str):
    yield candidate
    stripped = candidate.rstrip()
    while stripped:
        last = stripped[-1]
        if last in ",:":
            stripped = stripped[:-1].rstrip()
            yield stripped
            continue
        if last == '"':
            # drop a whole trailing string (possibly a key without a value)
            start = _string_start(stripped)
            if start is None:
                return
            stripped = stripped[:start].rstrip()
            yield stripped
            continue
        if last in "}]":
            return
        # a bare token (number, true/false/null fragment)
        index = len(stripped) - 1
        while index >= 0 and stripped[index] not in ",:[{ \n\t\r":
            index -= 1
        stripped = stripped[: index + 1].rstrip()
        yield stripped


def _string_start(text: str) -> int | None:
    """Index of the opening quote of the string that ends ``text``."""
    index = len(text) - 2
    while index >= 0:
        if text[index] == '"':
            backslashes = 0
            probe = index - 1
            while probe >= 0 and text[probe] == "\\":
                backslashes += 1
                probe -= 1
            if backslashes % 2 == 0:
                return index
        index -= 1
    return None
