"""API keys from the environment, and the set of secret values redaction must know about."""

from __future__ import annotations

import ipaddress
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from urllib.parse import urlparse

from .types import Model

PROVIDER_ENV_VARS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "google": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "groq": ("GROQ_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "together": ("TOGETHER_API_KEY",),
    "fireworks": ("FIREWORKS_API_KEY",),
}

# Local servers that accept any key, or none.
KEYLESS_PROVIDERS = frozenset(
    {"ollama", "vllm", "llama.cpp", "llamacpp", "lmstudio", "local", "faux"}
)

MIN_SECRET_LENGTH = 8

_seen_lock = threading.Lock()
_seen_keys: set[str] = set()

#: Why environment keys are withheld from the calls of this context (None: they are not).
_withheld: ContextVar[str | None] = ContextVar(
    "openprogram_withhold_environment_keys", default=None
)


def provider_env_vars(provider: str) -> tuple[str, ...]:
    """The environment variables consulted for ``provider``'s key, most preferred first."""
    known = PROVIDER_ENV_VARS.get(provider)
    if known:
        return known
    normalised = "".join(ch if ch.isalnum() else "_" for ch in provider.upper())
    return (f"{normalised}_API_KEY",)


def resolve_provider_key(provider: str) -> str | None:
    """The first non-empty key among ``provider``'s environment variables, else None."""
    for name in provider_env_vars(provider):
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


@contextmanager
def withhold_environment_keys(how_to_allow: str) -> Iterator[None]:
    """Inside the block (and the tasks it starts), a call that carries no key of its own gets
    none from the environment: for calls made on someone else's behalf, such as a proxy's,
    whose client must send its own key (docs/proxy.md, "Security"). ``how_to_allow`` ends the
    error of a call that needed a key, saying how to let the environment's be used."""
    token = _withheld.set(how_to_allow)
    try:
        yield
    finally:
        _withheld.reset(token)


def environment_keys_withheld() -> bool:
    """Whether :func:`withhold_environment_keys` is in force here."""
    return _withheld.get() is not None


def key_required(model: Model) -> bool:
    """Whether calling ``model`` without a key is an error rather than a local server."""
    if model.compat and model.compat.get("requires_api_key") is False:
        return False
    if model.provider in KEYLESS_PROVIDERS:
        return False
    host = urlparse(model.base_url).hostname if model.base_url else None
    if host:
        if host == "localhost":
            return False
        try:
            return not ipaddress.ip_address(host).is_loopback
        except ValueError:
            return True
    return True


def missing_key_message(model: Model) -> str:
    names = " or ".join(provider_env_vars(model.provider))
    withheld = _withheld.get()
    if withheld is not None:
        return (
            f"no API key for provider '{model.provider}' (model {model.provider}/{model.id}): the "
            f"request carried none, and {names} of this process is not used for it; {withheld}"
        )
    return (
        f"no API key for provider '{model.provider}' (model {model.provider}/{model.id}): "
        f"set {names}, or pass options.api_key"
    )


def note_secret_value(value: str | None) -> None:
    """Remember a key seen in this process so redaction can remove it wherever it appears."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _seen_lock:
            _seen_keys.add(value)


def seen_secret_values() -> frozenset[str]:
    """The keys seen in calls of this process (8 characters or more)."""
    with _seen_lock:
        return frozenset(_seen_keys)


def known_secret_values() -> frozenset[str]:
    """The provider credentials redaction must remove wherever they occur: the provider
    environment keys and every key seen in a call (8 characters or more). Read at every call,
    so a key set or changed mid-process is known at once. Redaction adds the values of other
    secret-named environment variables that read as credentials, and declared ones."""
    values = set()
    for names in PROVIDER_ENV_VARS.values():
        for name in names:
            value = os.environ.get(name, "").strip()
            if len(value) >= MIN_SECRET_LENGTH:
                values.add(value)
    with _seen_lock:
        values.update(_seen_keys)
    return frozenset(values)
