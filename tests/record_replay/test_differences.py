"""find_first_difference and ReplayMismatch (the request rule of docs/file-format.md).

Every rule is checked on both walks: the plain one (``plain_first_difference``, the reference)
and the public one, which skips equal subtrees by their encodings (``differences_fast``).
Property tests then hold the fast walk to the plain one on random pairs built to hit every
rule: True/1/1.0, missing/null, skipped timestamps at any depth, key order, long lists.
"""

from __future__ import annotations

import copy
import json
import pickle
import random
import re

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openprogram.recordings.replay.differences import (
    NON_DETERMINISTIC_FIELD_NAMES,
    ReplayMismatch,
    find_first_difference,
    plain_first_difference,
    short_repr,
)
from openprogram.recordings.replay.differences_fast import fast_first_difference


@pytest.fixture(params=[find_first_difference, plain_first_difference], ids=["fast", "plain"])
def find(request):
    """Each rule test runs on the public (fast) walk and on the plain reference walk."""
    return request.param


def _key_path(path: str, key: str) -> str:
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def same_result(found, expected) -> bool:
    # repr, not ==: ("p", True, 1) == ("p", 1, 1) in Python.
    return repr(found) == repr(expected)


# ============================================================================ rules


def test_equal_values_have_no_difference(find):
    value = {"a": [1, 2.5, True, None, "x", {"b": []}], "c": {}}
    assert find(value, value) is None
    assert find(value, copy.deepcopy(value)) is None
    assert find(value, orjson.loads(orjson.dumps(value))) is None


def test_top_level_difference_is_root(find):
    assert find(1, 2) == ("<root>", 1, 2)
    assert find({"a": 1}, [1]) == ("<root>", {"a": 1}, [1])


def test_path_prefix_names_the_top_and_prefixes_children(find):
    assert find("a", "b", "model") == ("model", "a", "b")
    assert find({"id": "a"}, {"id": "b"}, "model") == ("model.id", "a", "b")
    assert find([1], [2], "context") == ("context[0]", 1, 2)


def test_contract_example_path(find):
    def context(text):
        return {
            "messages": [
                {"role": "user", "content": "use echo"},
                {"role": "assistant", "content": [{"type": "toolCall", "name": "echo"}]},
                {"role": "toolResult", "content": [{"type": "text", "text": text}]},
            ]
        }

    found = find(context("echo:hi"), context("echo:bye"), "context")
    assert found == ("context.messages[2].content[0].text", "echo:hi", "echo:bye")


def test_keys_that_are_not_identifiers_are_quoted(find):
    found = find({"headers": {"X.Trace": "1"}}, {"headers": {"X.Trace": "2"}})
    assert found == ('headers["X.Trace"]', "1", "2")
    assert find({"a b": 1}, {"a b": 2})[0] == '["a b"]'
    assert find({"0x": 1}, {"0x": 2})[0] == '["0x"]'
    assert find({"q": {'say "hi"': 1}}, {"q": {'say "hi"': 2}})[0] == 'q["say \\"hi\\""]'
    assert find({"_ok9": 1}, {"_ok9": 2})[0] == "_ok9"


def test_dicts_are_walked_by_sorted_key_whatever_the_insertion_order(find):
    recorded = {"b": 1, "a": 1, "c": 1}
    incoming = {"c": 2, "a": 2, "b": 2}
    assert find(recorded, incoming) == ("a", 1, 2)
    assert find(dict(reversed(recorded.items())), incoming) == ("a", 1, 2)


def test_element_difference_before_the_end_of_the_shorter_list_wins(find):
    assert find([1, 2, 3], [1, 9]) == ("[1]", 2, 9)


def test_extra_element_reports_none_on_the_missing_side(find):
    assert find([1], [1, 2]) == ("[1]", None, 2)
    assert find({"x": [1, {"a": 1}]}, {"x": [1]}) == ("x[1]", {"a": 1}, None)


