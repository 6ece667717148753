"""What a suite of recorded agent tests spends and breaks, through real inner pytest sessions:
the usage report (``--llm-usage``, ``-v``, ``--llm-usage-json`` against its documented
schema), budgets (the marker's and the project's) and the prompt-cache check
(``cache_stable``), with ``recordings show --cache`` on the same recordings."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from openprogram.cli.main import main as cli_main
from tests.conftest import REPO_ROOT, made_once
from tests.transcripts.openai_completions_streams import ROLE, STOP, chunk, sse_frames, usage_chunk
from tests.vendor_server import ScriptedResponse, VendorServer

SCHEMA = json.loads((REPO_ROOT / "docs" / "usage-report.schema.json").read_text())

AGENTS = '''
import os
import pytest
from openprogram.agent import AgentContext, AgentLoopConfig, AgentTool, AgentToolResult, agent_loop
from openprogram.providers.faux import DEFAULT_FAUX_PROVIDER, FauxResponse, FauxText, FauxToolCall
from openprogram.providers.types import Model, ModelCost, UserMessage

PRICED = Model(id="priced", api="faux", provider="faux", cost=ModelCost(input=3, output=15, cache_read=0.3))


async def add(tool_call_id, args, signal, on_update):
    return AgentToolResult.text(str(args["a"] + args["b"] + int(os.environ.get("OFFSET", "0"))))


ADD = AgentTool(
    name="add", description="Add two numbers.",
    parameters={"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
    execute=add,
)


async def run(turns):
    """An agent that calls the tool ``turns`` times, then answers: turns + 1 model calls."""
    DEFAULT_FAUX_PROVIDER.clear()
    for turn in range(turns):
        usage = {"input": 100 + turn, "cache_read": 40 * turn, "output": 20, "reasoning": 5}
        DEFAULT_FAUX_PROVIDER.queue(FauxResponse(blocks=(FauxToolCall("add", {"a": turn, "b": 1}),), usage=usage))
    DEFAULT_FAUX_PROVIDER.queue(FauxResponse(blocks=(FauxText("done"),), usage={"input": 50, "cache_read": 200, "output": 7}))
    context = AgentContext(system_prompt="Add.", tools=[ADD])
    events = [e async for e in agent_loop([UserMessage(content="add")], context, AgentLoopConfig(model=PRICED))]
    return events[-1].messages[-1]


@pytest.mark.llm_recording
async def test_one_tool_turn():
    assert (await run(1)).content[0].text == "done"


@pytest.mark.llm_recording
async def test_three_tool_turns():
    assert (await run(3)).content[0].text == "done"


@pytest.mark.llm_recording(budget={"calls": 4, "tokens": 5000, "cost": 0.01})
async def test_within_budget():
    assert (await run(3)).content[0].text == "done"


@pytest.mark.llm_recording(budget={"calls": 3, "tokens": 500})
async def test_over_budget():
    assert (await run(3)).content[0].text == "done"


@pytest.mark.llm_recording(budget={"calls": None})
async def test_lifts_the_project_limit():
    assert (await run(3)).content[0].text == "done"
'''


def run_inner(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p",
        "asyncio",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "-p",
        "no:randomly",
        *args,
    )


@pytest.fixture
def recorded(pytester: pytest.Pytester, tmp_path_factory) -> pytest.Pytester:
    def record() -> None:
        pytester.makepyfile(test_agents=AGENTS)
        run_inner(pytester, "-q", "--llm-record-mode=record").assert_outcomes(
            passed=4, failed=1
        )  # over budget

    made_once(tmp_path_factory, "insight-agents", pytester.path, record)
    assert len(list((pytester.path / "recordings" / "test_agents").glob("*.jsonl"))) == 5
    return pytester


def usage_in_file(path: Path) -> dict[str, float]:
    """The sum of the usage the recording's final messages hold, read from its lines."""
    sums = dict.fromkeys(
        ("calls", "input", "cache_read", "output", "reasoning", "total_tokens", "cost"), 0.0
    )
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row.get("type") != "event" or row["event"].get("type") != "done":
            continue
        usage = row["event"]["message"]["usage"]
        sums["calls"] += 1
        for name in ("input", "cache_read", "output", "reasoning", "total_tokens"):
            sums[name] += usage.get(name, 0)
        sums["cost"] += usage["cost"]["total"]
    return sums


