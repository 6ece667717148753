"""The ``llm_proxy`` fixture (docs/proxy.md, "In pytest"): a test of code that builds its own
``openai.OpenAI()`` client records through the proxy, replays offline with no key, drifts with
the plugin's report and drift page, and updates, with no change to that code; live calls go
where the marker's ``upstream=`` or the project's ``proxy.upstream`` table says."""

from __future__ import annotations

import socket

import pytest

from tests.plugin.test_plugin_live_guard import CountingEchoServer

CODE_UNDER_TEST = '''
import os

import openai


def ask(question):
    """Application code: its own client, configured from the environment only."""
    client = openai.OpenAI()
    reply = client.chat.completions.create(model="echo", messages=[{"role": "user", "content": question}])
    return reply.choices[0].message.content


async def ask_streaming(question):
    client = openai.AsyncOpenAI()
    stream = await client.chat.completions.create(
        model="echo", messages=[{"role": "user", "content": question}], stream=True
    )
    return "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])
'''

TESTS = """
import os

import pytest

from agent_code import ask, ask_streaming

QUESTION = os.environ.get("QUESTION", "hello")


@pytest.mark.llm_recording(UPSTREAM)
def test_direct_sdk(llm_proxy):
    assert llm_proxy.url.startswith("http://127.0.0.1:")
    assert os.environ["OPENAI_BASE_URL"] == llm_proxy.url + "/v1"
    assert ask(QUESTION) == "echo: " + QUESTION


@pytest.mark.llm_recording(UPSTREAM)
async def test_direct_async_stream(llm_proxy):
    assert await ask_streaming(QUESTION + " again") == "echo: " + QUESTION + " again"
"""


def _closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _project(pytester: pytest.Pytester, *, by_marker: bool) -> None:
    pytester.makepyfile(agent_code=CODE_UNDER_TEST)
    if by_marker:
        pytester.makepyfile(
            test_app=TESTS.replace(
                "UPSTREAM", 'upstream={"openai-completions": os.environ["UPSTREAM_URL"]}'
            )
        )
    else:
        pytester.makepyfile(test_app=TESTS.replace("(UPSTREAM)", ""))


def _run(
    pytester: pytest.Pytester,
    *args: str,
    upstream: str,
    question: str = "hello",
    key: str | None = "sk-local-test",
) -> pytest.RunResult:
    pytester._monkeypatch.setenv("UPSTREAM_URL", upstream)
    pytester._monkeypatch.setenv("QUESTION", question)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        pytester._monkeypatch.delenv(name, raising=False)
    if key is not None:
        pytester._monkeypatch.setenv("OPENAI_API_KEY", key)
    return pytester.runpytest_subprocess(
        "-p",
        "asyncio",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "-q",
        *args,
    )


def _recording(pytester: pytest.Pytester, name: str) -> bytes:
    return (pytester.path / "recordings" / "test_app" / f"{name}.jsonl").read_bytes()


@pytest.mark.slow
def test_record_replay_offline_drift_and_update_through_the_fixture(pytester):
    _project(pytester, by_marker=True)
    with CountingEchoServer() as server:
        recorded = _run(pytester, "--llm-record-mode=record", upstream=server.base_url)
        assert server.requests == 2
    recorded.assert_outcomes(passed=2)
    first = _recording(pytester, "test_direct_sdk")
    assert b"echo: hello" in first and b"sk-local-test" not in first

    # Offline: the server is gone, and no key is set (the SDK gets a placeholder).
    replayed = _run(pytester, upstream=_closed_port_url(), key=None)
    replayed.assert_outcomes(passed=2)

    # A changed prompt: the client gets a 400, the test's report is the plugin's mismatch.
    drifted = _run(
        pytester, "-k", "test_direct_sdk", upstream=_closed_port_url(), question="goodbye"
    )
    drifted.assert_outcomes(failed=1)
    drifted.stdout.fnmatch_lines(
        [
            "*replay mismatch at call 0 (lane 'conversation-*'), field context.messages?0?.content:*",
            "*recorded 'hello', incoming 'goodbye'*",
            "*the client got it from llm_proxy as an HTTP 400: BadRequestError*",
            "*See the drift in a browser: *test_direct_sdk.drift.html*",
            "*pytest test_app.py::test_direct_sdk --llm-record-mode=rewrite*",
        ]
    )
    assert list(pytester.path.glob("llm-reports/**/test_direct_sdk.drift.html"))

    # Update: the drifted call goes live and the file is rewritten; the other test's stays.
    other = _recording(pytester, "test_direct_async_stream")
    with CountingEchoServer() as server:
        updated = _run(
            pytester, "--llm-record-mode=update", upstream=server.base_url, question="goodbye"
        )
        assert server.requests == 2
    updated.assert_outcomes(passed=2)
    assert b"echo: goodbye" in _recording(pytester, "test_direct_sdk")
    assert b"echo: hello" not in _recording(pytester, "test_direct_sdk")
    assert b"echo: goodbye again" in _recording(pytester, "test_direct_async_stream")
    assert other != _recording(pytester, "test_direct_async_stream")
    # ... and replays offline again.
    _run(pytester, upstream=_closed_port_url(), question="goodbye", key=None).assert_outcomes(
        passed=2
    )


