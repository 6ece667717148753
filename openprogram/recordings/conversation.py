"""Render a recording as the conversation it captured, for ``recordings show --conversation``.

Each call's request holds the whole conversation so far; printing, for every call, only the
messages its predecessor had not shown yet (and then the call's answer) tells the session once,
in order. A call whose context does not continue the previous one starts a new conversation.

What is printed is redacted again on the way out, as ``show --content`` is: the file was
redacted when it was written, but a file edited by hand or copied in from elsewhere may not be.
"""

from __future__ import annotations

from typing import Any

import orjson

from .comparison import final_message
from .redaction import remove_secret_values

THINKING_PREVIEW = 80


def _comparable(message: dict[str, Any]) -> bytes:
    return orjson.dumps({k: v for k, v in message.items() if k != "timestamp"}, option=orjson.OPT_SORT_KEYS)


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
    cost = float((usage.get("cost") or {}).get("total") or 0.0)
    return (
        f"  (call {call.call_index}: {model.get('provider')}/{model.get('id')}, "
        f"{usage.get('input', 0)} in / {usage.get('output', 0)} out tokens"
        f"{', cache ' + str(usage.get('cache_read')) + ' read' if usage.get('cache_read') else ''}, "
        f"${cost:.6f}, outcome {call.outcome})",
        cost,
    )


def render_conversation(recording: Any) -> str:
    """The whole recording as readable text, ending with the total cost a replay saves."""
    lines: list[str] = []
    shown: list[bytes] = []
    system_prompt: str | None = None
    total = 0.0
    for call in recording.calls:
        request = remove_secret_values(call.request)
        context = request.get("context") or {}
        messages = context.get("messages") or []
        keys = [_comparable(m) for m in messages]
        continues = keys[: len(shown)] == shown and context.get("system_prompt") == system_prompt
        if not continues or not shown:
            if lines:
                lines.append("")
                lines.append("--- new conversation ---")
            shown = []
            system_prompt = context.get("system_prompt")
            if system_prompt:
                lines += ["system:", _indent(system_prompt)]
        for message in messages[len(shown):]:
            lines += render_message(message)
        answer = remove_secret_values(final_message(call))
        if answer is not None:
            lines += render_message(answer)
            shown = keys + [_comparable(answer)]
        else:
            shown = keys
        usage_line, cost = _usage_line(call, request, answer)
        lines.append(usage_line)
        total += cost
    lines.append("")
    lines.append(
        f"{len(recording.calls)} calls; replaying this recording saves ${total:.6f} of model usage"
    )
    return "\n".join(lines)
