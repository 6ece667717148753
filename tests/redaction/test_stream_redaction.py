"""Secrets never reach the file, not even in pieces (issue #12): streamed deltas are stored so
that what they join to is redacted, whatever the delta sizes; prose is stored unchanged."""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openprogram.providers import credentials
from openprogram.providers.assembly import AssistantStreamAssembler
from openprogram.providers.faux import FauxProvider, faux_text
from openprogram.providers.recording import RecordingProvider
from openprogram.providers.replay import read_recording_file
from openprogram.providers.types import SimpleStreamOptions, StreamOptions
from openprogram.recordings import redaction
from openprogram.recordings.record.stream_redaction import spread
from tests.record_replay.test_recording_support import (
    MODEL,
    ScriptedProvider,
    collect,
    context_of,
    rows_of,
)

PLACEHOLDER = redaction.PLACEHOLDER


def pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def streamed(blocks: list[tuple[str, str]], size: int, *, tool: str = "login") -> list[Any]:
    """The well-formed events of an answer whose blocks (``("text", TEXT)``,
    ``("thinking", TEXT)`` or ``("tool", ARGUMENT_JSON)``, a call of ``tool``) stream in
    ``size``-character deltas."""
    assembler = AssistantStreamAssembler(MODEL, timestamp=5)
    events = [assembler.start()]
    for kind, body in blocks:
        if kind == "tool":
            index, event = assembler.begin_tool_call(f"call_{len(events)}", tool)
            events.append(event)
            events.extend(
                assembler.append_tool_arguments(index, piece) for piece in pieces(body, size)
            )
            events.append(assembler.end_tool_call(index))
        elif kind == "thinking":
            index, event = assembler.begin_thinking()
            events.append(event)
            events.extend(assembler.append_thinking(index, piece) for piece in pieces(body, size))
            events.append(assembler.end_thinking(index))
        else:
            index, event = assembler.begin_text()
            events.append(event)
            events.extend(assembler.append_text(index, piece) for piece in pieces(body, size))
            events.append(assembler.end_text(index))
    events.extend(assembler.finish("toolUse" if any(k == "tool" for k, _ in blocks) else "stop"))
    return events


def record(path: Path, events: list[Any], options: Any = None, provider: Any = None) -> list[Any]:
    provider = provider or ScriptedProvider(events)
    recorder = RecordingProvider(provider, path)
    live = asyncio.run(collect(recorder.stream(MODEL, context_of("go"), options)))
    recorder.sink.close()
    return live


def stored_deltas(path: Path) -> dict[tuple[int, int], str]:
    """The joined stored deltas of every block of every call, from the raw file rows."""
    joined: dict[tuple[int, int], str] = {}
    for row in rows_of(path):
        if row["type"] == "event" and "delta" in row["event"]:
            key = (row["call_index"], row["event"]["content_index"])
            joined[key] = joined.get(key, "") + row["event"]["delta"]
    return joined


def assert_no_piece(secret: str, path: Path) -> None:
    """No run of 8 characters of ``secret`` in the file bytes or in any call's joined deltas."""
    data = path.read_text()
    joined = list(stored_deltas(path).values())
    for start in range(len(secret) - 7):
        run = secret[start : start + 8]
        assert run not in data, f"{run!r} of the secret is in the file"
        assert not any(run in text for text in joined), (
            f"{run!r} of the secret is in the joined deltas"
        )


def assert_replays_consistently(path: Path) -> list[Any]:
    """The file reads back strictly; the replayed deltas of each block join to its final text
    or arguments."""
    events = list(read_recording_file(path).calls[0].events())
    final = events[-1].message if events[-1].type == "done" else events[-1].error
    for index, block in enumerate(final.content):
        deltas = "".join(
            e.delta
            for e in events
            if getattr(e, "content_index", None) == index and hasattr(e, "delta")
        )
        if block.type == "toolCall":
            assert orjson.loads(deltas) == block.arguments
        else:
            assert deltas == getattr(block, block.type)
    return events


# ============================================================================ issue #12, as reported


