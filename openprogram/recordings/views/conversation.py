"""Render a recording as the conversation it captured, for ``recordings show --conversation``.

Each call's request holds the whole conversation so far; printing, for every call, only the
messages its predecessor had not shown yet (and then the call's answer) tells the session once,
in order. A call whose context grew from an earlier call's without following its answer (a
retry, a branch) shows what it added after a note (``+ N earlier messages as in call K``); one
that shares nothing with the calls before it starts a new conversation.

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
    return block.get("type") == "toolCall" or (
        block.get("type") == "text" and bool(block.get("text"))
    )


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
        elif block.get("type") == "raw":
            parts.append(raw_label(block))
    return "\n".join(parts)


def raw_label(block: dict[str, Any]) -> str:
    """A part or message kept as the client sent it (``RawContent``), named by its kind."""
    stored = block.get("payload")
    payload: dict[str, Any] = stored if isinstance(stored, dict) else {}
    kind = payload.get("type") or payload.get("role") or next(iter(payload), "part")
    return f"[{kind}, as the client sent it]"


def _indent(text: str, prefix: str = "  ") -> str:
    return "\n".join(prefix + line for line in text.splitlines()) if text else prefix.rstrip()


def render_message(message: dict[str, Any]) -> list[str]:
    role = message.get("role")
    if role == "user":
        return ["user:", _indent(_text(message.get("content")))]
    if role == "toolResult":
        marker = " (error)" if message.get("is_error") else ""
        return [
            f"tool result {message.get('tool_name')}{marker}:",
            _indent(_text(message.get("content"))),
        ]
    lines = ["assistant:"]
    for block in message.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            lines.append(_indent(block.get("text", "")))
        elif kind == "thinking":
            thinking = " ".join(block.get("thinking", "").split())
            shown = thinking[:THINKING_PREVIEW] + (
                "..." if len(thinking) > THINKING_PREVIEW else ""
            )
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


def _usage_line(
    call: Any, model: dict[str, Any], message: dict[str, Any] | None
) -> tuple[str, float]:
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
    shown, and its answer, all redacted. ``new_conversation`` is set when the call's context
    does not continue an earlier call's (or it is the first call walked); ``earlier_call``
    when it grew from call K's context but not right after K's answer (a retry, a branch, a
    client that resends the answer in its own words): its first ``first_new_index`` messages
    are call K's and are not shown again. ``system_prompt`` is the prompt to show at this
    step (None: nothing new to show)."""

    call: Any
    model: dict[str, Any]
    new_conversation: bool
    system_prompt: str | None
    first_new_index: int
    new_messages: list[dict[str, Any]]
    answer: dict[str, Any] | None
    earlier_call: int | None = None


class _Shown:
    """What the walk keeps of the call it showed last (raw, for comparison only): its
    message count, system prompt and answer, and its messages when a comparison needs them.
    Of the calls before it, only the system prompt is kept, so the walk's memory grows with
    the conversation, not its square."""

    __slots__ = ("call", "count", "prompt", "answer", "_messages")

    def __init__(self, call: Any, count: int, prompt: Any, answer: dict[str, Any] | None) -> None:
        self.call, self.count, self.prompt, self.answer = call, count, prompt, answer
        self._messages: list[Any] | None = None

    def messages(self) -> list[Any]:
        if self._messages is None:
            self._messages = self.call.messages_from(0)
        return self._messages


class _Keys:
    """Each message's comparable form, made once per message object (two contexts of a
    conversation share their message objects, so the walk never encodes one twice)."""

    def __init__(self) -> None:
        self._made: dict[int, tuple[Any, bytes]] = {}

    def __call__(self, message: Any) -> bytes:
        made = self._made.get(id(message))
        if made is None or made[0] is not message:
            made = self._made[id(message)] = (message, _comparable(message))
        return made[1]

    def common_prefix(self, messages: list[Any], earlier: list[Any]) -> int:
        """How many leading messages of ``messages`` equal those of ``earlier``."""
        count = 0
        for mine, theirs in zip(messages, earlier, strict=False):
            if mine is not theirs and self(mine) != self(theirs):
                break
            count += 1
        return count


def conversation_steps(calls: Iterable[Any]) -> Iterator[ConversationStep]:
    """Walk ``calls`` in order, telling the conversation once: each step holds only what an
    earlier step had not shown yet. Requests and answers are redacted on the way out. Shared by
    the text view (:func:`render_conversation`) and the HTML page (:mod:`.view`).

    Work and output are linear in the file: a call whose context the file stores as the growth
    of an earlier call's is known to share that call's messages without comparing them
    (``RecordedCall.context_growth``), and only what it added is read, redacted and kept."""
    keys = _Keys()
    prompts: dict[int, Any] = {}  # the system prompt of every call shown so far
    last: _Shown | None = None
    for call in calls:
        count, prompt = call.message_count, call.system_prompt
        first_new = _continued(call, count, prompt, last, keys)
        earlier_call: int | None = None
        shown_prompt = None  # the same as the call before it
        if first_new is None:
            first_new, earlier_call = _grown_from(call, prompts, last, keys)
            if earlier_call is None or prompt != prompts[earlier_call]:
                shown_prompt = prompt
        raw_answer = final_message(call)
        yield ConversationStep(
            call,
            remove_secret_values(call.model),
            first_new == 0 and earlier_call is None,
            remove_secret_values(shown_prompt),
            first_new,
            [remove_secret_values(message) for message in call.messages_from(first_new)],
            remove_secret_values(raw_answer),
            earlier_call,
        )
        prompts[call.call_index] = prompt
        last = _Shown(call, count, prompt, raw_answer)


def _continued(call: Any, count: int, prompt: Any, last: _Shown | None, keys: _Keys) -> int | None:
    """The index of the first new message when ``call``'s context continues the call walked
    just before it (that call's messages, then its answer, the same system prompt), else None."""
    if last is None:
        return None
    shown = last.count + (1 if last.answer is not None else 0)
    if prompt != last.prompt or shown == 0 or count < shown:
        return None
    base, shared = call.context_growth
    if not (
        base == last.call.call_index and shared >= last.count
    ):  # else the file says they are the same
        if keys.common_prefix(call.messages_from(0)[: last.count], last.messages()) < last.count:
            return None
    if last.answer is not None and keys(call.messages_from(last.count)[0]) != _comparable(
        last.answer
    ):
        return None
    return shown


def _grown_from(
    call: Any, prompts: dict[int, Any], last: _Shown | None, keys: _Keys
) -> tuple[int, int | None]:
    """``(N, K)`` when the first N messages of ``call``'s context are those of call K, a call
    already shown (the base when the file stores the context as its growth, else the call
    walked just before), else ``(0, None)``: a new conversation."""
    base, shared = call.context_growth
    if base is not None:
        return (shared, base) if shared and base in prompts else (0, None)
    if last is None:
        return 0, None
    count = keys.common_prefix(call.messages_from(0), last.messages())
    return (count, last.call.call_index) if count else (0, None)


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
            first = False
            if step.earlier_call is not None:
                lines.append(
                    f"  (+ {step.first_new_index} earlier messages as in call {step.earlier_call})"
                )
            if step.system_prompt:
                lines += ["system:", _indent(step.system_prompt)]
            for message in step.new_messages:
                lines += render_message(message)
            if step.answer is not None:
                lines += render_message(step.answer)
            usage_line, cost = _usage_line(step.call, step.model, step.answer)
            lines.append(usage_line)
            total += cost
    lines.append("")
    lines.append(
        f"{len(recording.calls)} calls; replaying this recording saves ${total:.6f} of model usage"
    )
    return "\n".join(lines)
