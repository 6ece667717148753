"""Recording at the provider boundary: :class:`RecordingProvider` wraps a provider and writes
every request and event of its calls to a recording through a shared
:class:`~openprogram.recordings.file.sink.RecordingSink`.

* **One pipeline, one way.** :mod:`.stream_redaction` decides what each event is stored as,
  holding a delta back until the text past it is known to hold no piece of a secret, and
  hands on redacted records; :mod:`.encoder` writes them as lines (``partial`` as a patch
  against the previous snapshot); the sink appends them. The consumer still gets every event
  at once. What redaction removed from the model's output is said once per call (a warning)
  and counted in ``call_end`` (``redactions``).
* **Timings.** Every event line carries ``t``: the milliseconds from the moment the request
  was sent (``time.monotonic_ns`` when the call begins) to the moment the event arrived; an event
  whose line is held back keeps the time it arrived, not the time it was written. A provider
  that hands events on later than their bytes arrived (the proxy's passthrough reads an answer
  once it is forwarded) says when through ``event_arrival_ns()``.
* **The vendor's own answer.** A provider that received the vendor's answer as bytes (the
  proxy's passthrough) offers it through ``raw_answer()``; a call that completes keeps it in
  its ``call_end`` unless redaction would change any byte of it or the call's output lost a
  value to redaction, in which case the call replays from its events and the line says why
  (docs/file-format.md, "The vendor's answer"). The recorder reads no vendor format: only
  lines, and the JSON some of them hold.
* **Every exit path ends the call.** Normal end, provider exception, synchronous start
  failure, cancellation, early close and a consumer that stops at the terminal event each
  leave exactly one ``call_end`` with the right outcome.

The file format is described in ``docs/file-format.md``.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from time import monotonic_ns
from typing import Any

import orjson

from ...providers.base import streams_assembled_snapshots
from ...providers.credentials import note_secret_value
from ...providers.lanes import current_lane
from ...providers.types import (
    TERMINAL_EVENT_TYPES,
    AssistantMessageEvent,
    Context,
    Model,
    SimpleStreamOptions,
    StreamOptions,
)
from ..file.format import RecordingFileError, answer_field, call_end_row, recorded_request_payloads
from ..file.sink import RecordingSink
from ..redaction import PLACEHOLDER, Redactor, current_redactor, logger
from .encoder import EventEncoder, Record
from .stream_redaction import StreamRedaction

__all__ = ["RecordingProvider"]


# ============================================================================ one call


class _CallRecorder:
    """Writes the event and call_end lines of one call through the record pipeline: the stream
    stage redacts and holds back, the encoder writes lines, the sink appends them."""

    def __init__(
        self,
        sink: RecordingSink,
        call_index: int,
        redactor: Redactor,
        *,
        check_arguments: bool = False,
    ) -> None:
        self.sink = sink
        self.call_index = call_index
        self.event_count = 0
        self.ended = False
        self.redactor = redactor
        self.redaction = StreamRedaction(redactor, check_arguments=check_arguments)
        #: ``stored(event)``: the records that may be written now.
        self.stored = self.redaction.feed
        #: ``line_of(record, event_index, t)``: the record's whole line.
        self.line_of = EventEncoder(call_index).line
        #: When the request was sent, and the arrival time (``t``, ms) of each event the
        #: stream stage holds: it hands every event on once, in the order fed.
        self.started = monotonic_ns()
        self.arrivals: deque[int] = deque()

    def write(self, records: Iterable[Record]) -> None:
        write_line, arrivals, line_of = self.sink.write_event_line, self.arrivals, self.line_of
        for record in records:
            t = arrivals.popleft() if arrivals else (monotonic_ns() - self.started) // 1_000_000
            write_line(line_of(record, self.event_count, t))
            self.event_count += 1

    def flush(self) -> None:
        """Write what the stream stage still holds (the call is ending)."""
        if not self.ended:
            self.write(self.redaction.flush())

    def end(self, outcome: str, answer: Any = None) -> None:
        """Write the call's ``call_end``; ``answer`` is the vendor's own answer (a
        ``VendorAnswer``) when the provider offers one."""
        if self.ended:
            return
        self.ended = True
        marks = self.redaction.marks
        redactions = [
            {"path": path, "rules": sorted(rules)} for path, rules in sorted(marks.items())
        ]
        if redactions:
            _warn_redacted(self.sink.path, self.call_index, redactions)
        stored, withheld = (
            (None, None) if answer is None else _kept_answer(answer, self.redactor, bool(marks))
        )
        self.sink.write_row(
            call_end_row(self.call_index, self.event_count, outcome, redactions, stored, withheld)
        )

    def end_quietly(self, outcome: str) -> None:
        """End on a failure path: the original exception must reach the caller unchanged, so
        a write error here is dropped (the call then has no call_end, which the strict reader
        reports)."""
        try:
            self.flush()
            self.end(outcome)
        except RecordingFileError:
            pass


# ============================================================================ the provider


class RecordingProvider:
    """A transparent provider that records every call of the provider it wraps."""

    def __init__(
        self, provider: Any, recording_path_or_sink: str | os.PathLike[str] | RecordingSink
    ) -> None:
        self._provider = provider
        if isinstance(recording_path_or_sink, RecordingSink):
            self._sink = recording_path_or_sink
        else:
            self._sink = RecordingSink(recording_path_or_sink)
        #: A provider not built on the shared assembler may stream tool-call snapshots that
        #: are not the parse of their deltas: the stream stage then keeps them as streamed.
        self._check_arguments = not streams_assembled_snapshots(provider)

    @property
    def recording_path(self) -> Path:
        return self._sink.path

    @property
    def requires_credentials(self) -> bool:
        return getattr(self._provider, "requires_credentials", True)

    @property
    def wrapped_provider(self) -> Any:
        return self._provider

    @property
    def sink(self) -> RecordingSink:
        return self._sink

    def stream(
        self, model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        return self._record("stream", model, context, options)

    def stream_simple(
        self, model: Model, context: Context, options: SimpleStreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        return self._record("stream_simple", model, context, options)

    async def _record(
        self, method: str, model: Model, context: Context, options: StreamOptions | None
    ) -> AsyncIterator[AssistantMessageEvent]:
        # A key passed to this call is a known value however the call was made.
        note_secret_value(getattr(options, "api_key", None))
        # One snapshot of the known secret values serves the whole call: looking them up
        # reads the environment, which costs more than redacting an event.
        redactor = current_redactor()
        payloads = recorded_request_payloads(model, context, options, redactor)
        # The lane name is the caller's text like any other: redacted (replay looks it up redacted).
        call = _CallRecorder(
            self._sink,
            self._sink.begin_call(payloads, redactor.redact_lane(current_lane())),
            redactor,
            check_arguments=self._check_arguments,
        )
        try:
            inner = getattr(self._provider, method)(model, context, options)
            iterator = inner.__aiter__()
        except asyncio.CancelledError:
            call.end_quietly("cancelled")
            raise
        except BaseException:
            call.end_quietly("error")
            raise
        # ``__anext__`` of what ``__aiter__`` returned, not ``async for`` (which would call
        # ``__aiter__`` again: an iterable may start a second stream).
        next_event, stored, line_of, write_line = (
            iterator.__anext__,
            call.stored,
            call.line_of,
            self._sink.write_event_line,
        )
        started, arrivals = call.started, call.arrivals
        arrival_of = _arrival_clock(self._provider)
        try:
            while True:
                try:
                    event = await next_event()
                except StopAsyncIteration:
                    # The provider broke the stream contract (no terminal event): an error.
                    call.flush()
                    call.end("error")
                    return
                # Written before the consumer sees it, unless its stored form must wait for
                # more of the stream (see ``StreamRedaction``); the usual delta is one event.
                # The stage releases in order: held events first (their times queued in
                # ``arrivals``), then this one, unless it is held too (its time is queued).
                t = (arrival_of() - started) // 1_000_000  # integer ops: no float, no int()
                held = True
                for ready in stored(event):
                    if arrivals:
                        write_line(line_of(ready, call.event_count, arrivals.popleft()))
                    else:
                        write_line(line_of(ready, call.event_count, t))
                        held = False
                    call.event_count += 1
                if held:
                    arrivals.append(t)
                if event.type in TERMINAL_EVENT_TYPES:
                    # before the consumer sees it: it may stop here
                    call.end("complete", _raw_answer(self._provider))
                    await _close_quietly(iterator)
                    yield event
                    return
                yield event
        except asyncio.CancelledError:
            call.end_quietly("cancelled")
            raise
        except GeneratorExit:
            call.end_quietly("abandoned")
            raise
        except BaseException:
            call.end_quietly("error")
            raise
        finally:
            await _close_quietly(iterator)


def _arrival_clock(provider: Any) -> Callable[[], int]:
    """When the event just received arrived: now, or the moment ``provider`` says (see the
    module docstring, "Timings")."""
    offer = getattr(provider, "event_arrival_ns", None)
    if not callable(offer):
        return monotonic_ns

    def arrival() -> int:
        arrived = offer()
        return monotonic_ns() if arrived is None else arrived

    return arrival


def _raw_answer(provider: Any) -> Any:
    """The vendor's answer ``provider`` offers for the call that just ended (see
    ``openprogram.providers.api_registry.VendorAnswer``), or None."""
    offer = getattr(provider, "raw_answer", None)
    return offer() if callable(offer) else None


#: Why a call that had the vendor's answer does not keep it (``vendor_answer_withheld``).
WITHHELD_REDACTED_OUTPUT = (
    "redaction replaced part of the model's output: the call replays from its events"
)
WITHHELD_CHANGED = "redaction would change the vendor's answer (a secret or a run value in it): the call replays from its events"
WITHHELD_NOT_TEXT = "the vendor's answer is not UTF-8 text: the call replays from its events"


def _kept_answer(
    answer: Any, redactor: Redactor, output_redacted: bool
) -> tuple[dict[str, Any] | None, str | None]:
    """The stored form of the vendor's answer, or why it is withheld. It is kept only when
    redaction, line by line by the rules of everything else, changes none of its bytes, and
    when nothing of the call's output was replaced (a secret split across deltas is whole in
    no single line: the events' stream redaction is what sees it)."""
    if output_redacted:
        return None, WITHHELD_REDACTED_OUTPUT
    stored = answer_field(answer.status, answer.content_type, list(answer.chunks), answer.complete)
    if stored is None:
        return None, WITHHELD_NOT_TEXT
    if not _unchanged_by_redaction(stored["body"], redactor):
        return None, WITHHELD_CHANGED
    return stored, None


