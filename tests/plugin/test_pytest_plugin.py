"""The pytest plugin, exercised through real inner pytest sessions (pytester, in subprocesses
so each inner session loads the plugin from its entry point like a user's would)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import made_once

INNER_CONFTEST = """
import os, socket
import pytest

@pytest.fixture(autouse=True)
def no_network_when_replaying(monkeypatch):
    if os.environ.get("EXPECT_OFFLINE"):
        def refuse(*args, **kwargs):
            raise OSError("network disabled")
        monkeypatch.setattr(socket.socket, "connect", refuse)
        monkeypatch.setattr(socket, "create_connection", refuse)
"""

INNER_TEST = """
import os
import pytest
from openprogram.agent import AgentContext, AgentLoopConfig, agent_loop
from openprogram.providers.faux import DEFAULT_FAUX_PROVIDER
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage
from openprogram.tools import builtin_tools

ECHO = Model(id="echo", api="faux", provider="faux")
PROMPT = os.environ.get("INNER_PROMPT", "/calculator 6*7")


async def run_agent(prompt):
    context = AgentContext(tools=builtin_tools(["calculator"]))
    events = [e async for e in agent_loop([UserMessage(content=prompt)], context, AgentLoopConfig(model=ECHO))]
    return events[-1].messages[-1].content[0].text


def provider_was_called():
    return bool(DEFAULT_FAUX_PROVIDER.calls)


@pytest.mark.llm_recording
async def test_agent():
    assert await run_agent(PROMPT) == "calculator returned: 42"
    if os.environ.get("EXPECT_OFFLINE"):
        assert not provider_was_called()


@pytest.mark.llm_recording(name="direct")
def test_sync_facade_call(llm_recording):
    import asyncio
    message = asyncio.run(complete(ECHO, Context(messages=[UserMessage(content="hi", timestamp=0)])))
    assert message.content[0].text == "echo: hi"
    assert llm_recording.call_count == (0 if llm_recording.mode == "off" else 1)
    assert llm_recording.path.name == "direct.jsonl"
"""


def run_inner(pytester: pytest.Pytester, *args: str, **env: str) -> pytest.RunResult:
    for name, value in env.items():
        pytester._monkeypatch.setenv(name, value)
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


@pytest.fixture
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_agent_suite=INNER_TEST)
    return pytester


@pytest.fixture
def inner_recorded(pytester: pytest.Pytester, tmp_path_factory) -> pytest.Pytester:
    """``inner`` with both tests recorded (one inner session per worker: see made_once)."""

    def record() -> None:
        pytester.makeconftest(INNER_CONFTEST)
        pytester.makepyfile(test_agent_suite=INNER_TEST)
        run_inner(pytester, "--llm-record-mode=record").assert_outcomes(passed=2)

    made_once(tmp_path_factory, "agent-suite", pytester.path, record)
    return pytester


def recording_file(pytester, name="test_agent"):
    return pytester.path / "recordings" / "test_agent_suite" / f"{name}.jsonl"


def test_missing_recording_fails_with_the_command_that_records_it(inner):
    result = run_inner(inner)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*no LLM recording for test_agent_suite.py::test_agent*"])
    result.stdout.fnmatch_lines(
        ["*pytest test_agent_suite.py::test_agent --llm-record-mode=record*"]
    )
    assert not recording_file(inner).exists()


def test_record_then_replay_offline(inner):
    recorded = run_inner(inner, "--llm-record-mode=record")
    recorded.assert_outcomes(passed=2)
    path = recording_file(inner)
    assert path.exists() and recording_file(inner, "direct").exists()
    calls = [json.loads(line) for line in path.read_text().splitlines() if '"request"' in line]
    assert len(calls) == 2  # the tool call turn and the answer turn
    before = path.read_bytes()

    replayed = run_inner(inner, EXPECT_OFFLINE="1")
    replayed.assert_outcomes(passed=2)
    again = run_inner(inner, "--llm-record-mode=record", EXPECT_OFFLINE="1")  # existing: replays
    again.assert_outcomes(passed=2)
    assert path.read_bytes() == before


@pytest.mark.slow
def test_drifted_prompt_fails_with_the_mismatch_report_and_rewrite_fixes_it(inner_recorded):
    drifted = run_inner(
        inner_recorded, "test_agent_suite.py::test_agent", INNER_PROMPT="/calculator 42"
    )
    drifted.assert_outcomes(failed=1)
    drifted.stdout.fnmatch_lines(
        [
            "replay mismatch at call 0, field context.messages[[]0[]].content:",
            "recorded '/calculator 6*7', incoming '/calculator 42'",
            "If the change is intended, update the recording (the calls before call 0 are replayed, *",
            "  pytest test_agent_suite.py::test_agent --llm-record-mode=update",
            "or re-record the whole test (every call live):",
            "  pytest test_agent_suite.py::test_agent --llm-record-mode=rewrite",
        ]
    )
    assert "Traceback" not in drifted.stdout.str() and "loop.py" not in drifted.stdout.str()
    rewritten = run_inner(
        inner_recorded,
        "--llm-record-mode=rewrite",
        "test_agent_suite.py::test_agent",
        INNER_PROMPT="/calculator 42",
    )
    rewritten.assert_outcomes(passed=1)
    assert "/calculator 42" in recording_file(inner_recorded).read_text()
    run_inner(
        inner_recorded,
        "test_agent_suite.py::test_agent",
        INNER_PROMPT="/calculator 42",
        EXPECT_OFFLINE="1",
    ).assert_outcomes(passed=1)


def test_unconsumed_recorded_calls_fail_a_passing_test(pytester):
    pytester.makepyfile(
        test_agent_suite="""
