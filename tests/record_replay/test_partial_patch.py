"""``partial_patch``: the writer's diff is exact, the reader's apply is strict and pure."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openprogram.recordings.file.patches import (
    PatchError,
    apply_patch,
    compute_patch,
    strictly_equal,
)

json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=5),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=6),
)
json_values = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(["a", "b", "c", "text"]), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(json_values, json_values)
def test_a_computed_patch_restores_the_value_exactly(previous, current):
    before = copy.deepcopy(previous)
    patch = compute_patch(previous, current)
    if patch is None:
        return  # inexpressible (a key removed or a list shrunk): the writer writes in full
    assert strictly_equal(apply_patch(previous, patch), current)
    assert strictly_equal(previous, before), "apply_patch mutated its input"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=20), st.text(max_size=20))
def test_growing_text_becomes_one_append(start, more):
    previous = {"content": [{"type": "text", "text": start}]}
    current = {"content": [{"type": "text", "text": start + more}]}
    patch = compute_patch(previous, current)
    assert patch == ([] if not more else [["append", ["content", 0, "text"], more]])


def test_types_are_told_apart():
    assert compute_patch({"a": 1}, {"a": True}) == [["set", ["a"], True]]
    assert compute_patch({"a": 1}, {"a": 1.0}) == [["set", ["a"], 1.0]]
    assert compute_patch([0], [False]) == [["set", [0], False]]


def test_a_new_block_is_pushed_and_a_new_key_set():
    assert compute_patch({"content": []}, {"content": [{"x": 1}], "y": 2}) == [
        ["push", ["content"], {"x": 1}],
        ["set", ["y"], 2],
    ]


def test_inexpressible_changes_give_up():
    assert compute_patch({"a": 1, "b": 2}, {"a": 1}) is None
    assert compute_patch({"l": [1, 2]}, {"l": [1]}) is None


def test_unchanged_is_an_empty_patch():
    value = {"content": [{"text": "x", "arguments": {"k": [1, {"z": None}]}}]}
    assert compute_patch(value, copy.deepcopy(value)) == []


@pytest.mark.parametrize(
    "value, patch",
    [
        ({"a": "x"}, "not a list"),
        ({"a": "x"}, [["append", ["a"]]]),
        ({"a": "x"}, [["replace", ["a"], "y"]]),
        ({"a": "x"}, [["append", "a", "y"]]),
        ({"a": "x"}, [["append", ["b"], "y"]]),
        ({"a": 1}, [["append", ["a"], "y"]]),
        ({"a": "x"}, [["append", ["a"], 5]]),
        ({"a": "x"}, [["push", ["a"], 5]]),
        ({"a": [1]}, [["set", ["a", 1], 5]]),
        ({"a": [1]}, [["set", ["a", True], 5]]),
        ({"a": [1]}, [["set", ["a", "0"], 5]]),
        ({"a": {"b": 1}}, [["set", ["a", 0], 5]]),
        ({"a": "x"}, [["set", ["a", "b"], 5]]),
        ({"a": "x"}, [["append", [], "y"]]),
        ({"a": "x"}, [["set", ["a", 1.5], 5]]),
    ],
)
def test_a_patch_that_does_not_apply_is_rejected(value, patch):
    with pytest.raises(PatchError):
        apply_patch(value, patch)


def test_set_adds_a_key_and_an_empty_path_replaces_the_root():
    assert apply_patch({"a": 1}, [["set", ["b"], 2]]) == {"a": 1, "b": 2}
    assert apply_patch({"a": 1}, [["set", [], {"z": 0}]]) == {"z": 0}
