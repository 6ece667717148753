"""The encoder of the record pipeline: one call's redacted records in, ``event`` lines out (see
``docs/file-format.md``, "Linear size").

It redacts nothing and asks nothing back: the stream stage (:mod:`.stream_redaction`) hands it
records that are already in their stored form, and it only writes them, keeping the file linear
in what was streamed:

* a :class:`TextGrowth` (a delta appended to a text or thinking block) is one ``bytes`` format
  of a template in which the call, the event type and the block are already filled in;
* an :class:`ArgumentsGrowth` is patched along the one path of the arguments its delta grew
  (:func:`.patches.growth_patch`), never by dumping them whole;
* a :class:`Whole` event's snapshot is written as a ``partial_patch`` against the previous
  snapshot (:func:`.patches.compute_patch`), or in full when the patch cannot express it.

The previous snapshot is kept as written, with the text appended since it was last needed
kept in pieces, joined only when a whole event needs the snapshot (appending to one string
would copy the whole answer at every delta).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson

from ..file.format import event_line_head
from ..file.patches import compute_patch, growth_patch, patch_at

__all__ = ["ArgumentsGrowth", "EventEncoder", "Record", "TextGrowth", "Whole"]

_TEXT_FIELDS = {"text_delta": "text", "thinking_delta": "thinking"}


class TextGrowth(NamedTuple):
    """A text or thinking delta whose snapshot is the previous one with ``delta`` (stored form)
    appended to block ``content_index``."""

    type: str
    content_index: int
    delta: str


class ArgumentsGrowth(NamedTuple):
    """A tool-call delta whose snapshot is the previous one with block ``index``'s arguments
    going from ``before`` to ``after`` (the parse of the stored deltas so far, sharing every
    unchanged part)."""

    content_index: int
    delta: str
    before: Any
    after: Any


class Whole(NamedTuple):
    """Any other event, as a redacted JSON-shaped dict that the encoder may take over."""

    event: dict[str, Any]


Record = TextGrowth | ArgumentsGrowth | Whole


class EventEncoder:
    """Turns one call's records into whole ``event`` lines (newline included)."""

    def __init__(self, call_index: int = 0) -> None:
        self._head = event_line_head(call_index)
        #: The previous snapshot as written (None: none yet), and the text appended to its
        #: blocks since, in pieces: (index, field) -> pieces.
        self._partial: dict[str, Any] | None = None
        self._appended: dict[tuple[int, str], list[str]] = {}
        #: Per (event type, block): the line template of its deltas and the pieces list its
        #: text grows in (the same list as in ``_appended``).
        self._growths: dict[tuple[str, int], tuple[bytes, list[str]]] = {}

    def line(self, record: Record, event_index: int, t: int) -> bytes:
        """The line of one record; ``t`` is when its event arrived, in milliseconds since the
        call's request was sent. The usual record, a text delta, is one ``bytes`` format."""
        if type(record) is TextGrowth:
            growth = self._growths.get((record[0], record[1]))
            if growth is None:
                growth = self._growth(record[0], record[1])
            delta = record[2]
            if delta:
                growth[1].append(delta)
                gained = orjson.dumps(delta)
                return growth[0] % (event_index, t, gained, gained)
            return self._head % (
                event_index,
                t,
            ) + b'{"type":"%s","content_index":%d,"delta":"","partial_patch":[]}}\n' % (
                record[0].encode(),
                record[1],
            )
        if type(record) is ArgumentsGrowth:
            return self._arguments_line(record, event_index, t)
        return self._whole_line(record.event, event_index, t)  # type: ignore[union-attr]  # a Whole here: mypy does not narrow a union when `type(x) is C` fails

    def _growth(self, event_type: str, index: int) -> tuple[bytes, list[str]]:
        """The template of a delta appended to block ``index`` (to fill in with the event
        index, the time and the delta's JSON, twice: byte for byte what ``orjson.dumps`` makes
        of the dict), and the pieces list of that block's text."""
        field = _TEXT_FIELDS[event_type]
        body = (
            b'{"type":"%s","content_index":%d,"delta":%%s,"partial_patch":[["append",["content",%d,"%s"],%%s]]}'
            % (event_type.encode(), index, index, field.encode())
        )
        pieces = self._appended.setdefault((index, field), [])
        growth = self._growths[(event_type, index)] = (self._head + body + b"}\n", pieces)
        return growth

    def _arguments_line(self, record: ArgumentsGrowth, event_index: int, t: int) -> bytes:
        index = record.content_index
        event: dict[str, Any] = {
            "type": "toolcall_delta",
            "content_index": index,
            "delta": record.delta,
        }
        partial = self._snapshot()
        path = ["content", index, "arguments"]
        previous = partial["content"][index].get("arguments") if partial is not None else None
        if partial is None or previous is record.before:
            patch = growth_patch(record.before, record.after, path)
        else:  # the snapshot before holds the provider's own arguments (written whole)
            patch = patch_at(previous, record.after, path)
        if partial is None or patch is None:  # nothing to patch, or a member went away
            if partial is None:
                return self._head % (event_index, t) + orjson.dumps(event) + b"}\n"
            content = partial["content"] = list(partial["content"])
            content[index] = {**content[index], "arguments": record.after}
            event["partial"] = partial
            return self._head % (event_index, t) + orjson.dumps(event) + b"}\n"
        content = partial["content"]
        content[index] = {**content[index], "arguments": record.after}
        event["partial_patch"] = patch
        return self._head % (event_index, t) + orjson.dumps(event) + b"}\n"

    def _whole_line(self, event: dict[str, Any], event_index: int, t: int) -> bytes:
        partial = event.pop("partial", None)
        if type(partial) is dict:
            previous = self._snapshot()
            patch = compute_patch(previous, partial) if previous is not None else None
            if patch is None:
                event["partial"] = partial
            else:
                event["partial_patch"] = patch
            self._partial = partial
        elif partial is not None:
            event["partial"] = partial
        return self._head % (event_index, t) + orjson.dumps(event) + b"}\n"

    def _snapshot(self) -> dict[str, Any] | None:
        """The previous snapshot with the text appended since brought in (it is ours: the
        stage made it for this encoder, and its line is written already)."""
        partial = self._partial
        if partial is None:  # nothing to grow (the stage sends a growth only after a snapshot)
            for pieces in self._appended.values():
                pieces.clear()
            return partial
        content = partial.get("content")
        for (index, field), pieces in self._appended.items():
            if pieces:
                block = content[index]  # type: ignore[index]
                content[index] = {**block, field: block[field] + "".join(pieces)}  # type: ignore[index]
                pieces.clear()  # in place: the templates of the block's deltas hold this list
        return partial
