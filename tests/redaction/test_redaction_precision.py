"""Redaction precision: recording must never change a string that is not a secret.

Replay serves what the file holds, so a rule that fires on a non-secret ("ta[secret removed]"
for the branch ``task-1234-fix-login-redirect``, a cursor in a ``next_page_token`` argument,
a few bytes of an encrypted-reasoning blob) silently changes what the replayed program sees.
Each test records one family of :mod:`tests.redaction.precision_corpus` through the real recorder in one
place that model output (or a request) can hold it, replays the file, and requires **0 changed
bytes**: every served event's ``model_dump(mode="json")`` equals the live event's, in every
call, and a request's stored payloads equal the raw ones.

In model output only the exact secret field names (``token``, ``password``, ``api_key`` ...)
name secrets: the suffix forms used here (``next_page_token``, ``cursor_token``,
``csrf_token``, ``page_token``) do not.

Where the strings go (see ``share``):

* every string in a request: user text and images, an earlier assistant turn's text,
  signatures, tool call and server tool, a tool result's text, images and details;
* one string in three of each family streamed as deltas, in turn as text, thinking, and
  tool-call arguments that join to valid JSON or to invalid JSON (trailing comma, single
  quotes, raw line break), delta sizes cycling through 1..16 block by block; and the
  shortest blobs, one per block;
* another one in three set whole: text signatures, thinking signatures and server-tool
  payloads; every blob goes whole into one of them (half into thinking signatures, where
  encrypted reasoning goes), half the images into a code-execution result.

A failure names each changed string: its family, the string (cut to 80 characters), the
place, the delta size, where in the message, the first differing position and what was stored
there. Calls group many strings (several blocks each) so the module stays fast; no timing is
asserted.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from openprogram.providers import credentials
from openprogram.providers.assembly import AssistantStreamAssembler
from openprogram.providers.recording import RecordingProvider
from openprogram.providers.replay import ReplayProvider, read_recording_file
from openprogram.providers.types import (
    ANSWER_ONLY_FIELDS,
    AssistantMessage,
    Context,
    ImageContent,
    ServerToolContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from openprogram.recordings import redaction
from openprogram.recordings.text_diff import common_prefix_length
from tests.record_replay.test_recording_support import MODEL, ScriptedProvider, collect, context_of

from . import precision_corpus
from .precision_corpus import BLOB_FAMILIES, FAMILIES

STRING_FAMILIES = [name for name in FAMILIES if name not in BLOB_FAMILIES]
DELTA_SIZES = range(1, 17)
STREAMED_PLACES = ("text", "thinking", "arguments", "invalid_arguments")
SET_PLACES = ("text_signature", "thinking_signature", "server_tool")
#: The field names of streamed tool-call arguments (the ``_token`` suffix forms are not secret
#: names in model output); a block's further strings go in the list ``items``.
ARGUMENT_FIELDS = (
    "next_page_token",
    "cursor_token",
    "csrf_token",
    "branch",
    "page_token",
    "query",
    "url",
)
LIST_FIELD = "items"
#: Strings per streamed block, at most.
BLOCK_STRINGS = {
    "text": 12,
    "thinking": 12,
    "arguments": len(ARGUMENT_FIELDS) + 3,
    "invalid_arguments": 2,
}
#: Characters of a streamed block per unit of its delta size, at most (so that every size
#: streams about as many deltas), and of a call: every event carries a snapshot of the message
#: so far, so a call costs its events times its size.
BLOCK_CHARACTERS = 16
CALL_CHARACTERS = 800
#: Blocks per call of the places set whole (blobs: 3).
SET_BLOCKS_PER_CALL = {"text_signature": 8, "thinking_signature": 8, "server_tool": 4}
#: Results per packed server-tool block (Anthropic ``web_search_tool_result``).
RESULTS_PER_BLOCK = 8
#: How many of the shortest blobs stream, by place, and the delta sizes they cycle through.
STREAMED_BLOBS = {
    "text": (16, range(1, 17)),
    "thinking": (8, range(9, 17)),
    "arguments": (8, range(9, 17)),
    "invalid_arguments": (4, range(13, 17)),
}


# ============================================================================ environment


@pytest.fixture(autouse=True)
def no_known_values(monkeypatch):
    """No known secret value takes part: only the shape and field-name rules are tested.
    Environment variables with secret names are removed and the keys this process has seen
    are forgotten, for the test only."""
    for name in list(os.environ):
        if redaction.is_secret_field_name(name):
            monkeypatch.delenv(name, raising=False)
    for names in credentials.PROVIDER_ENV_VARS.values():
        for name in names:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(credentials, "_seen_keys", set())


# ============================================================================ which strings go where


def _shortest_blobs() -> list[str]:
    blobs = precision_corpus.family("urlsafe_blobs")
    return sorted(blobs, key=len)[: sum(count for count, _ in STREAMED_BLOBS.values())]


def share(place: str, family: str) -> list[str]:
    """The strings of ``family`` that go in model-output ``place``, in corpus order."""
    strings = precision_corpus.family(family)
    if family == "base64_images":
        return strings[::2] if place == "server_tool" else []
    if family == "urlsafe_blobs":
        if place in STREAMED_PLACES:
            start = 0
            for name in STREAMED_PLACES:
                count = STREAMED_BLOBS[name][0]
                if name == place:
                    return _shortest_blobs()[start : start + count]
                start += count
        turn = {"text_signature": (0,), "thinking_signature": (1, 2), "server_tool": (3,)}[place]
        return [s for i, s in enumerate(strings) if i % 4 in turn]
    if place in STREAMED_PLACES:
        # One string in three streams, in turn as text, thinking, arguments and invalid ones.
        turn = STREAMED_PLACES.index(place)
        return [s for i, s in enumerate(strings) if i % 3 == 0 and (i // 3) % 4 == turn]
    # One in three is set whole: 1 in 8 of them as a text signature, 1 as a thinking one, the
    # rest in server tools. (The third third is in requests only, like every string.)
    turn = {"text_signature": (0,), "thinking_signature": (1,), "server_tool": (2, 3, 4, 5, 6, 7)}[
        place
    ]
    return [s for i, s in enumerate(strings) if i % 3 == 1 and (i // 3) % 8 in turn]


@dataclass(frozen=True)
class Block:
    """One content block of a planned answer: its strings, and the delta size they stream in
    (None: set whole)."""

    place: str
    family: str
    strings: tuple[str, ...]
    size: int | None
    number: int  # of the block in its family and place: picks a style


def plan(place: str, family: str) -> list[list[Block]]:
    """The calls (each a list of blocks) that put ``share(place, family)`` in ``place``."""
    strings = share(place, family)
    calls: list[list[Block]] = []
    blocks: list[Block] = []
    if place in STREAMED_PLACES:
        blob = family in BLOB_FAMILIES
        cycle = STREAMED_BLOBS[place][1] if blob else DELTA_SIZES
        sizes = itertools.cycle(cycle)
        # A small share still cycles through every size twice: smaller blocks.
        unit = max(1, min(BLOCK_CHARACTERS, sum(map(len, strings)) // (2 * sum(cycle))))
        start = weight = 0
        while start < len(strings):
            size = next(sizes)
            group: list[str] = []
            length = 0
            while start < len(strings) and len(group) < (1 if blob else BLOCK_STRINGS[place]):
                if group and length + len(strings[start]) > unit * size:
                    break
                group.append(strings[start])
                length += len(strings[start])
                start += 1
            blocks.append(
                Block(place, family, tuple(group), size, len(blocks) + sum(map(len, calls)))
            )
            weight += length
            if blob or weight >= CALL_CHARACTERS:
                calls.append(blocks)
                blocks, weight = [], 0
    else:
        per_block = (
            RESULTS_PER_BLOCK if place == "server_tool" and family not in BLOB_FAMILIES else 1
        )
        per_call = 3 if family in BLOB_FAMILIES else SET_BLOCKS_PER_CALL[place]
        start = 0
        while start < len(strings):
            # Every third server-tool block is an OpenAI web_search_call: one string in it.
            count = 1 if len(blocks) % 3 == 0 else per_block
            blocks.append(
                Block(
                    place,
                    family,
                    tuple(strings[start : start + count]),
                    None,
                    len(blocks) + 3 * len(calls),
                )
            )
            start += count
            if len(blocks) >= per_call:
                calls.append(blocks)
                blocks = []
    if blocks:
        calls.append(blocks)
    return calls


# ============================================================================ where a string is


@dataclass(frozen=True)
class Slot:
    """Where one corpus string was put: ``path`` leads to a string in the dump of the call's
    final message (model output) or of its request context, and ``line`` picks one line of it
    (the strings of a text block are joined with "\\n"). For arguments that are not valid JSON,
    ``span`` locates the string's ``body`` (its text as streamed) in the joined deltas of
    content block ``path[1]`` instead."""

    family: str
    string: str
    place: str
    size: int | None
    call: int
    path: tuple[Any, ...]
    line: int | None = None
    span: tuple[int, int] | None = None
    body: str | None = None


def _walk(root: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        try:
            root = root[step]
        except (KeyError, IndexError, TypeError):
            return None
    return root


def _found(root: Any, slot: Slot) -> Any:
    value = _walk(root, slot.path)
    if slot.line is not None and isinstance(value, str):
        lines = value.split("\n")
        return lines[slot.line] if slot.line < len(lines) else None
    return value


_prefix = common_prefix_length


def _suffix(a: str, b: str, limit: int) -> int:
    return _prefix(a[::-1][:limit], b[::-1][:limit])


def _cut(text: Any, limit: int = 80) -> str:
    text = repr(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class Change:
    slot: Slot
    position: int
    stored: Any

    def describe(self) -> str:
        slot = self.slot
        size = f"delta size {slot.size}" if slot.size is not None else "set whole"
        stored = self.stored
        if isinstance(stored, str):
            start = max(0, self.position - 20)
            stored = ("..." if start else "") + stored[start : self.position + 60]
        where = "/".join(map(str, slot.path)) + (
            f" line {slot.line}" if slot.line is not None else ""
        )
        return (
            f"[{slot.family}] {_cut(slot.string)} in {slot.place} ({size}; call {slot.call}, {where}): "
            f"first difference at position {self.position}, stored {_cut(stored, 110)}"
        )


def _change(slot: Slot, stored: Any, expected: str | None = None) -> Change | None:
    expected = slot.string if expected is None else expected
    if stored == expected:
        return None
    position = _prefix(expected, stored) if isinstance(stored, str) else 0
    return Change(slot, position, stored)


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    """Where two dumps first differ, with both values there."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            if a.get(key, KeyError) != b.get(key, KeyError):
                return _first_difference(a.get(key), b.get(key), f"{path}.{key}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{path}[{index}]")
    elif isinstance(a, str) and isinstance(b, str):
        position = _prefix(a, b)
        return f"{path or '.'} position {position}: live {_cut(a[position:])}, replayed {_cut(b[position:])}"
    return f"{path or '.'}: live {_cut(a)}, replayed {_cut(b)}"


