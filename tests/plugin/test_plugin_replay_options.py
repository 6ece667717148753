"""The pytest plugin's replay options (docs/tutorial.md, "Testing what goes wrong"): the
marker's ``faults=``, ``rechunk=`` and ``pace=``, and ``--llm-fault``, ``--llm-rechunk`` and
``--llm-pace`` for a whole run, through real inner pytest sessions."""

from __future__ import annotations

import pytest

from tests.conftest import made_once
from tests.plugin.test_pytest_plugin import run_inner

#: A two-call agent on the scripted echo model that retries a failed call ``RETRIES`` times.
SUITE = """
import asyncio, os, pytest
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage

ECHO = Model(id="echo", api="faux", provider="faux")
RETRIES = int(os.environ.get("RETRIES", "2"))


def ask(text):
    for _attempt in range(RETRIES + 1):
        message = asyncio.run(complete(ECHO, Context(messages=[UserMessage(content=text, timestamp=0)])))
        if message.stop_reason != "error":
            return message.content[0].text
    raise RuntimeError(message.error_message)


@pytest.mark.llm_recording
def test_plain():
    assert [ask("one"), ask("two")] == ["echo: one", "echo: two"]


@pytest.mark.llm_recording(faults=["rate_limit@1"])
def test_marked():
    assert [ask("one"), ask("two")] == ["echo: one", "echo: two"]
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, tmp_path_factory) -> pytest.Pytester:
    def record() -> None:
        pytester.makepyfile(test_suite=SUITE)
        run_inner(pytester, "--llm-record-mode=record").assert_outcomes(passed=2)

    made_once(tmp_path_factory, "replay-options-suite", pytester.path, record)
    return pytester


def test_marker_and_run_faults_are_served_and_the_retry_gets_the_recording(suite):
    recordings = {path: path.read_bytes() for path in (suite.path / "recordings").rglob("*.jsonl")}
    run_inner(suite, "--llm-fault", "server_error@0", "--llm-fault", "cut@1:2").assert_outcomes(
        passed=2
    )
    failed = run_inner(suite, "--llm-fault=network@0", RETRIES="0")
    failed.assert_outcomes(failed=2)
    failed.stdout.fnmatch_lines(
        [
            "*RuntimeError: faux: connection failed (ConnectionError): All connection attempts failed*",
            "*openprogram replay options*",
            "The test failed under replay with faults network@0; run it so again with:",
            "  pytest test_suite.py::test_plain --llm-fault=network@0",
        ]
    )
    assert "replay mismatch" not in failed.stdout.str()
    marked = run_inner(suite, "test_suite.py::test_marked", RETRIES="0")
    marked.assert_outcomes(failed=1)
    marked.stdout.fnmatch_lines(["*RuntimeError: faux: HTTP 429: Too Many Requests*"])
    assert {path: path.read_bytes() for path in recordings} == recordings  # nothing rewritten


def test_run_options_are_said_in_the_header_and_bad_ones_are_usage_errors(suite):
    header = run_inner(suite, "-v", "--llm-fault=overloaded@0", "--llm-pace=recorded")
    header.stdout.fnmatch_lines(["openprogram: replay with faults overloaded@0; pace recorded"])
    bad = run_inner(suite, "--llm-fault=overload")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--llm-fault: fault 'overload': Fault kind must be one of*"])
    seed = run_inner(suite, "--llm-rechunk=soon")
    assert seed.ret == pytest.ExitCode.USAGE_ERROR
    seed.stderr.fnmatch_lines(
        ["*--llm-rechunk: rechunk takes a seed (an int >= 0) or 'random', not 'soon'*"]
    )


def test_a_bad_marker_option_fails_its_test_naming_it(pytester):
    pytester.makepyfile(
        test_suite="""
import pytest

@pytest.mark.llm_recording(faults=["soon"])
def test_agent():
    pass
"""
    )
    result = run_inner(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*@pytest.mark.llm_recording: fault 'soon'*"])


PROXIED = '''
import os

import openai
import pytest

RETRIES = int(os.environ.get("RETRIES", "2"))


def ask(question):
    """Application code: its own client, from the environment, with the SDK's retries."""
    client = openai.OpenAI(max_retries=RETRIES)
    reply = client.chat.completions.create(model="echo", messages=[{"role": "user", "content": question}])
    return reply.choices[0].message.content


@pytest.mark.llm_recording(upstream={"openai-completions": os.environ["UPSTREAM_URL"]}, faults=["rate_limit@0"])
def test_through_the_proxy(llm_proxy):
    assert ask("hello") == "echo: hello"
'''


@pytest.mark.slow
def test_llm_proxy_serves_the_markers_faults_and_the_sdk_retries(pytester):
    from tests.plugin.test_plugin_live_guard import CountingEchoServer

    pytester.makepyfile(test_app=PROXIED)
    pytester._monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    with CountingEchoServer() as server:
        pytester._monkeypatch.setenv("UPSTREAM_URL", server.base_url)
        run_inner(pytester, "--llm-record-mode=record").assert_outcomes(
            passed=1
        )  # no fault recording
        assert server.requests == 1
    pytester._monkeypatch.setenv("UPSTREAM_URL", "http://127.0.0.1:9/v1")
    run_inner(pytester).assert_outcomes(passed=1)  # the SDK retried the 429 itself
    failed = run_inner(pytester, RETRIES="0")
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(["*RateLimitError*Rate limit reached for requests per min*"])
