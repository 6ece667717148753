"""The one list of built-in vendors: every fact about a vendor that code outside its module
needs (its api, the SDK family that speaks it, its own server, the proxy's route for it), and
where its four roles live.

Registration (:mod:`openprogram.providers.register`), the failures a replay serves
(:mod:`.failures`), the proxy's formats, routes and upstreams, and the pytest plugin's network
apis all read this list, so a fifth vendor is one more entry here plus its module (see
``docs/architecture.md``).

Importing this module imports no vendor module and no SDK: an entry names its module by a
string and loads it on first use of a role, so ``import openprogram.providers`` stays fast.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..api_registry import ApiProvider

#: The four roles every vendor module defines, by the names it defines them under: the request
#: body builder and the stream translator (our call onto the vendor's wire and back), the
#: request parser and the stream encoder (a client's request onto our call and back, for
#: ``openprogram proxy``).
ROLES = ("build_request_body", "StreamTranslator", "parse_request_body", "StreamEncoder")


@dataclass(frozen=True)
class Vendor:
    """One built-in vendor. ``module`` is its module's name under ``providers/vendors/``;
    the proxy's fields say how its wire looks to a client (docs/proxy.md)."""

    api: str
    module: str
    #: The class of the provider the registry serves for ``api``.
    provider_class: str
    #: The SDK family that speaks the api (``openai``, ``anthropic``, ``google``): whose
    #: errors and fault answers a replay serves.
    sdk: str
    #: The vendor's own server: where a live proxied call goes when no upstream is configured.
    upstream: str
    #: The path the proxy serves the api on.
    route: str
    #: The key of the request body's list of messages (or items).
    messages_key: str
    #: The client's headers the proxy sends on with a live call (feature flags, never keys).
    forwarded_headers: tuple[str, ...] = ()
    #: Streaming is asked by the path's action (Gemini) rather than by ``"stream": true``.
    streaming_action: str | None = None
    #: Where a key goes: a header and what precedes the key in it, or ``("?", name)`` for a
    #: query parameter.
    credential_header: tuple[str, str] = ("authorization", "Bearer ")
    #: What of the client's path the upstream's base URL already ends with.
    base_path: str = ""
    #: A request header only this vendor's SDK sends: whose shape a request gets before a
    #: route has read it, and whose listing ``GET /v1/models`` answers.
    identifying_header: str | None = None

    @property
    def module_path(self) -> str:
        return f"{__package__}.{self.module}"

    def load(self) -> ModuleType:
        """The vendor's module (imported on first use; its SDK is still imported lazily)."""
        return importlib.import_module(self.module_path)

    def role(self, name: str) -> Any:
        """One of the :data:`ROLES` of this vendor."""
        if name not in ROLES:
            raise ValueError(f"unknown vendor role {name!r} (one of {', '.join(ROLES)})")
        return getattr(self.load(), name)

    @property
    def build_request_body(self) -> Any:
        return self.role("build_request_body")

    @property
    def stream_translator(self) -> Any:
        return self.role("StreamTranslator")

    @property
    def parse_request_body(self) -> Any:
        return self.role("parse_request_body")

    @property
    def stream_encoder(self) -> Any:
        return self.role("StreamEncoder")

    def provider(self) -> ApiProvider:
        """A fresh provider object for the api (building one imports no SDK)."""
        provider: ApiProvider = getattr(self.load(), self.provider_class)()
        return provider


OPENAI_UPSTREAM = "https://api.openai.com/v1"

VENDORS: tuple[Vendor, ...] = (
    Vendor(
        api="openai-completions",
        module="openai_completions",
        provider_class="OpenAICompletionsProvider",
        sdk="openai",
        upstream=OPENAI_UPSTREAM,
        route="/v1/chat/completions",
        messages_key="messages",
        base_path="/v1",
    ),
    Vendor(
        api="openai-responses",
        module="openai_responses",
        provider_class="OpenAIResponsesProvider",
        sdk="openai",
        upstream=OPENAI_UPSTREAM,
        route="/v1/responses",
        messages_key="input",
        base_path="/v1",
    ),
    Vendor(
        api="anthropic-messages",
        module="anthropic_messages",
        provider_class="AnthropicMessagesProvider",
        sdk="anthropic",
        upstream="https://api.anthropic.com",
        route="/v1/messages",
        messages_key="messages",
        forwarded_headers=("anthropic-beta",),
        credential_header=("x-api-key", ""),
        identifying_header="anthropic-version",
    ),
    Vendor(
        api="google-generative-ai",
        module="google_generative_ai",
        provider_class="GoogleGenerativeAIProvider",
        sdk="google",
        upstream="https://generativelanguage.googleapis.com",
        route="/{version}/models/{target}",
        messages_key="contents",
        streaming_action="streamGenerateContent",
        credential_header=("?", "key"),
    ),
)

_BY_API: dict[str, Vendor] = {vendor.api: vendor for vendor in VENDORS}

#: Every built-in vendor's api, in the list's order.
VENDOR_APIS: tuple[str, ...] = tuple(_BY_API)

#: The api whose shape a request gets before anything says whose it is (every compatible
#: server copies OpenAI's).
DEFAULT_API = VENDORS[0].api


def vendor_of(api: str) -> Vendor | None:
    """The built-in vendor speaking ``api``, or None (``faux``, a user-registered api)."""
    return _BY_API.get(api)


def vendor(api: str) -> Vendor:
    """The built-in vendor speaking ``api``; ``KeyError`` naming the known ones otherwise."""
    found = _BY_API.get(api)
    if found is None:
        raise KeyError(f"no built-in vendor speaks api {api!r} (one of {', '.join(VENDOR_APIS)})")
    return found


__all__ = ["DEFAULT_API", "ROLES", "VENDORS", "VENDOR_APIS", "Vendor", "vendor", "vendor_of"]