def _report(title: str, changes: list[Change], strings: int, other: list[str]) -> str:
    lines = [f"{title}: {len(changes)} of {strings} strings changed by recording and replay"]
    counts = Counter(change.slot.place for change in changes)
    lines += [f"  {count} in {place}" for place, count in sorted(counts.items())]
    shown: Counter[str] = Counter()
    for change in changes:
        if shown[change.slot.place] < 8:
            shown[change.slot.place] += 1
            lines.append("  " + change.describe())
    if other:
        lines.append(f"  events that differ ({len(other)} calls):")
        lines += ["    " + line for line in other[:6]]
    return "\n".join(lines)


# ============================================================================ model output


class CallBuilder:
    """The well-formed events of one answer, block by block, and the slots of its strings."""

    def __init__(self, call: int) -> None:
        self.call = call
        self.assembler = AssistantStreamAssembler(MODEL, timestamp=5)
        self.events: list[Any] = [self.assembler.start()]
        self.slots: list[Slot] = []

    def add(self, block: Block) -> None:
        getattr(self, block.place)(block)

    def _slot(self, block: Block, string: str, path: tuple[Any, ...], **where: Any) -> None:
        self.slots.append(
            Slot(block.family, string, block.place, block.size, self.call, path, **where)
        )

    def _stream(self, append: Callable[[int, str], Any], index: int, body: str, size: int) -> None:
        self.events.extend(append(index, body[i : i + size]) for i in range(0, len(body), size))

    # ------------------------------------------------------------------ streamed

    def _lines(self, block: Block, kind: str) -> None:
        assembler = self.assembler
        if kind == "text":
            index, event = assembler.begin_text()
            append, end = assembler.append_text, assembler.end_text
        else:
            index, event = assembler.begin_thinking()
            append, end = assembler.append_thinking, assembler.end_thinking
        self.events.append(event)
        self._stream(append, index, "\n".join(block.strings), block.size)
        self.events.append(end(index))
        for line, string in enumerate(block.strings):
            self._slot(block, string, ("content", index, kind), line=line)

    def text(self, block: Block) -> None:
        self._lines(block, "text")

    def thinking(self, block: Block) -> None:
        self._lines(block, "thinking")

    def _tool(self, body: str, size: int) -> int:
        assembler = self.assembler
        index, event = assembler.begin_tool_call(f"call_{self.call}_{len(self.events)}", "search")
        self.events.append(event)
        self._stream(assembler.append_tool_arguments, index, body, size)
        self.events.append(assembler.end_tool_call(index))
        return index

    def arguments(self, block: Block) -> None:
        """A tool call whose deltas join to valid JSON: compact, spaced, or indented."""
        keyed = dict(zip(ARGUMENT_FIELDS, block.strings, strict=False))
        rest = list(block.strings[len(keyed) :])
        value: dict[str, Any] = dict(keyed)
        if rest:
            value[LIST_FIELD] = rest
        style = block.number % 3
        if style == 0:
            body = json.dumps(value, separators=(",", ":"))
        elif style == 1:
            body = json.dumps(value)  # ", " and ": ", ASCII escapes
        else:
            body = json.dumps(value, ensure_ascii=False, indent=1)
        index = self._tool(body, block.size)
        for key, string in keyed.items():
            self._slot(block, string, ("content", index, "arguments", key))
        for number, string in enumerate(rest):
            self._slot(block, string, ("content", index, "arguments", LIST_FIELD, number))

    def invalid_arguments(self, block: Block) -> None:
        """A tool call whose deltas join to invalid JSON: a trailing comma, single quotes, or a
        raw line break inside a string."""
        escaped = lambda s: json.dumps(s, ensure_ascii=False)[1:-1]  # noqa: E731
        kind = ("trailing comma", "single quotes", "raw line break")[block.number % 3]
        parts: list[tuple[str, str | None]] = [("{", None)]  # (text, the corpus string it holds)
        names = itertools.cycle(ARGUMENT_FIELDS)
        for number, string in enumerate(block.strings):
            if kind == "trailing comma":
                parts += [(f'"{next(names)}": "', None), (escaped(string), string), ('",', None)]
            elif kind == "single quotes":
                parts += [
                    (", " if number else "", None),
                    (f"'{next(names)}': '", None),
                    (string, string),
                    ("'", None),
                ]
            else:
                parts += [('"note": "' if number == 0 else "\n", None), (escaped(string), string)]
        parts.append(('", "page": 2}' if kind == "raw line break" else "}", None))
        body = ""
        spans = []
        for text, string in parts:
            if string is not None:
                spans.append((string, text, (len(body), len(body) + len(text))))
            body += text
        index = self._tool(body, block.size)
        self.slots += [
            Slot(
                block.family,
                string,
                f"invalid_arguments ({kind})",
                block.size,
                self.call,
                ("deltas", index),
                span=span,
                body=text,
            )
            for string, text, span in spans
        ]

    # ------------------------------------------------------------------ set whole

    def text_signature(self, block: Block) -> None:
        (string,) = block.strings
        assembler = self.assembler
        index, event = assembler.begin_text()
        self.events += [event, assembler.append_text(index, "Here is the answer.")]
        assembler.set_text_signature(index, string)
        self.events.append(assembler.end_text(index))
        self._slot(block, string, ("content", index, "text_signature"))

    def thinking_signature(self, block: Block) -> None:
        (string,) = block.strings
        assembler = self.assembler
        index, event = assembler.begin_thinking()
        self.events += [event, assembler.append_thinking(index, "Reasoning about the request.")]
        assembler.set_thinking_signature(index, string)
        self.events.append(assembler.end_thinking(index))
        self._slot(block, string, ("content", index, "thinking_signature"))

    def server_tool(self, block: Block) -> None:
        """Blobs, images and cursors go where opaque values go (``encrypted_content``, an
        image's ``data``), URLs in a URL field, the rest in a query or a title. A one-string
        block is an OpenAI ``web_search_call``; a longer one an Anthropic
        ``web_search_tool_result`` with a result per string."""
        family = block.family
        opaque = family in ("urlsafe_blobs", "page_tokens")
        index = self.assembler.content_count
        if family == "base64_images":
            (string,) = block.strings
            payload: dict[str, Any] = {
                "type": "code_execution_tool_result",
                "tool_use_id": f"srvtoolu_{self.call:04d}{block.number:06d}",
                "content": {
                    "type": "code_execution_result",
                    "return_code": 0,
                    "stdout": "",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": string},
                        }
                    ],
                },
            }
            server = ServerToolContent(
                vendor="anthropic",
                api="anthropic-messages",
                kind="code_execution_tool_result",
                payload=payload,
            )
            self._slot(
                block,
                string,
                ("content", index, "payload", "content", "content", 0, "source", "data"),
            )
        elif len(block.strings) == 1:
            (string,) = block.strings
            payload = {
                "type": "web_search_call",
                "id": f"ws_{block.number:08x}{self.call:06x}",
                "status": "completed",
                "encrypted_content": "gAAAAABoAAAA",
                "action": {
                    "type": "search",
                    "query": "weather today",
                    "sources": [{"type": "url", "url": "https://example.com/"}],
                },
            }
            if opaque:
                payload["encrypted_content"], path = string, ("payload", "encrypted_content")
            elif family == "urls":
                payload["action"]["sources"][0]["url"], path = (
                    string,
                    ("payload", "action", "sources", 0, "url"),
                )
            else:
                payload["action"]["query"], path = string, ("payload", "action", "query")
            server = ServerToolContent(
                vendor="openai",
                api="openai-responses",
                kind="web_search_call",
                payload=payload,
                text="Searched the web.",
            )
            self._slot(block, string, ("content", index, *path))
        else:
            field = "encrypted_content" if opaque else "url" if family == "urls" else "title"
            results = []
            for number, string in enumerate(block.strings):
                result = {
                    "type": "web_search_result",
                    "title": "Result",
                    "url": f"https://example.com/{number}",
                    "encrypted_content": "EqgfCioIARgBIiQ",
                    "page_age": "2 days ago",
                }
                result[field] = string
                results.append(result)
                self._slot(block, string, ("content", index, "payload", "content", number, field))
            payload = {
                "type": "web_search_tool_result",
                "tool_use_id": f"srvtoolu_{self.call:04d}{block.number:06d}",
                "content": results,
            }
            server = ServerToolContent(
                vendor="anthropic",
                api="anthropic-messages",
                kind="web_search_tool_result",
                payload=payload,
                text=f"{len(results)} results",
            )
        self.assembler.add_server_tool(server)
        # The block shows in the next snapshot: a short text block follows it.
        begin, event = self.assembler.begin_text()
        self.events += [
            event,
            self.assembler.append_text(begin, "Found it."),
            self.assembler.end_text(begin),
        ]

    def finish(self) -> tuple[list[Any], list[Slot]]:
        self.events.extend(self.assembler.finish())
        return self.events, self.slots