import os, asyncio, pytest
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage
ECHO = Model(id="echo", api="faux", provider="faux")

@pytest.mark.llm_recording
def test_agent():
    for text in ["one", "two"][: int(os.environ.get("CALLS", "2"))]:
        asyncio.run(complete(ECHO, Context(messages=[UserMessage(content=text, timestamp=0)])))
"""
    )
    run_inner(pytester, "--llm-record-mode=record").assert_outcomes(passed=1)
    short = run_inner(pytester, CALLS="1")
    short.assert_outcomes(failed=1)
    short.stdout.fnmatch_lines(
        [
            "*replay mismatch at call 1, field remaining_calls:",
            "made 1 of its 2 recorded calls (1 left unused)",
            "If the test now makes fewer calls on purpose, re-record it *",
            "  pytest test_agent_suite.py::test_agent --llm-record-mode=rewrite",
        ]
    )
    assert (
        "--llm-record-mode=update" not in short.stdout.str()
    )  # an update keeps a file that did not drift


def test_failing_test_keeps_no_recording_unless_asked(pytester):
    pytester.makepyfile(
        test_agent_suite="""
import asyncio, pytest
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage

@pytest.mark.llm_recording
def test_agent():
    asyncio.run(complete(Model(id="echo", api="faux", provider="faux"), Context(messages=[UserMessage(content="x")])))
    assert False, "the agent did the wrong thing"
"""
    )
    run_inner(pytester, "--llm-record-mode=record").assert_outcomes(failed=1)
    assert not recording_file(pytester).exists()
    assert not list((pytester.path / "recordings").rglob("*.recording"))
    run_inner(pytester, "--llm-record-mode=record", "--llm-keep-failed").assert_outcomes(failed=1)
    assert recording_file(pytester).exists()


def test_off_mode_calls_the_provider_and_records_nothing(inner):
    run_inner(inner, "--llm-record-mode=off").assert_outcomes(passed=2)
    assert not (inner.path / "recordings").exists()


@pytest.mark.slow
def test_xdist_records_and_replays_twenty_tests(pytester):
    pytester.makepyfile(
        test_agent_suite="""