def test_the_project_table_names_the_upstream(pytester):
    _project(pytester, by_marker=False)
    with CountingEchoServer() as server:
        pytester.makepyprojecttoml(
            f'[tool.openprogram.proxy.upstream]\n"openai-completions" = "{server.base_url}"\n'
        )
        recorded = _run(pytester, "--llm-record-mode=record", upstream="unused")
        assert server.requests == 2
    recorded.assert_outcomes(passed=2)
    _run(pytester, upstream="unused", key=None).assert_outcomes(passed=2)


def test_a_bad_upstream_in_the_project_is_named(pytester):
    _project(pytester, by_marker=False)
    pytester.makepyprojecttoml(
        '[tool.openprogram.proxy.upstream]\n"openai-chat" = "http://127.0.0.1:1/v1"\n'
    )
    result = _run(pytester, "-k", "test_direct_sdk", "--llm-record-mode=record", upstream="unused")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*pyproject.toml: tool.openprogram.proxy.upstream: unknown api 'openai-chat'*"]
    )


def test_the_server_down_while_recording_fails_naming_it(pytester):
    _project(pytester, by_marker=True)
    result = _run(
        pytester, "-k", "test_direct_sdk", "--llm-record-mode=record", upstream=_closed_port_url()
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*a live call got no answer from the vendor, so no recording was kept*",
            "*connection failed*",
        ]
    )
    assert not (pytester.path / "recordings" / "test_app" / "test_direct_sdk.jsonl").exists()


OTHER_SDKS = """
import os

import pytest


@pytest.mark.llm_recording(upstream={"anthropic-messages": os.environ["UPSTREAM_URL"]})
def test_anthropic_client(llm_proxy):
    import anthropic

    assert os.environ["ANTHROPIC_BASE_URL"] == llm_proxy.url
    message = anthropic.Anthropic().messages.create(
        model="claude-haiku-4-5", max_tokens=100, messages=[{"role": "user", "content": "hello"}]
    )
    assert "".join(block.text for block in message.content if block.type == "text") == "Hello, world!"


@pytest.mark.llm_recording(upstream={"google-generative-ai": os.environ["UPSTREAM_URL"]})
def test_gemini_client(llm_proxy):
    from google import genai

    assert os.environ["GOOGLE_GEMINI_BASE_URL"] == llm_proxy.url
    client = genai.Client()  # kept: google-genai closes its HTTP client when the Client goes
    response = client.models.generate_content(model="gemini-2.5-flash", contents="hello")
    assert response.text == "Hello, world!"
"""


@pytest.mark.parametrize(
    ("test", "chunks", "key_variable"),
    [
        ("test_anthropic_client", "anthropic", "ANTHROPIC_API_KEY"),
        ("test_gemini_client", "google", "GEMINI_API_KEY"),
    ],
)
@pytest.mark.slow
def test_the_anthropic_and_google_sdks_find_the_proxy_from_their_variables(
    pytester, test, chunks, key_variable
):
    """Each SDK's own client, built with no argument, reaches the proxy through the variable the
    fixture sets; in replay it starts with the placeholder key, as no key is set. The calls do
    not stream, so the vendor answers with a whole JSON body."""
    from tests.proxy.test_proxy_sdks import whole_answer
    from tests.transcripts import anthropic_streams, google_streams
    from tests.vendor_server import ScriptedResponse, VendorServer

    api, stream = {
        "anthropic": ("anthropic-messages", anthropic_streams.PLAIN_TEXT),
        "google": ("google-generative-ai", google_streams.PLAIN_TEXT),
    }[chunks]
    body = whole_answer(api, stream)
    pytester.makepyfile(test_sdks=OTHER_SDKS)
    for name in (
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "ANTHROPIC_BASE_URL",
        "GOOGLE_GEMINI_BASE_URL",
    ):
        pytester._monkeypatch.delenv(name, raising=False)
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=[body], headers={"content-type": "application/json"}))
        pytester._monkeypatch.setenv(key_variable, "live-key-for-the-test")
        pytester._monkeypatch.setenv("UPSTREAM_URL", server.url)
        recorded = pytester.runpytest_subprocess("-q", "-k", test, "--llm-record-mode=record")
        assert len(server.requests) == 1
    recorded.assert_outcomes(passed=1)
    assert (
        b"live-key-for-the-test"
        not in (pytester.path / "recordings" / "test_sdks" / f"{test}.jsonl").read_bytes()
    )
    pytester._monkeypatch.delenv(key_variable)
    pytester._monkeypatch.setenv("UPSTREAM_URL", _closed_port_url())
    pytester.runpytest_subprocess("-q", "-k", test).assert_outcomes(passed=1)