def test_missing_key_and_null_are_equal(find):
    assert find({"a": 1, "b": None}, {"a": 1}) is None
    assert find({"a": 1}, {"a": 1, "b": None}) is None
    assert find({"a": 1}, {"a": 1, "b": 0}) == ("b", None, 0)
    assert find({"a": 1, "b": False}, {"a": 1}) == ("b", False, None)


@pytest.mark.parametrize(
    ("recorded", "incoming"),
    [(True, 1), (1, True), (False, 0), (1, 1.0), (0, 0.0), (True, 1.0), ("1", 1)],
)
def test_bool_int_and_float_are_different(find, recorded, incoming):
    assert find(recorded, incoming) == ("<root>", recorded, incoming)
    found = find({"a": [recorded]}, {"a": [incoming]})
    assert same_result(found, ("a[0]", recorded, incoming))
    # Inside a long list, where the fast path compares whole chunks at once.
    long_recorded = [{"n": index} for index in range(300)]
    long_incoming = copy.deepcopy(long_recorded)
    long_recorded[250]["v"] = recorded
    long_incoming[250]["v"] = incoming
    found = find(long_recorded, long_incoming)
    assert same_result(found, ("[250].v", recorded, incoming))


def test_tuples_compare_as_lists(find):
    assert find({"a": (1, 2)}, {"a": [1, 2]}) is None
    assert find((1, 2), [1, 3]) == ("[1]", 2, 3)


def test_nan_and_infinity_compare_as_null_like_json_stores_them(find):
    assert find({"t": float("nan")}, {"t": None}) is None
    assert find({"t": float("nan")}, {}) is None
    assert find([float("inf")], [None]) is None
    assert find([float("nan")], [float("nan")]) is None
    assert find([float("nan")], [1.0])[0] == "[0]"


def test_timestamp_is_skipped_at_any_depth(find):
    assert "timestamp" in NON_DETERMINISTIC_FIELD_NAMES
    recorded = {"timestamp": 1, "m": [{"timestamp": 1, "x": {"timestamp": 1, "y": 1}}]}
    incoming = {"timestamp": 2, "m": [{"timestamp": 2, "x": {"timestamp": "later", "y": 1}}]}
    assert find(recorded, incoming) is None
    incoming["m"][0]["x"]["y"] = 2
    assert find(recorded, incoming) == ("m[0].x.y", 1, 2)
    assert find({"timestamp": 1}, {}) is None


def _messages(count, clock, last="hi"):
    messages = []
    for index in range(count):
        messages.append(
            {
                "role": "user" if index % 2 == 0 else "assistant",
                "content": [{"type": "text", "text": f"message {index}"}],
                "usage": {"input": index, "cost": {"total": index * 0.5}},
                "timestamp": clock + index,
            }
        )
    messages[-1]["content"][0]["text"] = last
    return messages


@pytest.mark.parametrize("count", [1, 63, 64, 65, 200, 1000])
@pytest.mark.parametrize("clock", [0, 10_000])
def test_long_lists_find_the_last_difference(find, count, clock):
    recorded = {"messages": _messages(count, 0)}
    incoming = {"messages": _messages(count, clock, last="bye")}
    found = find(recorded, incoming, "context")
    assert found == (f"context.messages[{count - 1}].content[0].text", "hi", "bye")
    assert find(recorded, {"messages": _messages(count, clock)}) is None


def test_long_lists_with_another_key_order_and_timestamps(find):
    recorded = _messages(300, 0)
    incoming = [dict(reversed(message.items())) for message in _messages(300, 5)]
    assert find(recorded, incoming) is None
    incoming[299]["usage"]["input"] = True
    recorded[299]["usage"]["input"] = 1
    assert same_result(find(recorded, incoming), ("[299].usage.input", 1, True))


def test_long_lists_where_every_element_differs_only_by_a_missing_null(find):
    recorded = [{"a": index, "b": None} for index in range(200)]
    incoming = [{"a": index} for index in range(200)]
    assert find(recorded, incoming) is None
    incoming[150]["a"] = -1
    assert find(recorded, incoming) == ("[150].a", 150, -1)


