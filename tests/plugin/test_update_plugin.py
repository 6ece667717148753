"""``--llm-record-mode=update`` in the pytest plugin: one session per test, so the unused-call
check keeps working after an update; a failing or shorter test leaves its recording; the
outcome of each test is in the run's summary; a file another process holds fails the test in
one message naming it."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_recordings_cli import writer_holding
from tests.plugin.test_pytest_plugin import recording_file, run_inner

SUITE = """
import asyncio, os, pytest
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage
ECHO = Model(id="echo", api="faux", provider="faux")

@pytest.mark.llm_recording
def test_agent():
    prompts = os.environ.get("PROMPTS", "one,two,three").split(",")
    for prompt in prompts:
        message = asyncio.run(complete(ECHO, Context(messages=[UserMessage(content=prompt, timestamp=0)])))
        assert message.content[0].text == f"echo: {prompt}"
    assert not os.environ.get("FAIL"), "the agent did the wrong thing"
"""


def sessions(path) -> list[str]:
    return [
        json.loads(line).get("session")
        for line in path.read_text().splitlines()
        if '"request"' in line
    ]


@pytest.mark.slow
def test_an_updated_test_is_one_session_and_its_unused_calls_still_fail(pytester):
    pytester.makepyfile(test_agent_suite=SUITE)
    run_inner(pytester, "--llm-record-mode=record").assert_outcomes(passed=1)
    path = recording_file(pytester)
    updated = run_inner(pytester, "--llm-record-mode=update", PROMPTS="one,two,THREE")
    updated.assert_outcomes(passed=1)
    updated.stdout.fnmatch_lines(
        [
            "*openprogram update*",
            "test_agent_suite.py::test_agent: * updated: kept 2 calls, recorded 1, dropped 1",
        ]
    )
    assert len(sessions(path)) == 3 and len(set(sessions(path))) == 1

    shorter = run_inner(pytester, PROMPTS="one,two")  # replay: the recorded third call is unused
    shorter.assert_outcomes(failed=1)
    shorter.stdout.fnmatch_lines(["*replay mismatch at call 2, field remaining_calls*"])

    before = path.read_bytes()
    short_update = run_inner(pytester, "--llm-record-mode=update", PROMPTS="one,two")
    short_update.assert_outcomes(failed=1)  # nothing drifted: the file stays, and the check says so
    short_update.stdout.fnmatch_lines(
        ["*field remaining_calls*", "*left unchanged: nothing drifted (2 calls replayed)"]
    )
    assert path.read_bytes() == before


def test_a_failing_test_keeps_its_recording_and_says_why(pytester):
    pytester.makepyfile(test_agent_suite=SUITE)
    run_inner(pytester, "--llm-record-mode=record").assert_outcomes(passed=1)
    path = recording_file(pytester)
    before = path.read_bytes()
    failed = run_inner(pytester, "--llm-record-mode=update", PROMPTS="one,TWO", FAIL="1")
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(
        [
            "*left unchanged: the run ended with an exception (AssertionError); its 1 new call was not kept"
        ]
    )
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["test_agent.jsonl"]


def test_a_recording_another_process_holds_fails_the_test_in_one_message(pytester):
    pytester.makepyfile(test_agent_suite=SUITE)
    run_inner(pytester, "--llm-record-mode=record").assert_outcomes(passed=1)
    path = recording_file(pytester)
    before = path.read_bytes()
    with writer_holding(path) as writer:
        busy = run_inner(pytester, "--llm-record-mode=update", PROMPTS="one,TWO")
    busy.assert_outcomes(failed=1)
    busy.stdout.fnmatch_lines([f"*is being recorded into by process {writer.pid} (*"])
    assert "Traceback" not in busy.stdout.str()
    assert path.read_bytes() == before


def test_an_update_that_cannot_write_beside_the_recording_fails_in_one_message(pytester):
    pytester.makepyfile(test_agent_suite=SUITE)
    pytester.makeconftest(
        """
import tempfile
import openprogram.recordings.store.updating as updating

def refused(*args, **kwargs):  # root ignores permissions: a folder that refuses new files
    raise PermissionError(13, "Permission denied")

updating.tempfile = type("Refusing", (), {"mkstemp": staticmethod(refused)})
"""
    )
    run_inner(pytester, "--llm-record-mode=record").assert_outcomes(passed=1)
    path = recording_file(pytester)
    before = path.read_bytes()
    result = run_inner(pytester, "--llm-record-mode=update", PROMPTS="one,TWO")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*recording file {path}: cannot record the drifted call: the folder {path.parent} cannot be written (Permission denied)*",
            f"The recording {path} is left as it was.",
        ]
    )
    assert "Traceback" not in result.stdout.str() and "loop.py" not in result.stdout.str()
    assert path.read_bytes() == before
