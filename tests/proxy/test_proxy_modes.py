"""The proxy under the other modes and endings: ``update`` re-records only what drifted, the mode
the configuration puts in force applies when the proxy has no session of its own, and a stream
that breaks part-way reaches the client as the vendor's in-stream error, live and replayed."""

from __future__ import annotations

import json

import pytest

from openprogram.proxy import ProxySettings, start_proxy
from tests.proxy.test_proxy_sdks import VENDORS, call
from tests.transcripts import anthropic_streams as a
from tests.transcripts import openai_completions_streams as c
from tests.vendor_server import ScriptedResponse, VendorServer

COMPLETIONS = VENDORS["openai-completions"]


def _answer(text: str) -> list[bytes]:
    return c.sse_frames(
        c.ROLE, c.chunk(json.dumps({"content": text})), c.STOP, c.usage_chunk(5, 2), done=True
    )


def test_update_replays_what_matches_and_records_what_drifted(tmp_path):
    path = tmp_path / "update.jsonl"
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=_answer("first")))
        upstreams = {COMPLETIONS.api: server.url + "/v1"}
        with start_proxy(
            ProxySettings(upstreams=upstreams, recording=path, mode="record")
        ) as proxy:
            assert call(COMPLETIONS, proxy.url, streaming=True, prompt="one")[1]["text"] == "first"
        server.queue(ScriptedResponse(chunks=_answer("changed")))
        with start_proxy(
            ProxySettings(upstreams=upstreams, recording=path, mode="update")
        ) as proxy:
            assert (
                call(COMPLETIONS, proxy.url, streaming=True, prompt="one")[1]["text"] == "first"
            )  # replayed
            assert (
                call(COMPLETIONS, proxy.url, streaming=True, prompt="two")[1]["text"] == "changed"
            )  # live
        assert len(server.requests) == 2  # the update made one live call
    with start_proxy(ProxySettings(recording=path, mode="replay")) as proxy:
        assert [
            call(COMPLETIONS, proxy.url, streaming=False, prompt=p)[1]["text"]
            for p in ("one", "two")
        ] == ["first", "changed"]
        assert proxy.scope is not None
        proxy.scope.assert_consumed()


def test_without_a_session_of_its_own_the_configured_mode_applies(tmp_path, isolated_home):
    """``openprogram proxy`` with no --mode: the record_replay configuration's replay."""
    import subprocess

    from tests.conftest import PYTHON, cli_env

    path = tmp_path / "configured.jsonl"
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=c.PLAIN_TEXT))
        upstream = f"{COMPLETIONS.api}={server.url}/v1"
        settings = ProxySettings(
            upstreams={COMPLETIONS.api: server.url + "/v1"}, recording=path, mode="record"
        )
        with start_proxy(settings) as proxy:
            live = call(COMPLETIONS, proxy.url, streaming=True)
    (isolated_home / "config.json").write_text(
        json.dumps({"record_replay": {"mode": "replay", "file": str(path)}})
    )
    process = subprocess.Popen(
        [PYTHON, "-m", "openprogram", "proxy", "--port", "0", "--upstream", upstream],
        env=cli_env(isolated_home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = process.stdout.readline()
        assert first.rstrip().endswith(f"(mode replay, recording {path})"), first
        url = first.split("listening on ", 1)[1].split(" ", 1)[0]
        # the configured replay is the process's: it compares the upstream too (the same here)
        assert call(COMPLETIONS, url, streaming=True)[0] == live[0]
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_mode_off_calls_live_whatever_the_configuration_says(tmp_path, isolated_home):
    """``openprogram proxy --mode off`` with a configuration that replays: the call goes to the
    upstream, and no file is written."""
    import subprocess

    from tests.conftest import PYTHON, cli_env

    configured = tmp_path / "configured.jsonl"
    (isolated_home / "config.json").write_text(
        json.dumps({"record_replay": {"mode": "replay", "file": str(configured)}})
    )
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=_answer("live answer")))
        process = subprocess.Popen(
            [
                PYTHON,
                "-m",
                "openprogram",
                "proxy",
                "--port",
                "0",
                "--mode",
                "off",
                "--upstream",
                f"{COMPLETIONS.api}={server.url}/v1",
            ],
            env=cli_env(isolated_home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            first = process.stdout.readline()
            assert first.rstrip().endswith("(mode off)"), first
            url = first.split("listening on ", 1)[1].split(" ", 1)[0]
            assert call(COMPLETIONS, url, streaming=True, prompt="one")[1]["text"] == "live answer"
        finally:
            process.terminate()
            process.wait(timeout=30)
        assert len(server.requests) == 1
    assert not configured.exists()
    assert list(tmp_path.iterdir()) == []


def test_mode_off_takes_no_recording():
    with pytest.raises(ValueError, match="mode off records nothing"):
        ProxySettings(mode="off", recording="x.jsonl")


def test_a_stream_broken_part_way_breaks_off_for_the_client_live_and_replayed(tmp_path):
    """The client sees what the vendor's connection did: the text that arrived, then the
    connection dropping (before, the proxy turned the break into an in-stream error event the
    vendor never sent)."""
    import anthropic

    vendor = VENDORS["anthropic-messages"]
    path = tmp_path / "broken.jsonl"

    def read(url: str) -> tuple[str, str]:
        client = anthropic.Anthropic(base_url=url, api_key=vendor.key, max_retries=0)
        text = ""
        with pytest.raises(Exception) as raised:  # noqa: B017 - whichever the SDK's HTTP library raises
            with client.messages.stream(
                model=a.MODEL_ID, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
            ) as stream:
                for piece in stream.text_stream:
                    text += piece
        return text, type(raised.value).__name__

    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=a.BREAKS_OFF, break_after=a.BREAK_AFTER))
        settings = ProxySettings(upstreams={vendor.api: server.url}, recording=path, mode="record")
        with start_proxy(settings) as proxy:
            live = read(proxy.url)
    with start_proxy(ProxySettings(recording=path, mode="replay")) as proxy:
        replayed = read(proxy.url)
    assert live == replayed
    assert live[0] == "Partial "  # what arrived before the break
    assert live[1] == "RemoteProtocolError"  # the connection dropped, both times
    from openprogram.providers.replay import read_recording_file

    (recorded,) = read_recording_file(path).calls
    assert recorded.vendor_answer is not None and recorded.vendor_answer["broke_off"] is True
