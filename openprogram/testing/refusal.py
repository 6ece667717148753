"""Replay mode never calls a model: a test without a recording that calls a network provider
fails at once, with the two ways out (record it, or mark it ``llm_live``)."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from openprogram.providers.vendors.builtin import VENDOR_APIS

from .options import LIVE_MARKER, MARKER, record_mode
from .session import _inside

#: The apis that reach a vendor over the network: in replay mode a test without a recording
#: must not call them (scripted and user-registered providers are not blocked).
NETWORK_APIS = frozenset(VENDOR_APIS)


def _blocks_live_calls(item: pytest.Item) -> bool:
    """Replay mode never calls a model: a test with no recording is kept from calling one by
    accident, unless it says it means to (``llm_live``)."""
    return record_mode(item.config) == "replay" and item.get_closest_marker(LIVE_MARKER) is None


def live_call_refusal(nodeid: str, api: str) -> str:
    """Why a test without a recording may not call a network model in replay mode, and the
    two ways out (shell-quoted commands that paste into a POSIX shell)."""
    test = shlex.quote(nodeid)
    return (
        f"{nodeid} called a model live (api {api}), and --llm-record-mode=replay (the default) "
        "never calls a model. Record it once and replay it from then on: mark the test "
        f"@pytest.mark.{MARKER} and run\n  pytest {test} --llm-record-mode=record\n"
        f"or, for a test meant to call the model, run it with --llm-record-mode=off or mark it "
        f"@pytest.mark.{LIVE_MARKER}"
    )


class _RefusedLiveCall:
    """Stands for a network provider while a test without a recording runs in replay mode:
    the first call fails the test (``pytest.fail`` is no ``Exception``, so an agent loop that
    turns errors into answers cannot swallow it) before anything is sent."""

    requires_credentials = False

    def __init__(self, nodeid: str, api: str) -> None:
        self._message = live_call_refusal(nodeid, api)

    def stream(self, model: Any, context: Any, options: Any = None) -> Any:
        pytest.fail(self._message, pytrace=False)

    stream_simple = stream


@contextlib.contextmanager
def _live_calls_refused(nodeid: str) -> Iterator[None]:
    from openprogram.providers.api_registry import routed, served_provider

    def route(api: str, original: Any) -> Any:
        if api in NETWORK_APIS:
            return _RefusedLiveCall(nodeid, api)
        return served_provider(api)

    with routed(route):
        yield


def _without_live_calls(function: Callable[..., Any], nodeid: str) -> Callable[..., Any]:
    return _inside(function, lambda: _live_calls_refused(nodeid))
