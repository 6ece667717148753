"""Redaction that sees the stream: the stage in front of :mod:`.encoder` that decides what a
call's streamed deltas are stored as (see ``docs/file-format.md``, "Redaction").

Redacting each stored string on its own is not enough: a secret streamed in small deltas is
written before it can be recognised, and the deltas of a tool call join back to arguments whose
secret fields were removed. So this stage, per call, **holds back** the stored form of text,
thinking and tool-call deltas (and every later event of the call: event lines stay in
``event_index`` order) until the raw text past them is known to be safe:

* text and thinking: up to the block's last safe cut (``Redactor.safe_cut``: whitespace not
  after a scheme word, not inside an open PEM block, none at all when a known value holds
  whitespace), else the block's end or the call's end. The segment between two safe points is
  redacted once, on its own (the cut guarantees that equals redacting the whole text);
* tool-call arguments: until ``toolcall_end``, where the arguments are known whole.

The live consumer is not delayed: only the file write waits (see :mod:`.recorder`).

On release, a segment that redaction leaves alone (the usual case, proved by the cheap
``Trigger`` search first) keeps its deltas exactly as streamed, so prose replays byte-identical,
deltas included, and the events reach the encoder as the very objects the provider produced
(its hot path relies on that). Otherwise the held deltas are rewritten so that they join to the
redacted segment: the prefix and suffix the raw and redacted texts share stay where they were,
the replaced middle goes to the delta in which it starts (:func:`spread`). Tool-call deltas then
join to the compact JSON of the redacted arguments. Once anything in a call was rewritten, each
released event's ``partial`` shows the stored texts so far. A released ``toolcall_delta`` always
shows the arguments parsed, incrementally, from the tool call's stored deltas so far (held ones
keep none: each snapshot holds the whole arguments so far, quadratic memory), which is also
what :mod:`.encoder` writes for a tool call still streaming.

A held delta is rebuilt into an event only when it is the first of a run released at once: the
ones after it, unchanged, go on as :class:`Growth` records (the delta and the event it grows),
so that a long run costs no snapshot text or event per delta; the encoder writes the same
bytes from either, and asks a growth for its event when it cannot follow it.

Everything the stage hands on is redacted text, so the encoder does not redact block texts
again: recording costs O(total length) whatever the text looks like.

A crash loses the events held since the last safe point (a tool call's deltas since its start),
never a whole call's worth: ``docs/file-format.md`` states the rule.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from operator import is_, itemgetter
from typing import Any

import orjson

from ..providers.partial_json import StreamingJsonObject, parse_streaming_json
from ..providers.types import TERMINAL_EVENT_TYPES, AssistantMessage, ToolCall
from .redaction import Redactor

__all__ = ["StreamRedaction", "Growth", "spread"]

_TEXT_DELTAS = {"text_delta": "text", "thinking_delta": "thinking"}
_TEXT_ENDS = {"text_end": "text", "thinking_end": "thinking"}
_TEXT_FIELDS = ("text", "thinking")
# ``safe_cut`` cuts only after ASCII whitespace: a delta without any cannot add a safe point.
_HAS_CUT_WHITESPACE = re.compile(r"[ \t\n\r\f\v]").search
_CUT_CHARACTERS = frozenset(" \t\n\r\f\v")


def _common_prefix_length(a: str, b: str) -> int:
    """By halving, so that each step is one C-level comparison: long texts stay cheap."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


_set = object.__setattr__


_PLAIN_CLASSES: dict[type, bool] = {}


def _plain(model: Any) -> bool:
    """Whether the model's class lets it hold only its fields (no extra, no private values),
    so that :func:`_build` can rebuild it from its ``__dict__``."""
    kind = type(model)
    plain = _PLAIN_CLASSES.get(kind)
    if plain is None:
        config = getattr(kind, "model_config", {})
        plain = _PLAIN_CLASSES[kind] = config.get("extra") != "allow" and not getattr(
            kind, "__private_attributes__", None
        )
    return plain


