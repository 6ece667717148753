"""Render a recording as the conversation it captured, for ``recordings show --conversation``.

Each call's request holds the whole conversation so far; printing, for every call, only the
messages its predecessor had not shown yet (and then the call's answer) tells the session once,
in order. A call whose context does not continue the previous one starts a new conversation.

What is printed is redacted again on the way out, as ``show --content`` is: the file was
redacted when it was written, but a file edited by hand or copied in from elsewhere may not be.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from ..redaction import remove_secret_values
from .comparison import final_message
from .inspection import reasoning_note

THINKING_PREVIEW = 80


def _comparable(message: dict[str, Any]) -> bytes:
    """What a client resends of a message, to tell whether a call continues the previous one:
    its role and content. An answer comes back in the next request as the client resends it,
    which the proxy reads without usage, stop reason or timestamp, and an assistant message
    keeps only its text and tool calls (name and arguments: a client drops thinking, and the
    ids of a vendor that has none are made up anew on each reading)."""
    content = message.get("content")
    if message.get("role") == "assistant" and isinstance(content, list):
        content = [_resent_block(block) for block in content if _is_resent(block)]
    return orjson.dumps([message.get("role"), content], option=orjson.OPT_SORT_KEYS)


def _is_resent(block: Any) -> bool:
    if not isinstance(block, dict):
        return True
    return block.get("type") == "toolCall" or (block.get("type") == "text" and bool(block.get("text")))


def _resent_block(block: Any) -> Any:
    if not isinstance(block, dict):
        return block
    if block.get("type") == "toolCall":
        return ["toolCall", block.get("name"), block.get("arguments")]
    return ["text", block.get("text")]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        kind = block.get("type")
        if kind == "text":
            parts.append(block.get("text", ""))
        elif kind == "image":
            parts.append(f"[image {block.get('mime_type', '')}]")
    return "\n".join(parts)


def _indent(text: str, prefix: str = "  ") -> str:
    return "\n".join(prefix + line for line in text.splitlines()) if text else prefix.rstrip()


def render_message(message: dict[str, Any]) -> list[str]:
    role = message.get("role")
    if role == "user":
        return ["user:", _indent(_text(message.get("content")))]
    if role == "toolResult":
        marker = " (error)" if message.get("is_error") else ""
        return [f"tool result {message.get('tool_name')}{marker}:", _indent(_text(message.get("content")))]
    lines = ["assistant:"]
    for block in message.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            lines.append(_indent(block.get("text", "")))
        elif kind == "thinking":
            thinking = " ".join(block.get("thinking", "").split())
            shown = thinking[:THINKING_PREVIEW] + ("..." if len(thinking) > THINKING_PREVIEW else "")
            lines.append(f"  [thinking, {len(block.get('thinking', ''))} chars: {shown}]")
        elif kind == "toolCall":
            arguments = orjson.dumps(block.get("arguments") or {}).decode()
            lines.append(f"  -> {block.get('name')}({arguments})")
        elif kind == "serverTool":
            lines += _server_tool_lines(block)
    if message.get("stop_reason") in ("error", "aborted"):
        lines.append(f"  [{message.get('stop_reason')}: {message.get('error_message')}]")
    return lines


def _server_tool_lines(block: dict[str, Any]) -> list[str]:
    """A vendor-run tool block (docs/vendors.md): its kind, then its readable text if any."""
    lines = [f"  [server tool {block.get('vendor')} {block.get('kind')}]"]
    text = block.get("text")
    if isinstance(text, str) and text:
        lines.append(_indent(text, "    "))
    return lines


def _usage_line(call: Any, request: dict[str, Any], message: dict[str, Any] | None) -> tuple[str, float]:
    model = request.get("model") or {}
    usage = (message or {}).get("usage") or {}
    cost = call_cost(message)
    return (
        f"  (call {call.call_index}: {model.get('provider')}/{model.get('id')}, "
        f"{usage.get('input', 0)} in / {usage.get('output', 0)} out tokens{reasoning_note(usage)}"
        f"{', cache ' + str(usage.get('cache_read')) + ' read' if usage.get('cache_read') else ''}, "
        f"${cost:.6f}, outcome {call.outcome})",
        cost,
    )


@dataclass
class ConversationStep:
    """One call of a conversation walk: the messages its request added to what was already
    shown, and its answer. ``new_conversation`` is set when the call's context does not
    continue the previous call's (or it is the first call walked)."""

    call: Any
    request: dict[str, Any]
    new_conversation: bool
    system_prompt: str | None
    first_new_index: int
    new_messages: list[dict[str, Any]]
    answer: dict[str, Any] | None


