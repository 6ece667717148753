"""The proxy serves its owner only: one ASGI layer at the edge that every request passes first
(docs/proxy.md, "Security").

Listening on loopback keeps other machines out, but not other *web pages*. A page the owner
visits can make the browser send requests to ``http://127.0.0.1:8765``, and the proxy acts on
them before anyone reads an answer: a live call spends a key, a recording session writes the
page's prompt into the file. Three checks close that door:

- **JSON only.** A page may send a "simple" cross-site request without asking first: a ``POST``
  whose body is ``text/plain``, a form, or has no content type. Anything else, such as
  ``application/json``, makes the browser ask the server first (a CORS preflight), and the
  proxy never says yes. So a body not sent as JSON is refused, and the SDKs (and ``curl -H
  'content-type: application/json'``) all send JSON.
- **Origin.** A browser names the page behind every cross-site request in ``Origin``; a request
  that names a page off this machine (or ``null``: a sandboxed page, a ``file:`` one) is
  refused. Programs send no ``Origin`` at all.
- **Host**, against DNS rebinding, which gets round both: the attacker points a name they own
  at ``127.0.0.1``, so to the browser ``http://evil.example:8765`` is the page's *own* origin:
  no preflight, no ``Origin`` to refuse, and the page can even read the answers (a replay's
  recorded prompts and replies). The one thing it cannot change is the ``Host`` header, which
  still carries its name: only ``localhost`` and loopback addresses are answered, and the IP
  address the request came in on (a proxy started with ``--host`` beyond loopback answers
  clients that use its address; an address, unlike a name, cannot be rebound).

The ``Host`` value is parsed, not sliced: Starlette's ``TrustedHostMiddleware`` cuts it at the
first ``:``, which turns ``[::1]:8765`` into ``[``. Brackets, a port and one trailing dot
(``localhost.`` names the same host) are understood; ``@``, ``/``, ``?``, ``#`` and ``\\`` are
refused, so ``evil.example@127.0.0.1`` is not read as loopback.

None of this stops another program on the same machine, which can send any header it likes.
That is what the ``llm_proxy`` fixture's per-test key is for (``ProxySettings.client_token``:
every request must carry it), and why the proxy adds no key of its own environment to a request
unless started with ``--env-keys``.

A refused request is answered in the error shape of the SDK that most likely sent it (403 for
``Host`` and ``Origin``, 401 without the test's key, 415 for a body not sent as JSON), with the
header at fault and the fix; nothing behind this layer runs, so nothing is called or recorded.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from .exchange import PREFIX, send_error
from .formats import format_guess, scope_credential

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: A ``Host`` value: a name or a bracketed IPv6 address, then an optional port; nothing else
#: (no ``@``, ``/``, ``?``, ``#`` or spaces, so ``evil.example@127.0.0.1`` is no loopback).
_HOST = re.compile(r"(?:\[(?P<ipv6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9._-]+))(?::[0-9]{0,5})?\Z")
#: What a refusal may quote of a header's value: short, and of characters no secret hides in
#: unnoticed (a longer or stranger value is described instead of shown).
_QUOTABLE = re.compile(r"[A-Za-z0-9.:\[\]/_+;= -]{1,80}\Z")
#: Media types a JSON body may be sent as: ``application/json`` and ``application/*+json``.
_JSON_TYPE = re.compile(r"application/(?:[a-z0-9.!#$&^_-]+\+)?json\Z")
#: Methods that carry no body, which need no content type.
_BODILESS = frozenset({"GET", "HEAD"})


def hostname_of(host_header: str) -> str | None:
    """The lower-case host name in a ``Host`` header value (brackets, port and one trailing dot
    dropped), or None when the value is not one."""
    found = _HOST.match(host_header)
    if found is None:
        return None
    if found["ipv6"] is not None:
        return (
            found["ipv6"].lower()
            if isinstance(_address(found["ipv6"]), ipaddress.IPv6Address)
            else None
        )
    return found["name"].lower().removesuffix(".") or None


def is_loopback(hostname: str) -> bool:
    """``localhost``, or a loopback address (``127.0.0.0/8``, ``::1``, and ``127.x`` written as
    an IPv4-mapped IPv6 address)."""
    if hostname == "localhost":
        return True
    address = _address(hostname)
    if address is None:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def _address(hostname: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(hostname)
    except ValueError:
        return None


def host_allowed(host_header: str, server_host: str | None = None) -> bool:
    """Whether a request addressed to ``host_header`` is answered: ``localhost``, a loopback
    address, or the IP address the request came in on (``server_host``)."""
    hostname = hostname_of(host_header)
    if hostname is None:
        return False
    if is_loopback(hostname):
        return True
    address = _address(hostname)
    return (
        address is not None
        and server_host is not None
        and address == _address(server_host.strip("[]"))
    )


def origin_allowed(origin: str) -> bool:
    """Whether a page at ``origin`` may call: one served from this machine (``http://localhost:3000``,
    ``http://127.0.0.1:5173``); never ``null``."""
    try:
        parsed = urlsplit(origin)
    except ValueError:
        return False
    if parsed.scheme not in ("http", "https") or parsed.path or parsed.query or parsed.fragment:
        return False
    if "@" in parsed.netloc:
        return False
    hostname = hostname_of(parsed.netloc)
    return hostname is not None and is_loopback(hostname)


def is_json(content_type: str) -> bool:
    """Whether a ``Content-Type`` value names JSON (``application/json; charset=utf-8``,
    ``application/vnd.api+json``)."""
    media = content_type.split(";", 1)[0].strip().lower()
    return bool(_JSON_TYPE.match(media))


def _shown(value: str) -> str:
    return repr(value) if _QUOTABLE.match(value) else f"a value of {len(value)} characters"


class OwnerOnly:
    """The ASGI layer in front of the proxy's routes: ``Host``, ``Origin``, the test's key (when
    ``client_token`` is set) and the body's content type, checked in that order."""

    def __init__(self, app: ASGIApp, client_token: str | None = None) -> None:
        self.app = app
        self.client_token = client_token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, message = refusal
        await send_error(
            send,
            format_guess(scope).vendor,
            status,
            PREFIX + "refused: " + message,
            scope_credential(scope),
        )

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """Why a request is refused (its status and the message), or None to answer it."""
        headers = _headers(scope)
        server = scope.get("server")
        server_host = server[0] if server else None
        port = f":{server[1]}" if server and server[1] else ""
        host = headers.get("host", "")
        if not host_allowed(host, server_host):
            named = hostname_of(host)
            what = (
                f"names {_shown(named)}"
                if named
                else ("is missing" if not host else "cannot be read")
            )
            return 403, (
                f"the Host header {what}: this proxy answers only requests addressed to localhost or "
                "a loopback address, so that a web page cannot reach it through a name of its own (DNS "
                f"rebinding); point the client at http://127.0.0.1{port}"
            )
        origin = headers.get("origin")
        if origin is not None and not origin_allowed(origin):
            return 403, (
                f"the Origin header names a web page ({_shown(origin)}) not served from this machine: "
                "this proxy answers programs on this machine and pages served from localhost only; "
                "call it from your code (SDKs send no Origin), not from a browser page elsewhere"
            )
        if self.client_token is not None and not self._carries_token(scope):
            return 401, (
                "this proxy serves one test's llm_proxy fixture and answers only requests that carry "
                "that test's key; build the SDK client inside the test, so that it reads the key "
                "variables the fixture set (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY)"
            )
        if str(scope.get("method", "")).upper() not in _BODILESS:
            content_type = headers.get("content-type")
            if content_type is None or not is_json(content_type):
                sent = (
                    f"not {_shown(content_type)}" if content_type else "not without a Content-Type"
                )
                return 415, (
                    f"the body must be sent as JSON (Content-Type: application/json), {sent}: a web "
                    "page can send text or a form to any address without asking, JSON it cannot; "
                    "with curl, add -H 'content-type: application/json'"
                )
        return None

    def _carries_token(self, scope: Scope) -> bool:
        credential = scope_credential(scope)
        assert self.client_token is not None
        return credential is not None and hmac.compare_digest(
            credential.encode(), self.client_token.encode()
        )


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name; one sent twice has its values joined by ", "
    (as HTTP reads a repeated header), which no check accepts for ``Host`` or ``Origin``."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", []):
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


__all__ = ["OwnerOnly", "host_allowed", "hostname_of", "is_json", "is_loopback", "origin_allowed"]
