"""The API registry: the single narrow point where a request leaves for a provider.

Record and replay are providers registered here through a transform, so no vendor module knows
about either. The registry keeps the original provider of every api next to what is served,
so a transform always wraps the original, never an already wrapped provider.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from typing import Protocol, runtime_checkable

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

# A per-context route (see ``openprogram.providers.scoped.use_recording``) that takes precedence
# over the process-wide transform for lookups made inside it.
_scoped_route: ContextVar[ScopedRoute | None] = ContextVar(
    "openprogram_scoped_route", default=None
)


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
    with _lock:
        if route is not None:
            original = _originals.get(api)
            return route(api, original)
        return _served.get(api)


def served_provider(api: str) -> ApiProvider | None:
    """What a lookup outside any scoped route gets for ``api`` (the registered provider, as the
    process-wide transform serves it): for a scoped route that changes only some apis."""
    with _lock:
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