def test_a_project_upstream_on_an_untrusted_host_gets_no_key(pytester):
    """A repository's own table sends the llm_proxy's live calls elsewhere: the client's key is
    not forwarded there (refused before anything is sent, naming the host and the fix), and
    nothing is recorded."""
    _project(pytester, by_marker=False)
    pytester.makepyprojecttoml(
        '[tool.openprogram.proxy.upstream]\n"openai-completions" = "http://collector.invalid/v1"\n'
    )
    refused = _run(pytester, "--llm-record-mode=record", "-k", "test_direct_sdk", upstream="unused")
    refused.assert_outcomes(failed=1)
    refused.stdout.fnmatch_lines(
        [
            "*key not sent to collector.invalid (the upstream of openai-completions that *pyproject.toml sets)*"
        ]
    )
    assert "sk-local-test" not in refused.stdout.str()
    assert not (pytester.path / "recordings" / "test_app" / "test_direct_sdk.jsonl").exists()


def test_llm_proxy_without_the_proxy_extra_says_how_to_install_it(pytester):
    """One line naming the command, no traceback (the server's packages are an extra)."""
    pytester.makeconftest(
        'import sys\nsys.modules["uvicorn"] = None  # as if it were not installed\n'
    )
    pytester.makepyfile(test_missing="def test_it(llm_proxy):\n    pass\n")
    result = pytester.runpytest_subprocess("-q", "--llm-record-mode=record")
    result.assert_outcomes(errors=1)
    assert (
        "llm_proxy needs uvicorn, which come with the proxy extra: pip install 'starlette>=0.40' 'uvicorn>=0.29'"
        in result.stdout.str()
    )
    assert (
        "Traceback" not in result.stdout.str() and "ModuleNotFoundError" not in result.stdout.str()
    )


EARLY_STOP = """
import os

import openai
import pytest


@pytest.mark.llm_recording(upstream={"openai-completions": os.environ["UPSTREAM_URL"]})
def test_reads_the_first_two_chunks_only(llm_proxy):
    stream = openai.OpenAI(max_retries=0).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    chunks = iter(stream)
    first, second = next(chunks), next(chunks)  # all the vendor sent before it paused
    stream.close()  # stops reading while the answer is still streaming
    assert first.choices[0].delta.role == "assistant"
    assert second.choices[0].delta.content == "Hello"
"""


def test_a_client_that_stops_reading_early_is_recorded_as_what_it_was_sent(pytester):
    from openprogram.providers.replay import read_recording_file
    from tests.transcripts import openai_completions_streams as c
    from tests.vendor_server import ScriptedResponse, VendorServer

    pytester.makepyfile(test_early=EARLY_STOP)
    with VendorServer() as server:  # the answer stops after two chunks, until the test is over
        server.queue(ScriptedResponse(chunks=c.PLAIN_TEXT, hold_after=2))
        recorded = _run(pytester, "--llm-record-mode=record", upstream=server.url + "/v1")
    recorded.assert_outcomes(passed=1)  # and no error at the proxy's tear-down
    path = (
        pytester.path / "recordings" / "test_early" / "test_reads_the_first_two_chunks_only.jsonl"
    )
    (call,) = read_recording_file(path).calls  # the strict reader accepts it: no recover needed
    assert call.outcome == "cancelled" and [event.type for event in call.events()][:2] == [
        "start",
        "text_start",
    ]

    replayed = _run(pytester, upstream=_closed_port_url(), key=None)
    replayed.assert_outcomes(passed=1)
