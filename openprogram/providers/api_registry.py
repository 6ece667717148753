"""The API registry: the single narrow point where a request leaves for a provider.

Record and replay are providers registered here through a transform, so no vendor module knows
about either. The registry keeps the original provider of every api next to what is served,
so a transform always wraps the original, never an already wrapped provider.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from typing import NamedTuple, Protocol, runtime_checkable

from .types import AssistantMessageEvent, Context, Model, SimpleStreamOptions, StreamOptions


@runtime_checkable
class ApiProvider(Protocol):
    """What the registry stores. ``requires_credentials`` is optional (absent means True)."""

    def stream(
        self, model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]: ...

    def stream_simple(
        self, model: Model, context: Context, options: SimpleStreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]: ...


class VendorAnswer(NamedTuple):
    """A vendor's answer to one call as it came over the wire: the HTTP status, the content
    type, and the body in the chunks it arrived in. A provider that received one MAY offer it
    through a ``raw_answer()`` method (None until its stream has ended, or when it has none);
    the recorder then keeps it beside the call's events (docs/file-format.md, "The vendor's
    answer"), and a replay through ``openprogram proxy`` serves those bytes. ``complete`` is
    False for an answer whose connection broke off after ``chunks``."""

    status: int
    content_type: str
    chunks: list[bytes]
    complete: bool = True


#: What the process-wide transform does to the provider registered for an api (wrap it for
#: record or replay, say); None hides the api.
ProviderTransform = Callable[[str, ApiProvider], ApiProvider | None]
#: A per-context route: like a transform, but it also sees apis with nothing registered
#: (``original`` None).
ScopedRoute = Callable[[str, ApiProvider | None], ApiProvider | None]

_lock = threading.RLock()
_originals: dict[str, ApiProvider] = {}
_served: dict[str, ApiProvider | None] = {}
_transform: ProviderTransform | None = None

# A per-context route (see :func:`routed`) that takes precedence over the process-wide
# transform for lookups made inside it. Only this module touches it.
_scoped_route: ContextVar[ScopedRoute | None] = ContextVar("openprogram_scoped_route", default=None)
# Per-context providers standing in for the registered ones (see :func:`providing`).
_overrides: ContextVar[dict[str, ApiProvider] | None] = ContextVar(
    "openprogram_provider_overrides", default=None
)


@contextlib.contextmanager
def routed(route: ScopedRoute) -> Iterator[None]:
    """Inside the block (and the tasks it starts, which copy the context), every lookup goes
    to ``route``, ahead of the process-wide transform: ``use_recording``, the proxy's own
    session, the pytest plugin's refusal of live calls and its watch of them. A route that
    wraps the one in force asks :func:`current_route` for it first. The route is a context
    variable, so two tests in one event loop, or two threads, each see their own."""
    token = _scoped_route.set(route)
    try:
        yield
    finally:
        _scoped_route.reset(token)


def current_route() -> ScopedRoute | None:
    """The route :func:`routed` put in force here (None: lookups go to the transform)."""
    return _scoped_route.get()


@contextlib.contextmanager
def providing(api: str, provider: ApiProvider) -> Iterator[None]:
    """Inside the block (and the tasks it starts), ``provider`` is ``api``'s provider in place
    of the registered one, and whatever serves lookups wraps it as it would wrap the
    registered one: a scoped route (``use_recording``) or the process-wide transform (record,
    replay, update). ``openprogram proxy`` builds a provider per request this way (its
    passthrough of the client's own bytes), without touching the registry other callers see."""
    current = _overrides.get()
    token = _overrides.set({**(current or {}), api: provider})
    try:
        yield
    finally:
        _overrides.reset(token)


def register_api_provider(api: str, provider: ApiProvider) -> None:
    """Store ``provider`` for ``api`` (wrapped by the installed transform, if any).

    If the transform raises, the registry is left exactly as it was and the error propagates.
    """
    with _lock:
        served = _transform(api, provider) if _transform is not None else provider
        _originals[api] = provider
        _served[api] = served


def register_api_providers(providers: dict[str, ApiProvider]) -> None:
    """Register several providers at once: all of them are published, or none."""
    with _lock:
        served = {
            api: (_transform(api, provider) if _transform is not None else provider)
            for api, provider in providers.items()
        }
        _originals.update(providers)
        _served.update(served)


def unregister_api_provider(api: str) -> None:
    with _lock:
        _originals.pop(api, None)
        _served.pop(api, None)


def configure_provider_transform(transform: ProviderTransform) -> None:
    """Install the one process-wide transform and apply it to every registered provider.

    Installing the same callable again does nothing; a different one raises ``RuntimeError``.
    A transform that raises for any api leaves the registry unchanged.
    """
    global _transform
    with _lock:
        if _transform is not None:
            if _transform is transform or _transform == transform:
                return
            raise RuntimeError(
                "a provider transform is already installed; it can be set once per process"
            )
        wrapped = {api: transform(api, provider) for api, provider in _originals.items()}
        _transform = transform
        _served.update(wrapped)


def get_api_provider(api: str) -> ApiProvider | None:
    """The provider serving ``api`` (after the runtime is initialised), or None."""
    from .initialization import initialize_provider_runtime

    initialize_provider_runtime()
    return lookup_registered_provider(api)


def lookup_registered_provider(api: str) -> ApiProvider | None:
    """The lookup itself, without initialising the runtime."""
    route = _scoped_route.get()
    overrides = _overrides.get()
    override = overrides.get(api) if overrides is not None else None
    with _lock:
        if route is not None:
            original = override if override is not None else _originals.get(api)
            return route(api, original)
        if override is not None:
            return _transform(api, override) if _transform is not None else override
        return _served.get(api)


def served_provider(api: str) -> ApiProvider | None:
    """What a lookup outside any scoped route gets for ``api`` (the registered provider, or the
    one :func:`providing` puts in its place, as the process-wide transform serves it): for a
    scoped route that changes only some apis."""
    overrides = _overrides.get()
    override = overrides.get(api) if overrides is not None else None
    with _lock:
        if override is not None:
            return _transform(api, override) if _transform is not None else override
        return _served.get(api)


def get_original_provider(api: str) -> ApiProvider | None:
    with _lock:
        return _originals.get(api)


def registered_apis() -> list[str]:
    with _lock:
        return sorted(_originals)


def installed_transform() -> ProviderTransform | None:
    return _transform


def _reset_registry_for_tests() -> None:
    global _transform
    with _lock:
        _originals.clear()
        _served.clear()
        _transform = None