def test_a_replayed_suite_reports_the_recorded_usage_per_test_and_in_total(recorded):
    result = run_inner(
        recorded, "-q", "--llm-usage", "--llm-usage-json=usage.json", "-k", "tool_turn"
    )
    result.assert_outcomes(passed=2)
    report = json.loads((recorded.path / "usage.json").read_text())
    jsonschema.validate(report, SCHEMA)
    assert report["schema_version"] == 1
    folder = recorded.path / "recordings" / "test_agents"
    grand = dict.fromkeys(
        ("calls", "input", "cache_read", "output", "reasoning", "total_tokens", "cost"), 0.0
    )
    for test in report["tests"]:
        expected = usage_in_file(folder / f"{test['nodeid'].split('::')[1]}.jsonl")
        totals = test["totals"]
        assert {name: totals[name] for name in expected} == pytest.approx(expected)
        assert test["mode"] == "replay" and totals["replayed_calls"] == totals["calls"]
        assert totals["saved"] == pytest.approx(totals["cost"])
        for name in grand:
            grand[name] += expected[name]
    assert [test["totals"]["calls"] for test in report["tests"]] == [2, 4]
    assert {name: report["totals"][name] for name in grand} == pytest.approx(grand)
    assert report["totals"]["tests"] == 2 and report["totals"]["cost"] > 0
    # The three tool turns: input 100+101+102+50, cache 0+40+80+200, output 20*3+7, reasoning 5*3.
    three = report["tests"][1]["totals"]
    assert (three["input"], three["cache_read"], three["output"], three["reasoning"]) == (
        353,
        320,
        67,
        15,
    )
    assert three["cost"] == pytest.approx((353 * 3 + 320 * 0.3 + 67 * 15) / 1_000_000)

    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "openprogram usage" in line)
    section = lines[start + 1 : start + 6]
    assert section[0].split() == [
        "TEST",
        "MODE",
        "CALLS",
        "INPUT",
        "CACHE_READ",
        "OUTPUT",
        "REASONING",
        "COST",
    ]
    assert section[2].split() == [
        "test_agents.py::test_three_tool_turns",
        "replay",
        "4",
        "353",
        "320",
        "67",
        "15",
        f"${three['cost']:.6f}",
    ]
    assert section[3].split()[:2] == ["total", str(2 + 4)]
    assert section[4] == (
        f"replaying saved ${report['totals']['saved']:.6f}: 6 of 6 calls were served from recordings "
        "(their recorded cost)"
    )


def test_the_report_shows_with_verbose_and_not_by_default(recorded):
    quiet = run_inner(recorded, "-q", "-k", "one_tool")
    quiet.assert_outcomes(passed=1)
    assert "openprogram usage" not in quiet.stdout.str()
    verbose = run_inner(recorded, "-v", "-k", "one_tool")
    verbose.assert_outcomes(passed=1)
    verbose.stdout.fnmatch_lines(
        ["*openprogram usage*", "test_agents.py::test_one_tool_turn*replay*2*"]
    )


def test_an_update_counts_the_replayed_calls_as_saved_and_the_live_ones_as_paid(recorded):
    recorded._monkeypatch.setenv("OFFSET", "10")  # the tool answers otherwise: call 1 drifts
    result = run_inner(
        recorded, "-q", "--llm-record-mode=update", "--llm-usage-json=usage.json", "-k", "one_tool"
    )
    result.assert_outcomes(passed=1)
    (test,) = json.loads((recorded.path / "usage.json").read_text())["tests"]
    assert test["mode"] == "update"
    # Call 0 replayed (its recorded usage); then live, the scripted answers again from the
    # start: another tool call, then the answer.
    assert [(call["call"], call["replayed"], call["input"]) for call in test["calls"]] == [
        (0, True, 100),
        (1, False, 100),
        (2, False, 50),
    ]
    assert test["totals"]["replayed_calls"] == 1
    assert test["totals"]["saved"] == pytest.approx((100 * 3 + 20 * 15) / 1_000_000)


