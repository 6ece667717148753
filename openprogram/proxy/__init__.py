"""``openprogram proxy``: recordings for code that calls a vendor SDK directly.

A local server speaks the four wire formats (Chat Completions, Responses, Anthropic Messages,
Gemini ``generateContent``); each request is read into our types, sent through
``stream_simple`` under the mode in force (record, replay, update, off), and the events go back
in the format the client asked in. See docs/proxy.md.

- :mod:`.settings`: what a proxy serves (upstreams, the recording session) and the SDKs'
  base-URL variables;
- :mod:`.formats`: the table of wire formats, each backed by its vendor module's
  ``parse_request_body``, ``StreamEncoder``, ``response_body`` and ``error_body``;
- :mod:`.lanes`: the lane of a request, from the start of its conversation;
- :mod:`.exchange`: one request answered, errors in the vendor's own shape;
- :mod:`.app`: the ASGI application (routes);
- :mod:`.server`: running it, in the foreground (the command) or in a background thread
  (:func:`~.server.start_proxy`, for tests and fixtures).

The ASGI toolkit and server (Starlette, uvicorn) come with the ``openprogram[proxy]`` extra
and are imported only by :mod:`.app` and :mod:`.server`, when a proxy starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .server import RunningProxy, start_proxy
    from .settings import ProxySettings

__all__ = ["ProxySettings", "RunningProxy", "start_proxy"]

_EXPORTS = {"RunningProxy": "server", "start_proxy": "server", "ProxySettings": "settings"}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openprogram.proxy' has no attribute '{name}'")
    import importlib

    return getattr(importlib.import_module(f".{module}", __name__), name)