def output_calls(place: str, family: str) -> list[tuple[list[Any], list[Slot]]]:
    """The events and slots of each planned call."""
    calls = []
    for number, blocks in enumerate(plan(place, family)):
        builder = CallBuilder(number)
        for block in blocks:
            builder.add(block)
        calls.append(builder.finish())
    return calls


class _Calls:
    """A provider answering each call with the next script's events."""

    requires_credentials = True

    def __init__(self, scripts: list[list[Any]]) -> None:
        self.scripts = iter(scripts)

    def stream(self, model, context, options=None):
        return ScriptedProvider(next(self.scripts)).stream(model, context, options)

    stream_simple = stream


async def _record(path: Path, contexts: list[Context], scripts: list[list[Any]]) -> list[list[Any]]:
    recorder = RecordingProvider(_Calls(scripts), path)
    try:
        return [await collect(recorder.stream(MODEL, context)) for context in contexts]
    finally:
        recorder.sink.close()


async def _replay(path: Path, contexts: list[Context]) -> list[list[Any]]:
    replayer = ReplayProvider(path)
    served = [await collect(replayer.stream(MODEL, context)) for context in contexts]
    replayer.assert_consumed()
    return served


def _joined_deltas(dumps: list[dict[str, Any]]) -> dict[int, str]:
    joined: dict[int, list[str]] = defaultdict(list)
    for dump in dumps:
        if "delta" in dump:
            joined[dump["content_index"]].append(dump["delta"])
    return {index: "".join(parts) for index, parts in joined.items()}


