"""A failed live call is said, not recorded (docs/tutorial.md, "When a live call fails"): in
record, rewrite and update modes a call the vendor never answered (connection refused, no key)
fails the test with that cause and keeps nothing of it; an error the vendor did send (an HTTP
400) is recorded and named in the report; a failed test's discarded recording is said, with
``--llm-keep-failed``; a run with missing recordings ends with one command that records them
all."""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bench.echo_server import EchoServer
from tests.vendor_server import ScriptedResponse, VendorServer

AGENT = """
import os
import pytest
from openprogram.agent import AgentContext, AgentLoopConfig, agent_loop
from openprogram.providers.types import Model, UserMessage

KEY = os.environ.get("AGENT_KEY") or None
LOCAL = Model(id="echo", api="openai-completions", provider=os.environ.get("AGENT_PROVIDER", "local"),
              base_url=os.environ["ECHO_URL"])


async def ask(question):
    context = AgentContext()
    config = AgentLoopConfig(model=LOCAL, api_key=KEY)
    events = [e async for e in agent_loop([UserMessage(content=question)], context, config)]
    return events[-1].messages[-1]
"""

TESTS = (
    AGENT
    + """

@pytest.mark.llm_recording
async def test_answer():
    answer = await ask("hello")
    assert answer.content[0].text == "echo: hello"


@pytest.mark.llm_recording
async def test_error_is_handled():
    answer = await ask("hello")
    assert answer.stop_reason == "error"
    assert "HTTP 400" in answer.error_message
"""
)


def _closed_port_url() -> str:
    """A loopback URL nothing listens on (the port was just free)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _run(
    pytester: pytest.Pytester, url: str, *args: str, provider: str = "local", key: str = "local"
) -> pytest.RunResult:
    pytester._monkeypatch.setenv("ECHO_URL", url)
    pytester._monkeypatch.setenv("AGENT_PROVIDER", provider)
    pytester._monkeypatch.setenv("AGENT_KEY", key)
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


def _recordings(pytester: pytest.Pytester) -> list[str]:
    folder = pytester.path / "recordings"
    return (
        sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file())
        if folder.exists()
        else []
    )


@pytest.mark.parametrize("keep_failed", [False, True])
def test_record_with_the_server_down_fails_naming_the_cause_and_keeps_nothing(
    pytester, keep_failed
):
    pytester.makepyfile(test_agent=TESTS)
    extra = ("--llm-keep-failed",) if keep_failed else ()
    result = _run(
        pytester, _closed_port_url(), "-k", "test_answer", "--llm-record-mode=record", *extra
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_agent.py::test_answer: a live call got no answer from the vendor, so no recording was kept*",
            "*call 0 got no answer from the vendor: local: connection failed*",
            "*pytest test_agent.py::test_answer --llm-record-mode=record*",
        ]
    )
    # The test's own assertion (on the empty answer the agent made of the error) is not what
    # the user sees first: the cause is.
    assert "AssertionError" not in result.stdout.str()
    assert _recordings(pytester) == []


def test_a_missing_key_fails_the_recording_naming_the_variable(pytester):
    pytester.makepyfile(test_agent=TESTS)
    pytester._monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # A host that is not loopback needs a key; the call fails before anything is sent
    # (``.invalid`` never resolves, should it get that far).
    result = _run(
        pytester,
        "http://api.openai.invalid/v1",
        "-k",
        "test_answer",
        "--llm-record-mode=rewrite",
        provider="openai",
        key="",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*call 0 got no answer from the vendor:*OPENAI_API_KEY*"])
    assert _recordings(pytester) == []


def test_a_vendor_http_error_is_recorded_named_and_replayed(pytester):
    pytester.makepyfile(test_agent=TESTS)
    error = json.dumps(
        {"error": {"message": "max_tokens is too large", "type": "invalid_request_error"}}
    ).encode()
    with VendorServer() as server:
        server.queue(
            ScriptedResponse(
                status=400, headers={"content-type": "application/json"}, chunks=[error]
            )
        )
        recorded = _run(
            pytester, f"{server.url}/v1", "-k", "error_is_handled", "--llm-record-mode=record"
        )
        assert len(server.requests) == 1  # a 400 is not retried
    recorded.assert_outcomes(passed=1)
    recorded.stdout.fnmatch_lines(
        [
            "*openprogram model calls*",
            "*test_agent.py::test_error_is_handled: call 0 ended in an error the vendor sent (recorded: a replay "
            "serves it): local: HTTP 400: *max_tokens is too large*",
        ]
    )
    assert _recordings(pytester) == ["test_agent/test_error_is_handled.jsonl"]
    replayed = _run(pytester, _closed_port_url(), "-k", "error_is_handled")
    replayed.assert_outcomes(passed=1)


def test_update_with_the_server_down_fails_and_leaves_the_file(pytester):
    pytester.makepyfile(test_agent=TESTS)
    with EchoServer() as server:
        _run(
            pytester, server.base_url, "-k", "test_answer", "--llm-record-mode=record"
        ).assert_outcomes(passed=1)
    recording = pytester.path / "recordings" / "test_agent" / "test_answer.jsonl"
    before = recording.read_bytes()
    # The question changes: the first call drifts and goes live, to a server that is gone.
    pytester.makepyfile(test_agent=TESTS.replace('ask("hello")', 'ask("hello again")', 1))
    result = _run(pytester, _closed_port_url(), "-k", "test_answer", "--llm-record-mode=update")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*a live call got no answer from the vendor, so {recording} is left as it was*",
            "*connection failed*",
        ]
    )
    assert recording.read_bytes() == before
    assert _recordings(pytester) == ["test_agent/test_answer.jsonl"]


def test_off_mode_names_the_failure_in_the_report(pytester):
    pytester.makepyfile(test_agent=TESTS)
    result = _run(pytester, _closed_port_url(), "-k", "test_answer", "--llm-record-mode=off")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*openprogram model calls*",
            "*call 0 got no answer from the vendor: local: connection failed*",
        ]
    )


def test_a_failed_test_says_its_recording_was_discarded(pytester):
    pytester.makepyfile(
        test_agent=AGENT
        + """

