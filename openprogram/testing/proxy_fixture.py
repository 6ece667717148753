"""The ``llm_proxy`` pytest fixture: the test's recording, served to code that calls a vendor
SDK directly (docs/proxy.md, "In pytest").

The fixture starts an ``openprogram proxy`` on a free loopback port for one test and points the
SDKs at it through their base-URL environment variables, so code that builds its own
``openai.OpenAI()`` (or Anthropic, or google-genai) client needs no change. It is the
``llm_recording`` fixture underneath: the same marker, modes, file naming, drift pages and
reports. Each request the proxy answers runs in the context of the test body (its recording
scope, run values and declared secrets), so recording, replay, update and the failure rules are
the plugin's own, not a second implementation.

In replay the SDKs' key variables hold a random token made for the test, and the proxy answers
only requests that carry it: another program on the machine (which cannot read the test's
environment) can neither read the test's recorded calls nor add to them (docs/proxy.md,
"Security"). In record and update the real keys are used, as the client sends them.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from openprogram.testing.options import MARKER
from openprogram.testing.session import LlmRecording

if TYPE_CHECKING:
    from openprogram.proxy import RunningProxy

#: What starts the per-test key of a replay: the proxy never sends it anywhere (a replay calls
#: no vendor), and a recording run uses the real keys.
REPLAY_TOKEN_PREFIX = "openprogram-replay-"
#: The key variables each SDK reads (google-genai takes either of two, and prefers the second:
#: the first is set, the second removed for the test).
SDK_KEY_VARIABLES = (
    ("OPENAI_API_KEY",),
    ("ANTHROPIC_API_KEY",),
    ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
)


def replay_token() -> str:
    """A key for one test's replay: random, so that no other program can guess it."""
    return REPLAY_TOKEN_PREFIX + secrets.token_urlsafe(24)


def proxy_upstreams(item: pytest.Item) -> tuple[dict[str, str], dict[str, str]]:
    """Where the proxy's live calls go, by api: the project's ``proxy.upstream`` table, then
    the marker's ``upstream={API: URL}`` (which wins for its apis); an api named by neither goes
    to the vendor's own server. Also the apis whose upstream the project chose, with its file
    (a client's key goes there only on a trusted host)."""
    from openprogram.project import project_config
    from openprogram.proxy.settings import check_upstream
    from openprogram.state import ConfigError

    try:
        project = project_config(Path(str(item.config.rootpath)))
    except ConfigError as error:
        raise pytest.UsageError(f"openprogram project configuration: {error}") from None
    for api, url in project.proxy_upstream.items():
        try:
            check_upstream(api, url)
        except ValueError as error:
            pytest.fail(f"{project.where('proxy.upstream')}: {error}", pytrace=False)
    upstreams = dict(project.proxy_upstream)
    marker = item.get_closest_marker(MARKER)
    named = marker.kwargs.get("upstream", {}) if marker is not None else {}
    if not isinstance(named, dict):
        pytest.fail(
            f"@pytest.mark.{MARKER}(upstream=...) takes a dict of API: URL, not {named!r}",
            pytrace=False,
        )
    upstreams.update(named)
    chosen_by_project = {
        api: str(project.path) for api in project.proxy_upstream if api not in named
    }
    return upstreams, chosen_by_project


def _test_context(handle: LlmRecording) -> contextvars.Context:
    """The running test body's context, for one proxied request."""
    if handle.context is None:
        raise RuntimeError(
            f"llm_proxy of {handle.nodeid}: a request came while the test body was not running (in a "
            "fixture's set-up or tear-down); only the calls the test body makes are recorded and replayed"
        )
    return handle.context


@pytest.fixture
def llm_proxy(
    llm_recording: LlmRecording, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[RunningProxy]:
    """A proxy serving this test's recording, with ``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``
    and ``GOOGLE_GEMINI_BASE_URL`` pointing at it for the test (clients built inside the test;
    a client built at import time keeps the address it read then). In replay the SDKs' key
    variables hold a per-test token, the only key the proxy answers. ``llm_proxy.url`` is its
    address; ``llm_recording.scope`` the test's recording scope while the body runs."""
    from openprogram.proxy import ProxySettings, install_hint, missing_dependencies, start_proxy

    missing = missing_dependencies()
    if missing:
        pytest.fail(
            f"llm_proxy needs {' and '.join(missing)}, which come with the proxy extra: {install_hint()}",
            pytrace=False,
        )
    handle = llm_recording
    handle.proxied = True
    from openprogram.recordings.modes.vocabulary import REPLAY, route_mode_for_test

    replaying = route_mode_for_test(handle.mode, handle.path.exists()) == REPLAY
    token = replay_token() if replaying else None
    try:
        upstreams, chosen_by_project = proxy_upstreams(request.node)
        settings = ProxySettings(
            upstreams=upstreams,
            project_upstreams=chosen_by_project,
            call_context=functools.partial(_test_context, handle),
            normalize=handle.normalize,  # for its lanes: the test's session applies them to the calls
            client_token=token,
            # The test's replay options apply in its own scope; the proxy splits the bytes too.
            replay=handle.replay_options if replaying else None,
        )
    except ValueError as error:  # an upstream that is no http(s) URL, or an unknown api
        pytest.fail(f"llm_proxy: {error}", pytrace=False)
    if replaying and handle.path.exists():
        replay = dataclasses.replace(settings, mode="replay", recording=handle.path)
        try:
            proxy = start_proxy(replay)  # its lane book reads the recording's conversations
        except Exception:  # noqa: BLE001 - an unreadable file: the test body reports it, with the fix
            proxy = start_proxy(settings)
    else:
        proxy = start_proxy(settings)
    # A client that stopped reading a stream early leaves its call running after the test
    # body: it is ended then, recorded as far as it got, before the recording is closed.
    handle.at_body_end.append(proxy.end_calls)
    try:
        for name, value in proxy.environment().items():
            monkeypatch.setenv(name, value)
        if token is not None:
            for first, *others in SDK_KEY_VARIABLES:
                monkeypatch.setenv(first, token)
                for name in others:
                    monkeypatch.delenv(name, raising=False)
        yield proxy
    finally:
        proxy.stop()