LIVE_AGENT = """
import os
import pytest
from openprogram.agent import AgentContext, AgentLoopConfig, agent_loop
from openprogram.providers.types import Model, ModelCost, UserMessage

LOCAL = Model(id="local-model", api="openai-completions", provider="local", base_url=os.environ["SERVER_URL"],
              cost=ModelCost(input=2, output=8, cache_read=0.5))


@pytest.mark.llm_recording
async def test_live_answer():
    config = AgentLoopConfig(model=LOCAL, api_key="local")
    events = [e async for e in agent_loop([UserMessage(content="hello")], AgentContext(), config)]
    assert events[-1].messages[-1].content[0].text == "Hello"
"""


@pytest.mark.parametrize("mode", ["off", "record"])
def test_a_live_run_reports_the_vendor_s_numbers(pytester, mode):
    pytester.makepyfile(test_live=LIVE_AGENT)
    frames = sse_frames(
        ROLE,
        chunk('{"content":"Hello"}'),
        STOP,
        usage_chunk(1200, 90, cached=1000, reasoning=30),
        done=True,
    )
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=frames))
        pytester._monkeypatch.setenv("SERVER_URL", f"{server.url}/v1")
        result = run_inner(
            pytester, "-q", f"--llm-record-mode={mode}", "--llm-usage-json=usage.json"
        )
        assert len(server.requests) == 1
    result.assert_outcomes(passed=1)
    report = json.loads((pytester.path / "usage.json").read_text())
    jsonschema.validate(report, SCHEMA)
    (call,) = report["tests"][0]["calls"]
    # The server's numbers: 1200 prompt tokens of which 1000 cached, 90 completion tokens of
    # which 30 reasoning.
    assert (
        call["input"] + call["cache_read"],
        call["cache_read"],
        call["output"],
        call["reasoning"],
    ) == (1200, 1000, 90, 30)
    assert call["cost"] == pytest.approx((200 * 2 + 1000 * 0.5 + 90 * 8) / 1_000_000)
    assert not call["replayed"] and report["totals"]["saved"] == 0
    assert report["tests"][0]["mode"] == mode


# ============================================================================ budgets


def test_over_budget_fails_in_replay_naming_the_limit_the_figure_and_the_call(recorded):
    result = run_inner(recorded, "-q", "-k", "budget")
    result.assert_outcomes(passed=1, failed=1)
    tokens = 100 + 20 + 101 + 40 + 20 + 102 + 80 + 20 + 50 + 200 + 7  # the four calls' totals
    result.stdout.fnmatch_lines(
        [
            "*test_agents.py::test_over_budget went over its budget (the recorded usage of the replayed calls):",
            "  calls 4 > budget 3 (over by 1, 33%); call 3 (priced) crossed it, from 3 to 4",
            f"  tokens {tokens} > budget 500 (over by {tokens - 500}, *); call 3 (priced) crossed it, from 483 to {tokens}",
            "Make the agent spend less, or raise the limit: *",
        ]
    )
    assert "test_within_budget" not in result.stdout.str().split("short test summary")[-1]


def test_a_project_budget_applies_where_the_marker_sets_none(recorded):
    recorded.path.joinpath("pyproject.toml").write_text("[tool.openprogram.budget]\ncalls = 2\n")
    recorded.path.joinpath("pyproject.toml").chmod(0o644)
    result = run_inner(recorded, "-q", "-rf")
    # one tool turn: 2 calls; three: 4 (over); within budget: its own calls = 4; over budget:
    # its own 3; lifts the project limit: calls None.
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_agents.py::test_three_tool_turns went over its budget (the recorded usage of the replayed calls):",
            "  calls 4 > budget 2 (over by 2, 100%); call 2 (priced) crossed it, from 2 to 3",
        ]
    )
    result.stdout.fnmatch_lines(["FAILED test_agents.py::test_over_budget*"])


