"""Faults through ``openprogram proxy`` (docs/proxy.md, "Faults"): the openai, anthropic and
google-genai SDKs meet a replayed fault as they meet it live (their exception types, the
vendor's status and message), and their own retry logic runs: no ``x-should-retry: false``,
a short ``retry-after``, and the retry is served the recording.

Each SDK calls three servers: a scripted vendor server that fails the way a fault says (or a
closed port, or a server that never answers), to see what the SDK meets live; a proxy that
records a plain answer; and a proxy replaying it with faults, with no vendor anywhere.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openprogram.providers import Fault
from openprogram.providers.replay import ReplayOptions
from openprogram.providers.vendors.builtin import VENDOR_APIS
from openprogram.providers.vendors.failures import FAULT_ANSWERS, VENDOR_OF_API
from openprogram.proxy import ProxySettings, start_proxy
from openprogram.proxy.faults import fault_response
from tests.openai_support import closed_port_url
from tests.proxy.test_proxy_sdks import whole_answer
from tests.transcripts import anthropic_streams as a
from tests.transcripts import google_streams as g
from tests.transcripts import openai_completions_streams as c
from tests.vendor_server import ScriptedResponse, VendorServer
from tests.vendors.test_faults import silent_server

KEY = "sk-test-faults-0123456789abcdef"
PROMPT = "Say hello"
TIMEOUT = 0.5
#: What each SDK's call reads, and the transcript its vendor server answers with.
PLAIN = {
    "openai-completions": c.PLAIN_TEXT,
    "anthropic-messages": a.PLAIN_TEXT,
    "google-generative-ai": g.PLAIN_TEXT,
}
KINDS = ("rate_limit", "overloaded", "server_error", "timeout", "cut", "network")


def sdk_call(
    api: str, url: str, *, streaming: bool, retries: int = 0, timeout: float = 30.0
) -> str:
    """One call by the vendor's SDK to ``url``, its retries and timeout set; the text it read,
    or the SDK's exception."""
    if api == "openai-completions":
        import openai

        client = openai.OpenAI(
            base_url=url + "/v1", api_key=KEY, max_retries=retries, timeout=timeout
        )
        request: dict[str, Any] = {
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": PROMPT}],
        }
        if not streaming:
            return client.chat.completions.create(**request).choices[0].message.content or ""
        chunks = client.chat.completions.create(**request, stream=True)
        return "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    if api == "anthropic-messages":
        import anthropic

        client = anthropic.Anthropic(
            base_url=url, api_key=KEY, max_retries=retries, timeout=timeout
        )
        request = {
            "model": a.MODEL_ID,
            "max_tokens": 256,
            "messages": [{"role": "user", "content": PROMPT}],
        }
        if not streaming:
            return "".join(
                block.text
                for block in client.messages.create(**request).content
                if block.type == "text"
            )
        events = client.messages.create(**request, stream=True)
        return "".join(
            e.delta.text
            for e in events
            if e.type == "content_block_delta" and e.delta.type == "text_delta"
        )
    from google import genai

    retry = {
        "attempts": retries + 1,
        "initial_delay": 0.05,
        "max_delay": 0.1,
        "http_status_codes": [429, 500, 503],
    }
    google = genai.Client(
        api_key=KEY,
        http_options={"base_url": url, "retry_options": retry, "timeout": int(timeout * 1000)},
    )
    if not streaming:
        return google.models.generate_content(model=g.MODEL_ID, contents=PROMPT).text or ""
    return "".join(
        chunk.text or ""
        for chunk in google.models.generate_content_stream(model=g.MODEL_ID, contents=PROMPT)
    )


def failure(call: Any) -> BaseException:
    with pytest.raises(Exception) as raised:
        call()
    return raised.value


