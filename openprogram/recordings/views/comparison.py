"""Compare two recordings call by call: where the requests first differ, and how what came
back differs (final text, tool calls and their arguments, stop reason, usage, outcome).

Used by ``openprogram recordings diff``; works on the strict reader's parsed files, so it
knows nothing of vendors. Everything compared is redacted first, as ``show --content`` is: a
file edited by hand must not print a secret, whichever view shows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from ..file.patches import strictly_equal
from ..redaction import remove_secret_values
from ..replay.differences import find_first_difference

REQUEST_PARTS = ("model", "context", "options")


@dataclass
class CallDifference:
    call_index: int
    status: str  # same | different | only_in_a | only_in_b
    request_difference: dict[str, Any] | None = None
    response_differences: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "call_index": self.call_index,
            "status": self.status,
            "request_difference": self.request_difference,
            "response_differences": self.response_differences,
        }


@dataclass
class RecordingDiff:
    path_a: str
    path_b: str
    calls_a: int
    calls_b: int
    calls: list[CallDifference]

    @property
    def identical(self) -> bool:
        return all(call.status == "same" for call in self.calls)

    @property
    def different_calls(self) -> int:
        return sum(1 for call in self.calls if call.status != "same")

    def summary(self) -> str:
        if self.identical:
            return f"identical: {self.calls_a} calls, apart from non-deterministic fields"
        return (
            f"{self.different_calls} of {max(self.calls_a, self.calls_b)} calls differ "
            f"({self.calls_a} calls in A, {self.calls_b} in B)"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "a": self.path_a,
            "b": self.path_b,
            "identical": self.identical,
            "summary": {
                "calls_a": self.calls_a,
                "calls_b": self.calls_b,
                "different_calls": self.different_calls,
            },
            "calls": [call.as_json() for call in self.calls],
        }


def final_message(call: Any) -> dict[str, Any] | None:
    """The assistant message a recorded call ended with (``done`` or ``error``), if any."""
    last = call.last_event_dump()
    if last is None:
        return None
    if last.get("type") == "done":
        return cast("dict[str, Any] | None", last.get("message"))  # a done event's message dump
    if last.get("type") == "error":
        return cast("dict[str, Any] | None", last.get("error"))  # an error event's message dump
    return None


def response_summary(call: Any) -> dict[str, Any]:
    """What came back, reduced to what a reader compares: ids and timestamps left out;
    secrets removed."""
    message = remove_secret_values(final_message(call) or {})
    content = message.get("content") or []
    usage = message.get("usage") or {}
    return {
        "outcome": call.outcome,
        "stop_reason": message.get("stop_reason"),
        "error_message": message.get("error_message"),
        "text": "".join(block.get("text", "") for block in content if block.get("type") == "text"),
        "thinking": "".join(b.get("thinking", "") for b in content if b.get("type") == "thinking"),
        "tool_calls": [
            {"name": block.get("name"), "arguments": block.get("arguments")}
            for block in content
            if block.get("type") == "toolCall"
        ],
        "usage": {
            key: usage.get(key)
            for key in ("input", "output", "cache_read", "cache_write", "total_tokens")
        },
    }


def first_request_difference(
    call_a: Any, call_b: Any, same_contexts: bool = False, redacted: _Redacted | None = None
) -> dict[str, Any] | None:
    """The first differing request field, in the order replay compares them (secrets
    removed from both requests first). ``same_contexts``: the contexts are known to be equal
    (:class:`_SameContexts`), so they are not compared again; ``redacted``: the redactions
    of one comparison of recordings, each message redacted once."""
    redacted = redacted or _Redacted()
    for part in REQUEST_PARTS:
        if part == "context" and same_contexts:
            continue
        found = find_first_difference(
            redacted.part(call_a, part), redacted.part(call_b, part), part
        )
        if found is not None:
            path, value_a, value_b = found
            return {"field_path": path, "a": value_a, "b": value_b}
    return None


class _Redacted:
    """A request part with its secrets removed, each context message once: the contexts of a
    conversation share their message objects, and redacting the whole conversation at every
    call would cost time quadratic in the turns."""

    def __init__(self) -> None:
        self._messages: dict[int, tuple[Any, Any]] = {}

    def part(self, call: Any, part: str) -> Any:
        value = getattr(call, part)
        if part != "context" or type(value) is not dict or type(value.get("messages")) is not list:
            return remove_secret_values(value)
        result: dict[str, Any] = {}
        for key, item in value.items():
            if key == "messages":
                result[key] = [self._message(message) for message in item]
            else:
                result.update(remove_secret_values({key: item}))
        return result

    def _message(self, message: Any) -> Any:
        done = self._messages.get(id(message))
        if done is None or done[0] is not message:
            done = self._messages[id(message)] = (message, remove_secret_values(message))
        return done[1]


class _SameContexts:
    """Which calls have the very same context in both recordings, found from how the files
    store them: two contexts stored as the same operations applied to contexts already found
    the same are the same, without a look at the whole conversation. Comparing every
    context whole would cost time quadratic in the turns of an agent's recording; this costs
    the growth, and the whole comparison is left to calls that differ."""

    def __init__(self) -> None:
        self._same: set[int] = set()

    def check(self, call_a: Any, call_b: Any) -> bool:
        whole_a, base_a, ops_a = call_a.stored_context
        whole_b, base_b, ops_b = call_b.stored_context
        if base_a is not None and base_a == base_b:
            same = base_a in self._same and strictly_equal(ops_a, ops_b)
        elif base_a is None and base_b is None:
            same = strictly_equal(whole_a, whole_b)
        else:
            same = False
        if same:
            self._same.add(call_a.call_index)
        return same


def diff_recordings(recording_a: Any, recording_b: Any) -> RecordingDiff:
    calls: list[CallDifference] = []
    same_contexts, redacted = _SameContexts(), _Redacted()
    count = max(len(recording_a.calls), len(recording_b.calls))
    for index in range(count):
        if index >= len(recording_b.calls):
            calls.append(CallDifference(index, "only_in_a"))
            continue
        if index >= len(recording_a.calls):
            calls.append(CallDifference(index, "only_in_b"))
            continue
        call_a, call_b = recording_a.calls[index], recording_b.calls[index]
        request = first_request_difference(
            call_a, call_b, same_contexts.check(call_a, call_b), redacted
        )
        summary_a, summary_b = response_summary(call_a), response_summary(call_b)
        responses = [
            {"field": key, "a": summary_a[key], "b": summary_b[key]}
            for key in summary_a
            if find_first_difference(summary_a[key], summary_b[key]) is not None
        ]
        status = "same" if request is None and not responses else "different"
        calls.append(CallDifference(index, status, request, responses))
    return RecordingDiff(
        str(recording_a.path),
        str(recording_b.path),
        len(recording_a.calls),
        len(recording_b.calls),
        calls,
    )