@pytest.mark.llm_recording
async def test_wrong_expectation():
    answer = await ask("hello")
    assert answer.content[0].text == "something else"
"""
    )
    with EchoServer() as server:
        result = _run(pytester, server.base_url, "--llm-record-mode=record")
        kept = _run(pytester, server.base_url, "--llm-record-mode=record", "--llm-keep-failed")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*The test failed, so its new recording was not kept*",
            "*pytest test_agent.py::test_wrong_expectation --llm-record-mode=record --llm-keep-failed*",
        ]
    )
    kept.assert_outcomes(failed=1)
    assert "was not kept" not in kept.stdout.str()
    assert _recordings(pytester) == ["test_agent/test_wrong_expectation.jsonl"]


def test_one_closing_line_records_every_missing_recording(pytester):
    """Three tests without recordings (one id with an apostrophe and non-ASCII): the closing
    line, pasted into ``sh -c``, records all three."""
    pytester.makepyfile(
        test_agent=AGENT
        + """

@pytest.mark.llm_recording
@pytest.mark.parametrize("country", ["Côte d'Ivoire", "Peru"])
async def test_capital(country):
    answer = await ask(country)
    assert answer.content[0].text == f"echo: {country}"


@pytest.mark.llm_recording
async def test_plain():
    answer = await ask("plain")
    assert answer.content[0].text == "echo: plain"
"""
    )
    missing = _run(pytester, _closed_port_url())
    missing.assert_outcomes(failed=3)
    lines = missing.stdout.lines
    heading = next(
        index for index, line in enumerate(lines) if "openprogram: missing recordings" in line
    )
    assert lines[heading + 1] == "3 tests had no recording; record them all with:"
    command = lines[heading + 2].strip()
    assert command.startswith("pytest ") and command.endswith(" --llm-record-mode=record")
    assert len(shlex.split(command)) == 5
    with EchoServer() as server:
        pytester._monkeypatch.setenv("ECHO_URL", server.base_url)
        recorded = subprocess.run(
            [
                "sh",
                "-c",
                command.replace(
                    "pytest ",
                    f"{shlex.quote(sys.executable)} -m pytest -p asyncio -o asyncio_mode=auto -q ",
                    1,
                ),
            ],
            cwd=pytester.path,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert "3 passed" in recorded.stdout
    assert len(_recordings(pytester)) == 3
    assert all(Path(name).suffix == ".jsonl" for name in _recordings(pytester))
