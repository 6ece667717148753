"""The proxy's lanes and models (docs/proxy.md, "Lanes" and "Models"): a lane derived from a
conversation's start names the api and the model and is derived after the ``normalize`` rules;
the model a client names is looked up, so its cost is recorded and a project's model takes its
live calls to its own server."""

from __future__ import annotations

import json

import httpx

from openprogram.providers.replay import read_recording_file
from openprogram.providers.vendors import openai_completions
from openprogram.proxy import ProxySettings, start_proxy
from openprogram.proxy.lanes import conversation_lane
from tests.transcripts import openai_completions_streams as c
from tests.vendor_server import ScriptedResponse, VendorServer

API = "openai-completions"
DATE_RULE = (r"\d{4}-\d{2}-\d{2}", "DATE")


def _ask(url: str, question: str, model: str = "gpt-4o-mini") -> str:
    body = {"model": model, "messages": [{"role": "user", "content": question}], "stream": True}
    answer = httpx.post(
        url + "/v1/chat/completions",
        json=body,
        headers={"authorization": "Bearer sk-test-lanes-0123456789"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return "".join(
        choice["delta"].get("content") or ""
        for line in answer.text.splitlines()
        if line.startswith("data: {")
        for choice in json.loads(line[6:])["choices"]
    )


def _said(text: str) -> list[bytes]:
    return c.sse_frames(
        c.ROLE, c.chunk(json.dumps({"content": text})), c.STOP, c.usage_chunk(1000, 2000), done=True
    )


def test_a_derived_lane_names_the_api_and_the_model():
    body = {"model": "m", "messages": [{"role": "user", "content": "Hello"}]}
    context = openai_completions.parse_request_body(body)[1]
    lanes = {
        conversation_lane(context, api=api, model_id=model)
        for api, model in [
            ("openai-completions", "a"),
            ("openai-completions", "b"),
            ("anthropic-messages", "a"),
        ]
    }
    assert len(lanes) == 3


def test_conversations_that_open_with_a_normalized_value_replay_in_any_order(tmp_path):
    """Recorded one day, replayed another, in the other order: the rule that makes the requests
    match makes their lanes match too (before, the second conversation was lent the first's
    recorded lane and drifted)."""
    path = tmp_path / "dated.jsonl"
    with VendorServer() as server:
        server.queue(
            ScriptedResponse(chunks=_said("about X")), ScriptedResponse(chunks=_said("about Y"))
        )
        settings = ProxySettings(
            upstreams={API: server.url + "/v1"},
            recording=path,
            mode="record",
            normalize=(DATE_RULE,),
        )
        with start_proxy(settings) as proxy:
            assert _ask(proxy.url, "Today is 2026-01-05. Tell me about X.") == "about X"
            assert _ask(proxy.url, "Today is 2026-01-05. Tell me about Y.") == "about Y"
    with start_proxy(ProxySettings(recording=path, mode="replay", normalize=(DATE_RULE,))) as proxy:
        assert _ask(proxy.url, "Today is 2026-03-09. Tell me about Y.") == "about Y"
        assert _ask(proxy.url, "Today is 2026-03-09. Tell me about X.") == "about X"
        assert proxy.scope is not None
        proxy.scope.assert_consumed()


def test_a_known_model_s_call_has_its_cost(tmp_path):
    path = tmp_path / "cost.jsonl"
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=_said("hi")))
        with start_proxy(
            ProxySettings(upstreams={API: server.url + "/v1"}, recording=path, mode="record")
        ) as proxy:
            _ask(proxy.url, "Hello")
    (call,) = read_recording_file(path).calls
    usage = call.last_event_dump()["message"]["usage"]
    # gpt-4o-mini: $0.15 per million input tokens, $0.60 per million output tokens
    assert abs(usage["cost"]["total"] - (1000 * 0.15 + 2000 * 0.6) / 1_000_000) < 1e-12


def test_a_project_model_s_live_calls_go_to_its_own_server(tmp_path, monkeypatch, isolated_home):
    """Without an upstream for the api, a model the project defines (a local server) is called
    where its ``base_url`` says; the vendor's server is never tried."""
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=_said("local")))
        project = tmp_path / "project"
        project.mkdir()
        (project / ".git").mkdir()
        (project / "pyproject.toml").write_text(
            "[tool.openprogram]\n"
            f'models = [{{id = "llama-local", api = "{API}", provider = "local", base_url = "{server.url}/v1"}}]\n'
        )
        monkeypatch.chdir(project)
        path = tmp_path / "local.jsonl"
        with start_proxy(ProxySettings(recording=path, mode="record")) as proxy:
            assert _ask(proxy.url, "Hello", model="llama-local") == "local"
        assert server.requests[0].path == "/v1/chat/completions"
    (call,) = read_recording_file(path).calls
    assert call.model["provider"] == "local"


def test_a_project_model_on_an_untrusted_host_gets_no_key(tmp_path, monkeypatch, isolated_home):
    """A project file cannot send the client's key to a server it names (docs/project.md,
    "Security"): the call is refused before anything is sent, naming the host and the fix."""
    project = tmp_path / "project"
    project.mkdir()
    (project / ".git").mkdir()
    (project / "pyproject.toml").write_text(
        "[tool.openprogram]\n"
        f'models = [{{id = "collector-model", api = "{API}", provider = "collector", base_url = "http://collector.invalid/v1"}}]\n'
    )
    monkeypatch.chdir(project)
    path = tmp_path / "refused.jsonl"
    key = "sk-test-lanes-0123456789"
    with start_proxy(ProxySettings(recording=path, mode="record")) as proxy:
        body = {"model": "collector-model", "messages": [{"role": "user", "content": "Hello"}]}
        answer = httpx.post(
            proxy.url + "/v1/chat/completions",
            json=body,
            headers={"authorization": f"Bearer {key}"},
            timeout=30,
        )
    assert answer.status_code == 403
    message = answer.json()["error"]["message"]
    assert (
        "key not sent to collector.invalid" in message
        and "trusted_hosts" in message
        and key not in message
    )
