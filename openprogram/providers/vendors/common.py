"""What every vendor provider needs besides stream assembly: the key, the headers, the
payload hook and ``extra_body``, readable errors, and a conversation that another vendor can
accept.

Kept in one place so that the four vendor modules differ only in their wire mapping.
"""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Any

from ..credentials import (
    environment_keys_withheld,
    key_required,
    missing_key_message,
    resolve_provider_key,
)
from ..guard import CallNotSent, ErrorDescriber
from ..key_trust import key_refusal
from ..types import (
    AssistantMessage,
    ImageContent,
    Message,
    Model,
    ServerToolContent,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
)

#: The key sent to servers that need none (Ollama, vLLM, llama.cpp ...): the SDKs insist on one.
PLACEHOLDER_KEY = "not-needed"


class MissingApiKey(CallNotSent):
    """Raised inside a provider's producer; the guard turns it into the ``error`` event."""


def api_key_for(model: Model, options: StreamOptions | None) -> str:
    """The key to send, or :class:`MissingApiKey` naming the environment variable to set."""
    key = options.api_key if options is not None else None
    if key:
        return key
    environment_key = (
        not environment_keys_withheld() and resolve_provider_key(model.provider) is not None
    )
    refusal = key_refusal(model) if environment_key else None
    if refusal is not None:  # the environment's key exists but may not go to this host
        raise MissingApiKey(refusal)
    if not key_required(model):
        return PLACEHOLDER_KEY
    raise MissingApiKey(missing_key_message(model))


def sdk_http_module() -> Any:
    """The HTTP library the installed SDKs speak through (``httpx2`` in the releases that
    moved to it, ``httpx`` before): their exceptions carry its errors."""
    try:
        import httpx2

        return httpx2
    except ImportError:  # pragma: no cover - an SDK release from before httpx2
        import httpx

        return httpx


def request_headers(model: Model, options: StreamOptions | None) -> dict[str, str]:
    """Model headers, then per-call headers (which win)."""
    headers: dict[str, str] = dict(model.headers or {})
    if options is not None and options.headers:
        headers.update(options.headers)
    return headers


def apply_payload_hook(options: StreamOptions | None, body: dict[str, Any]) -> dict[str, Any]:
    """Let ``options.on_payload`` inspect the wire body, or replace it by returning a new one."""
    if options is None or options.on_payload is None:
        return body
    replacement = options.on_payload(body)
    return replacement if isinstance(replacement, dict) else body


def merge_extra_body(body: dict[str, Any], options: StreamOptions | None) -> dict[str, Any]:
    """``body`` with ``options.extra_body`` merged in, the last step of building a request
    body, so that a wire field with no typed option reaches the vendor and one that has a
    typed option can still be overridden. Objects present on both sides merge key by key
    (``{"reasoning": {"summary": "detailed"}}`` keeps the typed effort); any other value
    replaces. This is the rule the Gemini SDK applies to its own ``extra_body``, so all four
    vendors merge alike (docs/vendors.md)."""
    extra = options.extra_body if options is not None else None
    if not extra:
        return body
    return _merged(body, extra)


def _merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        current = merged.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            merged[key] = _merged(current, value)
        else:
            # A copy: a payload hook that edits the body must not edit the recorded options.
            merged[key] = copy.deepcopy(value)
    return merged


def describe_provider_error(label: str) -> ErrorDescriber:
    """An error describer for :func:`guarded_stream` that names the provider and, for HTTP
    failures, the status, using only attributes the official SDKs share."""

    def describe(error: BaseException) -> str:
        if isinstance(error, MissingApiKey):
            return f"{label}: {error}"
        status = getattr(error, "status_code", None)
        if not isinstance(status, int):
            code = getattr(error, "code", None)
            status = code if isinstance(code, int) else None
        message = getattr(error, "message", None) or str(error) or type(error).__name__
        message = " ".join(str(message).split())
        if status is not None:
            return f"{label}: HTTP {status}: {message}"
        name = type(error).__name__
        # "Connect" covers the SDKs' APIConnectionError and httpx's ConnectError (google-genai).
        if (
            "Connect" in name
            or "Timeout" in name
            or isinstance(error, ConnectionError | TimeoutError)
        ):
            return f"{label}: connection failed ({name}): {message}"
        return f"{label}: {name}: {message}"

    return describe


def as_plain_dict(value: Any) -> dict[str, Any]:
    """An SDK object as the JSON the server sent (unset fields left out)."""
    if isinstance(value, dict):
        return value
    # Both give the JSON of the SDK object: a dict with string keys.
    to_dict = getattr(value, "to_dict", None)
    if to_dict is not None:
        plain: dict[str, Any] = to_dict()
        return plain
    dumped: dict[str, Any] = value.model_dump(exclude_unset=True)
    return dumped


