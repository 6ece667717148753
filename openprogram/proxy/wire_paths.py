"""Where a message of openprogram's request lies in the client's request body, for the replay
mismatch a proxy answers with (docs/proxy.md).

A mismatch names the field of openprogram's request (``context.messages[2].content[0].text``);
the client knows its own body, where the system prompt may be a message of its own (Chat
Completions), tool results may share one message (Anthropic, Gemini) and an answer may be
several items (Responses). Rather than a rule per format, the body's list of messages is read
again cut short: the item a message begins at is the shortest prefix of the list that reads
into more messages than that message's index.
"""

from __future__ import annotations

import re
from typing import Any

from ..providers.vendors.builtin import VENDORS
from ..providers.vendors.wire import WireRequestError
from .formats import WireFormat

#: The key of the body's list of messages (or items), per api.
MESSAGE_LISTS = {vendor.api: vendor.messages_key for vendor in VENDORS}

_MESSAGE_FIELD = re.compile(r"context\.messages\[(\d+)\]")


def client_path(
    wire_format: WireFormat, body: dict[str, Any], field_path: str, model_id: str | None = None
) -> str | None:
    """The client's name of the message ``field_path`` lies in (``messages[3]``), or None when
    the field is no message's or the body cannot say."""
    found = _MESSAGE_FIELD.match(field_path)
    key = MESSAGE_LISTS.get(wire_format.api)
    items = body.get(key) if key else None
    if found is None or key is None or not isinstance(items, list):
        return None
    index = int(found.group(1))

    def messages_in(count: int) -> int | None:
        try:
            _, context, _ = wire_format.vendor.parse_request_body(
                {**body, key: items[:count]}, model_id=model_id
            )
        except (WireRequestError, ValueError):
            return None
        return len(context.messages)

    low, high = 1, len(items)  # the shortest prefix reading into more than `index` messages
    if (messages_in(high) or 0) <= index:
        return None
    while low < high:
        middle = (low + high) // 2
        count = messages_in(middle)
        if count is None:
            return None
        if count > index:
            high = middle
        else:
            low = middle + 1
    return f"{key}[{low - 1}]"


def with_client_path(
    message: str,
    wire_format: WireFormat,
    body: dict[str, Any],
    field_path: str,
    model_id: str | None,
) -> str:
    """A mismatch's message with a line under its first naming the message by the client's
    index too (``context.messages[2] is messages[3] of the request body``)."""
    path = client_path(wire_format, body, field_path, model_id)
    if path is None:
        return message
    ours = _MESSAGE_FIELD.match(field_path)
    assert ours is not None  # client_path found a message field
    first, newline, rest = message.partition("\n")
    return f"{first}\n({ours.group(0)} is {path} of the request body){newline}{rest}"


__all__ = ["MESSAGE_LISTS", "client_path", "with_client_path"]
