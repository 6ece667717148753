"""What a recorded test's model calls went through, seen at the provider boundary.

The pytest plugin (:mod:`openprogram.testing`) wraps every provider a test looks up while it
records, updates or calls live, so that it can tell the user what the agent loop turned into
an answer: a live call the vendor never answered (the test fails with that cause, and nothing
of it is kept), an error the vendor did answer (recorded, and named in the test's report), and
a replay mismatch raised where the test cannot see it (a proxy's request thread). It also
keeps each call's final message (what the usage report and budgets count) and, when asked, the
request (what the prompt-cache check compares). The watch only observes: every event reaches
the caller unchanged, in order, at once.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openprogram.recordings.replay.differences import ReplayMismatch


@dataclass(frozen=True)
class WatchedCall:
    """A call the watch saw end: its number in the test (from 0), its lane, its final message
    (None when it stopped without one) and, when the watch keeps requests, its request as
    recorded (redacted payloads)."""

    call: int
    lane: str
    request: dict[str, Any] | None = None
    message: Any = None


@dataclass(frozen=True)
class CallFailure:
    """A call of the test that ended in an ``error`` event: its number in the test (from 0),
    the error message (redacted), and whether the vendor answered at all."""

    call: int
    message: str
    answered: bool

    def describe(self) -> str:
        if self.answered:
            return f"call {self.call} ended in an error the vendor sent (recorded: a replay serves it): {self.message}"
        return f"call {self.call} got no answer from the vendor: {self.message}"


class CallWatch:
    """The failures of one test's calls (safe to share with a proxy's request threads)."""

    def __init__(self) -> None:
        self.failures: list[CallFailure] = []
        #: The first replay mismatch a watched call raised.
        self.mismatch: ReplayMismatch | None = None
        #: Every call seen, in the order made (final message and, if kept, request).
        self.calls: list[WatchedCall] = []
        #: Keep each call's request (the prompt-cache check needs them; off by default).
        self.keep_requests = False
        self._calls = 0
        self._lock = threading.Lock()

    @property
    def unanswered(self) -> list[CallFailure]:
        return [failure for failure in self.failures if not failure.answered]

    @property
    def vendor_errors(self) -> list[CallFailure]:
        return [failure for failure in self.failures if failure.answered]

    def wrap(self, provider: Any) -> WatchedProvider:
        return WatchedProvider(provider, self)

    def _next_call(self) -> int:
        with self._lock:
            number = self._calls
            self._calls += 1
            return number

    def _saw_error(self, call: int, event: Any) -> None:
        from openprogram.providers.guard import got_no_answer
        from openprogram.recordings.redaction import current_redactor

        message = event.error.error_message or event.reason
        failure = CallFailure(
            call, current_redactor().redact_text(message), not got_no_answer(event)
        )
        with self._lock:
            self.failures.append(failure)

    def _saw_mismatch(self, mismatch: ReplayMismatch) -> None:
        with self._lock:
            if self.mismatch is None:
                self.mismatch = mismatch

    def _saw_end(self, call: int, lane: str, request: dict[str, Any] | None, message: Any) -> None:
        with self._lock:
            self.calls.append(WatchedCall(call, lane, request, message))

    async def events(
        self, inner: AsyncIterator[Any], request: dict[str, Any] | None = None
    ) -> AsyncIterator[Any]:
        """``inner``'s events, unchanged; an ``error`` event or a mismatch is noted first, and
        the final message when the call ends."""
        from openprogram.providers.lanes import current_lane
        from openprogram.recordings.replay.differences import ReplayMismatch

        call = self._next_call()
        lane = current_lane()
        ended = False
        iterator = inner.__aiter__()
        next_event = iterator.__anext__
        try:
            while True:
                try:
                    event = await next_event()
                except StopAsyncIteration:
                    return
                kind = event.type
                if kind == "done" or kind == "error":
                    # Noted at once: a consumer may stop reading at the final event, and the
                    # generator is then closed only when it is collected.
                    ended = True
                    self._saw_end(
                        call, lane, request, event.message if kind == "done" else event.error
                    )
                    if kind == "error":
                        self._saw_error(call, event)
                yield event
        except ReplayMismatch as mismatch:
            self._saw_mismatch(mismatch)
            raise
        finally:
            if not ended:  # stopped before its final event: no usage was reported
                self._saw_end(call, lane, request, None)
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()


class WatchedProvider:
    """A provider whose calls a :class:`CallWatch` observes."""

    def __init__(self, provider: Any, watch: CallWatch) -> None:
        self._provider = provider
        self._watch = watch

    @property
    def requires_credentials(self) -> bool:
        return bool(getattr(self._provider, "requires_credentials", True))

    @property
    def wrapped_provider(self) -> Any:
        return self._provider

    def stream(self, model: Any, context: Any, options: Any = None) -> AsyncIterator[Any]:
        return self._watch.events(
            self._provider.stream(model, context, options), self._request(model, context, options)
        )

    def stream_simple(self, model: Any, context: Any, options: Any = None) -> AsyncIterator[Any]:
        return self._watch.events(
            self._provider.stream_simple(model, context, options),
            self._request(model, context, options),
        )

    def _request(self, model: Any, context: Any, options: Any) -> dict[str, Any] | None:
        """The request as recorded, when the watch keeps requests (read now: the agent may
        change its context once the call is made)."""
        if not self._watch.keep_requests:
            return None
        from openprogram.recordings.file.format import request_payloads

        return request_payloads(model, context, options)


@contextlib.contextmanager
def watching(watch: CallWatch) -> Iterator[None]:
    """Wrap every provider looked up in this context (the route in force, a recording scope's
    included) in ``watch``."""
    from openprogram.providers.api_registry import current_route, routed, served_provider

    inner = current_route()

    def route(api: str, original: Any) -> Any:
        provider = inner(api, original) if inner is not None else served_provider(api)
        return None if provider is None else watch.wrap(provider)

    with routed(route):
        yield