def test_values_that_are_not_plain_json_are_still_compared(find):
    assert find({1: "a"}, {1: "b"}) == ("[1]", "a", "b")
    assert find([2**80] * 100, [2**80] * 99 + [2**80 + 1])[0] == "[99]"
    lone = "\ud800"
    assert find([lone] * 100, [lone] * 100) is None
    assert find([lone] * 100, [lone] * 99 + ["x"])[0] == "[99]"


def test_inputs_are_not_mutated(find):
    recorded = {"messages": _messages(150, 0)}
    incoming = {"messages": _messages(150, 7, last="bye")}
    before = (copy.deepcopy(recorded), copy.deepcopy(incoming))
    find(recorded, incoming)
    assert (recorded, incoming) == before
    assert recorded["messages"][3]["timestamp"] == 3


# ============================================================================ properties

_JSON_KEYS = st.text(max_size=6).filter(lambda key: key not in NON_DETERMINISTIC_FIELD_NAMES)
_JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
json_values = st.recursive(
    _JSON_SCALARS,
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(_JSON_KEYS, children, max_size=6)
    ),
    max_leaves=40,
)


WALKS = pytest.mark.parametrize(
    "find", [find_first_difference, plain_first_difference], ids=["fast", "plain"]
)


@WALKS
@settings(max_examples=200, deadline=None)
@given(json_values)
def test_a_value_never_differs_from_itself_or_its_json_round_trip(find, value):
    assert find(value, value) is None
    assert find(value, copy.deepcopy(value)) is None
    assert find(value, orjson.loads(orjson.dumps(value))) is None


def _expected_path(steps) -> str:
    path = ""
    for step in steps:
        path = f"{path}[{step}]" if isinstance(step, int) else _key_path(path, step)
    return path or "<root>"


@WALKS
@settings(max_examples=200, deadline=None)
@given(json_values, st.data())
def test_a_single_planted_change_is_found_at_its_exact_path(find, value, data):
    changed = copy.deepcopy(value)
    steps = []
    parent, node = None, changed
    while isinstance(node, (list, dict)) and node and data.draw(st.booleans()):
        step = data.draw(
            st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node)))
        )
        steps.append(step)
        parent, node = node, node[step]
    replacement = 12345 if isinstance(node, str) else "changed"
    if parent is None:
        changed = replacement
    else:
        parent[steps[-1]] = replacement
    expected = (_expected_path(steps), node, replacement)
    assert same_result(find(value, changed), expected)
    assert same_result(find(changed, value), (expected[0], replacement, node))
    # Deterministic: the same pair gives the same answer again.
    assert same_result(find(value, changed), expected)