def _final(dumps: list[dict[str, Any]]) -> dict[str, Any]:
    last = dumps[-1] if dumps else {}
    return last.get("message") or last.get("error") or {}


def _span_changes(
    slots: list[Slot], live: dict[int, str], replayed: dict[int, str]
) -> list[Change]:
    """The strings, located by their span in a block's joined deltas, whose text as streamed
    is no longer in the block's replayed deltas (rewritten deltas that still hold it, moved,
    show as events that differ). The first difference is at the longest prefix of the text
    that is still there, nearest to where the text was."""
    changes: list[Change] = []
    for slot in slots:
        raw, got = live.get(slot.path[1], ""), replayed.get(slot.path[1], "")
        body = slot.body or ""
        if raw == got or body in got:
            continue
        low, high = 0, len(body)
        while low < high:
            middle = (low + high + 1) // 2
            if body[:middle] in got:
                low = middle
            else:
                high = middle - 1
        at, nearest = -1, -1
        while low:
            at = got.find(body[:low], at + 1)
            if at < 0:
                break
            if nearest < 0 or abs(at - slot.span[0]) < abs(nearest - slot.span[0]):
                nearest = at
        start = max(nearest, 0) if low else slot.span[0]
        changes.append(Change(slot, low, got[start : start + len(body) + 20]))
    return changes


