"""Built-in provider registration. Called by the runtime initialiser, never at import."""

from __future__ import annotations

from .api_registry import register_api_providers


def builtin_providers() -> dict[str, object]:
    """A fresh provider object for every built-in api. Vendor modules import their SDK lazily,
    inside a call, so building these is cheap."""
    from .faux import DEFAULT_FAUX_PROVIDER

    providers: dict[str, object] = {"faux": DEFAULT_FAUX_PROVIDER}
    return providers


def register_builtins() -> None:
    """Publish every built-in provider at once (all or none)."""
    register_api_providers(builtin_providers())