def conversation_steps(calls: Iterable[Any]) -> Iterator[ConversationStep]:
    """Walk ``calls`` in order, telling the conversation once: each step holds only what its
    predecessor had not shown yet. Requests and answers are redacted on the way out. Shared by
    the text view (:func:`render_conversation`) and the HTML page (:mod:`.view`)."""
    shown: list[bytes] = []
    system_prompt: str | None = None
    for call in calls:
        request = remove_secret_values(call.request)
        context = request.get("context") or {}
        messages = context.get("messages") or []
        keys = [_comparable(m) for m in messages]
        continues = keys[: len(shown)] == shown and context.get("system_prompt") == system_prompt
        new_conversation = not continues or not shown
        if new_conversation:
            shown = []
            system_prompt = context.get("system_prompt")
        answer = remove_secret_values(final_message(call))
        yield ConversationStep(
            call, request, new_conversation, system_prompt, len(shown), messages[len(shown):], answer
        )
        shown = keys + [_comparable(answer)] if answer is not None else keys


def call_cost(message: dict[str, Any] | None) -> float:
    """The total cost a call's answer reports (0 when it reports none)."""
    usage = (message or {}).get("usage") or {}
    return float((usage.get("cost") or {}).get("total") or 0.0)


def strands(calls: Iterable[Any]) -> list[tuple[int, str, list[Any]]]:
    """The calls grouped by session, then lane, in order of first appearance: each strand is
    one sequential conversation (concurrent sub-agents interleave in the file, not in a
    strand). ``(session number from 1, lane, calls)``."""
    sessions: dict[Any, int] = {}
    groups: dict[tuple[int, str], list[Any]] = {}
    for call in calls:
        number = sessions.setdefault(getattr(call, "session", None), len(sessions) + 1)
        groups.setdefault((number, getattr(call, "lane", "")), []).append(call)
    return [(number, lane, members) for (number, lane), members in groups.items()]


def render_conversation(recording: Any) -> str:
    """The whole recording as readable text, ending with the total cost a replay saves.
    Several sessions (commands) and lanes (concurrent sub-agents) are told one at a time."""
    lines: list[str] = []
    total = 0.0
    groups = strands(recording.calls)
    session_count = len({number for number, _, _ in groups})
    current_session = 0
    for number, lane, calls in groups:
        if session_count > 1 and number != current_session:
            if lines:
                lines.append("")
            lines.append(f"=== session {number} of {session_count} ===")
            current_session = number
        if lane:
            lines += ["", f"--- lane {lane} ---"]
        first = True
        for step in conversation_steps(calls):
            if step.new_conversation:
                if lines and not first:
                    lines.append("")
                    lines.append("--- new conversation ---")
                elif lines and not lane and not (session_count > 1 and first):
                    lines.append("")
                    lines.append("--- new conversation ---")
                if step.system_prompt:
                    lines += ["system:", _indent(step.system_prompt)]
            first = False
            for message in step.new_messages:
                lines += render_message(message)
            if step.answer is not None:
                lines += render_message(step.answer)
            usage_line, cost = _usage_line(step.call, step.request, step.answer)
            lines.append(usage_line)
            total += cost
    lines.append("")
    lines.append(
        f"{len(recording.calls)} calls; replaying this recording saves ${total:.6f} of model usage"
    )
    return "\n".join(lines)