def _compare_call(
    call: int,
    live: list[Any],
    replayed: list[Any],
    slots: list[Slot],
    changes: list[Change],
    other: list[str],
) -> None:
    """Compare the dumps of a call's live and replayed events; on a difference, note each
    corpus string the replayed answer changed and where the events first differ."""
    live_dumps = [event.model_dump(mode="json") for event in live]
    replayed_dumps = [event.model_dump(mode="json") for event in replayed]
    live_final = _final(live_dumps)
    live_deltas = _joined_deltas(live_dumps) if any(slot.span for slot in slots) else {}
    for slot in slots:  # the test's own bookkeeping: every string is where it was put
        here = (
            live_deltas.get(slot.path[1], "")[slot.span[0] : slot.span[1]]
            if slot.span
            else _found(live_final, slot)
        )
        assert here == (slot.body if slot.span else slot.string), (
            f"test bug: {slot} not at its place"
        )
    if live_dumps == replayed_dumps:
        return
    replayed_final = _final(replayed_dumps)
    found = len(changes)
    for slot in slots:
        if slot.span is None:
            change = _change(slot, _found(replayed_final, slot))
            if change is not None:
                changes.append(change)
    changes += _span_changes(
        [slot for slot in slots if slot.span], live_deltas, _joined_deltas(replayed_dumps)
    )
    if len(live_dumps) != len(replayed_dumps):
        other.append(f"call {call}: {len(live_dumps)} live events, {len(replayed_dumps)} replayed")
    differing = [
        i for i, (a, b) in enumerate(zip(live_dumps, replayed_dumps, strict=False)) if a != b
    ]
    if differing:
        i = differing[0]
        note = (
            ""
            if len(changes) > found
            else " (every corpus string is intact: deltas or snapshots changed around them)"
        )
        other.append(
            f"call {call}: {len(differing)} of {len(live_dumps)} events differ{note}; the first is event {i} "
            f"({live_dumps[i]['type']}): {_first_difference(live_dumps[i], replayed_dumps[i])}"
        )


