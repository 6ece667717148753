"""The accounting under the usage report, budgets and the prompt-cache check, on plain values."""

from __future__ import annotations

import pytest

from openprogram.providers.types import AssistantMessage, Usage, UsageCost
from openprogram.recordings.insight.budget import Budget, budget_overrun
from openprogram.recordings.insight.cache_prefix import CacheCall, compare_prefix, prefix_steps
from openprogram.recordings.insight.usage import (
    CallUsage,
    TestUsage,
    UsageTotals,
    call_usage,
    usage_document,
)


def test_a_call_s_usage_reads_a_message_or_its_dump_alike():
    usage = Usage(
        input=10, output=30, reasoning=12, cache_read=5, total_tokens=45, cost=UsageCost(total=0.25)
    )
    message = AssistantMessage(api="faux", provider="faux", model="m", usage=usage)
    from_object = call_usage(message, call=2, lane="a")
    from_dump = call_usage(message.model_dump(mode="json"), call=2, lane="a")
    assert from_object == from_dump
    assert (
        from_object.input,
        from_object.output,
        from_object.reasoning,
        from_object.cache_read,
    ) == (10, 30, 12, 5)
    assert (from_object.total_tokens, from_object.cost, from_object.model) == (45, 0.25, "m")
    # No vendor total: the sum of what was counted (reasoning is inside output, not added).
    assert (
        call_usage(
            {"usage": {"input": 3, "output": 4, "reasoning": 2, "cache_write": 1}}, call=0
        ).total_tokens
        == 8
    )
    assert call_usage(None, call=0) == CallUsage(call=0)
    assert (
        call_usage({"usage": {"input": -5, "output": "x"}}, call=0).input == 0
    )  # hand-edited nonsense counts as 0


def test_totals_count_what_a_replay_saved_and_the_document_round_trips():
    calls = [CallUsage(0, cost=0.5, input=1, replayed=True), CallUsage(1, cost=0.25, output=2)]
    totals = UsageTotals.of(calls)
    assert (totals.calls, totals.cost, totals.replayed_calls, totals.saved) == (2, 0.75, 1, 0.5)
    test = TestUsage("t.py::test_x", "update", "passed", calls)
    assert TestUsage.from_json(test.to_json()) == test
    document = usage_document([test, test])
    assert document["totals"]["tests"] == 2 and document["totals"]["saved"] == 1.0


def test_a_marker_budget_wins_key_by_key_and_none_lifts_a_project_limit():
    project = Budget.parse({"calls": 5, "cost": 0.1}, "project.budget")
    marker = Budget.parse({"calls": 10, "tokens": None}, "marker")
    merged = marker.over(project)
    assert (merged.calls, merged.tokens, merged.cost) == (10, None, 0.1)
    assert (Budget.parse({"cost": None}, "marker").over(project).cost) is None
    assert not Budget() and Budget(calls=0)
    with pytest.raises(
        ValueError, match=r"marker.calls must be a whole number, 0 or more; not True"
    ):
        Budget.parse({"calls": True}, "marker")


def test_an_overrun_names_the_call_that_crossed_the_limit():
    calls = [CallUsage(n, lane="sub", model="m", total_tokens=100, cost=0.01) for n in range(4)]
    (tokens,) = budget_overrun(Budget(tokens=250), calls)
    assert tokens.crossed_by.call == 2 and (tokens.before, tokens.figure) == (200, 400)
    assert (
        tokens.describe()
        == "tokens 400 > budget 250 (over by 150, 60%); call 2 in lane 'sub' (m) crossed it, from 200 to 300"
    )
    (cost,) = budget_overrun(Budget(cost=0.03), calls)
    assert cost.describe().startswith(
        "cost $0.040000 > budget $0.030000 (over by $0.010000, 33%); call 3"
    )
    assert budget_overrun(Budget(calls=4, cost=0.04), calls) == []  # at the limit is within it


def request(system="S", tools=("a", "b"), messages=("hi",), model="m"):
    return {
        "model": {"id": model, "provider": "p", "api": "x", "cost": {"input": 1}},
        "context": {
            "system_prompt": system,
            "tools": [
                {"name": name, "description": f"tool {name}", "parameters": {}} for name in tools
            ],
            "messages": [
                {"role": "user", "content": text, "timestamp": n} for n, text in enumerate(messages)
            ],
        },
        "options": None,
    }


def test_a_call_that_only_adds_turns_keeps_the_whole_previous_request():
    kept, total, breaks_at = compare_prefix(request(), request(messages=("hi", "more")))
    assert (kept, breaks_at) == (total, None) and total > 0
    # What no vendor is sent does not break the prefix: a message's timestamp, an answer's usage.
    later = request(messages=("hi",))
    later["context"]["messages"][0]["timestamp"] = 99
    assert compare_prefix(request(), later)[2] is None


@pytest.mark.parametrize(
    ("changed", "field"),
    [
        (request(system="S2"), "context.system_prompt"),
        (request(tools=("b", "a")), "context.tools[0].name"),
        (request(tools=("a", "c", "b")), "context.tools[1].name"),
        (request(tools=("a",)), "context.tools[1]"),  # a tool removed
        (request(tools=("a", "b", "c")), "context.tools[2]"),  # a tool added at the end
        (request(messages=("hello",)), "context.messages[0].content"),
        (request(messages=()), "context.messages[0]"),  # history dropped
        (request(model="other"), "model.id"),
    ],
)
def test_the_first_field_where_the_prefix_breaks(changed, field):
    kept, total, breaks_at = compare_prefix(request(), changed)
    assert breaks_at == field and kept < total


def test_steps_follow_each_lane_and_session_apart():
    calls = [
        CacheCall(0, request(), lane=""),
        CacheCall(1, request(system="sub"), lane="sub"),
        CacheCall(2, request(messages=("hi", "x")), lane=""),
        CacheCall(3, request(system="sub2"), lane="sub", cache_read=7),
        CacheCall(4, request(), lane="", session=2),
    ]
    steps = prefix_steps(calls)
    assert [(step.call_index, step.previous, step.breaks_at) for step in steps] == [
        (0, None, None),
        (1, None, None),
        (2, 0, None),
        (3, 1, "context.system_prompt"),
        (4, None, None),
    ]
    assert steps[2].kept_share == 1.0 and steps[0].kept_share is None
    assert steps[3].broken and steps[3].cache_read == 7 and steps[3].values == ("sub", "sub2")
    assert "values" not in steps[3].to_json()
