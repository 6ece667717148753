"""The wire formats a proxy speaks, one row per api: which vendor module reads and writes it,
how a request says it wants a stream, and which of the client's headers travel on.

A vendor module (``openprogram/providers/vendors/``) owns both directions of its format; this
table only names them, so a fifth vendor is one more row (see docs/proxy.md)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast
from urllib.parse import parse_qsl

from ..providers.types import AssistantMessage, AssistantMessageEvent
from ..providers.vendors.wire import ParsedRequest


class WireEncoder(Protocol):
    def encode(self, event: AssistantMessageEvent) -> bytes: ...


class VendorWire(Protocol):
    """What a vendor module offers the proxy (the same names in every module)."""

    def parse_request_body(self, body: dict[str, Any], *, model_id: str | None = None) -> ParsedRequest: ...

    def StreamEncoder(self, request_body: dict[str, Any]) -> WireEncoder: ...  # noqa: N802 - a class

    def response_body(self, message: AssistantMessage, request_body: dict[str, Any]) -> dict[str, Any]: ...

    def error_body(self, status: int, message: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class WireFormat:
    api: str
    module: str
    #: The client's headers sent on with the live call (feature flags, never credentials).
    forwarded_headers: tuple[str, ...] = ()
    #: Streaming is asked by the path's action (Gemini) rather than by ``"stream": true``.
    streaming_action: str | None = None

    @property
    def vendor(self) -> VendorWire:
        module = importlib.import_module(f"openprogram.providers.vendors.{self.module}")
        return cast(VendorWire, module)

    def streams(self, body: dict[str, Any], action: str | None) -> bool:
        if self.streaming_action is not None:
            return action == self.streaming_action
        return body.get("stream") is True


FORMATS: dict[str, WireFormat] = {
    "openai-completions": WireFormat("openai-completions", "openai_completions"),
    "openai-responses": WireFormat("openai-responses", "openai_responses"),
    "anthropic-messages": WireFormat("anthropic-messages", "anthropic_messages", ("anthropic-beta",)),
    "google-generative-ai": WireFormat("google-generative-ai", "google_generative_ai", streaming_action="streamGenerateContent"),
}


#: The Gemini API versions a client's SDK may put in its paths.
GEMINI_VERSIONS = ("v1", "v1beta", "v1alpha")

#: The format of each fixed path the proxy serves.
_FORMAT_OF_PATH = {
    "/v1/chat/completions": "openai-completions",
    "/v1/responses": "openai-responses",
    "/v1/messages": "anthropic-messages",
}


def format_guess(scope: Mapping[str, Any]) -> WireFormat:
    """Whose error shape a request gets before a route has read it (an unknown path, a refused
    request): its path's format, else Anthropic's when its SDK's version header is there,
    Gemini's on a Gemini path, OpenAI's otherwise."""
    path = str(scope.get("path", ""))
    if path in _FORMAT_OF_PATH:
        return FORMATS[_FORMAT_OF_PATH[path]]
    headers = {bytes(name).decode("latin-1").lower() for name, _ in scope.get("headers", [])}
    if "anthropic-version" in headers:
        return FORMATS["anthropic-messages"]
    if any(path.startswith(f"/{version}/") for version in GEMINI_VERSIONS if version != "v1") or ":" in path:
        return FORMATS["google-generative-ai"]
    return FORMATS["openai-completions"]


def client_credential(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """The key the client sent, in whichever place its SDK puts it: ``Authorization: Bearer``
    (OpenAI, and Anthropic's SDK with an auth token), an ``...api-key`` header (Anthropic,
    Gemini), or Gemini's ``key`` query parameter. It is used for the live call only; the
    recorder never writes it (redaction removes every key a call used)."""
    authorization = headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    for name, value in headers.items():
        if name.lower().endswith("api-key") and value.strip():
            return value.strip()
    key = query.get("key")
    return key.strip() if key and key.strip() else None


def scope_credential(scope: Mapping[str, Any]) -> str | None:
    """:func:`client_credential` of an ASGI request not read yet (its scope)."""
    headers = {bytes(name).decode("latin-1").lower(): bytes(value).decode("latin-1") for name, value in scope.get("headers", [])}
    query = dict(parse_qsl(bytes(scope.get("query_string", b"")).decode("latin-1")))
    return client_credential(headers, query)


__all__ = ["FORMATS", "GEMINI_VERSIONS", "VendorWire", "WireEncoder", "WireFormat", "client_credential", "format_guess", "scope_credential"]