# In what the model produced only the exact secret names count (``X-Session-Token`` there is
# data the agent passes on: see tests/redaction/test_redaction_precision.py).
@pytest.mark.parametrize("name", ["password", "token", "api_key", "clientSecret", "Refresh-Token"])
def test_tool_argument_deltas_do_not_join_back_to_a_secret_field(tmp_path, name):
    secret = "Hunter2Hunter2Hunter2xyz"
    arguments = orjson.dumps({"user": "bob", name: secret}).decode()
    path = tmp_path / "rec.jsonl"
    live = record(path, streamed([("tool", arguments)], 8))
    assert_no_piece(secret, path)
    events = assert_replays_consistently(path)
    assert events[-1].message.content[0].arguments == {"user": "bob", name: PLACEHOLDER}
    assert stored_deltas(path)[(0, 0)] == orjson.dumps({"user": "bob", name: PLACEHOLDER}).decode()
    assert [e.type for e in events] == [e.type for e in live]


GEMINI_KEY = "AIzaSyD4x7Qm2LpN8vR3tY6wZ1cB5hJ9kF0gE2s"  # 39 characters


def test_an_environment_key_streamed_in_small_deltas_leaves_no_piece(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    path = tmp_path / "rec.jsonl"
    record(path, streamed([("text", f"the key is {GEMINI_KEY} done")], 4))
    assert_no_piece(GEMINI_KEY, path)
    events = assert_replays_consistently(path)
    assert events[-1].message.content[0].text == f"the key is {PLACEHOLDER} done"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (
            "connect to https://admin:Zq7Wp2Lm9Xr4Tn8Vb3Ks@db.example.test/x now",
            "Zq7Wp2Lm9Xr4Tn8Vb3Ks",
        ),
        ("use sk-proj-Ab3De5Gh7Jk9Mn2Pq4St6Vw8Yz0 ok", "sk-proj-Ab3De5Gh7Jk9Mn2Pq4St6Vw8Yz0"),
        (
            "send Authorization: Bearer abcdefghijklmnopqrstuvwxyzABCDE7 please",
            "abcdefghijklmnopqrstuvwxyzABCDE7",
        ),
    ],
)
def test_a_shaped_secret_streamed_in_small_deltas_leaves_no_piece(tmp_path, text, secret):
    path = tmp_path / "rec.jsonl"
    record(path, streamed([("text", text)], 4))
    assert_no_piece(secret, path)
    assert PLACEHOLDER in assert_replays_consistently(path)[-1].message.content[0].text


@pytest.mark.parametrize("requires_credentials", [True, False])
def test_an_api_key_passed_straight_to_the_recording_provider_is_a_known_value(
    tmp_path, requires_credentials
):
    key = "odd.shaped/key~value-7Qx"  # matches no shape: only its being known can remove it
    provider = ScriptedProvider(streamed([("text", f"you sent {key} right")], 3))
    provider.requires_credentials = requires_credentials
    path = tmp_path / "rec.jsonl"
    record(path, [], StreamOptions(api_key=key), provider)
    assert key not in path.read_text()
    assert_no_piece(key, path)


def test_a_keyless_provider_through_the_facade_notes_the_key(monkeypatch):
    facade = importlib.import_module(
        "openprogram.providers.stream"
    )  # the package exports a function of that name
    key = "another.odd/key~value-9Zy"
    seen = []

    class Keyless:
        requires_credentials = False

        def stream(self, model, context, options=None):
            seen.append(options)
            return iter(())

    monkeypatch.setattr(facade, "get_api_provider", lambda api: Keyless())
    facade.stream(MODEL, context_of("go"), StreamOptions(api_key=key))
    assert seen[0].api_key == key
    assert key in credentials.known_secret_values()


def test_environment_variables_with_secret_names_are_known_values(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok.value/odd-shape~1")
    monkeypatch.setenv("DB_PASSWORD", "correct horse battery")  # holds whitespace
    monkeypatch.setenv("SHORT_SECRET", "abc")  # too short to be a known value
    monkeypatch.setenv("MAX_TOKENS", "4096-a-counter-not-a-secret")  # a counter name
    known = redaction.current_redactor()
    assert known.redact_text("a tok.value/odd-shape~1 b") == f"a {PLACEHOLDER} b"
    assert known.redact_text("x correct horse battery y") == f"x {PLACEHOLDER} y"
    assert known.redact_text("abc 4096-a-counter-not-a-secret") == "abc 4096-a-counter-not-a-secret"
    path = tmp_path / "rec.jsonl"
    record(
        path,
        streamed([("text", "say correct horse battery staple and tok.value/odd-shape~1 ok")], 2),
    )
    data = path.read_text()
    assert "horse" not in data and "odd-shape" not in data
    assert_replays_consistently(path)


# ============================================================================ prose stays


PROSE = [
    "Basic 2024-01-01 plan and Token 2023/2024 season; the token 0x1234abcd is here.",
    "bearer v1.2.3 notes, Bearer 1.2.3.4567 build, sk-learn, k=v&a=b, risk-assessment-framework",
    "no spaces at all: a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9&j=10",
    "café 日本 \u2028 lines\nand\ttabs   spaced",
]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13])
@pytest.mark.parametrize("text", PROSE)
def test_prose_replays_byte_identical_deltas_included(tmp_path, text, size):
    events = streamed(
        [("thinking", text), ("text", text), ("tool", orjson.dumps({"q": text}).decode())], size
    )
    path = tmp_path / "rec.jsonl"
    live = record(path, events)
    assert list(read_recording_file(path).calls[0].events()) == live


