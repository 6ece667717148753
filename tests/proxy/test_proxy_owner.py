"""The proxy serves its owner only (docs/proxy.md, "Security"): a web page's cross-site request,
a DNS-rebinding request and a request without the ``llm_proxy`` test's key are refused before
anything is called or recorded; a key-less request gets no key of the proxy's environment unless
``--env-keys``; what the proxy says (error bodies, start-up lines) holds no credential.

The upstream is a scripted server on 127.0.0.1 that keeps every request that reached it.
"""

from __future__ import annotations

import json
import subprocess

import httpx
import pytest

from openprogram.proxy import ProxySettings, start_proxy
from openprogram.proxy.guard import host_allowed, is_json, origin_allowed
from openprogram.proxy.server import startup_lines
from openprogram.proxy.settings import parse_upstream, shown_url
from tests.transcripts import openai_completions_streams as c
from tests.vendor_server import ScriptedResponse, VendorServer

OWNER_KEY = "sk-proj-Owner0123456789abcdefghijklmnopqrstuvwxyzAB"
CLIENT_KEY = "sk-proj-Client0123456789abcdefghijklmnopqrstuvwxyzA"
BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
JSON_HEADERS = {"content-type": "application/json"}


def whole_answer() -> ScriptedResponse:
    """The vendor's answer to ``BODY``, a call that does not stream (it goes upstream as sent)."""
    return ScriptedResponse(
        chunks=[c.PLAIN_TEXT_WHOLE], headers={"content-type": "application/json"}
    )


# --------------------------------------------------------------------------- the checks, alone


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:8765",
        "127.0.0.1",
        "127.8.9.10:1",
        "localhost",
        "LocalHost:8765",
        "localhost.",
        "localhost.:8765",
        "[::1]:8765",
        "[::1]",
        "[::ffff:127.0.0.1]:8765",
    ],
)
def test_loopback_and_localhost_are_answered(host):
    assert host_allowed(host)


@pytest.mark.parametrize(
    "host",
    [
        "attacker.example",
        "attacker.example:8765",
        "evil.example@127.0.0.1",
        "evil.example@127.0.0.1:8765",
        "127.0.0.1@evil.example",
        "127.0.0.1.evil.example",
        "localhost.evil.example",
        "localhost..",
        "",
        ":8765",
        "127.0.0.1:port",
        "[::1",
        "[::1]x",
        "127.0.0.1/evil",
        "127.0.0.1?x",
        "127.0.0.1#x",
        "127.0.0.1\\x",
        "127.0.0.1 evil.example",
        "127.0.0.1, evil.example",
        "0.0.0.0:8765",
        "[::]:8765",
        "192.168.1.5:8765",
    ],
)
def test_other_hosts_and_tricks_are_refused(host):
    assert not host_allowed(host)


def test_the_address_a_request_came_in_on_is_answered_too():
    """A proxy listening beyond loopback (``--host``) answers clients that use its address: an
    address, unlike a name, cannot be rebound."""
    assert host_allowed("192.168.1.5:8765", "192.168.1.5")
    assert host_allowed("[fd00::5]:8765", "fd00::5")
    assert not host_allowed("attacker.example:8765", "192.168.1.5")
    assert not host_allowed("192.168.1.6:8765", "192.168.1.5")


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://localhost:3000", True),
        ("http://127.0.0.1:5173", True),
        ("https://[::1]:8443", True),
        ("null", False),
        ("http://evil.example", False),
        ("http://localhost.evil.example", False),
        ("http://evil.example@localhost", False),
        ("http://localhost:3000/page", False),
        ("file://", False),
        ("chrome-extension://abcdef", False),
        ("", False),
    ],
)
def test_only_pages_served_from_this_machine_may_call(origin, allowed):
    assert origin_allowed(origin) is allowed


@pytest.mark.parametrize(
    ("content_type", "allowed"),
    [
        ("application/json", True),
        ("application/json; charset=utf-8", True),
        ("Application/JSON", True),
        ("application/vnd.api+json", True),
        ("text/plain", False),
        ("text/plain;charset=UTF-8", False),
        ("application/x-www-form-urlencoded", False),
        ("multipart/form-data; boundary=x", False),
        ("application/jsonp", False),
        ("", False),
    ],
)
def test_a_body_counts_as_json_by_its_media_type_only(content_type, allowed):
    assert is_json(content_type) is allowed


# --------------------------------------------------------------------------- the attacks