import asyncio, pytest
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage

@pytest.mark.llm_recording
@pytest.mark.parametrize("n", range(20))
def test_agent(n):
    message = asyncio.run(complete(Model(id="echo", api="faux", provider="faux"),
                                   Context(messages=[UserMessage(content=f"number {n}", timestamp=0)])))
    assert message.content[0].text == f"echo: number {n}"
"""
    )
    run_inner(pytester, "-n", "2", "--llm-record-mode=record").assert_outcomes(passed=20)
    files = sorted((pytester.path / "recordings" / "test_agent_suite").glob("*.jsonl"))
    assert len(files) == 20
    for n in (0, 7, 19):
        assert (
            f"number {n}"
            in (
                pytester.path / "recordings" / "test_agent_suite" / f"test_agent_{n}.jsonl"
            ).read_text()
        )
    run_inner(pytester, "-n", "2", EXPECT_OFFLINE="1").assert_outcomes(passed=20)


def test_parametrised_ids_that_differ_only_in_punctuation_get_a_recording_each(pytester):
    pytester.makepyfile(
        test_agent_suite="""
import asyncio, pytest
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage

@pytest.mark.llm_recording
@pytest.mark.parametrize("prompt", ["a/b", "a_b", "a b", "What is 6*7?", "What is 6+7?"])
def test_agent(prompt):
    message = asyncio.run(complete(Model(id="echo", api="faux", provider="faux"),
                                   Context(messages=[UserMessage(content=prompt, timestamp=0)])))
    assert message.content[0].text == f"echo: {prompt}"
"""
    )
    run_inner(pytester, "--llm-record-mode=record").assert_outcomes(passed=5)
    folder = pytester.path / "recordings" / "test_agent_suite"
    files = sorted(folder.glob("*.jsonl"))
    assert len(files) == 5, [f.name for f in files]
    assert (folder / "test_agent_a_b.jsonl").exists()  # lossless ids keep their plain name
    for prompt in ["a/b", "a b", "What is 6*7?", "What is 6+7?"]:
        matching = [f for f in files if f'"content":{json.dumps(prompt)}' in f.read_text()]
        assert len(matching) == 1, prompt
    run_inner(pytester, EXPECT_OFFLINE="1").assert_outcomes(passed=5)


def test_a_corrupt_recording_fails_the_test_with_the_reason_and_the_rerecord_command(
    inner_recorded,
):
    path = recording_file(inner_recorded)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:2] + ["{not json"] + lines[2:]) + "\n")
    result = run_inner(inner_recorded, "test_agent_suite.py::test_agent")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*recording file {path} at line 3: *",
            "*pytest test_agent_suite.py::test_agent --llm-record-mode=rewrite*",
        ]
    )
    assert "Traceback" not in result.stdout.str() and "reader.py" not in result.stdout.str()


def test_a_volatile_system_prompt_replays_with_a_marker_normalize_rule_and_fails_without(pytester):
    pytester.makeini("""
[pytest]
llm_recording_ignore =
    options.metadata.*
""")
    pytester.makepyfile(
        test_agent_suite="""
import asyncio, os, pytest
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage
ECHO = Model(id="echo", api="faux", provider="faux")
NOW = os.environ["NOW"]

def ask():
    context = Context(system_prompt=f"The time is {NOW}.", messages=[UserMessage(content="hi")])
    return asyncio.run(complete(ECHO, context)).content[0].text

@pytest.mark.llm_recording(normalize=[(r"\\d\\d:\\d\\d:\\d\\d", "<time>")])
def test_normalized():
    assert ask() == "echo: hi"

@pytest.mark.llm_recording
def test_plain():
    assert ask() == "echo: hi"