def _unchanged_by_redaction(body: str, redactor: Redactor) -> bool:
    """Whether redaction leaves every line of ``body`` as it is: JSON (a whole JSON body, or
    the JSON of an SSE ``data:`` line) by the rules of a request's payloads, every other line
    by the text rules."""
    whole = _json_of(body)
    if whole is not None:
        return bool(redactor.remove_secret_values(whole) == whole)
    for line in body.split("\n"):
        if line.startswith("data:"):
            value = _json_of(line[5:])
            if value is not None:
                if redactor.remove_secret_values(value) != value:
                    return False
                continue
        if line and redactor.redact_text(line) != line:
            return False
    return True


def _json_of(text: str) -> Any:
    """The JSON object or array ``text`` holds, or None."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        return orjson.loads(stripped)
    except orjson.JSONDecodeError:
        return None


def _warn_redacted(path: Path, call_index: int, redactions: list[dict[str, Any]]) -> None:
    """Say once per call that the model's output lost something to redaction: the replay
    serves the placeholder there, so a test that then drifts is explained."""
    where = "; ".join(f"{item['path']} (rule: {', '.join(item['rules'])})" for item in redactions)
    logger.warning(
        "%s call %d: redaction replaced part of the model's output at %s; the recording holds %r "
        "there and a replay serves it",
        path,
        call_index,
        where,
        PLACEHOLDER,
    )


async def _close_quietly(iterator: Any) -> None:
    aclose = getattr(iterator, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except Exception:  # noqa: BLE001 - closing must not mask the call's own outcome
        pass