def _build(kind: type, values: dict[str, Any], fields_set: set[str]) -> Any:
    """A model of class ``kind`` holding ``values``, without validation nor pydantic's generic
    copy (several times the cost of the rest of a delta's work): what ``model_copy`` makes of
    a plain model, for the snapshots this stage rebuilds per held delta."""
    model = kind.__new__(kind)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", fields_set)
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model


def _others(values: dict[str, Any], excluded: str) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """A getter of the tuple of the values of every key of ``values`` but ``excluded``."""
    names = [name for name in values if name != excluded]
    if not names:
        return lambda values: ()
    return itemgetter(*names, names[0])  # always a tuple, even of one name


class _Frame:
    """A held delta's snapshot without the value its block grows (text, thinking or
    arguments): the message's field values, its content with that block left out, and the
    block's other field values. Deltas held in a row share one frame while those values stay
    the same objects, so holding a delta costs no copy of the snapshot, and the events rebuilt
    from one frame share every value but the grown one (the encoder's hot path checks that by
    identity)."""

    __slots__ = (
        "message_kind", "message", "message_set", "message_others", "message_rest",
        "content", "block_kind", "block", "block_set", "block_others", "block_rest", "event_kind",
    )

    def __init__(self, event: Any, partial: Any, content: list[Any], index: int, field: str) -> None:
        item = content[index]
        self.event_kind = type(event)  # the class of the delta events it was made for
        self.message_kind, self.message_set = type(partial), partial.__pydantic_fields_set__
        self.message = {**partial.__dict__, "content": None}
        self.content = list(content)
        self.content[index] = None
        self.block_kind, self.block_set = type(item), item.__pydantic_fields_set__
        self.block = {**item.__dict__, field: None}
        # What :meth:`fits` compares by identity: every value but the content and the grown one.
        self.message_others = _others(self.message, "content")
        self.block_others = _others(self.block, field)
        self.message_rest, self.block_rest = self.message_others(self.message), self.block_others(self.block)

    def fits(self, partial: Any, content: list[Any], index: int) -> bool:
        """Whether ``partial`` is this frame with only block ``index``'s grown value changed
        (the frame's block, which keeps its field)."""
        item = content[index]
        message, values, before = partial.__dict__, item.__dict__, self.content
        try:
            return (
                type(partial) is self.message_kind
                and type(item) is self.block_kind
                and len(content) == len(before)
                and len(message) == len(self.message)
                and len(values) == len(self.block)
                and all(map(is_, self.message_others(message), self.message_rest))
                and all(map(is_, self.block_others(values), self.block_rest))
                and all(map(is_, content[:index], before[:index]))
                and all(map(is_, content[index + 1 :], before[index + 1 :]))
            )
        except KeyError:  # a field missing (built without validation)
            return False

    def event(self, held: _Held, field: str, value: Any) -> Any:
        """The held delta's event, its snapshot showing ``value`` as the grown field."""
        kind, values, fields_set = held.kind, held.event, held.fields_set
        content = self.content.copy()
        content[values["content_index"]] = _build(self.block_kind, {**self.block, field: value}, self.block_set)
        values["partial"] = _build(self.message_kind, {**self.message, "content": content}, self.message_set)
        return _build(kind, values, fields_set)


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


def _delta_block(event: Any) -> tuple[AssistantMessage, list[Any], int] | None:
    """The snapshot of a delta event, its content and the index of the block it grew; None
    when the event does not show that block (it is then held as it is)."""
    partial = getattr(event, "partial", None)
    index = event.content_index
    if type(partial) is not AssistantMessage or type(index) is not int:
        return None
    content = partial.content
    if not 0 <= index < len(content):
        return None
    return partial, content, index


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
    prefix = _common_prefix_length(source, target)
    limit = min(len(source), len(target)) - prefix
    suffix = _common_prefix_length(source[::-1][:limit], target[::-1][:limit])
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


