"""Where a key may go: a credential from the environment or the user's configuration is sent
only to its vendor's own hosts, to loopback, or to a host the user's own configuration trusts
(docs/project.md, "Security").

A project file is data anyone can commit: a ``[[models]]`` entry that moves ``gpt-4o-mini`` to
another server, or a ``proxy.upstream``, must not carry the developer's ``OPENAI_API_KEY``
there. So the host of a call's ``base_url`` is checked before an environment key is attached:

* the vendor's own hosts (those of the built-in catalog for the model's provider, and the
  SDKs' defaults) are trusted;
* a loopback address or ``localhost`` is trusted (a local server), except for a built-in model
  moved there: another local user's server is loopback too, and the built-in id is what the
  developer's code asks for without looking at the project file;
* a host named in ``trusted_hosts`` of the user's configuration (``openprogram config set``), or
  by a model of the user's own configuration, is trusted; a project file cannot add either.

Everything else gets the call without the key; the failure names the host and how to trust it.
A key the caller passes itself (``options.api_key``) goes where the caller sends it.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import shlex
from urllib.parse import urlparse

from .types import Model

#: The hosts of each vendor's SDK default, besides those of the built-in catalog.
SDK_DEFAULT_HOSTS: dict[str, tuple[str, ...]] = {
    "openai": ("api.openai.com",),
    "anthropic": ("api.anthropic.com",),
    "google": ("generativelanguage.googleapis.com",),
}


def host_of(url: str | None) -> str | None:
    """The host a URL names, lower-case, without a trailing dot; None without one."""
    if not url:
        return None
    try:
        host = urlparse(url).hostname
    except ValueError:
        return None
    return host.rstrip(".").lower() if host else None


def is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@functools.cache
def vendor_hosts(provider: str) -> frozenset[str]:
    """The hosts ``provider``'s key belongs to: its SDK default and its built-in models'."""
    from .models import builtin_models

    hosts = set(SDK_DEFAULT_HOSTS.get(provider, ()))
    for model in builtin_models():
        host = host_of(model.base_url)
        if model.provider == provider and host is not None and not is_loopback(host):
            hosts.add(host)
    return frozenset(hosts)


@functools.cache
def _builtin_hosts() -> dict[tuple[str, str], str | None]:
    from .models import builtin_models

    return {(model.provider, model.id): host_of(model.base_url) for model in builtin_models()}


def user_trusted_hosts() -> frozenset[str]:
    """``trusted_hosts`` of the user's configuration, and the hosts of the user's own models
    (a host the user wrote into their own configuration is one they chose). An unreadable
    configuration trusts nothing more."""
    from ..state import ConfigError, load_config

    try:
        config = load_config()
    except ConfigError:
        return frozenset()
    hosts = {
        host.strip("[]").rstrip(".").lower()
        for host in config.get("trusted_hosts") or []
        if isinstance(host, str)
    }
    for entry in config.get("models") or []:
        host = host_of(entry.get("base_url")) if isinstance(entry, dict) else None
        if host is not None:
            hosts.add(host)
    return frozenset(hosts)


def key_refusal(model: Model) -> str | None:
    """Why ``model``'s environment key must not be sent to its ``base_url`` (None: it may be),
    as a message naming the host and how to trust it."""
    host = host_of(model.base_url)
    if host is None or host in vendor_hosts(model.provider):
        return None
    builtin = (model.provider, model.id) in _builtin_hosts()
    moved = builtin and _builtin_hosts()[(model.provider, model.id)] != host
    if is_loopback(host) and not moved:
        return None
    if host in user_trusted_hosts():
        return None
    what = f"the built-in model {model.provider}/{model.id} moved to {host}" if moved else f"{host}"
    return untrusted_host_message(host, what)


def untrusted_host_message(host: str, what: str) -> str:
    """The refusal for ``host`` (``what`` says what was to be sent there)."""
    from ..state import ConfigError, load_config

    try:
        current = [h for h in load_config().get("trusted_hosts") or [] if isinstance(h, str)]
    except ConfigError:
        current = []
    trusted = json.dumps(list(dict.fromkeys([*current, host])))
    return (
        f"key not sent to {what}: a key from your environment or configuration goes only to its "
        "vendor's own hosts, loopback, and hosts you trust (a project file cannot choose them). "
        f"If you trust {host}: openprogram config set trusted_hosts {shlex.quote(trusted)}"
    )


def host_trusted_for_key(host: str | None, default_hosts: frozenset[str]) -> bool:
    """Whether a key may go to ``host``, where ``default_hosts`` are the vendor's own (the
    proxy's upstream check: no built-in model is involved)."""
    if host is None or host in default_hosts or is_loopback(host):
        return True
    return host in user_trusted_hosts()


__all__ = [
    "host_of",
    "host_trusted_for_key",
    "is_loopback",
    "key_refusal",
    "untrusted_host_message",
    "user_trusted_hosts",
    "vendor_hosts",
]