"""
    )
    run_inner(pytester, "--llm-record-mode=record", NOW="02:30:58").assert_outcomes(passed=2)
    later = run_inner(pytester, NOW="09:15:00", EXPECT_OFFLINE="1")
    later.assert_outcomes(passed=1, failed=1)
    later.stdout.fnmatch_lines(["*test_plain*", "*field context.system_prompt*"])


def test_update_mode_records_only_the_drifted_call_and_keeps_an_unchanged_file(pytester):
    pytester.makepyfile(
        test_agent_suite="""
import asyncio, os, pytest
from openprogram.providers.faux import DEFAULT_FAUX_PROVIDER
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage
ECHO = Model(id="echo", api="faux", provider="faux")

@pytest.mark.llm_recording
def test_agent():
    prompts = ["one", "two", os.environ.get("THIRD", "three")]
    for prompt in prompts:
        message = asyncio.run(complete(ECHO, Context(messages=[UserMessage(content=prompt, timestamp=0)])))
        assert message.content[0].text == f"echo: {prompt}"
    print(f"LIVE CALLS: {len(DEFAULT_FAUX_PROVIDER.calls)}")
"""
    )
    run_inner(pytester, "--llm-record-mode=record").assert_outcomes(passed=1)
    path = recording_file(pytester)
    updated = run_inner(pytester, "--llm-record-mode=update", "-s", THIRD="THREE")
    updated.assert_outcomes(passed=1)
    updated.stdout.fnmatch_lines(["*LIVE CALLS: 1*"])
    contents = [
        json.loads(line)["context"]["messages"][0]["content"]
        for line in path.read_text().splitlines()
        if '"request"' in line
    ]
    assert contents == ["one", "two", "THREE"]
    before = path.read_bytes()
    again = run_inner(pytester, "--llm-record-mode=update", "-s", THIRD="THREE")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*LIVE CALLS: 0*"])
    assert path.read_bytes() == before
    run_inner(pytester, THIRD="THREE", EXPECT_OFFLINE="1").assert_outcomes(passed=1)


def test_a_prompt_naming_tmp_path_records_once_and_replays_in_later_runs(pytester):
    pytester.makepyfile(
        test_agent_suite="""
import pytest
from openprogram.agent import AgentContext, AgentLoopConfig, AgentTool, AgentToolResult, agent_loop
from openprogram.providers.models import get_model
from openprogram.providers.types import TextContent, UserMessage

@pytest.mark.llm_recording
async def test_reads_a_file_in_its_folder(tmp_path):
    (tmp_path / "notes.txt").write_text("remember the milk")
    seen = []

    async def read(tool_call_id, args, signal, on_update):
        seen.append(args["path"])
        return AgentToolResult(content=[TextContent(text=open(args["path"]).read())])

    tool = AgentTool(name="read", description="read a file", parameters={
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}, execute=read)
    prompt = f"/read {tmp_path}/notes.txt"
    events = [e async for e in agent_loop([UserMessage(content=prompt)], AgentContext(tools=[tool]),
                                          AgentLoopConfig(model=get_model("faux/echo")))]
    assert events[-1].messages[-1].content[0].text == "read returned: remember the milk"
    assert seen == [f"{tmp_path}/notes.txt"]
"""
    )
    run_inner(pytester, "--llm-record-mode=record").assert_outcomes(passed=1)
    path = recording_file(pytester, "test_reads_a_file_in_its_folder")
    text = path.read_text()
    assert "pytest-of-" not in text and "{{tmp_path}}/notes.txt" in text
    for _ in range(2):  # later runs get other tmp_path folders
        run_inner(pytester, EXPECT_OFFLINE="1").assert_outcomes(passed=1)


def test_a_crashed_recording_fails_naming_the_recover_command(inner_recorded):
    from tests.cli.test_recover_cli import cut_recording

    path = recording_file(inner_recorded)
    cut_recording(path, torn=True, record=False)
    result = run_inner(inner_recorded, EXPECT_OFFLINE="1")
    result.assert_outcomes(failed=1, passed=1)  # the other test's recording is whole
    result.stdout.fnmatch_lines([f"*openprogram recordings recover {path}*"])
    result.stdout.fnmatch_lines(["*--llm-record-mode=rewrite*"])


SHARING = """
import pytest
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage

FAUX = Model(id="echo", api="faux", provider="faux")


async def echo(text):
    return (await complete(FAUX, Context(messages=[UserMessage(content=text)]))).content[0].text


@pytest.mark.llm_recording
@pytest.mark.parametrize("who", ["user_admin"])
async def test_load(who):
    assert await echo(who) == f"echo: {who}"


@pytest.mark.llm_recording
@pytest.mark.parametrize("who", ["admin"])
async def test_load_user(who):
    assert await echo(who) == f"echo: {who}"


@pytest.mark.llm_recording
async def test_alone():
    assert await echo("alone") == "echo: alone"
"""


def test_two_tests_whose_names_map_to_one_file_fail_saying_how_to_part_them(pytester):
    """``test_load[user_admin]`` and ``test_load_user[admin]`` both map to
    ``test_load_user_admin.jsonl``: each would record over and replay the other's calls."""
    pytester.makepyfile(test_shared=SHARING)
    result = run_inner(pytester, "--llm-record-mode=record")
    result.assert_outcomes(passed=1, errors=2)  # at set-up: neither body runs
    result.stdout.fnmatch_lines(
        [
            "*test_shared.py::test_load?user_admin? and test_shared.py::test_load_user?admin? would share the "
            'recording *test_load_user_admin.jsonl; give each a name of its own: @pytest.mark.llm_recording(name="...")*',
        ]
    )
    assert not (
        pytester.path / "recordings" / "test_shared" / "test_load_user_admin.jsonl"
    ).exists()
    pytester.makepyfile(
        test_shared=SHARING.replace(
            '@pytest.mark.llm_recording\n@pytest.mark.parametrize("who", ["admin"])',
            '@pytest.mark.llm_recording(name="load_user_admin")\n@pytest.mark.parametrize("who", ["admin"])',
        )
    )
    run_inner(pytester, "--llm-record-mode=record").assert_outcomes(passed=3)
    run_inner(pytester).assert_outcomes(passed=3)


@pytest.fixture
def usual_umask():
    """The umask most users have (022), whatever the suite runs under."""
    import os

    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_every_folder_the_plugin_creates_is_owner_only(inner, usual_umask):
    """Recordings and drift pages hold prompts and outputs: each folder made for them is 0700,
    the parents too (``recordings/`` above a module's folder, ``llm-reports/recordings/``
    above a page's), and a folder that was there before keeps its mode."""
    import stat

    def mode(path):
        return stat.S_IMODE(path.stat().st_mode)

    before = mode(inner.path)
    run_inner(inner, "--llm-record-mode=record").assert_outcomes(passed=2)
    run_inner(
        inner, "test_agent_suite.py::test_agent", INNER_PROMPT="/calculator 6*8"
    ).assert_outcomes(failed=1)
    reports = inner.path / "llm-reports"
    deeper = inner.path / "ci" / "pages"
    run_inner(
        inner,
        "test_agent_suite.py::test_agent",
        f"--llm-report-dir={deeper}",
        INNER_PROMPT="/calculator 6*8",
    )
    created = [
        inner.path / "recordings",
        recording_file(inner).parent,
        reports,
        reports / "recordings",
        reports / "recordings" / "test_agent_suite",
        inner.path / "ci",
        deeper,
        deeper / "recordings" / "test_agent_suite",
    ]
    assert {str(path.relative_to(inner.path)): mode(path) for path in created} == {
        str(path.relative_to(inner.path)): 0o700 for path in created
    }
    assert mode(inner.path) == before
    assert (inner.path / "ci" / ".gitignore").exists()  # at the top of the tree it made