def test_a_bad_budget_is_named_with_the_fix(recorded):
    recorded.path.joinpath("pyproject.toml").write_text(
        '[tool.openprogram.budget]\ncalls = "many"\n'
    )
    recorded.path.joinpath("pyproject.toml").chmod(0o644)
    result = run_inner(recorded, "-q")
    assert result.ret != 0
    result.stderr.fnmatch_lines(
        [
            "*pyproject.toml: tool.openprogram.budget.calls must be a whole number, 0 or more; not 'many'"
        ]
    )


# ============================================================================ prompt cache

CACHE_AGENTS = '''
import pytest
from openprogram.providers.faux import DEFAULT_FAUX_PROVIDER, FauxResponse, FauxText, FauxToolCall
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, Tool, ToolResultMessage, TextContent, UserMessage

MODEL = Model(id="cached", api="faux", provider="faux")
LOOKUP = Tool(name="lookup", description="Look a word up.", parameters={"type": "object", "properties": {}})
SPELL = Tool(name="spell", description="Spell a word.", parameters={"type": "object", "properties": {}})


async def agent(system_prompt, tools):
    """Two turns: a tool call, then the answer; the system prompt and tools of each turn come
    from the functions given."""
    DEFAULT_FAUX_PROVIDER.clear()
    DEFAULT_FAUX_PROVIDER.queue(
        FauxResponse(blocks=(FauxToolCall("lookup", {}),), usage={"input": 300, "output": 10}),
        FauxResponse(blocks=(FauxText("found"),), usage={"input": 20, "cache_read": 290, "output": 5}),
    )
    messages = [UserMessage(content="look up tide", timestamp=0)]
    for turn in range(2):
        context = Context(system_prompt=system_prompt(turn), messages=list(messages), tools=tools(turn))
        answer = await complete(MODEL, context)
        messages.append(answer)
        for block in answer.content:
            if block.type == "toolCall":
                messages.append(ToolResultMessage(
                    tool_call_id=block.id, tool_name=block.name, content=[TextContent(text="tide: the sea's rise")],
                    timestamp=0,
                ))
    return answer


@pytest.mark.llm_recording(cache_stable=True)
async def test_stable_system_prompt():
    await agent(lambda turn: "You look words up.", lambda turn: [LOOKUP, SPELL])


@pytest.mark.llm_recording(cache_stable=True)
async def test_timestamp_in_the_system_prompt():
    await agent(lambda turn: f"It is 2025-06-03T10:00:0{turn}. You look words up.", lambda turn: [LOOKUP, SPELL])


@pytest.mark.llm_recording(cache_stable=True)
async def test_tools_reordered_between_turns():
    await agent(lambda turn: "You look words up.", lambda turn: [LOOKUP, SPELL] if turn == 0 else [SPELL, LOOKUP])
'''


@pytest.fixture
def cache_suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_cache=CACHE_AGENTS)
    return pytester


CACHE_FAILURES = [
    "*test_cache.py::test_timestamp_in_the_system_prompt: calls break the prompt cache's prefix (cache_stable):",
    "  call 1 changes context.system_prompt of call 0 (keeps *% of its request as a prefix): "
    "was 'It is 2025-06-03T10:00:00. You look words up.', now 'It is 2025-06-03T10:00:01. You look words up.'",
]
TOOL_FAILURES = [
    "*test_cache.py::test_tools_reordered_between_turns: calls break the prompt cache's prefix (cache_stable):",
    "  call 1 changes context.tools[[]0[]].name of call 0 (keeps *% of its request as a prefix): was 'lookup', now 'spell'",
]


@pytest.mark.parametrize("mode", ["record", "replay"])
def test_cache_stable_passes_a_stable_agent_and_fails_the_two_that_break_the_prefix(
    cache_suite, mode
):
    if mode == "replay":
        run_inner(cache_suite, "-q", "--llm-record-mode=record")
    result = run_inner(cache_suite, "-q", f"--llm-record-mode={mode}")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(CACHE_FAILURES)
    result.stdout.fnmatch_lines(TOOL_FAILURES)
    assert "test_stable_system_prompt" not in result.stdout.str().split("short test summary")[-1]


