"""Replay redacts an incoming request only where it differs from the recorded one
(``openprogram.recordings.replay.lazy_redaction``): the same verdicts and reports as redacting it
whole, no redaction at all for a request equal to its recording, one message's worth for a
mismatch in one message, and never a secret in a report."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openprogram.providers.faux import FauxProvider, faux_text
from openprogram.providers.recording import RecordingProvider
from openprogram.providers.replay import ReplayMismatch, ReplayProvider
from openprogram.providers.types import AssistantMessage, Context, ToolCall, UserMessage
from openprogram.recordings import redaction
from openprogram.recordings.redaction import PLACEHOLDER, current_redactor, remove_secret_values
from openprogram.recordings.replay.lazy_redaction import settle
from openprogram.recordings.replay.replayer import first_request_difference
from tests.record_replay.test_recording_support import MODEL, collect

SECRET = "ghp_" + "Q7x2Lm9Kp4Rt8Vw3Zy6Bn1Cd5Fg0Hj2Ks4M"  # a GitHub token shape


def _context(texts: list[str]) -> Context:
    return Context(messages=[UserMessage(content=text, timestamp=1) for text in texts])


def _record(path, texts: list[str]) -> None:
    provider = RecordingProvider(FauxProvider([faux_text("ok")], timestamp=1), path)
    asyncio.run(collect(provider.stream(MODEL, _context(texts))))
    provider.sink.close()


def _replay(path, texts: list[str]) -> list:
    return asyncio.run(collect(ReplayProvider(path).stream(MODEL, _context(texts))))


@pytest.fixture
def redactions(monkeypatch) -> list:
    """Every part of a context (a message, or the context itself) that replay hands to the
    redactor's structure walk; the model and the options, a few fields each, are always
    redacted and not listed."""
    seen: list = []
    original = redaction.Redactor.remove_secret_values

    def counting(self, value):
        if isinstance(value, dict) and ("role" in value or "messages" in value):
            seen.append(value)
        return original(self, value)

    monkeypatch.setattr(redaction.Redactor, "remove_secret_values", counting)
    return seen


def test_an_equal_request_is_not_redacted_at_all(tmp_path, redactions):
    texts = [f"message {n}" for n in range(200)]
    _record(tmp_path / "r.jsonl", texts)
    redactions.clear()
    assert _replay(tmp_path / "r.jsonl", texts)
    assert redactions == []


def test_a_mismatch_in_one_message_redacts_that_message_only(tmp_path, redactions):
    texts = [f"message {n}" for n in range(200)]
    _record(tmp_path / "r.jsonl", texts)
    redactions.clear()
    with pytest.raises(ReplayMismatch) as raised:
        _replay(tmp_path / "r.jsonl", [*texts[:-1], "another last message"])
    assert raised.value.field_path == "context.messages[199].content"
    assert raised.value.incoming == "another last message"
    assert redactions == [{"role": "user", "content": "another last message", "timestamp": 1}]


def test_a_secret_in_the_request_matches_its_redacted_recording(tmp_path, redactions):
    texts = ["hello", f"my token is {SECRET} ok", "bye"]
    _record(tmp_path / "r.jsonl", texts)
    redactions.clear()
    assert _replay(tmp_path / "r.jsonl", texts)
    # Only the message whose raw text differs from the (redacted) recording was redacted.
    assert [item["content"] for item in redactions] == [f"my token is {SECRET} ok"]


def test_a_mismatch_report_never_shows_the_secret(tmp_path):
    _record(tmp_path / "r.jsonl", ["hello", "first version"])
    with pytest.raises(ReplayMismatch) as raised:
        _replay(tmp_path / "r.jsonl", ["hello", f"second version with {SECRET}"])
    assert raised.value.incoming == f"second version with {PLACEHOLDER}"
    report = str(raised.value) + repr(raised.value.__dict__)
    assert not any(SECRET[i : i + 8] in report for i in range(len(SECRET) - 7))


def test_a_secret_under_a_secret_field_name_is_redacted_with_its_key():
    recorded_message = AssistantMessage(
        content=[
            ToolCall(
                id="c1",
                name="login",
                arguments={"user": "bob", "password": "Hunter2Hunter2Hunter2xyz"},
            )
        ],
        api="faux",
        provider="faux",
        model="m",
        timestamp=1,
    ).model_dump(mode="json")
    recorded = remove_secret_values({"messages": [recorded_message]})
    assert recorded["messages"][0]["content"][0]["arguments"]["password"] == PLACEHOLDER
    settled = settle(recorded, {"messages": [recorded_message]}, current_redactor(), 3)
    assert not settled.differs
    assert (
        first_request_difference(
            {"model": {}, "context": recorded, "options": {}},
            {"model": {}, "context": settled.value, "options": {}},
        )
        is None
    )


def test_a_request_identical_to_an_older_recording_matches_though_todays_rules_would_redact_it(
    tmp_path,
):
    """A file written under older rules (or before a value became a known secret) keeps the
    text as it was; a replay asking for exactly that text matches (docs/file-format.md)."""
    path = tmp_path / "r.jsonl"
    _record(path, ["plain text"])
    text = path.read_text()
    path.write_text(text.replace("plain text", f"key {SECRET}"))
    assert _replay(path, [f"key {SECRET}"])


_TEXT = st.sampled_from(
    ["plain words", f"token {SECRET}", "a=1&password=hunter2hunter2", "sk-" + "a" * 40, "x"]
)


@given(
    base=st.lists(_TEXT, min_size=1, max_size=12),
    changes=st.dictionaries(st.integers(0, 11), _TEXT, max_size=3),
    extra=st.lists(_TEXT, max_size=2),
)
def test_settling_gives_the_verdict_of_redacting_everything(base, changes, extra):
    """Whatever differs, the first difference is the one the whole redacted request shows."""

    def payload(texts: list[str]) -> dict:
        return {
            "model": {"id": "m"},
            "context": _context(texts).model_dump(mode="json"),
            "options": None,
        }

    recorded = remove_secret_values(payload(base))
    incoming_texts = [changes.get(index, text) for index, text in enumerate(base)] + extra
    raw = payload(incoming_texts)
    expected = first_request_difference(recorded, remove_secret_values(raw))
    settled = settle(recorded, raw, current_redactor(), 3)
    assert settled.differs == (expected is not None)
    assert first_request_difference(recorded, settled.value) == expected
    assert raw == payload(incoming_texts)  # never mutated


@pytest.mark.parametrize(
    ("recorded", "raw", "differs"),
    [
        ({"a": "x", "b": "only recorded"}, {"a": "x"}, True),
        ({"a": "x", "b": None, "timestamp": 5}, {"a": "x"}, False),
        ({"a": "x"}, {"a": "x", "b": "only incoming"}, True),
        ({"a": ["x", "y"]}, {"a": ["x"]}, True),
        ({"a": ["x"]}, {"a": ["x", "y"]}, True),
        ({"a": ["x", f"t {PLACEHOLDER}"]}, {"a": ["x", f"t {SECRET}"]}, False),
    ],
)
def test_what_only_one_side_has_still_differs(recorded, raw, differs):
    assert settle(recorded, raw, current_redactor(), 3).differs is differs
    assert (
        first_request_difference(
            {"model": {}, "context": recorded, "options": {}},
            {"model": {}, "context": remove_secret_values(raw), "options": {}},
        )
        is not None
    ) is differs


def test_a_secret_in_every_message_is_settled_message_by_message(tmp_path, redactions):
    """Past the first few differing messages the rest are compared one by one: each message
    is compared and redacted once, however many hold a secret."""
    texts = [f"message {n} token {SECRET}" for n in range(40)]
    _record(tmp_path / "r.jsonl", texts)
    redactions.clear()
    assert _replay(tmp_path / "r.jsonl", texts)
    assert [item["content"] for item in redactions] == texts
    with pytest.raises(ReplayMismatch) as raised:
        _replay(tmp_path / "r.jsonl", [*texts[:30], "changed", *texts[31:]])
    assert raised.value.field_path == "context.messages[30].content"
