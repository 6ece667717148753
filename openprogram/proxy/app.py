"""The proxy's ASGI application: the route of each vendor's wire format (the one list,
:mod:`openprogram.providers.vendors.builtin`) and ``GET /v1/models``,
behind :class:`.guard.OwnerOnly`, which every request passes first.

Built on Starlette (the ``openprogram[proxy]`` extra), imported only when a proxy starts."""

from __future__ import annotations

import functools
import logging
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..providers.vendors.builtin import VENDORS
from .exchange import PREFIX, AnswerBrokeOff, IncomingRequest, answer, send_error
from .faults import until_disconnected
from .formats import (
    FORMATS,
    GEMINI_VERSIONS,
    WireFormat,
    client_credential,
    format_guess,
    scope_credential,
)
from .guard import OwnerOnly
from .lanes import LaneBook
from .settings import ProxySettings

logger = logging.getLogger("openprogram.proxy")


class _Endpoint:
    """One wire format's route: reads the request and hands it to :func:`.exchange.answer`. A
    failure of the proxy itself is answered in the vendor's shape too (500), and logged."""

    def __init__(self, wire_format: WireFormat, settings: ProxySettings, lanes: LaneBook) -> None:
        self.wire_format = wire_format
        self.settings = settings
        self.lanes = lanes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        model_id = action = None
        if self.wire_format.streaming_action is not None:
            if request.path_params.get("version") not in GEMINI_VERSIONS:
                await _not_found(scope, receive, send)
                return
            model_id, _, action = str(request.path_params.get("target", "")).partition(":")
            if action not in ("generateContent", "streamGenerateContent") or not model_id:
                await _not_found(scope, receive, send)
                return
        incoming = IncomingRequest(
            headers={name.lower(): value for name, value in request.headers.items()},
            query=dict(request.query_params),
            body=await request.body(),
            model_id=model_id,
            action=action,
            method=request.method,
            path=(scope.get("raw_path") or b"").decode("latin-1") or request.url.path,
            query_string=scope.get("query_string", b""),
            raw_headers=tuple(request.headers.items()),
            disconnected=functools.partial(until_disconnected, receive),
        )
        started = False

        async def tracked(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await answer(self.wire_format, self.settings, self.lanes, incoming, tracked)
        except AnswerBrokeOff as error:  # the client's connection drops, as the vendor's did
            logger.warning("openprogram proxy: %s", error)
        except Exception as error:
            logger.exception("openprogram proxy: a request failed")
            if not started:
                message = f"{PREFIX}internal error: {type(error).__name__}: {error}"
                credential = client_credential(incoming.headers, incoming.query)
                await send_error(send, self.wire_format.vendor, 500, message, credential)


class _NotFound:
    """Every other path: a 404 in the shape of the SDK that most likely asked."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _not_found(scope, receive, send)


async def _not_found(scope: Scope, receive: Receive, send: Send) -> None:
    method, path = scope.get("method", "?"), scope.get("path", "?")
    message = (
        f"{PREFIX}no route for {method} {path}; the proxy serves POST /v1/chat/completions, "
        "POST /v1/responses, POST /v1/messages, POST /v1beta/models/MODEL:generateContent "
        "(and :streamGenerateContent) and GET /v1/models"
    )
    await send_error(send, format_guess(scope).vendor, 404, message, scope_credential(scope))


async def _models(request: Request) -> Any:
    """The models openprogram knows, in the listing shape of the SDK that asks (Anthropic's
    when its version header is there, OpenAI's otherwise)."""
    from starlette.responses import JSONResponse

    from ..providers.models import builtin_models

    models = [m for m in builtin_models() if m.api in FORMATS]
    headers = {name.lower() for name in request.headers}
    asking = [v.api for v in VENDORS if v.identifying_header in headers]
    if asking:
        data = [
            {
                "type": "model",
                "id": m.id,
                "display_name": m.name,
                "created_at": "1970-01-01T00:00:00Z",
            }
            for m in models
            if m.api == asking[0]
        ]
        first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
        return JSONResponse({"data": data, "has_more": False, "first_id": first, "last_id": last})
    listing = [
        {"id": m.id, "object": "model", "created": 0, "owned_by": m.provider} for m in models
    ]
    return JSONResponse({"object": "list", "data": listing})


def build_app(settings: ProxySettings, lanes: LaneBook | None = None) -> ASGIApp:
    """The application serving ``settings``, for its owner only (see :mod:`.guard`); ``lanes``
    is the replay's lane book (see :class:`.lanes.LaneBook`), if calls replay."""
    book = lanes or LaneBook()
    endpoint = {api: _Endpoint(wire_format, settings, book) for api, wire_format in FORMATS.items()}
    routes = [Route(vendor.route, endpoint[vendor.api], methods=["POST"]) for vendor in VENDORS]
    routes += [
        Route("/v1/models", _models, methods=["GET"]),
        Route("/{path:path}", _NotFound()),
    ]
    return OwnerOnly(Starlette(routes=routes), client_token=settings.client_token)


__all__ = ["build_app"]