def test_show_cache_of_a_recording_without_calls_says_so(tmp_path, capsys):
    """A recording that holds only its header (``recordings record`` before the first call)
    has nothing to compare: ``--cache`` says so, where it once failed on an empty table."""
    from openprogram.recordings.store.managed import create_empty_recording

    path = tmp_path / "empty.jsonl"
    create_empty_recording(path)
    assert cli_main(["recordings", "show", str(path), "--cache"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out.splitlines()[-1] == "prompt cache: the recording holds no calls to compare"
    assert "calls      0 (0 events)" in captured.out
    assert cli_main(["recordings", "show", str(path), "--cache", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["calls"] == []


def test_a_table_without_rows_is_its_headers():
    from openprogram.cli.recordings.render import table

    assert table(["CALL", "KEPT", "BREAKS AT"], [], right=frozenset({1})) == [
        "CALL  KEPT  BREAKS AT"
    ]


def test_the_project_default_turns_the_check_on_and_the_marker_off(pytester):
    pytester.makepyfile(
        test_cache=CACHE_AGENTS.replace("(cache_stable=True)", "").replace(
            "async def test_tools",
            "@pytest.mark.llm_recording(cache_stable=False)\nasync def test_tools",
        )
    )
    pytester.path.joinpath("openprogram.toml").write_text("[record_replay]\ncache_stable = true\n")
    pytester.path.joinpath("openprogram.toml").chmod(0o644)
    result = run_inner(pytester, "-q", "--llm-record-mode=record")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(CACHE_FAILURES)


def test_show_cache_gives_the_kept_prefix_and_the_vendor_s_cached_tokens(cache_suite, capsys):
    run_inner(cache_suite, "-q", "--llm-record-mode=record")
    capsys.readouterr()  # the inner run's output
    folder = cache_suite.path / "recordings" / "test_cache"
    found = {}
    for name in (
        "test_stable_system_prompt",
        "test_timestamp_in_the_system_prompt",
        "test_tools_reordered_between_turns",
    ):
        assert (
            cli_main(["recordings", "show", str(folder / f"{name}.jsonl"), "--cache", "--json"])
            == 0
        )
        calls = json.loads(capsys.readouterr().out)["calls"]
        found[name] = [call["cache"] for call in calls]
    stable, dated, reordered = found.values()
    assert stable[0]["previous_call"] is None and stable[0]["kept_share"] is None
    assert (stable[1]["previous_call"], stable[1]["kept_share"], stable[1]["breaks_at"]) == (
        0,
        1.0,
        None,
    )
    assert stable[1]["kept_chars"] == stable[1]["previous_chars"] > 0
    assert (stable[1]["cache_read"], stable[1]["prompt_tokens"]) == (290, 310)
    assert dated[1]["breaks_at"] == "context.system_prompt" and 0 < dated[1]["kept_share"] < 1
    assert (
        reordered[1]["breaks_at"] == "context.tools[0].name"
        and reordered[1]["kept_share"] < dated[1]["kept_share"]
    )

    assert (
        cli_main(
            [
                "recordings",
                "show",
                str(folder / "test_timestamp_in_the_system_prompt.jsonl"),
                "--cache",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "prompt cache: each call against the call before it in its lane" in text
    rows = text.split("KEPT")[-1].splitlines()[1:3]
    assert rows[0].split() == ["0", "-", "-", "-", "0", "300", "-"]
    assert rows[1].split()[:4] == ["1", "-", "0", f"{dated[1]['kept_share']:.0%}"]
    assert rows[1].split()[4:] == ["290", "310", "context.system_prompt"]
    assert "1 call(s) break the prefix before the turns they added" in text

    from openprogram.recordings.views.inspection import read_recording
    from openprogram.recordings.views.view import render_recording_page

    page = render_recording_page(read_recording(folder / "test_stable_system_prompt.jsonl"))
    assert "keeps 100% of call 0 as a prompt-cache prefix (290 tokens read from the cache)" in page
    assert "290 tokens read from the cache</span>" in page and "cache read tokens<b>290</b>" in page
    page = render_recording_page(
        read_recording(folder / "test_tools_reordered_between_turns.jsonl")
    )
    assert (
        f"keeps {reordered[1]['kept_share']:.0%} of call 0 as a prompt-cache prefix, breaks at context.tools[0].name"
        in page
    )
    assert 'class="meta cache-break"' in page