def _reordered(value):
    if isinstance(value, dict):
        return {key: _reordered(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(item) for item in value]
    return value


_TRICKY = [True, False, 1, 0, 1.0, 0.0, None, "1", "", [], {}]


def _mutated(value, rng):
    """``value`` with random rule-probing edits: bool/int/float swaps, null vs missing,
    timestamps, key order. (A seeded ``Random`` rather than many draws keeps generation
    fast on long lists.)"""
    value = copy.deepcopy(value)

    def edit(node):
        if isinstance(node, dict):
            for key in list(node):
                roll = rng.randrange(10)
                if roll == 0:
                    node[key] = copy.deepcopy(rng.choice(_TRICKY))
                elif roll == 1 and node[key] is None:
                    del node[key]
                else:
                    edit(node[key])
            if rng.randrange(6) == 0:
                node["timestamp"] = rng.choice([0, 1, "x", None, [1]])
            if rng.randrange(6) == 0:
                node[rng.choice(["a", "b", "flag", "zz"])] = None
        elif isinstance(node, list):
            for index in range(len(node)):
                if rng.randrange(15 if len(node) < 50 else 400) == 0:
                    node[index] = copy.deepcopy(rng.choice(_TRICKY))
                else:
                    edit(node[index])
            if rng.randrange(10) == 0:
                node.append(copy.deepcopy(rng.choice(_TRICKY)))

    edit(value)
    return _reordered(value) if rng.random() < 0.5 else value


def _long_list(rng):
    """A message-like list longer than one encoded chunk, drawn from a seed (fast)."""
    items = []
    for _ in range(rng.randrange(60, 200)):
        item = {
            "role": rng.choice(["user", "assistant"]),
            "n": rng.randrange(4),
            "timestamp": rng.randrange(4),
        }
        if rng.random() < 0.3:
            item["flag"] = rng.random() < 0.5
        if rng.random() < 0.3:
            item["x"] = rng.choice([None, 0.5, 1.0])
        items.append(item)
    return items


_long_lists = st.randoms(use_true_random=False).map(_long_list)


def _agree(recorded, incoming) -> None:
    """The fast walk's answer is the plain walk's, both ways round."""
    assert same_result(
        fast_first_difference(recorded, incoming), plain_first_difference(recorded, incoming)
    )
    assert same_result(
        fast_first_difference(incoming, recorded), plain_first_difference(incoming, recorded)
    )


@settings(max_examples=120, deadline=None)
@given(
    st.one_of(json_values, _long_lists, st.dictionaries(_JSON_KEYS, _long_lists, max_size=2)),
    st.randoms(use_true_random=False),
)
def test_fast_walk_agrees_with_the_plain_walk_on_mutated_pairs(value, rng):
    _agree(value, _mutated(value, rng))


# Keys that include the skipped one, so that timestamps appear at every depth.
_KEYS_WITH_TIMESTAMP = st.sampled_from(["a", "b", "timestamp", "x y", "0"]) | st.text(max_size=3)
json_values_with_timestamps = st.recursive(
    _JSON_SCALARS,
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(_KEYS_WITH_TIMESTAMP, children, max_size=5)
    ),
    max_leaves=30,
)


def _near(value, rng):
    """A value JSON tells apart from ``value`` although Python may not (True vs 1, 1 vs
    1.0), or one the rule calls equal (null vs missing is made by :func:`_near_twin`)."""
    if type(value) is bool:
        return rng.choice([int(value), float(value)])
    if type(value) is int:
        return rng.choice([float(value), bool(value)]) if value in (0, 1) else float(value)
    if type(value) is float and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if value is None:
        return rng.choice([0, False, "", [], {}])
    return value


def _near_twin(value, rng):
    """A copy of ``value`` with a few near-equal swaps, nulls dropped or added, timestamps
    changed, so the pair is equal or differs only in the ways the rule is subtle about."""
    if isinstance(value, dict):
        twin = {}
        for key, item in value.items():
            if key == "timestamp":
                twin[key] = rng.choice([item, 0, "other", None, [1.0]])
            elif item is None and rng.random() < 0.3:
                continue  # missing against null: equal
            else:
                twin[key] = _near_twin(item, rng)
        if rng.random() < 0.2:
            twin.setdefault("extra", None)  # null against missing: equal
        return twin
    if isinstance(value, list):
        return [_near_twin(item, rng) for item in value]
    return _near(value, rng) if rng.random() < 0.1 else value


@settings(max_examples=200, deadline=None)
@given(json_values_with_timestamps, st.randoms(use_true_random=False))
def test_fast_walk_agrees_with_the_plain_walk_on_near_equal_pairs(value, rng):
    _agree(value, _near_twin(value, rng))


_small_values_with_timestamps = st.recursive(
    _JSON_SCALARS,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(_KEYS_WITH_TIMESTAMP, children, max_size=4)
    ),
    max_leaves=8,
)