class Growth:
    """A released delta handed on without its event: the stage vouches that its event is the
    one released just before it (``anchor``'s, or that of the growth before it) with only
    ``delta`` appended to block ``index`` (its text, or its arguments' text, parsed as
    ``arguments``), nothing rewritten. The encoder then writes its line from the delta alone
    (no snapshot rebuilt, nothing compared), or, when its own state does not follow
    ``anchor``, asks for the event (:meth:`event`).

    Valid only while the stage's release that yielded it is paused there (see
    :meth:`StreamRedaction._release`)."""

    __slots__ = ("type", "index", "delta", "anchor", "arguments", "_stage", "_held", "_materialized")

    def __init__(
        self, stage: StreamRedaction, held: _Held, event_type: str, anchor: Any, arguments: Any = None
    ) -> None:
        self.type, self.index, self.delta = event_type, held.event["content_index"], held.delta
        self.anchor, self.arguments = anchor, arguments
        self._stage, self._held, self._materialized = stage, held, None

    def event(self) -> Any:
        """The delta's event, rebuilt as the stage would have released it."""
        if self._materialized is None:
            self._materialized = self._stage._thick(self._held, self.arguments, grown=True)
        return self._materialized


class _Held:
    """One event waiting to be written; a delta also waits for its stored form."""

    __slots__ = ("event", "block", "start", "end", "stored", "pieces", "frame", "base", "kind", "fields_set", "delta")

    def __init__(self, event: Any, block: _Block | None = None, start: int = 0, end: int = 0) -> None:
        #: The event, or while thinned (class, field values without the snapshot, fields set).
        self.event = event
        self.delta = event.delta if block is not None else None
        self.block = block
        self.start, self.end = start, end  # the raw range of the delta in its block
        self.stored: str | None = None if block is not None else ""
        #: Stored pieces gathered while the delta spans segments (None: none yet). Held deltas
        #: are many: each allocates as few containers as it can (the garbage collector's work
        #: grows with them).
        self.pieces: list[str] | None = None
        #: A held delta keeps no snapshot text or arguments (``_thin``): the frame to rebuild
        #: its snapshot from (None: not thinned), and for text the raw text before the delta
        #: (None: the text the previous thinned delta ended with). ``event`` is then the
        #: event's field values without the snapshot, of class ``kind``.
        self.frame: _Frame | None = None
        self.base: str | None = None
        self.kind: type | None = None
        self.fields_set: set[str] | None = None


class _Block:
    """The raw and stored state of one streamed block (text, thinking or tool call)."""

    __slots__ = (
        "field", "pending", "settled", "length", "waiting", "released", "dirty", "closed", "view",
        "thinned_to", "raw", "light", "emitted", "parsed", "frame",
    )

    def __init__(self, field: str) -> None:
        self.field = field  # "text", "thinking" or "arguments"
        self.pending: list[str] = []  # raw text past the last safe point
        self.settled = 0  # raw length whose stored form is known
        self.length = 0  # raw length received
        self.waiting: deque[_Held] = deque()  # deltas whose stored form is incomplete
        self.released: list[str] = []  # stored deltas written so far
        self.dirty = False  # a stored delta differs from the raw one
        self.closed = False  # the block's end event was written
        self.view: tuple[Any, int, Any] | None = None  # (raw block, stored length, stored block)
        self.thinned_to = -1  # raw length at the last thinned delta
        self.raw = ""  # raw text rebuilt for thinned deltas, as of the last one released
        #: Deltas released since ``raw`` as :class:`Growth` (their text never built).
        self.light: list[str] = []
        self.emitted = 0  # raw length of the deltas released so far
        #: A tool call's stored deltas released so far, parsed incrementally: the arguments its
        #: released events show (each event's own value, sharing unchanged parts).
        self.parsed = StreamingJsonObject() if field == "arguments" else None
        self.frame: _Frame | None = None  # the frame of the last thinned delta