def _error(response: httpx.Response) -> str:
    return str(response.json()["error"]["message"])


def test_a_cross_site_page_and_dns_rebinding_are_refused_and_reach_nothing(tmp_path, monkeypatch):
    """The issue's attacks on a recording proxy whose environment holds its owner's key (and
    that adds it, ``--env-keys``: the worst case): each is refused, no key is used, nothing is
    recorded; a JSON request from a program on this machine (curl's) still goes through."""
    monkeypatch.setenv("OPENAI_API_KEY", OWNER_KEY)
    path = tmp_path / "owner.jsonl"
    with VendorServer() as server:
        server.queue(whole_answer())
        settings = ProxySettings(
            upstreams={"openai-completions": server.url + "/v1"},
            recording=path,
            mode="record",
            env_keys=True,
        )
        with start_proxy(settings) as proxy:
            url = proxy.url + "/v1/chat/completions"
            port = proxy.url.rsplit(":", 1)[1]
            text = json.dumps(BODY)
            # a page's cross-site "simple" request: text/plain, its Origin named
            cross_site = httpx.post(
                url,
                content=text,
                headers={"content-type": "text/plain", "origin": "http://evil.example"},
            )
            # the same as a form, and with no content type, from a page that sends no Origin
            form = httpx.post(
                url, content=text, headers={"content-type": "application/x-www-form-urlencoded"}
            )
            bare = httpx.post(url, content=text.encode())
            # DNS rebinding: the page's own name, pointed at 127.0.0.1 (same origin: JSON, no Origin)
            rebound = httpx.post(
                url, content=text, headers={**JSON_HEADERS, "host": f"attacker.example:{port}"}
            )
            listing = httpx.get(proxy.url + "/v1/models", headers={"host": "attacker.example"})
            page_listing = httpx.get(proxy.url + "/v1/models", headers={"origin": "null"})
            assert server.requests == []
            # a program on this machine: JSON, its own key
            curl = httpx.post(
                url, content=text, headers={**JSON_HEADERS, "authorization": f"Bearer {CLIENT_KEY}"}
            )
    assert cross_site.status_code == 403 and "Origin header" in _error(cross_site)
    assert "evil.example" in _error(cross_site)
    for refused in (form, bare):
        assert refused.status_code == 415
        assert "Content-Type: application/json" in _error(
            refused
        ) and "-H 'content-type: application/json'" in _error(refused)
    assert rebound.status_code == 403 and "Host header names 'attacker.example'" in _error(rebound)
    assert f"http://127.0.0.1:{port}" in _error(rebound)
    assert (listing.status_code, page_listing.status_code) == (403, 403)
    assert all(r.headers["x-should-retry"] == "false" for r in (cross_site, form, bare, rebound))
    assert (
        curl.status_code == 200
        and curl.json()["choices"][0]["message"]["content"] == "Hello world!"
    )
    assert (
        len(server.requests) == 1
        and server.requests[0].headers["authorization"] == f"Bearer {CLIENT_KEY}"
    )
    recorded = path.read_text()
    assert (
        recorded.count('"request"') == 1
        and "attacker" not in recorded
        and OWNER_KEY not in recorded
    )


def test_an_anthropic_client_is_refused_in_anthropic_s_shape():
    with start_proxy() as proxy:
        refused = httpx.post(
            proxy.url + "/v1/messages", json={}, headers={"host": "attacker.example"}
        )
    assert refused.status_code == 403
    assert refused.json()["type"] == "error" and "Host header" in refused.json()["error"]["message"]


def test_a_request_without_a_key_gets_none_of_the_proxy_s_own(tmp_path, monkeypatch):
    """Without ``--env-keys`` the owner's key stays home: a key-less call to a vendor fails
    naming the flag, one to a local server goes without it; with the flag it is added."""
    monkeypatch.setenv("OPENAI_API_KEY", OWNER_KEY)
    vendor = ProxySettings(
        upstreams={"openai-completions": "https://api.openai.invalid/v1"}, mode="off"
    )
    with start_proxy(vendor) as proxy:
        refused = httpx.post(proxy.url + "/v1/chat/completions", json=BODY)
    assert refused.status_code >= 400
    assert "start the proxy with --env-keys" in _error(refused) and "OPENAI_API_KEY" in _error(
        refused
    )
    assert OWNER_KEY not in refused.text
    with VendorServer() as server:
        server.queue(whole_answer(), whole_answer())
        upstreams = {"openai-completions": server.url + "/v1"}
        with start_proxy(ProxySettings(upstreams=upstreams, mode="off")) as proxy:
            assert httpx.post(proxy.url + "/v1/chat/completions", json=BODY).status_code == 200
        with start_proxy(ProxySettings(upstreams=upstreams, mode="off", env_keys=True)) as proxy:
            assert httpx.post(proxy.url + "/v1/chat/completions", json=BODY).status_code == 200
    sent = [request.headers.get("authorization") for request in server.requests]
    assert sent[0] != f"Bearer {OWNER_KEY}" and sent[1] == f"Bearer {OWNER_KEY}"