def _check_output(tmp_path: Path, place: str, family: str) -> None:
    calls = output_calls(place, family)
    assert calls, (place, family)
    contexts = [context_of(f"request {number}") for number in range(len(calls))]
    path = tmp_path / f"{place}-{family}.jsonl"
    live = asyncio.run(_record(path, contexts, [events for events, _ in calls]))
    replayed = asyncio.run(_replay(path, contexts))
    assert len(replayed) == len(live) == len(calls)
    changes: list[Change] = []
    other: list[str] = []
    for number, ((events, slots), live_events, replayed_events) in enumerate(
        zip(calls, live, replayed, strict=True)
    ):
        assert len(live_events) == len(events), "the consumer gets every scripted event"
        _compare_call(number, live_events, replayed_events, slots, changes, other)
    strings = sum(len(slots) for _, slots in calls)
    assert not changes and not other, _report(f"{family} in {place}", changes, strings, other)


@pytest.mark.parametrize("family", [*STRING_FAMILIES, "urlsafe_blobs"])
@pytest.mark.parametrize("place", STREAMED_PLACES)
def test_streamed_strings_replay_unchanged(tmp_path, place, family):
    """Text, thinking and tool-call argument deltas (valid and invalid JSON), delta sizes
    1..16; the blobs that stream are the shortest ones, one per block."""
    _check_output(tmp_path, place, family)


@pytest.mark.parametrize(
    ("place", "family"),
    [(place, family) for place in SET_PLACES for family in FAMILIES if share(place, family)],
)
def test_signatures_and_server_tools_replay_unchanged(tmp_path, place, family):
    """Values set whole: text and thinking signatures (encrypted reasoning is a 4-16 KB blob),
    and the payloads of vendor-run tools (opaque ``encrypted_content``, URLs, queries, titles,
    a code-execution image)."""
    _check_output(tmp_path, place, family)


# ============================================================================ requests


REQUEST_PLACES = {
    # where the strings of a family go in a request, in turn
    "strings": (
        "system_prompt",
        "user_text",
        "tool_result_text",
        "details",
        "assistant_text",
        "tool_arguments",
        "text_signature",
        "thinking_signature",
        "server_tool_query",
    ),
    "urlsafe_blobs": (
        "thinking_signature",
        "text_signature",
        "server_tool_encrypted",
        "tool_result_text",
    ),
    "base64_images": ("user_image", "tool_result_image"),
}