def live_failure(api: str, kind: str, streaming: bool) -> BaseException:
    """What the SDK raises when its vendor fails with ``kind`` (no retries)."""
    if kind == "network":
        return failure(
            lambda: sdk_call(api, closed_port_url().removesuffix("/v1"), streaming=streaming)
        )
    if kind == "timeout":
        listener, url = silent_server()
        try:
            return failure(lambda: sdk_call(api, url, streaming=streaming, timeout=TIMEOUT))
        finally:
            listener.close()
    with VendorServer() as server:
        if kind == "cut":
            server.queue(ScriptedResponse(chunks=PLAIN[api], break_after=2))
        else:
            answer = FAULT_ANSWERS[VENDOR_OF_API[api]][kind]
            headers = {"content-type": "application/json", **answer.headers}
            server.queue(
                ScriptedResponse(
                    status=answer.status, headers=headers, chunks=[json.dumps(answer.body).encode()]
                )
            )
        return failure(lambda: sdk_call(api, server.url, streaming=streaming))


def record(api: str, path: Path, streaming: bool) -> str:
    with VendorServer() as server:
        if streaming:
            server.queue(ScriptedResponse(chunks=PLAIN[api]))
        else:  # the call goes upstream as sent: the vendor answers it with one JSON body
            whole = whole_answer(api, PLAIN[api])
            assert whole is not None
            server.queue(
                ScriptedResponse(chunks=[whole], headers={"content-type": "application/json"})
            )
        suffix = "/v1" if api.startswith("openai") else ""
        settings = ProxySettings(
            upstreams={api: server.url + suffix}, recording=path, mode="record"
        )
        with start_proxy(settings) as proxy:
            return sdk_call(api, proxy.url, streaming=streaming)


@pytest.fixture
def recorded(tmp_path) -> Iterator[Any]:
    def make(api: str, streaming: bool) -> tuple[Path, str]:
        path = tmp_path / f"{api}-{streaming}.jsonl"
        return path, record(api, path, streaming)

    yield make


def replaying(path: Path, *faults: str | Fault) -> Any:
    return start_proxy(
        ProxySettings(recording=path, mode="replay", replay=ReplayOptions.of(faults))
    )


SDKS = ["openai-completions", "anthropic-messages", "google-generative-ai"]


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("api", SDKS)
def test_each_fault_meets_the_sdk_as_its_vendor_failing_live_and_the_retry_gets_the_recording(
    api, streaming, recorded
):
    path, text = recorded(api, streaming)
    assert text
    with replaying(path, *(f"{kind}@0" for kind in KINDS)) as proxy:
        for kind in KINDS:  # each request of call 0 meets the next fault
            wait = TIMEOUT if kind == "timeout" else 30.0
            replayed = failure(
                functools.partial(sdk_call, api, proxy.url, streaming=streaming, timeout=wait)
            )
            live = live_failure(api, kind, streaming)
            if kind == "network" and api == "google-generative-ai":
                # google-genai lets httpx's errors through: a refused connection is a
                # ConnectError, one closed unanswered a RemoteProtocolError (both transport errors)
                assert (
                    type(live).__name__ == "ConnectError"
                    and type(replayed).__name__ == "RemoteProtocolError"
                )
                continue
            assert type(replayed) is type(live), (kind, replayed, live)
            status = getattr(live, "status_code", getattr(live, "code", None))
            assert getattr(replayed, "status_code", getattr(replayed, "code", None)) == status
            if kind in ("rate_limit", "overloaded", "server_error"):
                assert str(replayed) == str(live)
        assert sdk_call(api, proxy.url, streaming=streaming) == text
        assert proxy.scope is not None
        proxy.scope.assert_consumed()


@pytest.mark.parametrize(
    ("api", "fault"),
    [
        ("openai-completions", "rate_limit@0"),
        ("anthropic-messages", "overloaded@0"),
        ("google-generative-ai", "server_error@0x2"),
        ("openai-completions", "network@0"),
        ("anthropic-messages", "timeout@0"),
    ],
)
def test_the_sdks_own_retries_get_past_a_fault(api, fault, recorded):
    path, text = recorded(api, True)
    with replaying(path, fault) as proxy:
        wait = TIMEOUT if fault.startswith("timeout") else 30.0
        assert sdk_call(api, proxy.url, streaming=True, retries=2, timeout=wait) == text
        assert proxy.scope is not None and proxy.scope.call_count == 1
        proxy.scope.assert_consumed()