# ============================================================================ the property


ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
#: An AWS access key id's 16 characters after its prefix (base32: no 0, 1, 8 or 9).
BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def _body(alphabet: str, size: int) -> st.SearchStrategy[str]:
    # A digit and some variety, so each secret is unlike prose and unlike the others.
    return st.text(alphabet=alphabet, min_size=size, max_size=size).filter(
        lambda s: (
            any(c.isdigit() for c in s)
            and any(c.isalpha() for c in s)
            and len(set(s)) >= min(8, size // 2)
        )
    )


SHAPED = st.one_of(
    _body(ALNUM, 36).map(lambda s: "ghp_" + s),
    _body(ALNUM, 82).map(lambda s: "github_pat_" + s),
    _body(ALNUM, 35).map(lambda s: "AIza" + s),
    _body(BASE32, 16).map(lambda s: "AKIA" + s),
    _body(ALNUM, 24).map(lambda s: "xoxb-" + s),
    _body(ALNUM, 24).map(lambda s: "sk_live_" + s),
    _body(ALNUM, 30).map(lambda s: "hf_" + s),
    _body(ALNUM, 28).map(lambda s: "sk-proj-" + s),
    _body(ALNUM, 28).map(lambda s: "key=sk-" + s),
    st.tuples(_body(ALNUM, 20), _body(ALNUM, 24), _body(ALNUM, 30)).map(
        lambda p: f"eyJ{p[0]}.{p[1]}.{p[2]}"
    ),
    _body(ALNUM, 24).map(lambda s: "Bearer " + s),
    _body(ALNUM, 20).map(lambda s: f"https://user:{s}@host.test/p"),
)
WORDS = st.lists(
    st.sampled_from(["the", "key", "is", "Basic", "token", "sk-learn", "ok", "\n", "é"]), max_size=4
)
SECRET_NAMES = st.sampled_from(
    ["password", "token", "api_key", "clientSecret", "refresh_token", "secret"]
)


def _secret_part(planted: str) -> str:
    """The part of a planted string that is the secret itself."""
    if planted.startswith("Bearer "):
        return planted[len("Bearer ") :]
    if planted.startswith("https://user:"):
        return planted[len("https://user:") : planted.index("@")]
    if planted.startswith("key="):
        return planted[len("key=") :]
    return planted


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    planted=SHAPED,
    field_secret=_body(ALNUM, 24),
    name=SECRET_NAMES,
    before=WORDS,
    after=WORDS,
    size=st.integers(min_value=1, max_value=16),
)
def test_no_piece_of_any_planted_secret_reaches_the_file(
    tmp_path_factory, planted, field_secret, name, before, after, size
):
    text = " ".join([*before, planted, *after])
    arguments = orjson.dumps(
        {"query": " ".join(before), name: field_secret, "note": planted}
    ).decode()
    path = tmp_path_factory.mktemp("rec") / "rec.jsonl"
    record(path, streamed([("thinking", text), ("text", text), ("tool", arguments)], size))
    assert_no_piece(_secret_part(planted), path)
    assert_no_piece(field_secret, path)
    assert_replays_consistently(path)


@settings(max_examples=25, deadline=None)
@given(
    words=st.lists(
        st.sampled_from(
            [
                "the",
                "Bearer",
                "bearer",
                "of",
                "news",
                "k=v&",
                "sk-learn",
                " ",
                "\n",
                "日本",
                "x" * 40,
            ]
        ),
        max_size=30,
    ),
    size=st.integers(min_value=1, max_value=16),
)
def test_prose_streamed_in_any_delta_size_replays_byte_identical(tmp_path_factory, words, size):
    text = " ".join(words)
    events = streamed([("text", text), ("tool", orjson.dumps({"q": text}).decode())], size)
    path = tmp_path_factory.mktemp("rec") / "rec.jsonl"
    live = record(path, events)
    assert list(read_recording_file(path).calls[0].events()) == live