def text_of(content: str | list[Any]) -> str:
    """The text of user or tool-result content, images left out."""
    if isinstance(content, str):
        return content
    return "\n".join(block.text for block in content if isinstance(block, TextContent))


def images_of(content: str | list[Any]) -> list[ImageContent]:
    if isinstance(content, str):
        return []
    return [block for block in content if isinstance(block, ImageContent)]


_SAFE_ID = re.compile(r"[^A-Za-z0-9_-]")


def normalize_tool_call_id(tool_call_id: str, max_length: int = 64) -> str:
    """An id that every vendor accepts (``[A-Za-z0-9_-]``, bounded length), stable for the
    same input so that a tool call and its result keep matching."""
    cleaned = _SAFE_ID.sub("_", tool_call_id)
    if len(cleaned) <= max_length and cleaned:
        return cleaned
    digest = hashlib.sha256(tool_call_id.encode()).hexdigest()[:16]
    return f"{cleaned[: max_length - 17]}_{digest}"


def prepare_messages(messages: list[Message], model: Model) -> list[Message]:
    """Make a conversation safe to send to ``model``'s vendor.

    - Assistant turns that ended in ``error``/``aborted`` are dropped, with the tool results
      that answered their calls: vendors reject half-finished turns.
    - Thinking from another vendor or model becomes plain text (its signature is meaningless
      there), and empty thinking is dropped.
    - Server-side tool blocks go back only to the API that produced them.
    - A tool call left without a result (the run stopped in between) gets an error result, so
      the vendor sees every call answered.
    """
    prepared: list[Message] = []
    dropped_calls: set[str] = set()
    pending: dict[str, ToolCall] = {}

    def flush_pending() -> None:
        for call in pending.values():
            prepared.append(
                ToolResultMessage(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    content=[TextContent(text="No result provided")],
                    is_error=True,
                    timestamp=0,
                )
            )
        pending.clear()

    for message in messages:
        if isinstance(message, AssistantMessage):
            flush_pending()
            if message.stop_reason in ("error", "aborted"):
                dropped_calls.update(b.id for b in message.content if isinstance(b, ToolCall))
                continue
            same_model = (
                message.api == model.api
                and message.provider == model.provider
                and message.model == model.id
            )
            content: list[Any] = []
            for block in message.content:
                if isinstance(block, ServerToolContent) and block.api != model.api:
                    continue
                if isinstance(block, ThinkingContent) and not same_model:
                    if block.thinking.strip() and not block.redacted:
                        content.append(TextContent(text=block.thinking))
                    continue
                content.append(block)
                if isinstance(block, ToolCall):
                    pending[block.id] = block
            prepared.append(message.model_copy(update={"content": content}))
        elif isinstance(message, ToolResultMessage):
            if message.tool_call_id in dropped_calls:
                continue
            pending.pop(message.tool_call_id, None)
            prepared.append(message)
        else:
            flush_pending()
            prepared.append(message)
    flush_pending()
    return prepared


#: Default thinking budgets (tokens) per reasoning level; ``xhigh`` falls back to ``high``.
DEFAULT_THINKING_BUDGETS: dict[str, int] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
}

#: What a budgeted-thinking request keeps for the answer itself when the budget must shrink.
MIN_ANSWER_TOKENS = 1024


def thinking_budget(model: Model, options: StreamOptions | None) -> tuple[int, int] | None:
    """``(max_tokens, budget)`` for a budgeted-thinking vendor, or None when no reasoning level
    was asked for (or the model cannot reason).

    The budget comes from ``options.thinking_budgets`` (per level) over the defaults; the
    answer keeps its own room, so ``max_tokens`` grows by the budget up to the model's limit,
    and a budget that would leave no room for the answer is cut down.
    """
    level = getattr(options, "reasoning", None)
    if not level or not model.reasoning:
        return None
    budgets = {**DEFAULT_THINKING_BUDGETS, **(getattr(options, "thinking_budgets", None) or {})}
    budget = budgets.get(level) or budgets.get("high", DEFAULT_THINKING_BUDGETS["high"])
    base = (options.max_tokens if options is not None else None) or min(model.max_tokens, 32000)
    max_tokens = min(base + budget, model.max_tokens)
    if max_tokens <= budget:
        budget = max(0, max_tokens - MIN_ANSWER_TOKENS)
    return max_tokens, budget