# --------------------------------------------------------------------------- nothing secret echoed


def test_error_bodies_hold_no_credential_the_client_sent_or_the_proxy_knows(tmp_path, monkeypatch):
    """What an answer quotes of the request (a refused Host, an unknown path, a lane name in a
    mismatch) loses the key the client sent and the keys of the proxy's environment, even
    where they have no vendor's shape."""
    owner_key = "ownerkey0123456789abcdefghij"  # lower case: a Host name keeps it whole
    client_key = "zq8xv2lm9kp4rt7wbn3cq"
    monkeypatch.setenv("OPENAI_API_KEY", owner_key)
    path = tmp_path / "one.jsonl"
    with VendorServer() as server:
        server.queue(whole_answer())
        settings = ProxySettings(
            upstreams={"openai-completions": server.url + "/v1"}, recording=path, mode="record"
        )
        with start_proxy(settings) as proxy:
            assert httpx.post(proxy.url + "/v1/chat/completions", json=BODY).status_code == 200
    client = {"authorization": f"Bearer {client_key}"}
    with start_proxy(ProxySettings(recording=path, mode="replay")) as proxy:
        url = proxy.url + "/v1/chat/completions"
        answers = [
            httpx.post(url, json=BODY, headers={**client, "host": key})
            for key in (client_key, owner_key)
        ]
        answers.append(httpx.post(f"{proxy.url}/v1/{client_key}", json=BODY, headers=client))
        answers += [
            httpx.post(url, json=BODY, headers={**client, "x-openprogram-lane": f"mine-{key}"})
            for key in (client_key, owner_key)
        ]
    assert [answer.status_code for answer in answers] == [403, 403, 404, 400, 400]
    for answer in answers:
        assert "[secret removed]" in _error(answer)
        assert client_key not in answer.text and owner_key not in answer.text


def test_start_up_lines_and_usage_errors_show_no_credential_of_an_upstream_url():
    upstream = (
        "https://gateway-user:pa55w0rd-s3cret@gw.example/v1"
        "?key=AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW&api-version=2024-06-01&sig=9f8e7d6c5b4a3928&region=eu"
    )
    lines = startup_lines(
        "http://127.0.0.1:8765", ProxySettings(upstreams={"openai-completions": upstream})
    )
    shown = "\n".join(lines)
    for secret in ("gateway-user", "pa55w0rd", "AIzaSyA1b2C3", "9f8e7d6c5b4a"):
        assert secret not in shown
    assert (
        "https://[secret removed]@gw.example/v1?key=[secret removed]&api-version=2024-06-01"
        in shown
    )
    assert "&sig=[secret removed]&region=eu" in shown
    assert shown_url("http://127.0.0.1:11434/v1") == "http://127.0.0.1:11434/v1"
    with pytest.raises(ValueError) as raised:
        parse_upstream("openai-completions=ftp://user:pa55w0rd-s3cret@host/v1")
    assert "pa55w0rd" not in str(raised.value) and "ftp://[secret removed]@host/v1" in str(
        raised.value
    )


def test_the_start_up_lines_say_when_the_proxy_adds_its_own_keys():
    default = startup_lines("http://127.0.0.1:8765", ProxySettings())
    with_keys = startup_lines("http://127.0.0.1:8765", ProxySettings(env_keys=True))
    assert not any("--env-keys" in line for line in default)
    assert "  a request without a key of its own gets this process's (--env-keys)" in with_keys