# ============================================================================ linear work


class LongTextProvider:
    """A provider that streams one text block (or, ``tool``, one tool call's arguments) in
    ``size``-character deltas, making each event as it is asked for (a list of them made
    beforehand holds every snapshot of the text so far: quadratic memory), with the shared
    assembler as every vendor provider does."""

    requires_credentials = False

    def __init__(self, text: str, size: int, *, tool: bool = False) -> None:
        self.text, self.size, self.tool = text, size, tool

    def stream(self, model, context, options=None):
        return self._events()

    stream_simple = stream

    async def _events(self):
        assembler = AssistantStreamAssembler(MODEL, timestamp=5)
        yield assembler.start()
        if self.tool:
            index, event = assembler.begin_tool_call("call_1", "lookup")
            append, end = assembler.append_tool_arguments, assembler.end_tool_call
        else:
            index, event = assembler.begin_text()
            append, end = assembler.append_text, assembler.end_text
        yield event
        for start in range(0, len(self.text), self.size):
            yield append(index, self.text[start : start + self.size])
        yield end(index)
        for event in assembler.finish("toolUse" if self.tool else "stop"):
            yield event


def record_long_text(path: Path, text: str, size: int, *, tool: bool = False) -> None:
    """Record ``text`` streamed in ``size``-character deltas, keeping no event."""

    async def drain() -> None:
        async for _event in recorder.stream(MODEL, context_of("go")):
            pass

    recorder = RecordingProvider(LongTextProvider(text, size, tool=tool), path)
    asyncio.run(drain())
    recorder.sink.close()


def _whitespace_free(kilobytes: int) -> str:
    return ("k=v&" * (kilobytes * 256))[: kilobytes * 1024]


def _redaction_work(path: Path, kilobytes: int) -> int:
    """Characters handed to the redaction rules and to the trigger search while recording
    ``kilobytes`` KB of whitespace-free ``k=v&`` text in 4-character deltas."""
    counted = [0]
    real_redact, real_trigger = redaction._redact, redaction._trigger_for

    def counting_redact(known, text):
        counted[0] += len(text)
        return real_redact(known, text)

    def counting_trigger(*arguments):
        search, reach = real_trigger(*arguments)

        def counting_search(text, start=0):
            counted[0] += len(text) - start
            return search(text, start)

        return redaction.Trigger(counting_search, reach)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(redaction, "_redact", counting_redact)
        patch.setattr(redaction, "_trigger_for", counting_trigger)
        patch.setattr(redaction, "_known_cache", None)
        record_long_text(path, _whitespace_free(kilobytes), 4)
    return counted[0]


def test_recording_whitespace_free_text_does_linear_redaction_work(tmp_path):
    counts = {
        kilobytes: _redaction_work(tmp_path / f"{kilobytes}.jsonl", kilobytes)
        for kilobytes in (25, 50, 100)
    }
    assert counts[25] >= 25 * 1024  # the text was looked at
    # Twice the text, about twice the work (quadratic work would be four times).
    assert counts[50] <= 2.2 * counts[25]
    assert counts[100] <= 2.2 * counts[50]


def _recording_peak_memory(path: Path, kilobytes: int, *, tool: bool = False) -> int:
    """The most memory (bytes, as ``tracemalloc`` counts it) allocated at once while recording
    ``kilobytes`` KB of whitespace-free text in 4-character deltas, or of a tool call's
    arguments in 8-character ones: every delta is held until the block ends (text waits for
    a safe cut that never comes, arguments are redacted whole)."""
    import tracemalloc

    text = _whitespace_free(kilobytes)
    if tool:
        text = orjson.dumps({"q": text[:-8]}).decode()
    tracemalloc.start()
    try:
        record_long_text(path, text, 8 if tool else 4, tool=tool)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_held_deltas_do_not_keep_every_snapshot_of_the_text_so_far(tmp_path):
    """A held delta keeps what its line needs, not its event: each event's snapshot holds the
    text so far, so keeping them all took memory quadratic in the text (1.3 GB at 100 KB)."""
    peaks = {kb: _recording_peak_memory(tmp_path / f"{kb}.jsonl", kb) for kb in (20, 40)}
    path = tmp_path / "40.jsonl"
    assert _text_of_recording(path) == _whitespace_free(40)  # all of it was recorded
    # Twice the text, about twice the memory (keeping the snapshots: 3.7 times, 350 MB at 50 KB).
    assert peaks[40] <= 2.4 * peaks[20]
    assert peaks[40] <= 250 * 40 * 1024