def request_contexts(family: str) -> list[tuple[Context, list[Slot]]]:
    """Contexts whose messages hold every string of ``family`` (a user turn with text and
    images, an earlier assistant turn with signatures, a tool call and a server tool, a tool
    result with text, images and details), with the slots of the strings in the context dump."""
    strings = precision_corpus.family(family)
    places = REQUEST_PLACES.get(family, REQUEST_PLACES["strings"])
    per_call = 10 if family in BLOB_FAMILIES else 40
    built = []
    for call, start in enumerate(range(0, len(strings), per_call)):
        group = strings[start : start + per_call]
        lines: dict[str, list[str]] = defaultdict(list)
        user: list[Any] = []
        assistant: list[Any] = []
        result: list[Any] = []
        details: list[str] = []
        arguments: dict[str, str] = {}
        slots: list[Slot] = []

        def slot(
            s: str,
            path: tuple[Any, ...],
            line: int | None = None,
            where: str = "",
            *,
            call=call,
            slots=slots,
        ) -> None:
            slots.append(Slot(family, s, f"request {where}", None, call, path, line))

        for number, s in enumerate(group):
            where = places[number % len(places)]
            if where in ("system_prompt", "user_text", "tool_result_text", "assistant_text"):
                lines[where].append(s)
            elif where == "details":
                details.append(s)
            elif where == "tool_arguments":
                arguments[
                    ("cursor", "branch", "query", "url", "page", "ref")[len(arguments) % 6]
                    + str(len(arguments))
                ] = s
            elif where == "text_signature":
                assistant.append(
                    (
                        TextContent(text="Earlier answer.", text_signature=s),
                        s,
                        ("text_signature",),
                        where,
                    )
                )
            elif where == "thinking_signature":
                assistant.append(
                    (
                        ThinkingContent(thinking="Earlier reasoning.", thinking_signature=s),
                        s,
                        ("thinking_signature",),
                        where,
                    )
                )
            elif where in ("server_tool_query", "server_tool_encrypted"):
                payload = {
                    "type": "web_search_call",
                    "id": f"ws_{call:04x}{number:04x}",
                    "status": "completed",
                    "encrypted_content": "gAAAAABo" + "y" * 20,
                    "action": {"type": "search", "query": "news"},
                }
                path = ("payload", "action", "query")
                if where == "server_tool_encrypted":
                    payload["encrypted_content"], path = s, ("payload", "encrypted_content")
                else:
                    payload["action"]["query"] = s
                block = ServerToolContent(
                    vendor="openai", api="openai-responses", kind="web_search_call", payload=payload
                )
                assistant.append((block, s, path, where))
            elif where == "user_image":
                user.append((ImageContent(data=s, mime_type="image/png"), s))
            else:
                result.append((ImageContent(data=s, mime_type="image/jpeg"), s))

        system = "\n".join(lines["system_prompt"]) or "be brief"
        for line, s in enumerate(lines["system_prompt"]):
            slot(s, ("system_prompt",), line, "system_prompt")
        user_content: list[Any] = [TextContent(text="\n".join(lines["user_text"]) or "hello")]
        for line, s in enumerate(lines["user_text"]):
            slot(s, ("messages", 0, "content", 0, "text"), line, "user_text")
        for block, s in user:
            slot(s, ("messages", 0, "content", len(user_content), "data"), where="user_image")
            user_content.append(block)
        assistant_content: list[Any] = [
            TextContent(text="\n".join(lines["assistant_text"]) or "ok")
        ]
        for line, s in enumerate(lines["assistant_text"]):
            slot(s, ("messages", 1, "content", 0, "text"), line, "assistant_text")
        for block, s, path, where in assistant:
            slot(s, ("messages", 1, "content", len(assistant_content), *path), where=where)
            assistant_content.append(block)
        tool_index = len(assistant_content)
        assistant_content.append(ToolCall(id=f"call_{call}", name="search", arguments=arguments))
        for key, s in arguments.items():
            slot(
                s, ("messages", 1, "content", tool_index, "arguments", key), where="tool_arguments"
            )
        result_content: list[Any] = [
            TextContent(text="\n".join(lines["tool_result_text"]) or "no results")
        ]
        for line, s in enumerate(lines["tool_result_text"]):
            slot(s, ("messages", 2, "content", 0, "text"), line, "tool_result_text")
        for block, s in result:
            slot(
                s,
                ("messages", 2, "content", len(result_content), "data"),
                where="tool_result_image",
            )
            result_content.append(block)
        for i, s in enumerate(details):
            slot(s, ("messages", 2, "details", "items", i), where="details")
        context = Context(
            system_prompt=system,
            messages=[
                UserMessage(content=user_content, timestamp=1),
                AssistantMessage(
                    content=assistant_content, api="faux", provider="faux", model="m", timestamp=2
                ),
                ToolResultMessage(
                    tool_call_id=f"call_{call}",
                    tool_name="search",
                    content=result_content,
                    details={"items": details, "next": "page 2"},
                    timestamp=3,
                ),
                UserMessage(content="continue", timestamp=4),
            ],
        )
        built.append((context, slots))
    return built


