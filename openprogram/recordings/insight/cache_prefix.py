"""How much of each request a vendor's prompt cache could reuse: the prefix it keeps of the
call before it in its lane.

Vendors cache a prompt by its prefix, in the order they build it: the tools, then the system
prompt, then the messages (Anthropic's ``cache_control`` breakpoints, OpenAI's and Gemini's
automatic caching). A call whose request starts with the whole request of the call before it
(plus the answer and the turns it added) can be served from the cache; one that changes
anything earlier (a timestamp in the system prompt, tools in another order, an edited earlier
message, another model) pays for the rest again. For each call this module says what share of
the previous call's request it keeps as a prefix (in characters of the request as sent: a
stand-in for tokens that needs no tokenizer) and the first field where the prefix breaks,
beside the cached tokens the vendor reported (``usage.cache_read``). docs/recordings-cli.md
(``show --cache``) and docs/tutorial.md.

What a vendor is never sent is left out: timestamps, and an answer's usage, ids and model
names as a resent assistant message carries them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..replay.differences import find_first_difference
from ..text_diff import common_prefix_length

__all__ = ["CacheCall", "PrefixStep", "compare_prefix", "prefix_steps", "recording_cache_calls"]

#: Fields of a message in a request that no vendor is sent (answers' metadata, the clock).
NOT_SENT = frozenset(
    {
        "timestamp",
        "usage",
        "response_id",
        "response_model",
        "api",
        "provider",
        "model",
        "stop_reason",
        "error_message",
    }
)
#: The fields of ``model`` that select the cache: another model starts from nothing.
MODEL_FIELDS = ("id", "provider", "api")


@dataclass(frozen=True)
class CacheCall:
    """A call as this module reads it: where it was made and its request (the recorded
    payloads: ``model``, ``context``, ``options``), with the vendor's counts of its prompt."""

    call_index: int
    request: Mapping[str, Any]
    lane: str = ""
    session: int = 1
    cache_read: int | None = None
    #: Every prompt token: ``input + cache_read + cache_write``.
    prompt_tokens: int | None = None