@pytest.mark.parametrize("api", VENDOR_APIS)
@pytest.mark.parametrize("kind", ["rate_limit", "overloaded", "server_error"])
def test_a_fault_answer_is_the_vendors_status_headers_and_body_and_may_be_retried(api, kind):
    status, headers, body = fault_response(api, Fault(kind))  # type: ignore[arg-type, misc]
    answer = FAULT_ANSWERS[VENDOR_OF_API[api]][kind]
    assert (status, json.loads(body)) == (answer.status, answer.body)
    names = dict(headers)
    assert names[b"content-type"] == b"application/json" and b"x-should-retry" not in names
    assert (names.get(b"retry-after") == b"1") == (kind == "rate_limit")
    assert fault_response(api, Fault("cut")) is None
    assert (api, kind, status) != ("anthropic-messages", "overloaded", 503)  # Anthropic's is 529


def test_a_rechunked_replay_splits_the_bytes_and_the_sdk_reads_the_same(recorded):
    path, text = recorded("openai-completions", True)
    with start_proxy(
        ProxySettings(recording=path, mode="replay", replay=ReplayOptions.of(rechunk=11))
    ) as proxy:
        assert sdk_call("openai-completions", proxy.url, streaming=True) == text


def test_replay_options_need_a_replay(tmp_path):
    with pytest.raises(
        ValueError, match="--fault, --rechunk and --pace change what a replay serves"
    ):
        ProxySettings(
            recording=tmp_path / "r.jsonl", mode="record", replay=ReplayOptions.of("rate_limit")
        )
    with pytest.raises(
        ValueError, match="--fault, --rechunk and --pace change what a replay serves"
    ):
        ProxySettings(replay=ReplayOptions.of(pace="recorded"))


def test_a_stream_that_breaks_part_way_is_met_while_reading_it(recorded):
    import openai

    path, text = recorded("openai-completions", True)
    with replaying(path, "cut@0:2", "timeout@0:2") as proxy:
        for expected, wait in (
            (openai.APIConnectionError, 30.0),
            (openai.APITimeoutError, TIMEOUT),
        ):
            client = openai.OpenAI(
                base_url=proxy.url + "/v1", api_key=KEY, max_retries=2, timeout=wait
            )
            chunks = client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": PROMPT}], stream=True
            )
            read = []
            with pytest.raises(expected):
                for chunk in chunks:
                    read.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
            assert "".join(read) and text.startswith("".join(read)) and "".join(read) != text
        assert sdk_call("openai-completions", proxy.url, streaming=True) == text


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["--fault", "rate_limit@x"],
            "--fault: fault 'rate_limit@x' does not read as kind[@call][:event][xtimes]",
        ),
        (["--rechunk", "soon", "--recording", "r.jsonl"], "--rechunk: rechunk takes a seed"),
        (["--fault", "network"], "--fault, --rechunk and --pace change what a replay serves"),
    ],
)
def test_the_commands_replay_flags_are_checked_before_starting(
    arguments, message, isolated_home, tmp_path
):
    import subprocess

    from tests.conftest import PYTHON, cli_env

    result = subprocess.run(
        [PYTHON, "-m", "openprogram", "proxy", "--port", "0", *arguments],
        env=cli_env(isolated_home),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_the_command_says_what_its_replay_does(tmp_path):
    from openprogram.proxy.server import startup_lines

    settings = ProxySettings(
        recording=tmp_path / "r.jsonl", mode="replay", replay=ReplayOptions.of(["rate_limit@1"], 7)
    )
    assert "  replaying with faults rate_limit@1; rechunk seed 7" in startup_lines(
        "http://127.0.0.1:1", settings
    )
