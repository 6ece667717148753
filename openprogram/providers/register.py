"""Built-in provider registration. Called by the runtime initialiser, never at import."""

from __future__ import annotations

from .api_registry import ApiProvider, register_api_providers


def builtin_providers() -> dict[str, ApiProvider]:
    """A fresh provider object for every built-in api: each vendor of the one list
    (:mod:`.vendors.builtin`), and ``faux``. Vendor modules import their SDK lazily, inside a
    call, so building these is cheap."""
    from .faux import DEFAULT_FAUX_PROVIDER
    from .vendors.builtin import VENDORS

    providers = {vendor.api: vendor.provider() for vendor in VENDORS}
    providers["faux"] = DEFAULT_FAUX_PROVIDER
    return providers


def register_builtins() -> None:
    """Publish every built-in provider at once (all or none)."""
    register_api_providers(builtin_providers())
