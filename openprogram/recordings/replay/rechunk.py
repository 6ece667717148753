"""Re-splitting a replayed stream at other boundaries (docs/tutorial.md, "Testing what goes
wrong").

A recording keeps the deltas one vendor sent on one day. Another day, or another vendor, splits
the same answer elsewhere: a tool's name and arguments a character at a time, a word across two
deltas, a JSON string cut between a backslash and what it escapes, an emoji on its own. Code that
assumes its deltas arrive whole passes every replay and fails in production. :func:`rechunked`
takes the events of one replayed call and re-splits every run of text, thinking and
tool-argument deltas of one block at pseudo-random boundaries drawn from the seed and the call's
index (one-character deltas, deltas merged across the recorded ones, cuts beside multi-byte
characters and after JSON quotes, colons and backslashes). Each new delta's ``partial`` is the
message as it was when that delta's last character arrived, with the block grown to exactly the
text so far (tool arguments parsed from the text so far, as the provider parses them); every
other event, and so the final message, is the recorded one.

A run whose recorded snapshots do not read as its deltas (arguments a vendor sent whole) is
served as recorded.
"""

from __future__ import annotations

import bisect
import random
import re
from collections.abc import Iterator
from typing import Any

from ...providers.partial_json import StreamingJsonObject
from ...providers.types import AssistantMessageEvent
from ..file.reader_fast import replaced

__all__ = ["rechunked"]

#: The field each delta type grows in its block.
_FIELDS = {"text_delta": "text", "thinking_delta": "thinking", "toolcall_delta": "arguments"}
#: Where a cut likes to stand: after the start of a JSON key or string, a member's colon, an
#: escape's backslash (cut from what it escapes), a container opening or a new member's comma;
#: and on either side of a character that takes more than one byte in UTF-8.
_AFTER_JSON_MARK = re.compile(r'["\\:{\[,]')
_MULTI_BYTE = re.compile(r"[^\x00-\x7f]")
#: How often a cut moves to a character it likes when one is near.
_LIKED = 0.35

Numbered = tuple[int, AssistantMessageEvent]


def rechunked(numbered: Iterator[Numbered], seed: int, call_index: int) -> Iterator[Numbered]:
    """``(recorded event index, event)`` pairs with every delta run re-split; a new delta
    carries the index of the recorded delta in which its last character arrived."""
    rng = random.Random(f"openprogram-rechunk:{seed}:{call_index}")
    arguments: dict[int, list[str]] = {}  # the argument text of each tool call so far
    run: list[Numbered] = []
    for item in numbered:
        event = item[1]
        if event.type in _FIELDS:
            first = run[0][1] if run else None
            if first is not None and (
                first.type != event.type or first.content_index != event.content_index  # type: ignore[union-attr]
            ):
                yield from _resplit(run, rng, arguments)
                run = []
            run.append(item)
            continue
        if run:
            yield from _resplit(run, rng, arguments)
            run = []
        yield item
    if run:
        yield from _resplit(run, rng, arguments)


def _resplit(
    run: list[Numbered], rng: random.Random, arguments: dict[int, list[str]]
) -> Iterator[Numbered]:
    events: list[Any] = [event for _, event in run]
    kind, index = events[0].type, events[0].content_index
    field = _FIELDS[kind]
    deltas = [event.delta for event in events]
    text = "".join(deltas)
    before = "".join(arguments.setdefault(index, [])) if field == "arguments" else None
    if field == "arguments":
        arguments[index].append(text)
    if not text:
        yield from run
        return
    ends = []  # where each recorded delta ends in ``text``
    total = 0
    for delta in deltas:
        total += len(delta)
        ends.append(total)
    grown = _grown(events, field, before, text, ends)
    if grown is None:  # the snapshots do not read as the deltas: as recorded
        yield from run
        return
    start = 0
    for cut in _cuts(text, rng):
        source = bisect.bisect_left(ends, cut)  # the recorded delta holding character cut - 1
        event = events[source]
        partial = event.partial
        content = list(partial.content)
        content[index] = replaced(content[index], **{field: grown(cut)})
        yield (
            run[source][0],
            replaced(event, delta=text[start:cut], partial=replaced(partial, content=content)),
        )
        start = cut


def _grown(events: list[Any], field: str, before: str | None, text: str, ends: list[int]) -> Any:
    """A function from an offset in ``text`` to the block's field at that point, or None when
    the recorded snapshots say otherwise (checked at the run's last delta)."""
    last = getattr(events[-1].partial.content[events[0].content_index], field)
    if before is None:  # text or thinking: the field ends with the run
        prefix = last[: len(last) - len(text)]
        if not last.endswith(text):
            return None
        return lambda cut: prefix + text[:cut]
    parser = StreamingJsonObject(before)
    values: dict[int, dict[str, Any]] = {}
    fed = 0

    def value(cut: int) -> dict[str, Any]:
        nonlocal fed
        if cut not in values:
            values[cut] = parser.feed(text[fed:cut])
            fed = cut
        return values[cut]

    # Cuts come in increasing order, so the parser reads each character once; the check at
    # the end uses a parser of its own.
    check = StreamingJsonObject(before)
    if check.feed(text) != last:
        return None
    return value


def _cuts(text: str, rng: random.Random) -> list[int]:
    """Increasing offsets in ``text`` where deltas end (the last is ``len(text)``)."""
    size = len(text)
    liked = sorted(
        {match.end() for match in _AFTER_JSON_MARK.finditer(text)}
        | {edge for match in _MULTI_BYTE.finditer(text) for edge in match.span()} - {0, size}
    )
    cuts: list[int] = []
    position = 0
    while position < size:
        draw = rng.random()
        if draw < 0.3:
            step = 1
        elif draw < 0.6:
            step = rng.randint(2, 4)
        elif draw < 0.85:
            step = rng.randint(5, 16)
        else:
            step = rng.randint(17, 80)
        cut = min(size, position + step)
        if liked and rng.random() < _LIKED:
            near = bisect.bisect_right(liked, position)
            if near < len(liked) and liked[near] <= position + step + 8:
                cut = liked[near]
        cuts.append(cut)
        position = cut
    return cuts
