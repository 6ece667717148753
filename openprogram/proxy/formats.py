"""The wire formats a proxy speaks, one per vendor of the one list
(:mod:`openprogram.providers.vendors.builtin`): which vendor module reads and writes it, how a
request says it wants a stream, and which of the client's headers travel on.

A vendor module (``openprogram/providers/vendors/``) owns both directions of its format; this
module only reads the list, so a fifth vendor is one more entry there (see docs/proxy.md)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast
from urllib.parse import parse_qsl

from ..providers.assembly import AssistantStreamAssembler
from ..providers.types import AssistantMessage, AssistantMessageEvent
from ..providers.vendors.builtin import DEFAULT_API, VENDORS, Vendor
from ..providers.vendors.wire import ParsedRequest


class WireEncoder(Protocol):
    def encode(self, event: AssistantMessageEvent) -> bytes: ...


class AnswerReader(Protocol):
    """A vendor module's reader of its own answer's JSON, into events."""

    def sse(self, event: str | None, data: str) -> list[AssistantMessageEvent]: ...

    def body(self, body: Any) -> list[AssistantMessageEvent]: ...

    def end(self) -> list[AssistantMessageEvent]: ...


class VendorWire(Protocol):
    """What a vendor module offers the proxy (the same names in every module)."""

    def AnswerReader(self, assembler: AssistantStreamAssembler) -> AnswerReader: ...  # noqa: N802 - a class

    def parse_request_body(
        self, body: dict[str, Any], *, model_id: str | None = None
    ) -> ParsedRequest: ...

    def StreamEncoder(self, request_body: dict[str, Any]) -> WireEncoder: ...  # noqa: N802 - a class

    def response_body(
        self, message: AssistantMessage, request_body: dict[str, Any]
    ) -> dict[str, Any]: ...

    def error_body(self, status: int, message: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class WireFormat:
    api: str
    module: str
    #: The client's headers sent on with the live call (feature flags, never credentials).
    forwarded_headers: tuple[str, ...] = ()
    #: Streaming is asked by the path's action (Gemini) rather than by ``"stream": true``.
    streaming_action: str | None = None
    #: Where a key goes, for a live call the client sent without one (the key the proxy's
    #: environment holds, where it may go): a header and what precedes the key in it, or
    #: ``("?", name)`` for a query parameter.
    credential_header: tuple[str, str] = ("authorization", "Bearer ")
    #: What of the client's path the upstream's base URL already ends with (OpenAI's base URLs
    #: end with ``/v1``; Anthropic's and Gemini's are the bare host).
    base_path: str = ""

    @property
    def vendor(self) -> VendorWire:
        module = importlib.import_module(f"openprogram.providers.vendors.{self.module}")
        return cast(VendorWire, module)

    def streams(self, body: dict[str, Any], action: str | None) -> bool:
        if self.streaming_action is not None:
            return action == self.streaming_action
        return body.get("stream") is True

    def answers_with_events(self, streaming: bool, query: Mapping[str, str]) -> bool:
        """Whether a successful answer to such a request is server-sent events (Gemini
        streams a JSON array unless asked ``alt=sse``)."""
        if self.streaming_action is not None:
            return streaming and query.get("alt") == "sse"
        return streaming

    def upstream_url(self, base_url: str, path: str, query: bytes) -> str:
        """Where the client's ``path`` and ``query`` go under an upstream's ``base_url``."""
        if self.base_path and path.startswith(self.base_path + "/"):
            path = path[len(self.base_path) :]
        url = base_url.rstrip("/") + path
        return f"{url}?{query.decode('latin-1')}" if query else url


def _wire_format(vendor: Vendor) -> WireFormat:
    return WireFormat(
        vendor.api,
        vendor.module,
        vendor.forwarded_headers,
        streaming_action=vendor.streaming_action,
        credential_header=vendor.credential_header,
        base_path=vendor.base_path,
    )


#: One format per vendor of the one list (:mod:`openprogram.providers.vendors.builtin`).
FORMATS: dict[str, WireFormat] = {vendor.api: _wire_format(vendor) for vendor in VENDORS}


#: The Gemini API versions a client's SDK may put in its paths.
GEMINI_VERSIONS = ("v1", "v1beta", "v1alpha")

#: The format of each fixed path the proxy serves (a path with a ``{`` takes parameters).
_FORMAT_OF_PATH = {vendor.route: vendor.api for vendor in VENDORS if "{" not in vendor.route}
#: The format of each header only one vendor's SDK sends.
_FORMAT_OF_HEADER = {
    vendor.identifying_header: vendor.api for vendor in VENDORS if vendor.identifying_header
}
#: The format whose streaming is asked by the path's action (Gemini's ``model:action`` paths).
_ACTION_FORMATS = [vendor.api for vendor in VENDORS if vendor.streaming_action is not None]


def format_guess(scope: Mapping[str, Any]) -> WireFormat:
    """Whose error shape a request gets before a route has read it (an unknown path, a refused
    request): its path's format, else Anthropic's when its SDK's version header is there,
    Gemini's on a Gemini path, OpenAI's otherwise."""
    path = str(scope.get("path", ""))
    if path in _FORMAT_OF_PATH:
        return FORMATS[_FORMAT_OF_PATH[path]]
    headers = {bytes(name).decode("latin-1").lower() for name, _ in scope.get("headers", [])}
    for header, api in _FORMAT_OF_HEADER.items():
        if header in headers:
            return FORMATS[api]
    if (
        any(path.startswith(f"/{version}/") for version in GEMINI_VERSIONS if version != "v1")
        or ":" in path
    ):
        return FORMATS[_ACTION_FORMATS[0]]
    return FORMATS[DEFAULT_API]


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
    headers = {
        bytes(name).decode("latin-1").lower(): bytes(value).decode("latin-1")
        for name, value in scope.get("headers", [])
    }
    query = dict(parse_qsl(bytes(scope.get("query_string", b"")).decode("latin-1")))
    return client_credential(headers, query)


__all__ = [
    "FORMATS",
    "GEMINI_VERSIONS",
    "VendorWire",
    "WireEncoder",
    "WireFormat",
    "client_credential",
    "format_guess",
    "scope_credential",
]
