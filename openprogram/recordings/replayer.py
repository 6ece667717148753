"""Replay at the provider boundary: the offline :class:`ReplayProvider`.

It holds nothing but the parsed file (:mod:`.reader`): no vendor provider, no HTTP client, no
credential. It compares each incoming request with the recorded one and raises
:class:`ReplayMismatch` at the first difference (see ``docs/file-format.md``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ..providers.types import (
    AssistantMessageEvent,
    Context,
    Model,
    SimpleStreamOptions,
    StreamOptions,
)
from .differences import ReplayMismatch, find_first_difference
from .format import request_payloads
from .reader import RecordedCall, Recording, read_recording_file
from .redaction import remove_secret_values

__all__ = ["RecordedCallInterrupted", "ReplayProvider"]


class RecordedCallInterrupted(Exception):
    """A recorded call that did not end normally (``error``, ``cancelled``, ``abandoned``):
    replay hands back the events it produced and then raises this, as the live run failed."""

    def __init__(self, call_index: int, outcome: str) -> None:
        self.call_index = call_index
        self.outcome = outcome
        super().__init__(
            f"recorded call {call_index} ended with outcome {outcome!r}: the recorded run was "
            "interrupted here, so the replay stops here too"
        )

    def __reduce__(self):
        return (type(self), (self.call_index, self.outcome))



# ============================================================================ the provider


def _default_options_dump() -> dict[str, Any]:
    """What ``options=None`` is compared as: the redacted default ``StreamOptions``.

    A call made with ``options=None`` and one made with default options behave the same, and
    the facade turns one into the other when it fills in a key. A field one side lacks equals
    ``null`` on the other (``find_first_difference``), so ``stream`` recordings
    (``StreamOptions``) replay through ``stream_simple`` (``SimpleStreamOptions`` adds
    ``reasoning`` and ``thinking_budgets``, both ``null`` by default) whenever the options
    agree.
    """
    return remove_secret_values(StreamOptions().model_dump(mode="json"))


#: The fields that say which model a request is for: a changed model is reported by the field
#: that tells it (``model.id``), not by whichever of its numbers sorts first.
MODEL_IDENTITY_FIELDS = ("id", "provider", "api")


def first_request_difference(
    recorded: dict[str, Any], incoming: dict[str, Any]
) -> tuple[str, Any, Any] | None:
    """The first difference between two requests' payloads: ``model`` (its identity fields
    first, then the rest in sorted order), then ``context``, then ``options``."""
    recorded_model, incoming_model = recorded["model"], incoming["model"]
    if isinstance(recorded_model, dict) and isinstance(incoming_model, dict):
        for field in MODEL_IDENTITY_FIELDS:
            difference = find_first_difference(
                recorded_model.get(field), incoming_model.get(field), f"model.{field}"
            )
            if difference is not None:
                return difference
    for name in ("model", "context", "options"):
        difference = find_first_difference(recorded[name], incoming[name], name)
        if difference is not None:
            return difference
    return None


class ReplayProvider:
    """Serves recorded events offline. Holds only the parsed recording file."""

    requires_credentials = False

    def __init__(self, recording_path: str | os.PathLike[str]) -> None:
        self._recording = read_recording_file(recording_path)
        self._lock = threading.Lock()
        self._call_count = 0

    @property
    def recording_path(self) -> Path:
        return self._recording.path

    @property
    def recording(self) -> Recording:
        return self._recording

    @property
    def call_count(self) -> int:
        """Recorded calls handed out so far, by ``stream`` and ``stream_simple`` together."""
        return self._call_count

    def stream(
        self, model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        return self._replay(model, context, options)

    def stream_simple(
        self, model: Model, context: Context, options: SimpleStreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        return self._replay(model, context, options)

    def assert_consumed(self) -> None:
        """Raise :class:`ReplayMismatch` if recorded calls were left unused."""
        total = len(self._recording.calls)
        with self._lock:
            used = self._call_count
        if used < total:
            raise ReplayMismatch(
                used,
                "remaining_calls",
                f"{total - used} more recorded call(s)",
                f"{used} call(s) made",
            )

    def _take(self, model: Model, context: Context, options: StreamOptions | None) -> RecordedCall:
        """Match the request against the next recorded call and consume it, atomically; a
        mismatch consumes nothing, so the same request may be retried."""
        incoming = request_payloads(model, context, options)
        defaults: dict[str, Any] | None = None  # built at most once per call, when needed
        if incoming["options"] is None:
            incoming["options"] = defaults = _default_options_dump()
        calls = self._recording.calls
        with self._lock:
            index = self._call_count
            if index >= len(calls):
                raise ReplayMismatch(
                    index,
                    "call_index",
                    f"{len(calls)} recorded call(s), the last is call {len(calls) - 1}"
                    if calls
                    else "no recorded calls",
                    f"call {index}",
                )
            call = calls[index]
            recorded = dict(call.request)
            if recorded["options"] is None:
                recorded["options"] = defaults if defaults is not None else _default_options_dump()
            difference = first_request_difference(recorded, incoming)
            if difference is not None:
                raise ReplayMismatch(index, *difference)
            self._call_count = index + 1
            return call

    async def _replay(
        self, model: Model, context: Context, options: StreamOptions | None
    ) -> AsyncIterator[AssistantMessageEvent]:
        call = self._take(model, context, options)
        kept = call._events
        for event in kept if kept is not None else call.events():
            yield event
        if call.outcome != "complete":
            raise RecordedCallInterrupted(call.call_index, call.outcome)
