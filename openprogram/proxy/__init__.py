"""``openprogram proxy``: recordings for code that calls a vendor SDK directly.

A local server speaks the four wire formats (Chat Completions, Responses, Anthropic Messages,
Gemini ``generateContent``); each request is read into our types and sent through
``stream_simple`` under the mode in force (record, replay, update, off) with a passthrough of
the client's own request standing in for the api's provider: a live call forwards the request
and the vendor's answer as they are, a replay serves the recorded answer's bytes (or its events,
in the format the client asked in). See docs/proxy.md.

- :mod:`.settings`: what a proxy serves (upstreams, the recording session) and the SDKs'
  base-URL variables;
- :mod:`.formats`: the table of wire formats, each backed by its vendor module's
  ``parse_request_body``, ``StreamEncoder``, ``response_body`` and ``error_body``;
- :mod:`.lanes`: the lane of a request, from the start of its conversation;
- :mod:`.passthrough`: the live call of one request, its answer forwarded and read;
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

__all__ = [
    "ProxySettings",
    "RunningProxy",
    "install_hint",
    "missing_dependencies",
    "proxy_requirements",
    "start_proxy",
]


def missing_dependencies() -> list[str]:
    """The packages of the ``proxy`` extra that are not installed (checked without importing
    them), so a caller can say how to get them in one line instead of failing on an import."""
    import importlib.util

    return [name for name in ("starlette", "uvicorn") if importlib.util.find_spec(name) is None]


def proxy_requirements() -> list[str]:
    """The requirements of openprogram's ``proxy`` extra, as the installed package declares
    them (``starlette>=0.40``), or the bare names when its metadata cannot be read."""
    import importlib.metadata

    try:
        declared = importlib.metadata.requires("openprogram") or []
    except importlib.metadata.PackageNotFoundError:
        declared = []
    found = [
        requirement.strip()
        for requirement, _, marker in (entry.partition(";") for entry in declared)
        if marker.replace("'", '"').replace(" ", "") == 'extra=="proxy"'
    ]
    return found or ["starlette", "uvicorn"]


def install_hint() -> str:
    """How to get what a proxy needs: the extra's own packages, not the extra by the project's
    name (on PyPI ``openprogram`` is another project: docs/install.md)."""
    import shlex

    return "pip install " + " ".join(
        shlex.quote(requirement) for requirement in proxy_requirements()
    )


_EXPORTS = {"RunningProxy": "server", "start_proxy": "server", "ProxySettings": "settings"}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openprogram.proxy' has no attribute '{name}'")
    import importlib

    return getattr(importlib.import_module(f".{module}", __name__), name)
