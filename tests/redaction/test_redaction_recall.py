"""Redaction recall: no run of 8 characters of any secret of the corpus
(:mod:`tests.redaction.recall_corpus`) reaches a recording or anything shown from one, wherever the
secret is put and however it streams.

Every test ends in one check, :func:`assert_no_piece`, which looks for every 8-character window
of every secret's secret part in

(a) the raw file text, (b) every JSON string (keys included) of every line, decoded, (c) the
joined stored deltas of each block of each call, (d) every CLI output, HTML page and exception
message given to it;

each text also once and twice JSON-unescaped (a PEM newline is ``\\n`` in a line, ``\\\\n`` in
tool-argument JSON inside a line) and HTML-unescaped. A check for the whole secret could not
see a secret written in pieces.

The places: every part of a request (:data:`PLACES`); model output streamed at every delta
size 1..16 (text, thinking, tool-call arguments as valid and as invalid JSON); a stream cut
short inside a secret; the message of a replay mismatch; every view of a file (``recordings
show`` in each form, ``recordings view``).
"""

from __future__ import annotations

import asyncio
import functools
import html
import json
import re
import subprocess
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from openprogram.providers import credentials
from openprogram.providers.assembly import AssistantStreamAssembler
from openprogram.providers.lanes import lane, lane_segment
from openprogram.providers.recording import RecordingProvider, RecordingSink
from openprogram.providers.replay import ReplayMismatch
from openprogram.providers.scoped import use_recording
from openprogram.providers.stream import stream as facade_stream
from openprogram.providers.types import (
    AssistantMessage,
    Context,
    StreamOptions,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from tests.conftest import PYTHON, cli_env
from tests.record_replay.test_recording_support import MODEL, ScriptedProvider, collect

from .recall_corpus import (
    CORPUS,
    FIELD,
    KNOWN_ENV,
    OPTION_KEY,
    SHAPE_PATTERNS,
    TEXT_SECRETS,
    WINDOW,
    Secret,
    build_corpus,
    by_shape,
    sentence,
)

SIZES = range(1, 17)
TOOL_ARGUMENT_NAMES = ("password", "api_key", "token", "secret")
TOOL_FIELD = tuple(s for s in FIELD if s.field in TOOL_ARGUMENT_NAMES)


@pytest.fixture(autouse=True)
def known_values(monkeypatch):
    """The environment keys of the corpus are set, and this test starts with no key noted by
    an earlier one (a key noted as known would hide a shape rule that fails)."""
    forget_noted_keys(monkeypatch)
    for secret in KNOWN_ENV:
        monkeypatch.setenv(secret.env, secret.text)


def forget_noted_keys(patch: pytest.MonkeyPatch) -> None:
    """As in a new process: no key noted by an earlier call is known."""
    patch.setattr(credentials, "_seen_keys", set(), raising=False)


# ============================================================================ the check

_CHUNKS = re.compile(
    ".{4}", re.DOTALL
).findall  # text[0:4], text[4:8], ... (a shorter tail is never a window's)
# JSON escapes, and those of repr() (a mismatch message) and of the CLI's terminal_safe (\xNN).
_ESCAPE = re.compile(r"""\\(?:u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2})|(["'\\/bfnrt]))""")
_SIMPLE_ESCAPES = {
    '"': '"',
    "'": "'",
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}


def _unescaped(text: str) -> str:
    return _ESCAPE.sub(
        lambda m: chr(int(m[1] or m[2], 16)) if m[3] is None else _SIMPLE_ESCAPES[m[3]], text
    )


def _layers(text: str) -> list[str]:
    """The text, and what it reads as once and twice unescaped (JSON, repr, terminal
    escapes) and HTML-unescaped."""
    layers = [text]
    if "\\" in text:
        once = _unescaped(text)
        layers.append(once)
        if "\\" in once:
            layers.append(_unescaped(once))
    if "&" in text:
        layers.append(html.unescape(text))
    return layers


@dataclass(frozen=True)
class Leak:
    window: str
    owners: tuple[Secret, ...]
    where: str
    excerpt: str


class Recall:
    """Every window of some secrets, and where windows show up in texts.

    A window at position ``p`` of a text holds the aligned 4 characters at the first multiple
    of 4 from ``p`` on (wholly inside the window), so one set test of the text's aligned
    4-character chunks against every 4 characters of the secrets rules most texts out at C
    speed; only the places around a matching chunk are then compared window by window."""

    def __init__(self, secrets: Iterable[Secret]) -> None:
        owners: dict[str, list[Secret]] = defaultdict(list)
        for secret in secrets:
            for window in secret.windows:
                owners[window].append(secret)
        self.owners = {window: tuple(found) for window, found in owners.items()}
        self.windows = frozenset(self.owners)
        self.quarters = frozenset(w[i : i + 4] for w in self.windows for i in range(WINDOW - 3))

    def _in(self, text: str) -> list[str]:
        """The windows in ``text`` (each once)."""
        candidates = self.quarters.intersection(_CHUNKS(text))
        if not candidates:
            return []
        hits: dict[str, None] = {}
        windows = self.windows
        for candidate in sorted(candidates):  # every occurrence, overlapping ones included
            at = text.find(candidate)
            while at >= 0:
                for start in range(max(0, at - 3), at + 1):
                    window = text[start : start + WINDOW]
                    if window in windows:
                        hits[window] = None
                at = text.find(candidate, at + 1)
        return list(hits)

    def found(self, text: str) -> set[str]:
        hits: set[str] = set()
        for layer in _layers(text):
            hits.update(self._in(layer))
        return hits

    def leaks(self, text: str, where: str, skip: set[str] | None = None) -> list[Leak]:
        """The windows in ``text`` (but those in ``skip``, which it extends), each once."""
        result = []
        skip = set() if skip is None else skip
        for layer in _layers(text):
            for window in self._in(layer):
                if window in skip:
                    continue
                skip.add(window)
                at = layer.index(window)
                excerpt = layer[max(0, at - 24) : at + WINDOW + 24]
                result.append(Leak(window, self.owners[window], where, excerpt))
        return result


@functools.lru_cache(maxsize=32)
def recall_of(secrets: tuple[Secret, ...]) -> Recall:
    return Recall(secrets)


_JSON_STRING = re.compile(r'"((?:[^"\\]++|\\.)*+)"').findall


def _decoded_strings(raw: str) -> dict[str, str]:
    """Every JSON string of every line (keys and values: each string literal of the text),
    decoded, each distinct one once: decoded string -> its literal as written."""
    decoded: dict[str, str] = {}
    for literal in set(_JSON_STRING(raw)):
        text = orjson.loads(f'"{literal}"') if "\\" in literal else literal
        decoded.setdefault(text, literal)
    return decoded


def stored_deltas(rows: Sequence[dict[str, Any]]) -> dict[tuple[int, int], str]:
    """The joined stored deltas of every block of every call."""
    joined: dict[tuple[int, int], str] = {}
    for row in rows:
        event = row.get("event") if row.get("type") == "event" else None
        if isinstance(event, dict) and isinstance(event.get("delta"), str):
            key = (row["call_index"], event.get("content_index", -1))
            joined[key] = joined.get(key, "") + event["delta"]
    return joined


def patched_strings(rows: Sequence[dict[str, Any]]) -> Iterable[tuple[int, str, str]]:
    """``(call, path, text)`` of every string the stored ``partial_patch`` operations grow by
    ``append`` (what a replayed snapshot shows there), as long as it grew before a ``set``
    replaced it and at the end."""
    grown: dict[tuple[int, str], str] = {}
    for row in rows:
        event = row.get("event") if row.get("type") == "event" else None
        patch = event.get("partial_patch") if isinstance(event, dict) else None
        for op in patch if isinstance(patch, list) else ():
            if not (isinstance(op, list) and len(op) == 3 and isinstance(op[2], str)):
                continue
            key = (row["call_index"], json.dumps(op[1]))
            if op[0] == "append":
                grown[key] = grown.get(key, "") + op[2]
            elif op[0] == "set":
                previous = grown.pop(key, None)
                if previous is not None:
                    yield (*key, previous)
                grown[key] = op[2]
    for key, text in grown.items():
        yield (*key, text)


def file_leaks(recall: Recall, path: Path, calls: Sequence[str] = ()) -> list[Leak]:
    """Checks (a), (b) and (c) of one recording file."""

    def call_name(index: Any) -> str:
        if isinstance(index, int) and 0 <= index < len(calls):
            return f"call {index} ({calls[index]})"
        return f"call {index}"

    raw = path.read_text()
    lines = raw.split("\n")
    rows = [orjson.loads(line) for line in lines if line.strip()]
    leaks: list[Leak] = []

    def line_of(literal: str) -> str:
        number = next((n for n, line in enumerate(lines) if f'"{literal}"' in line), None)
        if number is None:
            return "?"
        return f"line {number + 1}, {call_name(rows[number].get('call_index'))}"

    # (a) the raw text; line by line (to say where) only when something is there
    if recall._in(raw):
        reported: set[str] = set()
        for number, line in enumerate(lines):
            if recall._in(line):
                row = rows[number] if number < len(rows) else {}
                leaks += recall.leaks(
                    line,
                    f"raw file line {number + 1}, {call_name(row.get('call_index'))}",
                    reported,
                )
    # (b) every JSON string of every line, decoded (and what JSON text inside it reads as)
    decoded = _decoded_strings(raw)
    if recall.found("\x00".join(decoded)):
        reported = set()
        for text, literal in decoded.items():
            if recall.found(text):
                leaks += recall.leaks(text, f"decoded string on {line_of(literal)}", reported)
    # (c) the joined stored deltas of each block, and the strings the stored patches grow
    for (call_index, block), text in stored_deltas(rows).items():
        leaks += recall.leaks(
            text, f"joined stored deltas of block {block} of {call_name(call_index)}"
        )
    for call_index, where, text in patched_strings(rows):
        leaks += recall.leaks(
            text, f"string grown by partial_patch appends at {where} of {call_name(call_index)}"
        )
    return leaks


def assert_no_piece(
    secrets: Iterable[Secret],
    *,
    context: str,
    path: Path | None = None,
    calls: Sequence[str] = (),
    outputs: Mapping[str, str] | None = None,
    recall: Recall | None = None,
) -> None:
    """No 8-character window of any of ``secrets`` in the file at ``path`` (raw, decoded,
    joined deltas) nor in any of ``outputs`` (name -> text). ``calls`` names each call of the
    file for the report; ``context`` says what the test did."""
    recall = recall or recall_of(tuple(dict.fromkeys(secrets)))
    leaks = file_leaks(recall, path, calls) if path is not None else []
    for name, text in (outputs or {}).items():
        leaks += recall.leaks(text, name)
    if not leaks:
        return
    by_secret: dict[str, list[Leak]] = defaultdict(list)
    for leak in leaks:
        by_secret[" / ".join(f"{s.label} [{s.family}]" for s in leak.owners)].append(leak)
    report = [f"{len(by_secret)} secret(s) left pieces ({context}):"]
    for label, found in sorted(by_secret.items()):
        first = found[0]
        more = f" (and {len(found) - 1} more window(s)/place(s))" if len(found) > 1 else ""
        report.append(
            f"  {label}: window {first.window!r} in {first.where}: ...{first.excerpt!r}...{more}"
        )
    raise AssertionError("\n".join(report))


# ============================================================================ recording


@dataclass
class Call:
    """One recorded call: what it is named in reports, its request and its answer events."""

    name: str
    events: list[Any]
    context: Context | None = None
    options: StreamOptions | None = None
    lane: str | None = None
    raise_after: int | None = None
    error: BaseException | None = None
    outcome: BaseException | None = field(default=None, init=False)


def plain_context(text: str = "go") -> Context:
    return Context(system_prompt="be brief", messages=[UserMessage(content=text, timestamp=1)])


def call_options(**extra: Any) -> StreamOptions:
    """Options of a call made with the corpus's call key (so it is a known value)."""
    return StreamOptions(**{"api_key": OPTION_KEY.text, **extra})


def record_calls(path: Path, calls: Sequence[Call]) -> None:
    """Record every call into one file through one sink, in order; a call whose provider
    raises is recorded as far as it got (its exception is kept in ``call.outcome``)."""
    sink = RecordingSink(path)

    async def run() -> None:
        for call in calls:
            provider = ScriptedProvider(call.events, raise_after=call.raise_after, error=call.error)
            recorder = RecordingProvider(provider, sink)
            try:
                with lane(call.lane) if call.lane else nullcontext():
                    await collect(
                        recorder.stream(
                            MODEL, call.context or plain_context(), call.options or call_options()
                        )
                    )
            except Exception as error:  # noqa: BLE001 - a cut-short call raises by design
                call.outcome = error

    try:
        asyncio.run(run())
    finally:
        sink.close()


def pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def answer(blocks: Sequence[tuple[str, str]], size: int, *, cut: bool = False) -> list[Any]:
    """The events of an answer whose blocks (``("text"|"thinking"|"tool", BODY)``) stream in
    ``size``-character deltas; with ``cut``, the stream stops after the last delta with an
    ``error`` event (the caller may instead make the provider raise there)."""
    assembler = AssistantStreamAssembler(MODEL, timestamp=5)
    events: list[Any] = [assembler.start()]
    for kind, body in blocks:
        if kind == "tool":
            index, event = assembler.begin_tool_call(f"call_{len(events)}", "lookup")
            append, end = assembler.append_tool_arguments, assembler.end_tool_call
        elif kind == "thinking":
            index, event = assembler.begin_thinking()
            append, end = assembler.append_thinking, assembler.end_thinking
        else:
            index, event = assembler.begin_text()
            append, end = assembler.append_text, assembler.end_text
        events.append(event)
        events.extend(append(index, piece) for piece in pieces(body, size))
        if not cut:
            events.append(end(index))
    if cut:
        events.append(assembler.fail("connection reset by peer"))
    else:
        events.extend(assembler.finish())
    return events


def ok_answer() -> list[Any]:
    return answer([("text", "ok")], 2)


# ============================================================================ the corpus


BRIEF_SHAPES = {
    "bearer",
    "basic",
    "token",
    "openai",
    "openai-project",
    "anthropic",
    "deepseek",
    "github",
    "github-pat",
    "google",
    "aws",
    "slack",
    "stripe",
    "huggingface",
    "jwt",
    "pem",
    "url-userinfo",
    "url-query",
    "known-env",
    "known-option",
    "field",
}


def test_the_corpus_is_deterministic_and_every_secret_has_its_documented_form():
    assert build_corpus() == CORPUS
    assert set(by_shape(CORPUS)) == BRIEF_SHAPES
    for secret in CORPUS:
        assert SHAPE_PATTERNS[secret.shape].fullmatch(secret.text), secret.label
        assert secret.secret in secret.text and len(secret.windows) >= WINDOW, secret.label
    variants = {(s.shape, s.variant) for s in CORPUS}
    for prefix in ("ghp_", "gho_", "ghu_", "ghs_"):
        assert ("github", prefix) in variants
    for label in ("RSA PRIVATE KEY", "PRIVATE KEY", "OPENSSH PRIVATE KEY"):
        assert ("pem", label) in variants
    assert {s.variant for s in CORPUS if s.shape == "url-query"} == {
        "api_key",
        "apikey",
        "key",
        "access_token",
        "token",
    }
    assert {s.field for s in FIELD} == {
        "Authorization",
        "x-api-key",
        "client_secret",
        *TOOL_ARGUMENT_NAMES,
    }
    assert {s.env for s in KNOWN_ENV} == {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}


def test_every_planted_secret_stands_at_a_token_boundary():
    boundary = set(" \n\t\"'=:(,[{<>")
    for secret in CORPUS:
        for k in range(14):
            text = sentence(secret, k)
            at = text.index(secret.text)
            end = at + len(secret.text)
            assert at == 0 or text[at - 1] in boundary, (secret.label, k)
            assert end == len(text) or text[end] in boundary, (secret.label, k)
    # every placement is used by some secret
    assert {sentence(s)[: sentence(s).index(s.text)][-1:] for s in CORPUS} >= {"", *boundary}


def test_the_check_sees_a_secret_in_pieces_escaped_or_decoded(tmp_path):
    """The check itself: a secret split across deltas, a PEM line break only a decoded string
    shows, tool JSON inside a line, HTML-escaped output, all found; the placeholder is not."""
    pem = next(s for s in CORPUS if s.shape == "pem")
    key = next(s for s in CORPUS if s.shape == "openai")
    password = next(s for s in CORPUS if s.field == "password")
    path = tmp_path / "hand.jsonl"
    line_break = pem.secret.index("\n")
    secret_across_lines = pem.secret[
        line_break - 4 : line_break + 5
    ]  # 4 + newline + 4: only decoded

    rows = [
        {"type": "header", "format_version": 1},
        {
            "type": "event",
            "call_index": 0,
            "event": {"type": "text_delta", "content_index": 0, "delta": key.secret[:5]},
        },
        {
            "type": "event",
            "call_index": 0,
            "event": {"type": "text_delta", "content_index": 0, "delta": key.secret[5:10]},
        },
        {
            "type": "event",
            "call_index": 0,
            "event": {"type": "text_delta", "content_index": 1, "delta": secret_across_lines},
        },
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(AssertionError) as caught:
        assert_no_piece(CORPUS, context="self-check", path=path, calls=["hand-made"])
    message = str(caught.value)
    assert key.label in message and "joined stored deltas of block 0" in message
    assert pem.label in message  # found only once the line's JSON is decoded
    tool = json.dumps({"delta": json.dumps({"note": secret_across_lines})})  # escaped twice
    with pytest.raises(AssertionError, match=re.escape(pem.label)):
        assert_no_piece(CORPUS, context="self-check", outputs={"tool json": tool})
    with pytest.raises(AssertionError, match=re.escape(password.label)):
        assert_no_piece(
            CORPUS, context="self-check", outputs={"page": html.escape(password.secret[:9])}
        )
    terminal = secret_across_lines.replace("\n", "\\x0a")  # as the CLI's terminal_safe shows it
    with pytest.raises(AssertionError, match=re.escape(pem.label)):
        assert_no_piece(CORPUS, context="self-check", outputs={"show": terminal, "repr": "x"})
    with pytest.raises(AssertionError, match=re.escape(pem.label)):
        assert_no_piece(
            CORPUS, context="self-check", outputs={"repr": repr(secret_across_lines + "'\"")}
        )
    assert_no_piece(
        CORPUS, context="self-check", outputs={"clean": f"key [secret removed] {key.secret[:7]}"}
    )


# ============================================================================ requests


PLACES = (
    "system_prompt",
    "user_text",
    "tool_result",
    "history_tool_call",
    "headers",
    "metadata",
    "api_key",
    "session_id",
    "lane",
)


# A lane name holds no "/" (``lane_segment`` maps it), which turns a URL's "://" into ":__":
# what is left is no URL, and no rule could recognise its password. Lanes get every other shape.
LANE_SECRETS = [s for s in TEXT_SECRETS if s.shape != "url-userinfo"]


def secrets_for(place: str) -> list[Secret]:
    """What may be put in ``place``: any text secret; a field secret only in its own field."""
    if place.startswith("lane"):
        return list(LANE_SECRETS)
    fields = {
        "history_tool_call": TOOL_ARGUMENT_NAMES,
        "headers": ("Authorization", "x-api-key"),
        "metadata": ("client_secret",),
    }.get(place, ())
    return [*TEXT_SECRETS, *(s for s in FIELD if s.field in fields)]


def _renamed(name: str) -> str:
    """The same field in another spelling a client might use (still a secret name)."""
    return {
        "Authorization": "authorization",
        "x-api-key": "X-Api-Key",
        "client_secret": "clientSecret",
        "password": "Password",
        "api_key": "apiKey",
        "token": "Token",
        "secret": "Secret",
    }[name]


@dataclass
class Request:
    context: Context
    options: StreamOptions
    lane: str | None = None


def request_with(place: str, secret: Secret, *, incoming: bool = False) -> Request:
    """A request that holds ``secret`` in ``place``. ``incoming``: the request a replay makes
    instead, which differs from the recorded one in that place even once redacted (a word
    added; a secret field named in another spelling; for the key, which is never compared,
    another key and another prompt)."""
    text = sentence(secret) + (" (retry)" if incoming else "")
    context = plain_context()
    options = call_options()
    name = None if secret.field is None else (_renamed(secret.field) if incoming else secret.field)
    if place == "system_prompt":
        context = Context(system_prompt=text, messages=context.messages)
    elif place == "user_text":
        context = plain_context(text)
    elif place in ("tool_result", "history_tool_call"):
        arguments = {"query": text} if name is None else {"user": "bob", name: secret.text}
        context = Context(
            system_prompt="be brief",
            messages=[
                UserMessage(content="look it up", timestamp=1),
                AssistantMessage(
                    content=[
                        ToolCall(
                            id="call_1",
                            name="lookup",
                            arguments=arguments if place == "history_tool_call" else {"q": "x"},
                        )
                    ],
                    api=MODEL.api,
                    provider=MODEL.provider,
                    model=MODEL.id,
                    stop_reason="toolUse",
                    timestamp=2,
                ),
                ToolResultMessage(
                    tool_call_id="call_1",
                    tool_name="lookup",
                    timestamp=3,
                    content=[TextContent(text=text if place == "tool_result" else "found it")],
                ),
            ],
        )
    elif place == "headers":
        options = call_options(
            headers={"X-Request-Note": text}
            if name is None
            else {"X-Trace": "7", name: secret.text}
        )
    elif place == "metadata":
        options = call_options(
            metadata={"note": text} if name is None else {"user": "bob", name: secret.text}
        )
    elif place == "api_key":
        # Any api_key, none included, is stored and compared as the placeholder, so a replay
        # cannot differ there: the replayed request passes another key and asks another thing.
        options = StreamOptions(api_key=secret.text)
        if incoming:
            context = plain_context("go (retry)")
    elif place == "session_id":
        options = call_options(session_id=text)
    elif place == "lane":
        return Request(context, options, lane_segment(text))
    else:
        raise ValueError(place)
    return Request(context, options)


def checked_form(place: str, secret: Secret) -> Secret:
    """The secret as the place keeps it (a lane name has no ``/``)."""
    return secret.mapped(lane_segment) if place.startswith("lane") else secret


@pytest.mark.parametrize("place", PLACES)
def test_a_secret_anywhere_in_a_request_leaves_no_piece(tmp_path, place):
    secrets = secrets_for(place)
    calls = []
    for secret in secrets:
        request = request_with(place, secret)
        calls.append(
            Call(
                f"{place}: {secret.label}",
                ok_answer(),
                request.context,
                request.options,
                request.lane,
            )
        )
    path = tmp_path / "requests.jsonl"
    record_calls(path, calls)
    assert all(call.outcome is None for call in calls), [call.outcome for call in calls]
    assert_no_piece(
        [checked_form(place, s) for s in secrets],
        context=f"place {place}",
        path=path,
        calls=[c.name for c in calls],
    )


# ============================================================================ streamed output


def rotation(secrets: Iterable[Secret], turn: int) -> list[Secret]:
    """One secret of each shape (each PEM kind, each field), the ``turn``-th of its shape:
    every shape at every turn, every secret over as many turns as its shape has secrets."""
    groups: dict[tuple[str, str | None], list[Secret]] = {}
    for secret in secrets:
        groups.setdefault((secret.shape, secret.field), []).append(secret)
    return [group[turn % len(group)] for group in groups.values()]


INVALID_JSON = ("trailing_comma", "single_quotes", "raw_newline")


def _invalid(variant: str, name: str, value: str) -> str:
    quoted = value.replace('"', '\\"')
    if variant == "trailing_comma":
        return f'{{"user": "bob", "{name}": "{quoted}",}}'
    if variant == "single_quotes":
        return f"{{'user': 'bob', '{name}': '{value}'}}"
    return f'{{"user": "bob", "{name}": "{quoted}\nsecond line"}}'  # a raw line break in the string


def _tool_calls_invalid(variant: str, size: int) -> tuple[list[tuple[str, str]], list[Secret]]:
    """Every tool field secret under its name, and a quarter of the shapes (another quarter,
    and other secrets of them, at each size) in a ``query``, in arguments that are not valid
    JSON."""
    shaped = rotation(TEXT_SECRETS, size)[size % 4 :: 4]
    made = [(f"{s.label} {variant}", _invalid(variant, s.field, s.text)) for s in TOOL_FIELD]
    made += [
        (f"query {s.label} {variant}", _invalid(variant, "query", sentence(s))) for s in shaped
    ]
    return made, [*TOOL_FIELD, *shaped]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kind", ["text", "thinking", "tool"])
def test_streamed_output_leaves_no_piece_at_any_delta_size(tmp_path, kind, size):
    """Every shape at every size (the secrets of a shape take turns across the sizes), each
    shape in its own call; tool arguments also carry every field secret."""
    shaped = rotation(TEXT_SECRETS, size)
    bodies = [(f"{s.label}", sentence(s)) for s in shaped]
    secrets = list(shaped)
    if kind == "tool":
        bodies = [(name, json.dumps({"query": text})) for name, text in bodies]
        for secret in rotation((s for s in shaped if s.shape in ("bearer", "basic", "token")), 0):
            bodies.append(
                (
                    f"Authorization query {secret.label}",
                    json.dumps({"query": f"Authorization: {secret.text}"}),
                )
            )
        for secret in TOOL_FIELD:
            bodies.append((secret.label, json.dumps({"user": "bob", secret.field: secret.text})))
            bodies.append((f"{secret.label} alone", json.dumps({secret.field: secret.text})))
        secrets += TOOL_FIELD
    calls = [
        Call(f"{kind} {name}, delta size {size}", answer([(kind, body)], size))
        for name, body in bodies
    ]
    path = tmp_path / "stream.jsonl"
    record_calls(path, calls)
    assert_no_piece(
        secrets, context=f"{kind} deltas of size {size}", path=path, calls=[c.name for c in calls]
    )


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("variant", INVALID_JSON)
def test_invalid_json_tool_arguments_leave_no_piece_at_any_delta_size(tmp_path, variant, size):
    bodies, secrets = _tool_calls_invalid(variant, size)
    calls = [
        Call(f"tool {name}, delta size {size}", answer([("tool", body)], size))
        for name, body in bodies
    ]
    path = tmp_path / "invalid.jsonl"
    record_calls(path, calls)
    assert_no_piece(
        secrets,
        context=f"tool arguments as {variant} JSON, deltas of size {size}",
        path=path,
        calls=[c.name for c in calls],
    )


# ============================================================================ streams cut short


def _cut_bodies(kind: str) -> list[tuple[Secret, str, int]]:
    """(secret, body, where its secret part starts in the body) of each cut-short case."""
    made = []
    for secret in TEXT_SECRETS:
        text = sentence(secret)
        start = text.index(secret.text) + secret.text.index(secret.secret)
        if kind != "tool":
            made.append((secret, text, start))
        else:
            prefix = '{"query": ' + json.dumps(text[:start])[:-1]
            made.append((secret, prefix + json.dumps(text[start:])[1:], len(prefix)))
    if kind == "tool":
        for secret in TOOL_FIELD:
            prefix = f'{{"user": "bob", "{secret.field}": "'
            made.append(
                (
                    secret,
                    prefix + secret.text + '"}',
                    len(prefix) + secret.text.index(secret.secret),
                )
            )
    return made


def _escaped_length(text: str, kind: str) -> int:
    return len(json.dumps(text)) - 2 if kind == "tool" else len(text)


@pytest.mark.parametrize("ending", ["error_event", "provider_raises"])
@pytest.mark.parametrize("kind", ["text", "thinking", "tool"])
def test_a_stream_cut_inside_a_secret_leaves_no_piece(tmp_path, kind, ending):
    calls = []
    for number, (secret, body, start) in enumerate(_cut_bodies(kind)):
        for shown in sorted({WINDOW, len(secret.secret) // 2, len(secret.secret) - 1}):
            cut = start + _escaped_length(secret.secret[:shown], kind)
            size = 1 + (number * 3 + shown) % 16
            events = answer([(kind, body[:cut])], size, cut=True)
            name = f"{kind} cut after {shown} of {len(secret.secret)} secret characters ({secret.label}), delta size {size}, {ending}"
            if ending == "error_event":
                calls.append(Call(name, events))
            else:  # the provider raises right after the last delta, instead of the error event
                calls.append(
                    Call(
                        name,
                        events[:-1],
                        raise_after=len(events) - 1,
                        error=ConnectionResetError("reset"),
                    )
                )
    path = tmp_path / "cut.jsonl"
    record_calls(path, calls)
    if ending == "provider_raises":
        assert all(isinstance(call.outcome, ConnectionResetError) for call in calls)
    secrets = [*TEXT_SECRETS, *(TOOL_FIELD if kind == "tool" else ())]
    assert_no_piece(
        secrets,
        context=f"{kind} stream cut short ({ending})",
        path=path,
        calls=[c.name for c in calls],
    )


# ============================================================================ replay mismatch


MISMATCH_PLACES = (*PLACES, "lane_unchanged")


def _partner(secret: Secret) -> Secret:
    """Another secret of the same shape (the next one), for the replayed request."""
    group = [s for s in CORPUS if s.shape == secret.shape and s.field == secret.field]
    return group[(group.index(secret) + 1) % len(group)]


@pytest.mark.parametrize("place", MISMATCH_PLACES)
def test_a_replay_mismatch_message_leaves_no_piece(tmp_path, monkeypatch, place):
    """Record a request holding a secret; replay (through ``use_recording`` and the stream
    facade, as a test would, in a process that knows only its own keys) a request that
    differs in the place holding it, holding another secret of the shape there; neither may
    show in the mismatch. ``lane_unchanged``: the same lane, another prompt."""
    where = "lane" if place == "lane_unchanged" else place
    outputs: dict[str, str] = {}
    secrets: list[Secret] = []
    missing = []
    for number, secret in enumerate(secrets_for(where)):
        other = _partner(secret)
        recorded = request_with(where, secret)
        if place == "lane_unchanged":
            incoming = Request(plain_context("go (retry)"), recorded.options, recorded.lane)
        else:
            incoming = request_with(where, other, incoming=True)
        path = tmp_path / f"{number}.jsonl"
        record_calls(
            path, [Call(place, ok_answer(), recorded.context, recorded.options, recorded.lane)]
        )
        forget_noted_keys(
            monkeypatch
        )  # a new process: only the keys the replay itself passes are known
        try:
            with (
                use_recording(path, "replay"),
                lane(incoming.lane) if incoming.lane else nullcontext(),
            ):
                asyncio.run(collect(facade_stream(MODEL, incoming.context, incoming.options)))
        except ReplayMismatch as error:
            name = f"ReplayMismatch of {place} recorded with {secret.label}, replayed with {other.label}"
            outputs[f"str() of the {name}"] = str(error)
            outputs[f"recorded/incoming of the {name}"] = f"{error.recorded!r} {error.incoming!r}"
        else:
            missing.append(secret.label)
        secrets += [checked_form(place, secret), checked_form(place, other)]
    assert not missing, f"replay matched although the request differs in {place}: {missing}"
    assert_no_piece(secrets, context=f"replay mismatch in {place}", outputs=outputs)


# ============================================================================ every view


def _everything_calls() -> list[Call]:
    """Calls with secrets in every request place, streamed outputs of every kind, and streams
    cut short inside a secret: everything but lanes (which have their own file)."""
    calls = []
    for number, secret in enumerate(TEXT_SECRETS):
        text = sentence(secret)
        size = 5 + number % 12  # every size is the streaming tests' business
        request = Context(
            system_prompt=text,
            messages=[
                UserMessage(content=text, timestamp=1),
                AssistantMessage(
                    content=[ToolCall(id="call_1", name="lookup", arguments={"query": text})],
                    api=MODEL.api,
                    provider=MODEL.provider,
                    model=MODEL.id,
                    stop_reason="toolUse",
                    timestamp=2,
                ),
                ToolResultMessage(
                    tool_call_id="call_1",
                    tool_name="lookup",
                    content=[TextContent(text=text)],
                    timestamp=3,
                ),
            ],
        )
        options = call_options(
            headers={"X-Request-Note": text}, metadata={"note": text}, session_id=text
        )
        blocks = [("thinking", text), ("text", text), ("tool", json.dumps({"query": text}))]
        calls.append(
            Call(f"everywhere: {secret.label}, size {size}", answer(blocks, size), request, options)
        )
        cut = text.index(secret.secret) + len(secret.secret) // 2
        calls.append(
            Call(f"cut short: {secret.label}", answer([("text", text[:cut])], size, cut=True))
        )
    for number, secret in enumerate(FIELD):
        size = 5 + number % 12
        name = secret.field
        options = call_options(
            headers={name: secret.text} if name in ("Authorization", "x-api-key") else None,
            metadata={name: secret.text} if name == "client_secret" else None,
        )
        arguments = json.dumps({"user": "bob", name: secret.text})
        history = Context(
            system_prompt="be brief",
            messages=[
                UserMessage(content="log in", timestamp=1),
                AssistantMessage(
                    content=[
                        ToolCall(
                            id="call_1", name="login", arguments={"user": "bob", name: secret.text}
                        )
                    ],
                    api=MODEL.api,
                    provider=MODEL.provider,
                    model=MODEL.id,
                    stop_reason="toolUse",
                    timestamp=2,
                ),
            ],
        )
        calls.append(
            Call(f"field {secret.label}", answer([("tool", arguments)], size), history, options)
        )
    return calls


def _lane_calls() -> list[Call]:
    return [
        Call(f"lane {s.label}", ok_answer(), lane=lane_segment(sentence(s))) for s in LANE_SECRETS
    ]


VIEW_FILES = {
    "everything": (_everything_calls, lambda: [*TEXT_SECRETS, *FIELD]),
    "lanes": (_lane_calls, lambda: [checked_form("lane", s) for s in LANE_SECRETS]),
}


@pytest.fixture(scope="module")
def view_files(tmp_path_factory) -> dict[str, tuple[Path, list[str], list[Secret]]]:
    """The recordings every view is run on, recorded once for the module."""
    folder = tmp_path_factory.mktemp("views")
    made = {}
    with pytest.MonkeyPatch.context() as patch:
        forget_noted_keys(patch)
        for secret in KNOWN_ENV:
            patch.setenv(secret.env, secret.text)
        for name, (calls_of, secrets_of) in VIEW_FILES.items():
            calls = calls_of()
            path = folder / f"{name}.jsonl"
            record_calls(path, calls)
            made[name] = (path, [c.name for c in calls], secrets_of())
    return made


VIEWS = {
    "show": ["show"],
    "show --json": ["show", "--json"],
    "show --conversation": ["show", "--conversation"],
    "show --content": ["show", "--content"],
    "show --json --content": ["show", "--json", "--content"],
    "view": ["view"],
}


_VIEW_SCRIPT = """
import contextlib, io, json, sys, traceback
from pathlib import Path
from openprogram.cli.main import main
path, views = sys.argv[1], json.loads(sys.argv[2])
report = {}
for name, args in views.items():
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["recordings", *args, path])
    except BaseException:
        code, err = "raised", io.StringIO(traceback.format_exc())
    report[name] = {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}
    if args == ["view"] and code == 0:
        page = Path(out.getvalue().strip().splitlines()[-1])
        report[name]["page"] = [str(page), page.read_text()]
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def view_outputs(view_files, tmp_path_factory) -> dict[str, dict[str, dict[str, Any]]]:
    """Every view of each recording, as ``openprogram recordings VIEW FILE`` prints it: run in
    one fresh process per recording (one that knows no key: its environment has none, as
    ``tests/cli/test_recordings_cli.py`` runs the CLI) calling ``openprogram.cli.main.main``."""
    home = tmp_path_factory.mktemp("view-home")
    outputs = {}
    for name, (path, _, _) in view_files.items():
        result = subprocess.run(
            [PYTHON, "-c", _VIEW_SCRIPT, str(path), json.dumps(VIEWS)],
            env=cli_env(home),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        outputs[name] = json.loads(result.stdout.strip().splitlines()[-1])
    return outputs


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("recording", VIEW_FILES)
def test_every_view_of_a_recording_leaves_no_piece(view_files, view_outputs, recording, view):
    path, _, secrets = view_files[recording]
    shown = view_outputs[recording][view]
    assert shown["code"] == 0, shown["stderr"]
    assert "Traceback" not in shown["stderr"], shown["stderr"]
    outputs = {
        f"stdout of `recordings {view}`": shown["stdout"],
        f"stderr of `recordings {view}`": shown["stderr"],
    }
    if "page" in shown:
        page, text = shown["page"]
        assert (
            page.endswith(".html") and Path(page).parent.name == "reports"
        )  # the profile's reports, never beside the recording
        assert Path(page).parent != path.parent
        outputs[f"the HTML page `recordings view` wrote ({Path(page).name})"] = text
    assert_no_piece(
        secrets, context=f"`recordings {view}` of the {recording} recording", outputs=outputs
    )


@pytest.mark.parametrize("recording", VIEW_FILES)
def test_the_recordings_the_views_show_leave_no_piece(view_files, recording):
    path, calls, secrets = view_files[recording]
    assert_no_piece(secrets, context=f"the {recording} recording itself", path=path, calls=calls)