class StreamRedaction:
    """The per-call stage: ``feed(event)`` returns the events that may now be encoded, in
    order, with stored (redacted) block texts; ``flush()`` returns whatever is still held
    (the call ended, failed, was cancelled or closed early). Both return iterables to
    consume whole before the next call. Held text deltas keep no snapshot text (``_thin``),
    so memory stays linear in the text however long it is held.

    Every event fed is released exactly once, in the order fed: the recorder relies on that
    to give each written line the time its event arrived (``t``), however long it was held."""

    def __init__(self, redactor: Redactor) -> None:
        self._redact = redactor.str_redactor()
        self._remove = redactor.remove_secret_values
        self._safe_cut = redactor.safe_cut
        self._redact_unfinished = redactor.redact_unfinished
        self._search = redactor.trigger().search
        self._cuts = self._safe_cut("a ") == 2  # False when a known value holds whitespace
        self._blocks: dict[int, _Block] = {}
        self._held: deque[_Held] = deque()
        self._dirty = False  # some stored delta of the call differs from the raw one
        #: A released event showed block text its deltas do not account for (a provider that
        #: sets text without streaming it): the texts are not known to be redacted, and the
        #: recorder must have the encoder redact them itself from then on.
        self.unaccounted = False
        #: The frame of the last event accounted: later events rebuilt from it differ only in
        #: the grown value, which is their deltas' by construction (nothing left to check).
        self._accounted: _Frame | None = None
        #: The snapshot of the last event rebuilt from a frame: the event a ``Growth`` grows.
        self._anchor: Any = None
        #: The text of the last rebuilt text delta and the text it was made from by appending
        #: the delta (None: from a slice), for :meth:`extends`.
        self._grown: tuple[str, str | None] = ("", None)

    def extends(self, text: str, previous: str) -> bool:
        """Whether this stage made ``text`` by appending a delta to ``previous`` (identity,
        not equality): the encoder then knows ``text.startswith(previous)`` without comparing
        the whole text so far."""
        grown = self._grown
        return grown[0] is text and grown[1] is previous

    def arguments_parse(self, index: int) -> StreamingJsonObject | None:
        """The parse of tool call ``index``'s stored deltas released so far (None: no tool
        call streams there), for the encoder to read instead of parsing them again."""
        block = self._blocks.get(index)
        return block.parsed if block is not None else None

    # ------------------------------------------------------------------------ input

    def feed(self, event: Any) -> Iterable[Any]:
        kind = getattr(event, "type", None)
        field = _TEXT_DELTAS.get(kind)  # type: ignore[arg-type]
        if field is not None:
            return self._text_delta(event, field)
        if kind == "toolcall_delta":
            block = self._blocks.get(event.content_index)
            if block is None or block.field != "arguments":
                block = self._block(event.content_index, "arguments")
            self._hold_delta(event, block)
            return ()
        if kind in TERMINAL_EVENT_TYPES:
            self._held.append(_Held(event))
            return self.flush(cut_short=kind != "done")
        if kind in _TEXT_ENDS:
            block = self._blocks.get(event.content_index)
            if block is not None and block.field == _TEXT_ENDS[kind]:
                self._settle_text(block, final=True)
        elif kind == "toolcall_end":
            block = self._blocks.get(event.content_index)
            if block is not None and block.field == "arguments":
                self._settle_arguments(block, event.tool_call.arguments)
        if not self._held:
            self._account(event)
            return [event] if not self._dirty else [self._stored(_Held(event))]
        self._held.append(_Held(event))
        return self._release()

    def flush(self, *, cut_short: bool = True) -> Iterable[Any]:
        """Settle every block as it stands and release everything held. ``cut_short``: the
        stream did not end normally (an ``error`` event, no terminal event, cancelled or
        closed early), so a block's last word may be the start of a secret cut off before any
        rule could recognise it: it is stored as ``PLACEHOLDER`` when it may be one."""
        for block in self._blocks.values():
            if block.field == "arguments":
                if block.waiting:
                    self._settle_arguments(block, None, cut_short=cut_short)
            else:
                self._settle_text(block, final=True, cut_short=cut_short)
        return self._release()

    # ------------------------------------------------------------------------ text

    def _text_delta(self, event: Any, field: str) -> Iterable[Any]:
        block = self._blocks.get(event.content_index)
        if block is None or block.field != field:
            block = self._block(event.content_index, field)
        delta = event.delta
        if type(delta) is not str:
            return self._pass(event)
        # The usual case: nothing held, and the delta ends at a safe point with nothing
        # redaction could act on: written as it is, at once.
        # A trigger-free delta holds no scheme word and no PEM header, so one that ends in
        # whitespace ends at a safe cut (unless a known value holds whitespace: ``_cuts``).
        if (
            not self._held
            and not block.pending
            and delta[-1:] in _CUT_CHARACTERS
            and self._cuts
            and self._search(delta, 0) is None
        ):
            block.length += len(delta)
            block.settled = block.emitted = block.length
            block.released.append(delta)
            self._account_delta(event, block)
            return [event] if not self._dirty else [self._stored(_Held(event, block, 0, 0), delta)]
        self._hold_delta(event, block)
        if delta and _HAS_CUT_WHITESPACE(delta):
            self._settle_text(block, final=False)
        return self._release()

    def _settle_text(self, block: _Block, *, final: bool, cut_short: bool = False) -> None:
        """Redact the pending raw text up to its last safe cut (all of it when ``final``;
        as a text cut short when ``cut_short``) and hand the stored pieces to the deltas
        waiting for them."""
        pending = "".join(block.pending)
        cut = len(pending) if final else self._safe_cut(pending)
        if cut:
            segment = pending[:cut]
            block.pending = [pending[cut:]] if cut < len(pending) else []
            if cut_short:
                stored = self._redact_unfinished(segment)
            elif self._search(segment, 0) is None:
                stored = segment
            else:
                stored = self._redact(segment)
            self._assign(block, segment, stored)
        if final:
            for held in block.waiting:  # empty deltas at the very end
                held.stored = "".join(held.pieces) if held.pieces else ""
            block.waiting.clear()

    def _assign(self, block: _Block, segment: str, stored: str) -> None:
        start, end = block.settled, block.settled + len(segment)
        block.settled = end
        owners: list[_Held] = []
        portions: list[str] = []
        for held in block.waiting:
            low = max(held.start, start)
            if low >= end and held.end > low:
                break
            owners.append(held)
            portions.append(segment[low - start : min(held.end, end) - start])
        if stored != segment:
            block.dirty = self._dirty = True
            portions = spread(portions, stored)
        for held, portion in zip(owners, portions, strict=True):
            if held.end <= end:
                held.stored = "".join(held.pieces) + portion if held.pieces else portion
                block.waiting.popleft()
            else:
                if held.pieces is None:
                    held.pieces = [portion]
                else:
                    held.pieces.append(portion)

    # ------------------------------------------------------------------------ tool calls

    def _settle_arguments(
        self, block: _Block, arguments: dict[str, Any] | None, *, cut_short: bool = False
    ) -> None:
        """Store a tool call's deltas as the growth of its redacted argument JSON: unchanged
        when redaction changes nothing, else joined to the compact JSON of the redacted
        arguments (``arguments`` None: the call ended before the block did, and what
        streamed so far is all there is; ``cut_short``: its last string may be cut off
        mid-secret)."""
        pieces = [held.delta for held in block.waiting]
        raw = "".join(pieces)
        if arguments is None:
            arguments = parse_streaming_json(raw)
        redacted = self._remove(
            _with_last_string(arguments, self._redact_unfinished) if cut_short else arguments
        )
        if redacted != arguments:
            target = orjson.dumps(redacted).decode()
        else:
            target = raw if self._search(raw, 0) is None else self._redact(raw)
        if target != raw and pieces:
            block.dirty = self._dirty = True
            pieces = spread(pieces, target)
        for held, piece in zip(block.waiting, pieces, strict=True):
            held.stored = piece
        block.waiting.clear()
        block.settled = block.length

    # ------------------------------------------------------------------------ output

    def _block(self, index: int, field: str) -> _Block:
        block = self._blocks[index] = _Block(field)
        return block

    def _hold_delta(self, event: Any, block: _Block) -> None:
        delta = event.delta
        start = block.length
        block.length += len(delta)
        held = _Held(event, block, start, block.length)
        if block.field != "arguments" and not delta and not block.waiting and not block.pending:
            held.stored = ""  # an empty delta at a safe point holds nothing
        else:
            block.waiting.append(held)
            block.pending.append(delta)
            self._thin(held, block)
        self._held.append(held)

    @staticmethod
    def _thin(held: _Held, block: _Block) -> None:
        """Keep a held delta without its snapshot's text or arguments, rebuilt on release:
        held snapshots each hold the whole value so far, which for a long text without a safe
        point (or a long tool call) would be quadratic memory. Text shown must be the raw
        text before the delta plus the delta, to be rebuilt from the deltas alone."""
        event = held.event
        found = _delta_block(event)
        if found is None:
            return
        partial, content, index = found
        field = block.field
        item = content[index]
        frame = block.frame
        # A frame is made only of plain classes: one that fits needs no class checked again.
        fits = frame is not None and type(event) is frame.event_kind and frame.fits(partial, content, index)
        if not fits and not (_plain(event) and _plain(partial) and _plain(item)):
            return
        if field == "arguments":
            if type(item) is not ToolCall:
                return
            base = None
        else:
            text = item.__dict__.get(field)
            if type(text) is not str or len(text) != held.end or not text.endswith(held.delta):
                return
            base = None if block.thinned_to == held.start else text[: held.start]
            block.thinned_to = held.end
        if not fits:
            frame = block.frame = _Frame(event, partial, content, index, field)
        held.frame, held.base, held.kind = frame, base, type(event)
        held.event, held.fields_set = {**event.__dict__, "partial": None}, event.__pydantic_fields_set__

    def _thick(self, held: _Held, arguments: Any = None, *, grown: bool = False) -> Any:
        """The event of a thinned held delta, its snapshot's text (or ``arguments``) restored;
        ``grown``: the delta went as a :class:`Growth` (a text one: the last of the block's
        ``light`` deltas)."""
        block = held.block
        frame, base = held.frame, held.base
        assert frame is not None and block is not None
        if block.field == "arguments":
            event = frame.event(held, "arguments", arguments)
        else:
            light = block.light
            if grown:
                light.pop()
            if base is not None:
                previous, text = None, base + held.delta
            elif light:
                previous, text = None, "".join([block.raw, *light, held.delta])
            else:
                previous = block.raw
                text = previous + held.delta
            light.clear()
            block.raw = text
            self._grown = (text, previous)
            event = frame.event(held, block.field, text)
        self._anchor = event.partial
        return event

    def _pass(self, event: Any) -> Iterable[Any]:
        self._held.append(_Held(event))
        return self._release()

    def _release(self) -> Iterator[Any]:
        """The releasable events, one at a time: a long run released at a block's end is
        encoded and dropped event by event, never all rebuilt at once. The caller consumes
        it whole before feeding the next event.

        A text delta that grows the event released just before it, nothing rewritten, goes
        as a :class:`Growth` (its snapshot text is never built): the usual case of a
        long run released at once."""
        held = self._held
        while held and held[0].stored is not None:
            entry = held.popleft()
            block = entry.block
            frame = entry.frame
            # A growth: a thinned delta after one of the same frame, base-less, nothing rewritten.
            light = (
                frame is not None
                and frame is self._accounted
                and entry.base is None
                and not self._dirty
                and not self.unaccounted
                and self._anchor is not None
            )
            if block is not None and block.parsed is not None:
                arguments = block.parsed.feed(entry.stored)  # type: ignore[arg-type]
                if light:
                    block.released.append(entry.stored)  # type: ignore[arg-type]
                    block.emitted = entry.end
                    yield Growth(self, entry, "toolcall_delta", self._anchor, arguments)
                    continue
                if frame is not None:
                    entry.event = self._thick(entry, arguments)
            elif frame is not None:
                if light:
                    block.light.append(entry.delta)  # type: ignore[union-attr]
                    block.released.append(entry.stored)  # type: ignore[union-attr, arg-type]
                    block.emitted = entry.end  # type: ignore[union-attr]
                    yield Growth(self, entry, entry.event["type"], self._anchor)
                    continue
                entry.event = self._thick(entry)
            if block is not None:
                block.released.append(entry.stored)  # type: ignore[arg-type]
                block.emitted = entry.end
            if frame is None or frame is not self._accounted:
                self._account(entry.event)
                self._accounted = frame
            yield self._stored(entry, entry.stored) if self._dirty else entry.event

    def _account_delta(self, event: Any, block: _Block) -> None:
        """:meth:`_account` for the usual delta, checking only the block it grew (every
        other event checks them all)."""
        try:
            text = getattr(event.partial.content[event.content_index], block.field)
        except (AttributeError, IndexError, TypeError):
            self.unaccounted = True
            return
        if type(text) is not str or len(text) != block.emitted:
            self.unaccounted = True

    def _account(self, event: Any) -> None:
        """Note (``unaccounted``) a raw event whose block texts are not exactly what the
        block's deltas streamed so far: only streamed text passed through this stage."""
        if self.unaccounted:
            return
        message = getattr(event, "partial", None) or getattr(event, "message", None) or getattr(event, "error", None)
        content = getattr(message, "content", None)
        if type(content) is not list:
            return
        blocks = self._blocks
        for index, item in enumerate(content):
            for field in _TEXT_FIELDS:
                text = getattr(item, field, None)
                if type(text) is str and text:
                    block = blocks.get(index)
                    if block is None or block.field != field or block.emitted != len(text):
                        self.unaccounted = True
                        return

    def _stored(self, entry: _Held, delta: str | None = None) -> Any:
        """The event as written: stored delta and stored block texts (only once something
        in the call was rewritten; before that, the event itself)."""
        event = entry.event
        kind = event.type
        if kind in _TEXT_ENDS or kind == "toolcall_end":
            block = self._blocks.get(event.content_index)
            if block is not None:
                block.closed = True
        update: dict[str, Any] = {}
        if delta is not None and entry.block is not None and delta != event.delta:
            update["delta"] = delta
        if kind in _TEXT_ENDS:
            block = self._blocks.get(event.content_index)
            if block is not None and block.dirty and block.field != "arguments":
                update["content"] = "".join(block.released)
        for name in ("partial", "message", "error"):
            message = getattr(event, name, None)
            if type(message) is AssistantMessage:
                stored = self._stored_message(message)
                if stored is not message:
                    update[name] = stored
        return event.model_copy(update=update) if update else event

    def _stored_message(self, message: AssistantMessage) -> AssistantMessage:
        content = message.content
        stored_content = None
        for index, raw_block in enumerate(content):
            block = self._blocks.get(index)
            if block is None or not block.dirty:
                continue
            stored_block = self._stored_block(block, raw_block)
            if stored_block is not raw_block:
                if stored_content is None:
                    stored_content = list(content)
                stored_content[index] = stored_block
        if stored_content is None:
            return message
        return message.model_copy(update={"content": stored_content})

    def _stored_block(self, block: _Block, raw_block: Any) -> Any:
        """A block with its stored text, reused while neither it nor its stored text changed
        (the encoder's hot path compares blocks by identity)."""
        if block.field == "arguments" and block.closed:
            return raw_block  # whole arguments: the encoder redacts them by field name
        if not hasattr(raw_block, block.field):
            return raw_block
        size = len(block.released)
        view = block.view
        if view is not None and view[0] is raw_block and view[1] == size:
            return view[2]
        value: Any = block.parsed.feed("") if block.parsed is not None else "".join(block.released)
        stored = raw_block.model_copy(update={block.field: value})
        block.view = (raw_block, size, stored)
        return stored