@dataclass(frozen=True)
class PrefixStep:
    """One call against the call before it in its lane: how many characters of the previous
    request it keeps as a prefix, of how many, and where the prefix breaks (None: it keeps the
    whole previous request, so only the turns it added are new). The first call of a lane has
    no previous call."""

    call_index: int
    session: int
    lane: str
    previous: int | None
    previous_chars: int
    kept_chars: int
    breaks_at: str | None
    cache_read: int | None = None
    prompt_tokens: int | None = None
    #: The two values at ``breaks_at`` (the previous call's, this call's), for a test's failure
    #: message; never in ``show``, which prints no content.
    values: tuple[Any, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def kept_share(self) -> float | None:
        if self.previous is None:
            return None
        return self.kept_chars / self.previous_chars if self.previous_chars else 1.0

    @property
    def broken(self) -> bool:
        """The call changed something its previous call had sent: a cache miss from there."""
        return self.breaks_at is not None

    def to_json(self) -> dict[str, Any]:
        share = self.kept_share
        return {
            "call_index": self.call_index,
            "session": self.session,
            "lane": self.lane,
            "previous_call": self.previous,
            "previous_chars": self.previous_chars,
            "kept_chars": self.kept_chars,
            "kept_share": None if share is None else round(share, 4),
            "breaks_at": self.breaks_at,
            "cache_read": self.cache_read,
            "prompt_tokens": self.prompt_tokens,
        }


def _sent(message: Any) -> Any:
    if isinstance(message, Mapping):
        return {key: value for key, value in message.items() if key not in NOT_SENT}
    return message


def segments(request: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The request in the order a vendor caches it, as ``(field, value)`` pieces: the model's
    identity, each tool, the system prompt, each message."""
    model = request.get("model")
    model = model if isinstance(model, Mapping) else {}
    context = request.get("context")
    context = context if isinstance(context, Mapping) else {}
    pieces: list[tuple[str, Any]] = [("model", {name: model.get(name) for name in MODEL_FIELDS})]
    tools = context.get("tools") or []
    pieces.extend((f"context.tools[{index}]", tool) for index, tool in enumerate(tools))
    if context.get("system_prompt") is not None:
        pieces.append(("context.system_prompt", context["system_prompt"]))
    messages = context.get("messages") or []
    pieces.extend(
        (f"context.messages[{index}]", _sent(message)) for index, message in enumerate(messages)
    )
    return pieces


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode()


@dataclass(frozen=True)
class _Comparison:
    kept: int
    total: int
    breaks_at: str | None = None
    values: tuple[Any, Any] | None = None


def compare_prefix(
    previous: Mapping[str, Any], request: Mapping[str, Any]
) -> tuple[int, int, str | None]:
    """``(kept_chars, previous_chars, breaks_at)``: how much of ``previous`` ``request``
    starts with, and the first field where it stops (None: all of it)."""
    found = _compare(previous, request)
    return found.kept, found.total, found.breaks_at


def _compare(previous: Mapping[str, Any], request: Mapping[str, Any]) -> _Comparison:
    before, now = segments(previous), segments(request)
    texts = [_text(value) for _path, value in before]
    total = sum(len(text) for text in texts)
    kept = 0
    for position, ((path, value), text) in enumerate(zip(before, texts, strict=True)):
        if position >= len(now):
            return _Comparison(kept, total, path, (value, None))
        new_path, new_value = now[position]
        if new_path != path:  # a tool added or removed: the pieces after it moved
            added = new_path.startswith("context.tools")
            return _Comparison(
                kept,
                total,
                new_path if added else path,
                (None, new_value) if added else (value, None),
            )
        new_text = _text(new_value)
        difference = None if new_text == text else _first_difference(path, value, new_value)
        if difference is None:  # the same (or the same to a replay: 1 and 1.0)
            kept += len(text)
            continue
        kept += common_prefix_length(text, new_text)
        return _Comparison(kept, total, difference[0], (difference[1], difference[2]))
    return _Comparison(kept, total)


def _first_difference(path: str, value: Any, new_value: Any) -> tuple[str, Any, Any] | None:
    """Where two pieces differ; a tool by its name first (tools in another order read as
    ``context.tools[0].name``, not as whichever of their fields sorts first)."""
    if (
        path.startswith("context.tools[")
        and isinstance(value, Mapping)
        and isinstance(new_value, Mapping)
    ):
        if value.get("name") != new_value.get("name"):
            return f"{path}.name", value.get("name"), new_value.get("name")
    return find_first_difference(value, new_value, path)


def prefix_steps(calls: Iterable[CacheCall]) -> list[PrefixStep]:
    """A :class:`PrefixStep` for each call, against the call before it in the same session and
    lane, in the order given."""
    last: dict[tuple[int, str], CacheCall] = {}
    steps = []
    for call in calls:
        key = (call.session, call.lane)
        previous = last.get(key)
        last[key] = call
        if previous is None:
            steps.append(
                PrefixStep(
                    call.call_index,
                    call.session,
                    call.lane,
                    None,
                    0,
                    0,
                    None,
                    call.cache_read,
                    call.prompt_tokens,
                )
            )
            continue
        found = _compare(previous.request, call.request)
        steps.append(
            PrefixStep(
                call.call_index,
                call.session,
                call.lane,
                previous.call_index,
                found.total,
                found.kept,
                found.breaks_at,
                call.cache_read,
                call.prompt_tokens,
                found.values,
            )
        )
    return steps


def recording_cache_calls(calls: Iterable[Any]) -> list[CacheCall]:
    """:class:`CacheCall` of recorded calls (``RecordedCall``), sessions numbered in file order,
    with the usage their final messages recorded."""
    from .usage import call_usage, terminal_message

    sessions: dict[Any, int] = {}
    found = []
    for call in calls:
        usage = call_usage(terminal_message(call), call=call.call_index)
        found.append(
            CacheCall(
                call_index=call.call_index,
                request=call.request,
                lane=getattr(call, "lane", ""),
                session=sessions.setdefault(getattr(call, "session", None), len(sessions) + 1),
                cache_read=usage.cache_read,
                prompt_tokens=usage.input + usage.cache_read + usage.cache_write,
            )
        )
    return found