def test_held_tool_arguments_are_written_one_state_at_a_time(tmp_path):
    """A tool call's held deltas are handed on, once its arguments are whole, each with the
    arguments before and after it: made all at once, those records held every state of the
    arguments together (2.5 GB at 200 KB)."""
    peaks = {
        kb: _recording_peak_memory(tmp_path / f"tool{kb}.jsonl", kb, tool=True) for kb in (20, 40)
    }
    events = list(read_recording_file(tmp_path / "tool40.jsonl").calls[0].events())
    assert events[-1].message.content[0].arguments == {"q": _whitespace_free(40)[:-8]}
    assert peaks[40] <= 2.4 * peaks[20]
    assert peaks[40] <= 250 * 40 * 1024


def _text_of_recording(path: Path) -> str:
    events = list(read_recording_file(path).calls[0].events())
    return events[-1].message.content[0].text


# ============================================================================ crash safety and spread


def test_held_deltas_are_written_when_the_call_fails(tmp_path):
    events = streamed(
        [
            ("text", "no-safe-point-here-at-all"),
            ("tool", '{"password": "Hunter2Hunter2Hunter2xyz"}'),
        ],
        4,
    )
    failing_at = next(i for i, e in enumerate(events) if e.type == "toolcall_end")
    provider = ScriptedProvider(events, raise_after=failing_at)
    path = tmp_path / "rec.jsonl"
    with pytest.raises(RuntimeError, match="provider exploded"):
        record(path, [], provider=provider)
    rows = rows_of(path)
    assert rows[-1] == {
        "type": "call_end", "call_index": 0, "event_count": failing_at, "outcome": "error",
        "redactions": [{"path": "content[1].arguments.password", "rules": ["secret-field-name"]}],
    }  # fmt: skip
    assert "Hunter2Hunter2" not in path.read_text()
    call = read_recording_file(path).calls[0]
    assert len(list(call.events())) == failing_at


def test_a_consumer_that_stops_early_still_gets_every_held_line_written(tmp_path):
    events = streamed([("text", "abcdefghijklmnopqrstuvwxyz")], 2)
    path = tmp_path / "rec.jsonl"

    async def take(count: int) -> None:
        stream = RecordingProvider(ScriptedProvider(events), path).stream(MODEL, context_of("go"))
        seen = 0
        async for _ in stream:
            seen += 1
            if seen == count:
                break
        await stream.aclose()

    asyncio.run(take(6))
    assert rows_of(path)[-1] == {
        "type": "call_end",
        "call_index": 0,
        "event_count": 6,
        "outcome": "abandoned",
    }
    assert len(list(read_recording_file(path).calls[0].events())) == 6


@pytest.mark.parametrize(
    ("pieces_in", "target", "expected"),
    [
        (["ab", "cd", "ef"], "abcdef", ["ab", "cd", "ef"]),
        (
            ["the k", "ey AI", "zaXYZ", " done"],
            "the key [X] done",
            ["the k", "ey [X]", "", " done"],
        ),
        (["ab", "cd"], "abXd", ["ab", "Xd"]),
        (["", ""], "xy", ["", "xy"]),
        ([], "", []),
    ],
)
def test_spread_keeps_shared_text_in_place_and_gives_the_middle_where_it_starts(
    pieces_in, target, expected
):
    result = spread(pieces_in, target)
    assert result == expected and "".join(result) == target


def test_a_faux_answer_with_options_key_in_text_through_stream_simple(tmp_path):
    key = "zz.odd/shape~key-42abc"
    path = tmp_path / "rec.jsonl"
    provider = RecordingProvider(FauxProvider([faux_text(f"echo {key} back")], timestamp=1), path)
    asyncio.run(
        collect(provider.stream_simple(MODEL, context_of(key), SimpleStreamOptions(api_key=key)))
    )
    assert "odd/shape" not in path.read_text()


def test_block_text_that_was_never_streamed_is_still_redacted(tmp_path):
    """A provider that puts text in a block without streaming it as deltas: the recorder
    cannot rely on the stream redaction for that text and redacts it itself."""
    secret = "sk-proj-Ab3De5Gh7Jk9Mn2Pq4St6Vw8Yz0"
    events = streamed([("text", "hello there ")], 3)
    block = events[-1].message.content[0].model_copy(update={"text": f"hello there {secret}"})

    def with_block(message):
        return message.model_copy(update={"content": [block]})

    for number, event in enumerate(events):
        if event.type == "text_end":
            events[number] = event.model_copy(
                update={"content": block.text, "partial": with_block(event.partial)}
            )
        elif event.type == "done":
            events[number] = event.model_copy(update={"message": with_block(event.message)})
    path = tmp_path / "rec.jsonl"
    record(path, events)
    assert secret[3:] not in path.read_text()
    final = list(read_recording_file(path).calls[0].events())[-1].message
    assert final.content[0].text == f"hello there {PLACEHOLDER}"


