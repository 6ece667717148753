"""Recording long tool-call arguments does work linear in their length (issue #12): counted,
never timed. Per ``toolcall_delta`` the recorder must not redact, dump or compare the
arguments so far, only what the delta added."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from openprogram.providers.partial_json import StreamingJsonObject
from openprogram.providers.replay import read_recording_file
from openprogram.recordings import redaction
from openprogram.recordings.file import patches
from openprogram.recordings.record import recorder
from tests.redaction.test_stream_redaction import record, streamed


def _arguments(kilobytes: int) -> str:
    """Whitespace-free text full of what redaction acts on ("=", "&"): no safe cut anywhere."""
    body = ("k=v&" * (kilobytes * 256))[: kilobytes * 1024]
    return orjson.dumps({"q": body[:-8]}).decode()


def _work(path: Path, kilobytes: int) -> dict[str, int]:
    """Characters redacted or searched for triggers, values compared by the patch diff (string
    characters included), and whole-prefix parses, while recording ``kilobytes`` KB of tool
    arguments in 8-character deltas."""
    counts = {"redacted": 0, "compared": 0, "full_parses": 0}
    real_redact, real_trigger, real_diff = redaction._redact, redaction._trigger_for, patches._diff
    real_feed = StreamingJsonObject.feed

    def counting_redact(known, text):
        counts["redacted"] += len(text)
        return real_redact(known, text)

    def counting_trigger(*arguments):
        search, reach = real_trigger(*arguments)

        def counting_search(text, start=0):
            counts["redacted"] += len(text) - start
            return search(text, start)

        return redaction.Trigger(counting_search, reach)

    def counting_diff(previous, current, path, ops, grown):
        # A string compared in full costs its length; one known to have grown, nothing.
        if (
            type(previous) is str
            and type(current) is str
            and not (grown and len(current) > len(previous))
        ):
            counts["compared"] += len(current)
        counts["compared"] += 1
        return real_diff(previous, current, path, ops, grown)

    def counting_feed(self, delta):
        before = self.full_parses
        value = real_feed(self, delta)
        counts["full_parses"] += self.full_parses - before
        return value

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(redaction, "_redact", counting_redact)
        patch.setattr(redaction, "_trigger_for", counting_trigger)
        patch.setattr(redaction, "_known_cache", None)
        patch.setattr(patches, "_diff", counting_diff)
        patch.setattr(StreamingJsonObject, "feed", counting_feed)
        # The events come from the shared assembler: the pipeline a vendor provider gets.
        patch.setattr(recorder, "streams_assembled_snapshots", lambda provider: True)
        events = streamed([("tool", _arguments(kilobytes))], 8)
        live = record(path, events)
    (call,) = read_recording_file(path).calls
    assert list(call.events()) == live  # nothing to redact: the replay is the live stream
    return counts


@pytest.mark.slow
def test_recording_tool_arguments_does_linear_work(tmp_path):
    # The work is counted, so the doubling shows at any size: 25, 50 and 100 KB prove what
    # 50, 100 and 200 KB did, in a quarter of the time (the time goes to the replay's check
    # below, whose events each hold the arguments so far).
    counts = {kb: _work(tmp_path / f"{kb}.jsonl", kb) for kb in (25, 50, 100)}
    assert counts[25]["redacted"] >= 25 * 1024  # the whole arguments were looked at, once
    for small, large in ((25, 50), (50, 100)):
        # Twice the arguments, about twice the work (quadratic work would be four times).
        assert counts[large]["redacted"] <= 2.2 * counts[small]["redacted"]
        assert counts[large]["compared"] <= 2.2 * counts[small]["compared"]
    # A few comparisons per delta (the one changed path), the whole value a bounded number of
    # times (once the arguments are whole, at toolcall_end), never the value at every delta.
    arguments = len(_arguments(100))
    assert counts[100]["compared"] <= 4 * (arguments // 8 + 1) + 2 * arguments
    assert counts[100]["full_parses"] == 0


def test_the_patches_of_long_arguments_restore_every_snapshot(tmp_path):
    """The trusted growth of the arguments (``growth_patch``) writes patches that restore
    every live snapshot exactly, escapes and nested values included."""
    arguments = orjson.dumps(
        {
            "path": "a/b.txt",
            "content": 'line \\ "quoted" é\u2028' * 40,
            "options": {"n": 12, "flags": [True, None, 1.5]},
        }
    ).decode()
    path = tmp_path / "rec.jsonl"
    live = record(path, streamed([("tool", arguments), ("text", "done. ")], 3))
    (call,) = read_recording_file(path).calls
    assert list(call.events()) == live
    lines = path.read_bytes().count(b'"partial":{')
    assert lines <= 2  # the first event and at most one more: the rest are patches


def _fed_characters(path: Path, events: list) -> tuple[int, list]:
    """Characters fed to any argument parse while recording ``events`` (already built)."""
    fed = [0]
    real_feed = StreamingJsonObject.feed

    def counting_feed(self, delta):
        fed[0] += len(delta)
        return real_feed(self, delta)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(StreamingJsonObject, "feed", counting_feed)
        live = record(path, events)
    return fed[0], live


def test_recording_parses_tool_arguments_once(tmp_path, monkeypatch):
    """The encoder reads the stream redaction's parse of the stored deltas rather than parsing
    them a second time: the arguments are fed to a parse once while recording (for a provider
    whose snapshots come from the shared assembler; any other has its snapshots checked, see
    tests/record_replay/test_record_transparency.py)."""
    monkeypatch.setattr(
        recorder, "streams_assembled_snapshots", lambda provider: True
    )  # the events come from the assembler
    arguments = _arguments(20)
    path = tmp_path / "rec.jsonl"
    fed, live = _fed_characters(path, streamed([("tool", arguments), ("text", "done. ")], 8))
    assert fed == len(arguments)
    (call,) = read_recording_file(path).calls
    assert list(call.events()) == live


def test_a_text_growth_line_is_what_the_dict_would_encode_to():
    """The encoder's template for the usual delta writes byte for byte what ``orjson`` makes
    of the same event line as a dict (the reader sees no difference between the two paths)."""
    from openprogram.recordings.record.encoder import EventEncoder, TextGrowth, Whole

    encoder = EventEncoder(3)
    start = {
        "type": "text_start",
        "content_index": 0,
        "partial": {"content": [{"type": "text", "text": ""}]},
    }
    encoder.line(Whole(start), 0, 0)
    for number, delta in enumerate(['a"b', "é\u2028", "</script>", "\x00", "plain "], start=1):
        line = encoder.line(TextGrowth("text_delta", 0, delta), number, 7)
        expected = {
            "type": "event", "call_index": 3, "event_index": number, "t": 7,
            "event": {
                "type": "text_delta", "content_index": 0, "delta": delta,
                "partial_patch": [["append", ["content", 0, "text"], delta]],
            },
        }  # fmt: skip
        assert line == orjson.dumps(expected) + b"\n"
