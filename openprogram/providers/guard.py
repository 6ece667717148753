"""The event stream contract, enforced once for every provider.

A provider's own generator only has to describe the happy path with an
:class:`~openprogram.providers.assembly.AssistantStreamAssembler`. :func:`guarded_stream`
turns everything else into the single terminal ``error`` event the contract requires: an
exception from the SDK, a stream that stops without finishing, and an abort signal, which is
honoured promptly even while the provider is waiting on the network.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Callable

from .assembly import AssistantEvent, AssistantStreamAssembler
from .types import TERMINAL_EVENT_TYPES, EventError

ErrorDescriber = Callable[[BaseException], str]

SECRET_PLACEHOLDER = "[secret removed]"


def without_secrets(describe: ErrorDescriber, api_key: str | None) -> ErrorDescriber:
    """Wrap an error describer so that no known credential (this call's key, the provider
    environment variables) survives in the message, even when a vendor echoes it back."""
    from .credentials import MIN_SECRET_LENGTH, known_secret_values

    secrets = set(known_secret_values())
    if api_key and len(api_key) >= MIN_SECRET_LENGTH:
        secrets.add(api_key)
    ordered = sorted(secrets, key=len, reverse=True)

    def scrubbed(error: BaseException) -> str:
        text = describe(error)
        for secret in ordered:
            text = text.replace(secret, SECRET_PLACEHOLDER)
        return text

    return scrubbed


class CallNotSent(Exception):
    """A failure before any request left the process (no key to send): the vendor never saw
    the call. Providers raise subclasses of it inside their producer."""


#: ``id()`` of the ``error`` events of calls the vendor never answered, while those events
#: live. A side table rather than a field or a private attribute: pydantic compares private
#: attributes in ``==``, and the event must stay equal to its recorded and replayed copies.
_unanswered_events: set[int] = set()


def got_no_answer(event: object) -> bool:
    """Whether ``event`` is the ``error`` event of a call the vendor never answered: the
    connection was refused or timed out, the host did not resolve, no key was there to send,
    and no content had arrived. A recorded test fails on such a call instead of keeping a
    failure it would replay forever (docs/tutorial.md, "Failed live calls")."""
    return id(event) in _unanswered_events


def _mark_unanswered(event: EventError) -> EventError:
    key = id(event)
    _unanswered_events.add(key)
    weakref.finalize(event, _unanswered_events.discard, key)
    return event


def is_unanswered_failure(error: BaseException) -> bool:
    """An exception that means no answer came from the vendor (an HTTP status is an answer).
    Judged by the exception and its causes: the SDKs wrap httpx's and the socket's errors."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(getattr(current, "status_code", None), int):
            return False
        if isinstance(current, CallNotSent | ConnectionError | TimeoutError):
            return True
        name = type(current).__name__
        # The SDKs' APIConnectionError / APITimeoutError, httpx's ConnectError / ConnectTimeout
        # / ReadTimeout, and socket.gaierror (an OSError) for a host that does not resolve.
        if "Connect" in name or "Timeout" in name or name == "gaierror":
            return True
        current = current.__cause__ or current.__context__
    return False


def describe_plain_error(label: str) -> ErrorDescriber:
    def describe(error: BaseException) -> str:
        text = str(error).strip()
        kind = type(error).__name__
        return f"{label}: {kind}: {text}" if text else f"{label}: {kind}"

    return describe


async def guarded_stream(
    assembler: AssistantStreamAssembler,
    produce: AsyncIterator[AssistantEvent],
    *,
    signal: asyncio.Event | None,
    describe_error: ErrorDescriber,
) -> AsyncIterator[AssistantEvent]:
    """Yield ``produce``'s events, guaranteeing exactly one terminal event, last.

    The producer runs in the consumer's task (SDK streams may not be moved between tasks);
    an abort while it waits is delivered by cancelling that task only while it is inside the
    producer, so the consumer's own code is never interrupted.
    """
    watcher: asyncio.Task[None] | None = None
    current = asyncio.current_task()
    inside_producer = False
    abort_requested = False

    async def cancel_on_signal() -> None:
        nonlocal abort_requested
        assert signal is not None
        await signal.wait()
        if inside_producer and current is not None:
            abort_requested = True
            current.cancel()

    if signal is not None and current is not None:
        watcher = asyncio.get_running_loop().create_task(cancel_on_signal())

    try:
        while True:
            if signal is not None and signal.is_set():
                yield assembler.fail("Request was aborted", aborted=True)
                return
            inside_producer = True
            try:
                event = await anext(produce)
            except StopAsyncIteration:
                inside_producer = False
                yield assembler.fail(
                    describe_error(
                        ConnectionError("the stream ended before the response was complete")
                    )
                )
                return
            except asyncio.CancelledError:
                inside_producer = False
                if abort_requested and current is not None:
                    abort_requested = False
                    current.uncancel()
                    if current.cancelling() == 0:
                        yield assembler.fail("Request was aborted", aborted=True)
                        return
                raise
            except Exception as error:  # noqa: BLE001 - every failure becomes an error event
                inside_producer = False
                if signal is not None and signal.is_set():
                    yield assembler.fail("Request was aborted", aborted=True)
                else:
                    failed = assembler.fail(describe_error(error))
                    if not failed.error.content and is_unanswered_failure(error):
                        _mark_unanswered(failed)
                    yield failed
                return
            inside_producer = False
            yield event
            if event.type in TERMINAL_EVENT_TYPES:
                return
    finally:
        inside_producer = False
        if watcher is not None:
            watcher.cancel()
        aclose = getattr(produce, "aclose", None)
        if aclose is not None:
            try:
                await aclose()
            except Exception:  # noqa: BLE001 - closing a broken SDK stream must not mask the result
                pass
