"""The stream stage of the record pipeline: a call's raw events in, redacted records out (see
``docs/architecture.md``, "The record pipeline", and ``docs/file-format.md``, "Redaction").

::

    provider events -> StreamRedaction (holds deltas, applies the redactor) -> records
                    -> EventEncoder (writes lines) -> RecordingSink

Redacting each stored string on its own is not enough: a secret streamed in small deltas is
written before it can be recognised, and the deltas of a tool call join back to arguments whose
secret fields were removed. So this stage **holds back** text, thinking and tool-call deltas
(and every later event of the call: lines stay in ``event_index`` order) until the raw text
past them is known to be safe:

* text and thinking: up to the block's last safe cut (whitespace not after a scheme word, not
  inside an open PEM block; none at all when a known value holds whitespace), else the
  block's end or the call's end. A stretch that holds nothing any rule could act on (the
  redactor's ``Trigger``, checked on each delta and the few characters before it) is stored as
  it streamed; any other stretch between two safe cuts is redacted once, on its own;
* tool-call arguments: until ``toolcall_end``, where they are known whole: redacted as JSON
  (exact secret names, value shapes), or as text when they are not valid JSON.

When redaction changes a stretch, the held deltas are rewritten so that they join to the
redacted text (:func:`spread`). Every record this stage hands on is redacted, and it never asks
the encoder anything back:

* :class:`~.encoder.TextGrowth` / :class:`~.encoder.ArgumentsGrowth`: a delta whose snapshot
  is the previous one grown by that delta (checked here, by identity, when the event arrives),
  with its stored delta (and, for arguments, the stored arguments before and after);
* :class:`~.encoder.Whole`: any other event, dumped and redacted, its streamed block texts
  replaced by their stored form.

``marks`` collects what redaction replaced in the model's output (field path and rules), for
the recorder to say once per call and to count in ``call_end``.

The live consumer is not delayed: only the file write waits. A crash loses the events held
since the last safe point (a tool call's deltas since its start), never a whole call's worth.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import accumulate
from operator import itemgetter
from typing import Any

import orjson

from ...providers.partial_json import StreamingJsonObject, parse_streaming_json
from ...providers.types import TERMINAL_EVENT_TYPES, AssistantMessage
from ..file.patches import strictly_equal
from ..redaction import PLACEHOLDER, Redactor, is_exact_secret_name
from ..text_diff import common_prefix_length
from .encoder import ArgumentsGrowth, Record, TextGrowth, Whole

__all__ = ["StreamRedaction", "spread"]

_TEXT_DELTAS = {"text_delta": "text", "thinking_delta": "thinking"}
_TEXT_ENDS = {"text_end": "text", "thinking_end": "thinking"}
_BLOCK_TYPES = {"text": "text", "thinking": "thinking", "arguments": "toolCall"}
_CUT_CHARACTERS = " \t\n\r\f\v"
_MESSAGES = ("partial", "message", "error")


def spread(pieces: list[str], target: str) -> list[str]:
    """Pieces, one per given piece, that join to ``target``: where ``"".join(pieces)`` and
    ``target`` share a prefix and a suffix, those characters stay in the piece that held them;
    the differing middle of ``target`` goes to the piece in which the differing middle of the
    source starts (the last piece when the source is empty)."""
    source = "".join(pieces)
    if source == target:
        return list(pieces)
    if not source:
        return [""] * (len(pieces) - 1) + [target] if pieces else []
    prefix = common_prefix_length(source, target)
    limit = min(len(source), len(target)) - prefix
    suffix = common_prefix_length(source[::-1][:limit], target[::-1][:limit])
    source_length, target_length = len(source), len(target)

    def position(x: int) -> int:
        if x <= prefix:
            return x
        if x >= source_length - suffix:
            return target_length - (source_length - x)
        return target_length - suffix

    result = []
    start = end = 0
    for piece in pieces:
        end += len(piece)
        stop = position(end)
        result.append(target[start:stop])
        start = stop
    return result


_VALUE_TOKEN = re.compile(r"\{\{!*[A-Za-z_][A-Za-z0-9_]*\}\}")
_ESCAPED_LITERAL = re.compile(r"\{\{(!+)[A-Za-z_][A-Za-z0-9_]*\}\}")


def _tokens_whole(pieces: list[str]) -> list[str]:
    """``pieces`` rejoined so that no ``{{name}}`` token (a run value, or an escaped literal)
    is split between two of them: replay substitutes each stored delta on its own, so a token
    must lie in one. A boundary inside a token moves to its end."""
    joined = "".join(pieces)
    spans = [match.span() for match in _VALUE_TOKEN.finditer(joined)]
    if not spans:
        return pieces
    result, start, token = [], 0, 0
    for end in accumulate(map(len, pieces)):
        while token < len(spans) and spans[token][1] <= end:
            token += 1
        if token < len(spans) and spans[token][0] < end < spans[token][1]:
            end = spans[token][1]
        end = max(end, start)
        result.append(joined[start:end])
        start = end
    return result


def _escaped_only(segment: str, stored: str) -> list[tuple[int, int, int]] | None:
    """When ``stored`` is ``segment`` with literals escaped and nothing else changed (the model
    wrote ``{{name}}`` of a run value's name: stored ``{{!name}}``, see ``docs/file-format.md``),
    each inserted bang's position in ``stored`` with its token's span; else None."""
    extra = len(stored) - len(segment)
    if extra <= 0 or "{{!" not in stored or stored.count("!") - segment.count("!") != extra:
        return None
    inserted, position = [], 0
    for index, character in enumerate(stored):
        if position < len(segment) and segment[position] == character:
            position += 1
        elif character == "!":
            inserted.append(index)
        else:
            return None
    tokens = {match.end(1) - 1: match.span() for match in _ESCAPED_LITERAL.finditer(stored)}
    if position != len(segment) or any(index not in tokens for index in inserted):
        return None
    return [(index, *tokens[index]) for index in inserted]


def _literal_portions(
    owners: list[_Entry], portions: list[str], stored: str, inserted: list[tuple[int, int, int]]
) -> list[str]:
    """The stored pieces of raw ``portions`` whose text differs from ``stored`` only by the
    ``inserted`` bangs, each bang with the piece before it; and, on the deltas a literal is
    split between, what keeps each replaying as it streamed (a piece of a token is no token,
    so replay leaves it as it is): the bang is left out of the delta that holds it
    (``dropped``) and out of the snapshot of a delta that ends inside the token
    (``open_bang``)."""
    cuts, raw_cut, bangs = [0], 0, 0
    for portion in portions:
        raw_cut += len(portion)
        while bangs < len(inserted) and inserted[bangs][0] - bangs <= raw_cut:
            bangs += 1
        cuts.append(raw_cut + bangs)
    for bang, start, end in inserted:
        if not any(start < cut < end for cut in cuts):
            continue  # whole in one delta: replay turns it back into the literal
        for position, owner in enumerate(owners):
            first, cut = cuts[position], cuts[position + 1]
            if first <= bang < cut:
                before = sum(map(len, owner.parts)) if owner.parts else 0
                owner.dropped = [*(owner.dropped or ()), before + bang - first]
            if bang < cut < end:
                owner.open_bang = cut - bang
    return [stored[first:cut] for first, cut in zip(cuts, cuts[1:], strict=False)]


def _without(text: str, positions: Iterable[int]) -> str:
    """``text`` without the characters at ``positions``."""
    for position in sorted(positions, reverse=True):
        text = text[:position] + text[position + 1 :]
    return text


def _shown(text: str, open_bang: int | None) -> str:
    """A block's stored text as a snapshot holds it: without the bang of a literal it ends
    inside (``open_bang`` characters from the end), which replay could not tell from text."""
    return text if open_bang is None else _without(text, (len(text) - open_bang,))


def _last_cut(text: str) -> int:
    """The index just past the last whitespace character of ``text`` (0: none)."""
    return max(map(text.rfind, _CUT_CHARACTERS)) + 1


def _fields_besides(
    kind: type, excluded: str
) -> Callable[[dict[str, Any]], tuple[Any, ...]] | None:
    """A getter of the values, in a model's ``__dict__``, of every field of ``kind`` but
    ``excluded``; None when instances of ``kind`` may hold more than their fields (such a
    delta is then written whole)."""
    fields = getattr(kind, "model_fields", None)
    config = getattr(kind, "model_config", {})
    if fields is None or excluded not in fields or config.get("extra") == "allow":
        return None
    names = [name for name in fields if name != excluded]
    return itemgetter(*names, names[0]) if names else (lambda values: ())  # always a tuple


_MESSAGE_OTHERS = _fields_besides(AssistantMessage, "content")
_UNKNOWN: Any = object()
#: A record made without the namedtuple's Python-level ``__new__`` (one per delta: it costs
#: more than the rest of the record's making).
_new_record: Any = tuple.__new__
assert _MESSAGE_OTHERS is not None


class _Block:
    """The raw and stored state of one streamed block (text, thinking or tool-call arguments)."""

    __slots__ = (
        "index",
        "field",
        "length",
        "settled",
        "pending",
        "tail",
        "triggered",
        "waiting",
        "released",
        "emitted",
        "joined",
        "joined_count",
        "closed",
        "parse",
        "value",
        "final_raw",
        "final_stored",
        "rewritten",
        "raw_parse",
        "open_bang",
    )

    def __init__(self, index: int, field: str) -> None:
        self.index, self.field = index, field
        self.length = 0  # raw characters received
        self.settled = 0  # raw characters whose stored form is known
        self.pending: list[str] = []  # raw text past the last safe point, in pieces
        self.tail = ""  # the last few raw characters, for the trigger check of the next delta
        self.triggered = False  # the pending text holds something a rule could act on
        self.waiting: deque[_Entry] = deque()  # deltas whose stored form is incomplete
        self.released: list[str] = []  # stored deltas handed on so far
        self.emitted = 0  # raw characters of the deltas handed on
        self.joined, self.joined_count = "", 0  # "".join(released), as of that many pieces
        self.closed = False  # a tool call's arguments are known whole
        #: Tool calls: the parse of the stored deltas handed on, and its value so far.
        self.parse = StreamingJsonObject() if field == "arguments" else None
        self.value: Any = self.parse.feed("") if self.parse is not None else None
        #: Tool calls, once closed: the arguments the raw text gives, and their stored form.
        self.final_raw: Any = None
        self.final_stored: Any = None
        self.rewritten = False  # redaction changed the tool call's arguments
        #: Tool calls of a provider whose snapshots are checked: the parse of the raw deltas.
        self.raw_parse: StreamingJsonObject | None = None
        #: Text that stops inside an escaped literal: its snapshots leave the bang this many
        #: characters from the end out (see :func:`_literal_portions`).
        self.open_bang: int | None = None

    def stored_text(self) -> str:
        if self.joined_count != len(self.released):
            self.joined += "".join(self.released[self.joined_count :])
            self.joined_count = len(self.released)
        return self.joined


class _Entry:
    """One event waiting to be handed on; a delta also waits for its stored form."""

    __slots__ = (
        "type",
        "block",
        "delta",
        "start",
        "end",
        "stored",
        "parts",
        "event",
        "own",
        "source",
        "templated",
        "dropped",
        "open_bang",
    )

    def __init__(
        self, kind: str, block: _Block | None, delta: str, start: int, end: int, event: Any = None
    ) -> None:
        self.type, self.block, self.delta, self.start, self.end = kind, block, delta, start, end
        #: The stored delta (None: not known yet; "" for an event that is no delta).
        self.stored: str | None = None if block is not None else ""
        self.parts: list[str] | None = None  # stored pieces while the delta spans safe points
        #: The event itself, for one written whole (None: a verified delta, written from its
        #: stored delta alone).
        self.event = event
        #: A tool-call delta whose snapshot is not the parse of the deltas so far: written with
        #: the provider's own arguments (unless redaction rewrote them).
        self.own = False
        #: What a text delta is written whole from when it shares an escaped literal with
        #: another delta (where its stored delta leaves a bang out, and where its snapshot
        #: does): its own event, or for a delta whose snapshot grew the template of its run
        #: (see ``StreamRedaction._template``), whose block text is then its stored text.
        self.source: Any = None
        self.templated = False  # ``source`` is a run's template, not this delta's event
        self.dropped: list[int] | None = None
        self.open_bang: int | None = None


class StreamRedaction:
    """The per-call stage: ``feed(event)`` returns the records that may be written now, in
    order; ``flush()`` returns whatever is still held (the call ended, failed, was cancelled or
    closed early). Every event fed is handed on exactly once, in the order fed: the recorder
    relies on that to give each line the time its event arrived."""

    def __init__(self, redactor: Redactor, *, check_arguments: bool = False) -> None:
        self._redactor = redactor
        #: Whether a tool call's snapshots are compared with the parse of its deltas: for a
        #: provider that is not built on the shared assembler (whose snapshots are that parse
        #: by construction), so that a replay serves the snapshots it streamed even when its
        #: parser lags a delta. It costs a comparison of the arguments at every delta.
        self._check_arguments = check_arguments
        self._redact = redactor.str_redactor()
        self._search, self._reach = redactor.trigger()
        self._cuts = redactor.cuts_anywhere()
        self._blocks: dict[int, _Block] = {}
        self._held: deque[_Entry] = deque()
        self._previous: Any = None  # the snapshot of the last event fed
        #: The first event of the current run of text deltas that each grew the snapshot
        #: before them in one block: every held delta of the run is written whole (when it
        #: must be) from this one event, with its own delta and stored text. Keeping each held
        #: delta's own event instead would keep every snapshot of the text so far: quadratic
        #: memory while whitespace-free text waits for a safe cut (gigabytes at 200 KB).
        self._template: Any = None
        self._getters: dict[tuple[type, str], Any] = {}
        #: The last snapshot checked by :meth:`_grows` and its values besides the content.
        self._rest: tuple[Any, tuple[Any, ...]] = (None, ())
        #: What redaction replaced in the model's output: field path -> rule names.
        self.marks: dict[str, set[str]] = {}

    # ------------------------------------------------------------------------ input

    def feed(self, event: Any) -> Iterable[Record]:
        fields = event.__dict__
        kind = fields.get("type")
        field = _TEXT_DELTAS.get(kind)
        if field is not None:
            return self._text_delta(event, fields, field)
        if kind == "toolcall_delta":
            return self._arguments_delta(event, fields)
        self._previous = fields.get("partial")
        self._template = None
        if kind in TERMINAL_EVENT_TYPES:
            self._held.append(_Entry(kind, None, "", 0, 0, event))
            return self.flush(cut_short=kind != "done")
        if kind in _TEXT_ENDS:
            block = self._blocks.get(fields.get("content_index"))
            if block is not None and block.field == _TEXT_ENDS[kind]:
                self._settle_text(block, final=True)
        elif kind == "toolcall_end":
            block = self._blocks.get(fields.get("content_index"))
            if block is not None and block.field == "arguments" and not block.closed:
                self._settle_arguments(block, cut_short=False)
        if not self._held:
            return [self._whole(event)]
        self._held.append(_Entry(kind, None, "", 0, 0, event))
        return self._release()

    def flush(self, *, cut_short: bool = True) -> Iterable[Record]:
        """Settle every block as it stands and hand on everything held. ``cut_short``: the
        stream did not end normally, so a block's last word may be the start of a secret cut
        off before any rule could recognise it (see :meth:`Redactor.redact_unfinished`)."""
        for block in self._blocks.values():
            if block.field == "arguments":
                if not block.closed:
                    self._settle_arguments(block, cut_short=cut_short)
            else:
                self._settle_text(block, final=True, cut_short=cut_short)
        return self._release()

    # ------------------------------------------------------------------------ text

    def _block(self, index: Any, field: str) -> _Block:
        block = self._blocks.get(index)
        if block is None or block.field != field:
            block = self._blocks[index] = _Block(index, field)
        return block

    def _text_delta(self, event: Any, fields: dict[str, Any], field: str) -> Iterable[Record]:
        index, delta = fields.get("content_index"), fields.get("delta")
        grows = self._grows(fields, index, field, delta)
        template = self._template
        if template is not None and (
            not grows or type(template) is not type(event) or template.content_index != index
        ):
            self._template = None  # the run ends: a delta of another block, or not grown
        if type(delta) is not str or type(index) is not int:
            return self._pass(event)
        block = self._blocks.get(index)
        if block is None or block.field != field:
            block = self._blocks[index] = _Block(index, field)
        tail = block.tail + delta
        clean = not block.triggered and self._search(tail) is None
        block.tail = tail[-self._reach :] if len(tail) > self._reach else tail
        start = block.length
        block.length = end = start + len(delta)
        if (
            clean
            and not block.pending
            and not self._held
            and self._cuts
            and delta[-1:] in _CUT_CHARACTERS
        ):
            # The usual case: nothing held, and the delta ends at a safe point with nothing a
            # rule could act on: handed on as it is, at once.
            block.settled = block.emitted = end
            block.released.append(delta)
            if grows:
                return [_new_record(TextGrowth, (fields["type"], index, delta))]
            return [self._whole(event, delta)]
        entry = _Entry(fields["type"], block, delta, start, block.length, None if grows else event)
        if grows and self._is_template(event, fields, index, field, end):
            entry.source, entry.templated = self._template, True
        else:
            entry.source = event
        self._held.append(entry)
        if not delta:
            entry.stored = ""
            return self._release()
        block.waiting.append(entry)
        block.pending.append(delta)
        if not clean:
            block.triggered = True
        if not self._cuts:
            return self._release()
        cut = _last_cut(delta)
        if cut:
            if block.triggered:
                self._settle_text(block, final=False)
            else:
                self._settle_clean(block, start + cut)
        return self._release()

    def _is_template(
        self, event: Any, fields: dict[str, Any], index: int, field: str, end: int
    ) -> bool:
        """Whether ``event`` (a grown delta of block ``index``) can be written from the
        template of its run (``_template``, which it starts when there is none). A run starts
        only where the snapshot's text is the block's deltas so far (``end`` characters), so
        that each of its deltas' snapshot text is exactly what the stored text stands for."""
        if self._template is not None:  # of this block: any other delta ended the run
            return True
        if len(fields["partial"].content[index].__dict__[field]) != end:
            self._template = None
            return False
        self._template = event
        return True

    def _settle_clean(self, block: _Block, end: int) -> None:
        """Hand the raw text up to ``end`` (a safe cut in a stretch no rule can act on) to the
        deltas waiting for it, as it streamed."""
        waiting = block.waiting
        while waiting and waiting[0].end <= end:
            entry = waiting.popleft()
            if entry.parts:
                entry.stored = "".join(
                    [*entry.parts, entry.delta[max(block.settled - entry.start, 0) :]]
                )
            else:
                entry.stored = entry.delta
        if waiting:
            entry = waiting[0]
            keep = end - entry.start
            portion = entry.delta[max(block.settled - entry.start, 0) : keep]
            entry.parts = [*(entry.parts or []), portion]
            block.pending = [entry.delta[keep:], *(other.delta for other in list(waiting)[1:])]
        else:
            block.pending = []
        block.settled = end

    def _settle_text(self, block: _Block, *, final: bool, cut_short: bool = False) -> None:
        """Redact the pending raw text up to its last safe cut (all of it when ``final``; as a
        text cut short when ``cut_short``) and hand the stored pieces to the waiting deltas."""
        pending = "".join(block.pending)
        cut = len(pending) if final else self._redactor.safe_cut(pending)
        if cut:
            segment = pending[:cut]
            if cut_short:
                stored = self._redactor.redact_unfinished(segment)
            elif not block.triggered or self._search(segment, 0) is None:
                stored = segment
            else:
                stored = self._redact(segment)
            if stored != segment:
                self._mark(f"content[{block.index}].{block.field}", segment, stored, cut_short)
            self._assign(block, segment, stored)
            rest = pending[cut:]
            block.pending = [rest] if rest else []
            block.triggered = bool(rest) and self._search(rest, 0) is not None
        if final:
            for entry in block.waiting:  # empty deltas at the very end
                entry.stored = "".join(entry.parts) if entry.parts else ""
            block.waiting.clear()
            block.pending, block.triggered = [], False

    def _assign(self, block: _Block, segment: str, stored: str) -> None:
        start, end = block.settled, block.settled + len(segment)
        block.settled = end
        owners: list[_Entry] = []
        portions: list[str] = []
        for entry in block.waiting:
            low = max(entry.start, start)
            if low >= end and entry.end > low:
                break
            owners.append(entry)
            portions.append(segment[low - start : min(entry.end, end) - start])
        if stored != segment:
            # A literal the model wrote keeps the boundaries it streamed with; a run value's
            # text differs from run to run, so its token goes whole into one delta.
            inserted = _escaped_only(segment, stored)
            if inserted is not None:
                portions = _literal_portions(owners, portions, stored, inserted)
            else:
                portions = spread(portions, stored)
                if "{{" in stored:
                    portions = _tokens_whole(portions)
        for entry, portion in zip(owners, portions, strict=True):
            if entry.end <= end:
                entry.stored = "".join(entry.parts) + portion if entry.parts else portion
                block.waiting.popleft()
            elif entry.parts is None:
                entry.parts = [portion]
            else:
                entry.parts.append(portion)

    # ------------------------------------------------------------------------ tool calls

    def _arguments_delta(self, event: Any, fields: dict[str, Any]) -> Iterable[Record]:
        index, delta = fields.get("content_index"), fields.get("delta")
        grows = self._grows(fields, index, "arguments", delta)
        self._template = None
        if type(delta) is not str or type(index) is not int:
            return self._pass(event)
        block = self._block(index, "arguments")
        if block.closed:  # a delta after the end: written whole, redacted on its own
            return self._pass(event)
        start = block.length
        block.length += len(delta)
        entry = _Entry(
            "toolcall_delta", block, delta, start, block.length, None if grows else event
        )
        if self._check_arguments and not self._snapshot_is_parse(block, fields, index, delta):
            entry.event, entry.own = event, True
        self._held.append(entry)
        block.waiting.append(entry)
        return []

    def _snapshot_is_parse(
        self, block: _Block, fields: dict[str, Any], index: int, delta: str
    ) -> bool:
        """Whether the delta's snapshot holds, for its tool call, the parse of the raw deltas
        so far (what a replay rebuilds from them)."""
        if block.raw_parse is None:
            block.raw_parse = StreamingJsonObject()
        parsed = block.raw_parse.feed(delta)
        partial = fields.get("partial")
        content = getattr(partial, "content", None)
        if type(content) is not list or not 0 <= index < len(content):
            return True  # no snapshot of the block: nothing to keep
        arguments = getattr(content[index], "arguments", None)
        return strictly_equal(arguments, parsed)

    def _settle_arguments(self, block: _Block, *, cut_short: bool) -> None:
        """Store a tool call's deltas as the growth of its redacted arguments: unchanged when
        redaction changes nothing, else joined to the compact JSON of the redacted arguments
        (valid JSON), or to the redacted text (not valid JSON, or cut short)."""
        pieces = [entry.delta for entry in block.waiting]
        raw = "".join(pieces)
        parsed = _parsed(raw)
        if parsed is not None and not cut_short:
            redacted = self._redactor.remove_from_output(parsed)
            target = raw if redacted == parsed else orjson.dumps(redacted).decode()
            block.final_raw, block.final_stored = parsed, redacted
            given = parsed
        else:
            # Not valid JSON, or cut short: the rules run on what the text decodes to as far
            # as it parses (an escape such as "\n" must not hide the word after it), and on
            # the text itself (keys in single quotes, a value cut off).
            decoded = parse_streaming_json(raw) if raw.strip() else {}
            finished = (
                _with_last_string(decoded, self._redactor.redact_unfinished)
                if cut_short
                else decoded
            )
            given = decoded
            redacted = self._redactor.remove_from_output(finished)
            base = raw if redacted == decoded else orjson.dumps(redacted).decode()
            target = self._redactor.redact_arguments_text(base, unfinished=cut_short)
            block.final_raw, block.final_stored = _arguments_of(raw), _arguments_of(target)
            if target != raw:  # what the text gives may still hold a secret under another name
                block.final_stored = self._redactor.remove_from_output(block.final_stored)
        block.rewritten = target != raw
        if target != raw:
            where = f"content[{block.index}].arguments"
            changes = _argument_changes(
                given, redacted, where, self._redactor, "cut-short" if cut_short else "known-value"
            )
            for path, rules in changes.items():
                self.marks.setdefault(path, set()).update(rules)
            if not changes:  # only the text rules found something: the arguments as a whole
                self._mark(where, raw, target, cut_short, names=_names_secret(parsed, raw))
            if pieces:
                pieces = spread(pieces, target)
                if "{{" in target:
                    pieces = _tokens_whole(pieces)
        for entry, piece in zip(block.waiting, pieces, strict=True):
            entry.stored = piece
        block.waiting.clear()
        block.settled = block.length
        block.closed = True

    # ------------------------------------------------------------------------ checks

    def _grows(self, fields: dict[str, Any], index: Any, field: str, delta: Any) -> bool:
        """Whether the delta's snapshot is the previous event's with only block ``index``'s
        ``field`` grown by ``delta``. Blocks and usage are immutable values that snapshots
        share until they change, so "nothing else changed" is a comparison of the other
        values, which stops at the first identical pair; the grown text is checked by its
        length and its end. Only then may the delta be written from its delta alone."""
        partial, previous = fields.get("partial"), self._previous
        self._previous = partial
        if (
            type(partial) is not AssistantMessage
            or type(previous) is not AssistantMessage
            or type(index) is not int
            or type(delta) is not str
        ):
            return False
        message, before = partial.__dict__, previous.__dict__
        try:
            rest = _MESSAGE_OTHERS(message)  # type: ignore[misc]
            seen = self._rest
            self._rest = (partial, rest)
            if rest != (seen[1] if seen[0] is previous else _MESSAGE_OTHERS(before)):  # type: ignore[misc]
                return False
            content, old = message["content"], before["content"]
            if len(content) != len(old) or not 0 <= index < len(content):
                return False
            block, old_block = content[index], old[index]
            kind = type(block)
            if kind is not type(old_block):
                return False
            values, old_values = block.__dict__, old_block.__dict__
            if field != "arguments":
                text, old_text = values[field], old_values[field]
                if (
                    type(text) is not str
                    or type(old_text) is not str
                    or len(text) != len(old_text) + len(delta)
                    or not text.endswith(delta)
                ):
                    return False
            others = self._getters.get((kind, field), _UNKNOWN)
            if others is _UNKNOWN:
                others = self._getters[(kind, field)] = _fields_besides(kind, field)
            if others is None:
                return False
            return others(values) == others(old_values) and (
                len(content) == 1
                or (content[:index] == old[:index] and content[index + 1 :] == old[index + 1 :])
            )
        except KeyError:  # built without validation, a field missing
            return False

    def _mark(
        self, path: str, raw: str, stored: str, cut_short: bool, *, names: bool = False
    ) -> None:
        """Note that redaction removed something at ``path`` of the model's output (a run value
        stored as ``{{name}}`` removes nothing, and is not noted)."""
        if stored.count(PLACEHOLDER) <= raw.count(PLACEHOLDER):
            return
        rules = set(self._redactor.rules_in(raw))
        if names:
            rules.add("secret-field-name")
        if not rules:
            rules.add("cut-short" if cut_short else "known-value")
        self.marks.setdefault(path, set()).update(rules)

    # ------------------------------------------------------------------------ output

    def _pass(self, event: Any) -> Iterable[Record]:
        if not self._held:
            return [self._whole(event)]
        self._held.append(_Entry(event.__dict__.get("type", ""), None, "", 0, 0, event))
        return self._release()

    def _release(self) -> Iterator[Record]:
        """The records that may be written now: every held entry up to the first whose stored
        form is not known yet. Made one at a time, as the caller writes them: a record holds
        what its line needs (a tool call's arguments before and after its delta), and a list
        of all the records of a long held stretch would hold every state of it at once
        (2.5 GB for 200 KB of arguments)."""
        held = self._held
        while held and held[0].stored is not None:
            entry = held.popleft()
            block, stored = entry.block, entry.stored
            if block is not None:
                block.released.append(stored)  # type: ignore[arg-type]
                block.emitted = entry.end
                if block.parse is not None:
                    before = block.value
                    block.value = block.parse.feed(stored)  # type: ignore[arg-type]
                    if entry.event is None:
                        yield _new_record(
                            ArgumentsGrowth, (block.index, stored, before, block.value)
                        )
                        continue
                    if entry.own and not block.rewritten:
                        yield self._whole(entry.event, stored, own_block=block.index)
                        continue
                elif (
                    entry.dropped is not None
                    or entry.open_bang is not None
                    or block.open_bang is not None
                ):
                    yield self._literal_delta(entry, block, stored)  # type: ignore[arg-type]
                    continue
                elif entry.event is None:
                    yield _new_record(TextGrowth, (entry.type, block.index, stored))
                    continue
                yield self._whole(entry.event, stored)
            else:
                yield self._whole(entry.event)

    def _literal_delta(self, entry: _Entry, block: _Block, stored: str) -> Record:
        """A text delta that shares an escaped literal with another delta (already counted in
        ``block.released``): its delta without the bang it holds, and written whole when its
        snapshot is not the previous one grown by that delta (the bang comes back in the
        snapshot where the literal ends)."""
        shown = _without(stored, entry.dropped) if entry.dropped else stored
        before_open, block.open_bang = block.open_bang, entry.open_bang
        text = block.stored_text()  # through this delta
        tail = text[len(text) - len(stored) - (before_open or 0) :]  # from the open bang, if any
        grown = _shown(tail[: len(tail) - len(stored)], before_open) + shown == _shown(
            tail, entry.open_bang
        )
        if grown and entry.event is None:
            return _new_record(TextGrowth, (entry.type, block.index, shown))  # type: ignore[no-any-return]
        if entry.templated:
            return self._whole(entry.source, shown, grown_block=block.index)
        return self._whole(entry.event if entry.event is not None else entry.source, shown)

    def _whole(
        self,
        event: Any,
        stored_delta: str | None = None,
        own_block: int | None = None,
        grown_block: int | None = None,
    ) -> Whole:
        """The event dumped and redacted, with the stored form of every streamed block in
        place of its raw text (a block the stream did not account for is redacted on its own,
        and noted when that changes it). ``own_block``: a tool call whose snapshot arguments
        are kept as the provider made them (redacted like any model output). ``grown_block``:
        ``event`` is the template of a run of grown deltas (see ``_template``) standing for a
        later one, whose snapshot text in that block is the block's stored text so far."""
        dump = type(event).__pydantic_serializer__.to_python(event, mode="json")
        kept: list[tuple[tuple[Any, ...], Any]] = []  # (path in the dump, stored value)
        if stored_delta is not None and "delta" in dump:
            kept.append((("delta",), stored_delta))
            dump["delta"] = ""
        kind = dump.get("type")
        index = dump.get("content_index")
        if kind in _TEXT_ENDS and type(dump.get("content")) is str:
            block = self._blocks.get(index)
            if (
                block is not None
                and block.field == _TEXT_ENDS[kind]
                and len(dump["content"]) == block.emitted
            ):
                kept.append((("content",), block.stored_text()))
                dump["content"] = ""
        if kind == "toolcall_end" and type(dump.get("tool_call")) is dict:
            self._keep_block(dump["tool_call"], self._blocks.get(index), ("tool_call",), kept)
        for name in _MESSAGES:
            message = dump.get(name)
            content = message.get("content") if type(message) is dict else None
            if type(content) is list:
                blocks = self._blocks
                for position, item in enumerate(content):
                    block = blocks.get(position)
                    if block is not None and type(item) is dict and position != own_block:
                        self._keep_block(
                            item, block, (name, "content", position), kept, position == grown_block
                        )
        redacted = self._redactor.remove_secret_values(dump)
        if redacted != dump:
            self._mark_changes(dump, redacted, "")
        for path, value in kept:
            target = redacted
            for step in path[:-1]:
                target = target[step]
            target[path[-1]] = value
        return Whole(redacted)

    def _keep_block(
        self,
        item: dict[str, Any],
        block: _Block | None,
        where: tuple[Any, ...],
        kept: list[tuple[tuple[Any, ...], Any]],
        grown: bool = False,
    ) -> None:
        """Take a streamed block's stored value aside (blanking it in the dump) when the raw
        value is the one its deltas streamed (``grown``: known to be, see ``_whole``)."""
        if block is None or item.get("type") != _BLOCK_TYPES[block.field]:
            return
        field = block.field
        value = item.get(field)
        if field == "arguments":
            if block.closed:
                if value == block.final_raw:
                    kept.append(((*where, field), block.final_stored))
                    item[field] = {}
            else:
                kept.append(((*where, field), block.value))
                item[field] = {}
        elif type(value) is str and (grown or len(value) == block.emitted):
            kept.append(((*where, field), _shown(block.stored_text(), block.open_bang)))
            item[field] = ""

    def _mark_changes(self, raw: Any, redacted: Any, path: str) -> None:
        """Note every string of the model's output that redaction changed (rare: text a
        provider showed without streaming it, an error message)."""
        if type(raw) is dict and type(redacted) is dict:
            for key, value in raw.items():
                if key in redacted:
                    # A toolcall_end's tool call is the message's block: named as such.
                    index = raw.get("content_index") if not path and key == "tool_call" else None
                    here = (
                        f"content[{index}]"
                        if type(index) is int
                        else f"{path}.{key}"
                        if path
                        else str(key)
                    )
                    self._mark_changes(value, redacted[key], here)
                elif value is not None:
                    self.marks.setdefault(f"{path}.{key}" if path else str(key), set()).add(
                        "secret-field-name"
                    )
        elif type(raw) is list and type(redacted) is list:
            for position, (value, other) in enumerate(zip(raw, redacted, strict=False)):
                self._mark_changes(value, other, f"{path}[{position}]")
        elif raw != redacted and PLACEHOLDER in str(redacted) and PLACEHOLDER not in str(raw):
            where = (
                path.split(".", 1)[1]
                if path.split(".", 1)[0] in _MESSAGES and "." in path
                else path
            )
            rules = set(self._redactor.rules_in(raw)) if type(raw) is str else set()
            self.marks.setdefault(where, set()).update(rules or {"secret-field-name"})


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")


def _key_step(key: Any) -> str:
    """A dict key as a step of a field path: ``.name``, or ``["a key"]`` when it is no plain
    name."""
    text = str(key)
    return f".{text}" if _PLAIN_KEY.match(text) else f"[{orjson.dumps(text).decode()}]"


def _argument_changes(
    raw: Any, redacted: Any, path: str, redactor: Redactor, default: str
) -> dict[str, set[str]]:
    """The key paths inside a tool call's arguments where redaction removed something
    (``content[1].arguments.auth.password``), with their rules: the paths are built from the
    redacted keys, so a key that held a secret is named without it. Empty when the two do not
    line up (the arguments as a whole are named then)."""
    changes: dict[str, set[str]] = {}
    stack = [(raw, redacted, path)]
    while stack:
        before, after, here = stack.pop()
        if type(before) is dict and type(after) is dict and len(before) == len(after):
            for (key, value), (stored_key, stored) in zip(
                before.items(), after.items(), strict=True
            ):
                child = here + _key_step(stored_key)
                if stored == PLACEHOLDER and value != PLACEHOLDER and is_exact_secret_name(key):
                    changes.setdefault(child, set()).add("secret-field-name")
                else:
                    if key != stored_key:
                        changes.setdefault(child, set()).update(
                            redactor.rules_in(str(key)) or {default}
                        )
                    stack.append((value, stored, child))
        elif type(before) is list and type(after) is list and len(before) == len(after):
            stack.extend(
                (value, stored, f"{here}[{number}]")
                for number, (value, stored) in enumerate(zip(before, after, strict=True))
            )
        elif type(before) is str and type(after) is str:
            if after.count(PLACEHOLDER) > before.count(PLACEHOLDER):
                changes.setdefault(here, set()).update(redactor.rules_in(before) or {default})
        elif before != after and after == PLACEHOLDER:
            changes.setdefault(here, set()).add(default)
    return changes


def _with_last_string(value: Any, change: Callable[[str], str]) -> Any:
    """``value`` (parsed JSON) with its last string in document order, the one a stream cut
    short may have cut off, replaced by ``change`` of it: copies along that path only."""
    if type(value) is str:
        return change(value)
    if type(value) is dict and value:
        last = next(reversed(value))
        return {**value, last: _with_last_string(value[last], change)}
    if type(value) is list and value:
        return [*value[:-1], _with_last_string(value[-1], change)]
    return value


def _parsed(raw: str) -> Any:
    """The JSON value of a tool call's whole argument text, or None when it is not valid."""
    if not raw.strip():
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def _arguments_of(text: str) -> dict[str, Any]:
    """The arguments the assembler makes of a tool call's text (see ``end_tool_call``)."""
    if not text.strip():
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        value = parse_streaming_json(text)
    return value if isinstance(value, dict) else {}


def _names_secret(parsed: Any, raw: str) -> bool:
    """Whether a secret field name (exact) is among the arguments' keys."""
    if parsed is None:
        return any(is_exact_secret_name(word) for word in _words(raw))
    stack: list[Any] = [parsed]
    while stack:
        value = stack.pop()
        if type(value) is dict:
            if any(
                is_exact_secret_name(key) and item != PLACEHOLDER for key, item in value.items()
            ):
                return True
            stack.extend(value.values())
        elif type(value) is list:
            stack.extend(value)
    return False


def _words(text: str) -> Iterable[str]:
    word = []
    for ch in text:
        if ch.isalnum() or ch in "_-":
            word.append(ch)
        elif word:
            yield "".join(word)
            word = []
    if word:
        yield "".join(word)