# Message-like elements: dicts that mostly carry a timestamp, as every message does.
_message_likes = st.dictionaries(
    _KEYS_WITH_TIMESTAMP, _small_values_with_timestamps, max_size=4
).map(lambda message: {**message, "timestamp": 0} if len(message) % 4 else message)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(_message_likes | _small_values_with_timestamps, min_size=1, max_size=4),
    st.randoms(use_true_random=False),
)
def test_fast_walk_agrees_with_the_plain_walk_on_long_near_equal_lists(samples, rng):
    # Longer than one encoded chunk, so the chunk comparison and its escalations are taken
    # (elements picked from a few drawn ones: drawing 150 values would be slow).
    items = [copy.deepcopy(rng.choice(samples)) for _ in range(rng.randrange(60, 140))]
    _agree(items, _near_twin(items, rng))
    _agree({"messages": items}, {"messages": _near_twin(items, rng)})


def test_near_equal_pairs_are_told_apart_by_both_walks():
    rng = random.Random(7)
    for recorded, incoming in [
        (True, 1),
        (1, 1.0),
        (0, False),
        ({"a": None}, {}),
        ({"timestamp": 1}, {}),
    ]:
        _agree(
            [{"n": index} for index in range(100)] + [recorded],
            [{"n": index} for index in range(100)] + [incoming],
        )
        _agree(recorded, incoming)
    assert _near(True, rng) in (1, 1.0) and type(_near(True, rng)) is not bool


def test_the_public_walk_takes_the_shortcut(monkeypatch):
    from openprogram.recordings.replay import differences, differences_fast

    calls = []

    def spy(recorded, incoming, path=""):
        calls.append(path)
        return fast_first_difference(recorded, incoming, path)

    monkeypatch.setattr(differences_fast, "fast_first_difference", spy)
    monkeypatch.setattr(differences, "fast_first_difference", spy)
    assert find_first_difference({"a": 1}, {"a": 2}, "context") == ("context.a", 1, 2)
    assert calls[0] == "context"  # the public name enters the shortcut (which recurses)


# ============================================================================ ReplayMismatch


def test_mismatch_message_is_exactly_the_contract_format():
    error = ReplayMismatch(1, "context.messages[2].content[0].text", "echo:hi", "echo:bye")
    assert str(error) == (
        "replay mismatch at call 1, field context.messages[2].content[0].text:\n"
        "recorded 'echo:hi', incoming 'echo:bye'"
    )
    assert isinstance(error, AssertionError)
    assert (error.call_index, error.field_path, error.recorded, error.incoming) == (
        1,
        "context.messages[2].content[0].text",
        "echo:hi",
        "echo:bye",
    )
    assert error.event_index is None
    assert ReplayMismatch(0, "call_index", 2, 3, event_index=4).event_index == 4


def test_long_reprs_are_cut_to_200_characters_including_the_dots():
    assert short_repr("x" * 198) == repr("x" * 198)  # exactly 200: kept
    cut = short_repr("x" * 199)  # 201: cut
    assert len(cut) == 200 and cut.endswith("...") and cut.startswith("'xxx")
    error = ReplayMismatch(3, "context", {"k": "v" * 1000}, None)
    recorded_line = str(error).splitlines()[1]
    assert recorded_line == f"recorded {short_repr({'k': 'v' * 1000})}, incoming None"
    assert len(short_repr({"k": "v" * 1000})) == 200


def test_mismatch_pickles_with_its_attributes():
    error = ReplayMismatch(2, 'headers["X.Trace"]', {"a": [1, True]}, None, event_index=7)
    error.add_note("while replaying test_x")
    for restored in (pickle.loads(pickle.dumps(error)), copy.copy(error), copy.deepcopy(error)):
        assert type(restored) is ReplayMismatch
        assert str(restored) == str(error)
        assert (restored.call_index, restored.field_path, restored.recorded, restored.incoming) == (
            2,
            'headers["X.Trace"]',
            {"a": [1, True]},
            None,
        )
        assert restored.event_index == 7
        assert restored.__notes__ == ["while replaying test_x"]