# ============================================================================ streams cut short


def cut_short(
    kind: str, body: str, size: int, keep: int, ending: str
) -> tuple[list[Any], ScriptedProvider]:
    """The events of one ``kind`` block (``"text"`` or ``"tool"``) streaming ``body`` whose
    stream stops after ``keep`` deltas: with an ``error`` event (``ending == "error"``), or
    with the provider raising (``"raise"``) or simply ending without a terminal event
    (``"end"``)."""
    assembler = AssistantStreamAssembler(MODEL, timestamp=5)
    events = [assembler.start()]
    if kind == "tool":
        index, event = assembler.begin_tool_call("call_1", "login")
        append = assembler.append_tool_arguments
    else:
        index, event = assembler.begin_text()
        append = assembler.append_text
    events.append(event)
    events.extend(append(index, piece) for piece in pieces(body, size)[:keep])
    if ending == "error":
        events.append(assembler.fail("connection reset"))
        return events, ScriptedProvider(events)
    if ending == "raise":
        return events, ScriptedProvider(events, raise_after=len(events))
    return events, ScriptedProvider(events)


_PUBLIC_PREFIXES = (
    "ghp_",
    "github_pat_",
    "AIza",
    "AKIA",
    "xoxb-",
    "sk_live_",
    "hf_",
    "sk-proj-",
    "sess-sk-",
    "eyJ",
)


def _secret_body(planted: str) -> str:
    """The secret part of a planted string without its well-known public prefix: a stream
    cut inside the prefix ("github_p") has shown nothing secret yet."""
    planted = _secret_part(planted)
    prefix = next((p for p in _PUBLIC_PREFIXES if planted.startswith(p)), "")
    return planted[len(prefix) :]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    planted=SHAPED,
    before=WORDS,
    size=st.integers(min_value=1, max_value=16),
    cut=st.floats(min_value=0.0, max_value=1.0),
    kind=st.sampled_from(["text", "tool"]),
    ending=st.sampled_from(["error", "raise", "end"]),
)
def test_a_stream_cut_short_inside_a_secret_leaves_no_piece_of_it(
    tmp_path_factory, planted, before, size, cut, kind, ending
):
    """A key cut off before its length, a URL password before its "@": no rule recognises
    what streamed so far, yet none of it may reach the file."""
    text = " ".join([*before, planted])
    body = orjson.dumps({"note": text})[:-2].decode() if kind == "tool" else text
    start = len(body) - len(planted)  # where the planted string begins
    # Cut somewhere inside the planted string, on a delta boundary.
    deltas = len(pieces(body, size))
    keep = min(deltas, max(1, round((start + cut * len(planted)) / size)))
    _, provider = cut_short(kind, body, size, keep, ending)
    path = tmp_path_factory.mktemp("rec") / "rec.jsonl"
    try:
        record(path, [], provider=provider)
    except RuntimeError:
        assert ending == "raise"
    assert_no_piece(_secret_body(planted), path)
    call = read_recording_file(path).calls[0]
    # An error event is the call's answer; a stream that broke off is an interrupted call.
    assert call.outcome == ("complete" if ending == "error" else "error")
    list(call.events())  # reads back whole


@pytest.mark.parametrize("ending", ["error", "raise", "end"])
@pytest.mark.parametrize("kind", ["text", "tool"])
def test_prose_cut_short_is_stored_as_it_streamed(tmp_path, kind, ending):
    text = "the news of the day is that sk-learn and k=v&x=y are fine and the Bearer of bad new"
    body = orjson.dumps({"note": text})[:-2].decode() if kind == "tool" else text
    events, provider = cut_short(kind, body, 4, len(pieces(body, 4)), ending)
    path = tmp_path / "rec.jsonl"
    try:
        record(path, [], provider=provider)
    except RuntimeError:
        assert ending == "raise"
    streamed_deltas = "".join(e.delta for e in events if hasattr(e, "delta"))
    assert stored_deltas(path)[(0, 0)] == streamed_deltas