@pytest.mark.parametrize("family", list(FAMILIES))
def test_request_payloads_are_stored_unchanged(tmp_path, family):
    """The stored request of every call equals the raw one (user text and images, tool
    results and their details, an earlier assistant turn's signatures, tool arguments and
    server tools), and the calls replay, their answers unchanged."""
    built = request_contexts(family)
    contexts = [context for context, _ in built]
    path = tmp_path / f"request-{family}.jsonl"
    live = asyncio.run(_record(path, contexts, [_answer(number) for number in range(len(built))]))
    recording = read_recording_file(path)
    assert len(recording.calls) == len(built)
    changes: list[Change] = []
    other: list[str] = []
    strings = 0
    for call, ((context, slots), recorded) in enumerate(zip(built, recording.calls, strict=True)):
        strings += len(slots)
        # As a request carries the context: an earlier answer without its id, model version and
        # reasoning count, which reach no vendor and are not recorded with the request.
        raw = context.model_dump(mode="json", exclude={"messages": {"__all__": ANSWER_ONLY_FIELDS}})
        for slot in slots:  # the test's own bookkeeping
            assert _found(raw, slot) == slot.string, f"test bug: {slot} not at its place"
        assert recorded.request["model"] == MODEL.model_dump(mode="json")
        assert recorded.request["options"] is None
        stored = recorded.request["context"]
        if stored == raw:
            continue
        for slot in slots:
            change = _change(slot, _found(stored, slot))
            if change is not None:
                changes.append(change)
        other.append(
            f"call {call}: stored context differs from the raw one at {_first_difference(raw, stored)}"
        )
    replayed = asyncio.run(_replay(path, contexts))
    for call, (live_events, replayed_events) in enumerate(zip(live, replayed, strict=True)):
        _compare_call(call, live_events, replayed_events, [], changes, other)
    assert not changes and not other, _report(f"{family} in requests", changes, strings, other)


def _answer(number: int) -> list[Any]:
    assembler = AssistantStreamAssembler(MODEL, timestamp=5)
    events = [assembler.start()]
    index, event = assembler.begin_text()
    events += [event, assembler.append_text(index, f"answer {number}"), assembler.end_text(index)]
    return events + assembler.finish()


# ============================================================================ the corpus


def test_the_corpus_is_large_varied_and_deterministic():
    corpus = precision_corpus.corpus()
    strings = [s for name in STRING_FAMILIES for s in corpus[name]]
    assert len(strings) >= 10_000
    assert all(len(corpus[name]) >= 500 for name in STRING_FAMILIES)
    assert len(corpus["urlsafe_blobs"]) == 2000 and len(corpus["base64_images"]) == 200
    assert all(1024 <= len(s) <= 16 * 1024 for s in corpus["urlsafe_blobs"])
    assert all(len(family) == len(set(family)) for family in corpus.values())
    assert not any("\n" in s or "\r" in s for s in strings)  # the lines of a text block
    # Model output holds two strings in three of each family at most once (blobs: each set
    # whole, the shortest streamed too; images: half); requests hold every string.
    for name in FAMILIES:
        placed = [s for place in (*STREAMED_PLACES, *SET_PLACES) for s in share(place, name)]
        if name == "base64_images":
            assert placed == corpus[name][::2]
        elif name == "urlsafe_blobs":
            assert len(placed) == len(corpus[name]) + len(_shortest_blobs())
        else:
            assert (
                len(placed)
                == len(set(placed))
                == len([i for i in range(len(corpus[name])) if i % 3 < 2])
            )
        requested = [slot.string for _, slots in request_contexts(name) for slot in slots]
        assert sorted(requested) == sorted(corpus[name]), name
        planned = [
            s
            for place in (*STREAMED_PLACES, *SET_PLACES)
            for call in plan(place, name)
            for block in call
            for s in block.strings
        ]
        assert sorted(planned) == sorted(placed), name
        # Every delta size streams strings of every family, in every streamed place.
        for place in STREAMED_PLACES:
            sizes = {block.size for call in plan(place, name) for block in call}
            expected = (
                set(STREAMED_BLOBS[place][1])
                if name == "urlsafe_blobs"
                else set(DELTA_SIZES)
                if name != "base64_images"
                else set()
            )
            assert sizes == expected, (place, name, sizes)
    # The same strings on every run: generated afresh, a family equals the cached one.
    for name, make in FAMILIES.items():
        assert make() == corpus[name], name