def test_the_command_takes_env_keys(isolated_home):
    from tests.conftest import PYTHON, cli_env

    result = subprocess.run(
        [PYTHON, "-m", "openprogram", "proxy", "--help"],
        env=cli_env(isolated_home),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "--env-keys" in result.stdout


# --------------------------------------------------------------------------- llm_proxy's token

CODE_UNDER_TEST = """
import openai


def ask(question):
    client = openai.OpenAI()
    reply = client.chat.completions.create(model="echo", messages=[{"role": "user", "content": question}])
    return reply.choices[0].message.content
"""

TOKEN_TEST = '''
import os
import subprocess
import sys

import httpx
import pytest

from agent_code import ask

OTHER_PROGRAM = """
import httpx, sys
body = {"model": "echo", "messages": [{"role": "user", "content": "hello"}]}
print(httpx.post(sys.argv[1] + "/v1/chat/completions", json=body).status_code)
"""


@pytest.mark.llm_recording(upstream={"openai-completions": os.environ["UPSTREAM_URL"]})
def test_direct_sdk(llm_proxy, llm_recording):
    key = os.environ["OPENAI_API_KEY"]
    if llm_recording.mode == "replay":
        assert key.startswith("openprogram-replay-") and len(key) > 40
        assert os.environ["ANTHROPIC_API_KEY"] == os.environ["GEMINI_API_KEY"] == key
        assert "GOOGLE_API_KEY" not in os.environ
        body = {"model": "echo", "messages": [{"role": "user", "content": "hello"}]}
        for headers in ({}, {"authorization": "Bearer sk-someone-else-0123456789"}, {"x-api-key": key[:-1]}):
            refused = httpx.post(llm_proxy.url + "/v1/chat/completions", json=body, headers=headers)
            assert refused.status_code == 401, refused.text
            assert "answers only requests that carry that test's key" in refused.json()["error"]["message"]
        environment = {name: value for name, value in os.environ.items() if not name.endswith("_API_KEY")}
        other = subprocess.run([sys.executable, "-c", OTHER_PROGRAM, llm_proxy.url], env=environment, capture_output=True, text=True)
        assert other.stdout.strip() == "401", other.stderr
    else:
        assert key == "sk-local-test"
    # the one recorded call is still there for the test's own client
    assert ask("hello") == "echo: hello"
'''


def test_llm_proxy_in_replay_answers_only_the_test_s_own_key(pytester, monkeypatch):
    """In replay the SDKs' key variables hold a per-test token, and requests without it (none,
    another key, another program's) are refused: the recorded call is left for the test, and
    the file is not touched. In record the real key is used, as before."""
    from tests.plugin.test_plugin_live_guard import CountingEchoServer

    pytester.makepyfile(agent_code=CODE_UNDER_TEST, test_token=TOKEN_TEST)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "AIzaSy-not-for-a-replay-0123456789")
    with CountingEchoServer() as server:
        monkeypatch.setenv("UPSTREAM_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
        pytester.runpytest_subprocess("-q", "--llm-record-mode=record").assert_outcomes(passed=1)
        assert server.requests == 1
        recording = pytester.path / "recordings" / "test_token" / "test_direct_sdk.jsonl"
        recorded = recording.read_bytes()
        pytester.runpytest_subprocess("-q").assert_outcomes(passed=1)
        assert server.requests == 1
    assert recording.read_bytes() == recorded and b"sk-local-test" not in recorded


def test_the_token_is_never_sent_on(tmp_path):
    """A proxy with a client token passes no key on: the token opens the proxy, nothing else."""
    token = "openprogram-replay-0123456789abcdefghijklmnop"
    with VendorServer() as server:
        server.queue(whole_answer())
        settings = ProxySettings(
            upstreams={"openai-completions": server.url + "/v1"}, mode="off", client_token=token
        )
        with start_proxy(settings) as proxy:
            answer = httpx.post(
                proxy.url + "/v1/chat/completions",
                json=BODY,
                headers={"authorization": f"Bearer {token}"},
            )
    assert answer.status_code == 200
    assert token not in json.dumps(server.requests[0].headers) and token not in repr(settings)


def test_a_gemini_client_s_key_in_the_query_opens_the_proxy_too():
    token = "openprogram-replay-0123456789abcdefghijklmnop"
    with start_proxy(ProxySettings(client_token=token)) as proxy:
        path = "/v1beta/models/gemini-2.5-flash:countTokens"
        opened = httpx.post(proxy.url + path, params={"key": token}, json={})
        closed = httpx.post(proxy.url + path, params={"key": "AIzaSy-other"}, json={})
    assert opened.status_code == 404  # past the guard: no such route
    assert closed.status_code == 401 and closed.json()["error"]["status"] == "UNAUTHENTICATED"
