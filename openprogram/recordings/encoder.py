"""Encoding one call's events as recorded ``event`` objects: redacted, with ``partial`` written
as a ``partial_patch`` against the previous snapshot (see ``docs/file-format.md``).

Two properties make recording linear in what was streamed:

* **Linear size.** An event's ``partial`` is written as a ``partial_patch`` against the
  previous one (see :mod:`.partial_patch`), computed on the redacted values.
* **Linear redaction.** In a recording, block texts and deltas arrive already redacted by
  :mod:`.stream_redaction` (``texts_redacted``) and are not redacted again. Used on its own,
  the encoder redacts the growing text of a streamed block incrementally: the
  prefix that no secret pattern can still span (``redaction.safe_cut``) is redacted once, only
  the tail is redacted again at every event; while the tail holds nothing redaction could act
  on (``redaction.Trigger``), not even that: only the delta and the few characters before it
  are searched. Deltas are redacted in the context of the text before them, so a credential
  split across chunks ("Bearer " + "abc123...") is still caught.

* **Linear tool-call arguments.** With ``texts_redacted`` the arguments of a tool call still
  streaming are those parsed, incrementally, from its stored deltas (as the stream redaction
  shows them), not redacted again; a ``toolcall_delta`` is patched along the one path of the
  arguments its delta changed (:func:`.patches.growth_patch`), never by dumping them whole.

The encoder of a call writes its whole event lines: the usual delta is one ``bytes`` format of
a template in which the call index and the block's content index are already filled in.

This module knows nothing of files or providers: :mod:`.recorder` writes what it encodes.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import is_, itemgetter
from typing import Any

import orjson

from ..providers.partial_json import StreamingJsonObject
from ..providers.types import AssistantMessage, AssistantMessageEvent, ToolCall
from .patches import compute_patch, growth_patch
from .redaction import Redactor, Trigger
from .stream_redaction import Growth

__all__ = ["EventEncoder"]

_CUT_AT = 96  # a growing tail longer than this is cut at a safe point (redacted for good)
_TEXT_FIELDS = ("text", "thinking")


class _GrowingText:
    """Redaction of one string that grows by appending, in time bounded by what is new.

    ``raw[:cut]`` lies before a point no secret pattern can span (``safe_cut``); its
    redaction never changes, so only the tail ``raw[cut:]`` is redacted again at each event.
    The redacted text is ``"".join(stable) + tail_redacted``: the stable part is kept in
    pieces and joined only when a whole text must be written (rarely), since appending to one
    string would copy the whole answer at every cut.

    ``clean`` says the tail holds nothing redaction could act on (no ``Trigger`` match), so
    it is its own redaction; text appended to a clean tail needs only the appended part
    searched (see :meth:`grow_clean`), which is the recorder's usual case.
    """

    __slots__ = (
        "raw", "cut", "stable", "tail_raw", "tail_redacted", "clean", "pending_cut", "reset",
        "gained", "previous_length", "search", "reach",
    )

    def __init__(self, trigger: Trigger) -> None:
        self.raw = ""
        self.cut = 0
        self.stable: list[str] = []
        self.tail_raw = ""  # raw[cut:]
        self.tail_redacted = ""
        self.clean = True
        self.pending_cut = 0
        self.reset = False
        self.gained = ""  # what the redacted text gained at the last step (see advance)
        self.previous_length = 0  # of the raw text before the last step
        self.search, self.reach = trigger

    def full(self) -> str:
        stable = self.stable
        if len(stable) > 1:
            stable[:] = ["".join(stable)]
        return (stable[0] if stable else "") + self.tail_redacted

    def grow_clean(self, text: str, delta: str, safe_cut: Callable[[str], int]) -> bool:
        """Take ``text`` (the previous text plus a non-empty ``delta``) if the tail stays
        clean, so that the redacted text simply gains ``delta``; False (nothing changed) when
        the tail is not clean or the delta makes it so, for the caller to :meth:`extend`."""
        tail = self.tail_raw
        grown = tail + delta
        if not self.clean or self.search(grown, len(tail) - self.reach + 1):
            return False
        self.raw = text
        self.take_clean(grown, safe_cut)
        return True

    def take_clean(self, grown: str, safe_cut: Callable[[str], int]) -> None:
        """Make ``grown`` (a clean tail that gained a delta) the tail, settling what lies
        before its safe cut: the bookkeeping of :meth:`grow_clean` without the raw text, which
        a caller that knows it grew by ``grown`` sets later (``raw``)."""
        if len(grown) > _CUT_AT:
            cut = safe_cut(grown)
            if cut:  # a trigger-free piece is its own redaction: settled as it is
                self.stable.append(grown[:cut])
                self.cut += cut
                grown = grown[cut:]
        self.tail_raw = self.tail_redacted = grown

    def prepare(
        self, text: str, safe_cut: Callable[[str], int], *, extends: bool = False
    ) -> tuple[str, str]:
        """The raw pieces to redact for ``text``: the part becoming stable and the new tail.
        ``extends`` says the caller has checked that ``text`` starts with the previous text
        (comparing a long text twice per event is what makes long answers slow)."""
        self.previous_length = len(self.raw)
        self.reset = not (extends or text.startswith(self.raw))
        if self.reset:
            self.cut, self.stable, self.tail_redacted = 0, [], ""
        tail = text[self.cut :]
        cut = safe_cut(tail) if len(tail) > _CUT_AT else 0
        self.pending_cut = cut
        self.raw = text
        self.tail_raw = tail[cut:]
        return tail[:cut], self.tail_raw

    def extend(
        self, text: str, redact: Callable[[str], str], safe_cut: Callable[[str], int], path: list[Any]
    ) -> list[Any] | None:
        """:meth:`prepare` then :meth:`advance`, for a ``text`` the caller has checked starts
        with the previous one."""
        settled, tail = self.prepare(text, safe_cut, extends=True)
        return self.advance(redact(settled) if settled else "", redact(tail) if tail else "", path)

    def advance(self, settled: str, tail: str, path: list[Any]) -> list[Any] | None:
        """Take the redacted pieces; return the operation that moves the redacted text from
        its previous value to the new one (None when unchanged)."""
        before = self.tail_redacted
        grown = settled + tail  # the redaction of raw[old cut:]
        if settled:
            self.stable.append(settled)
            self.cut += self.pending_cut
        self.tail_redacted = tail
        self.clean = self.search(self.tail_raw, 0) is None
        if self.reset:
            self.gained = ""
            return ["set", path, self.full()]
        if grown == before:
            self.gained = ""
            return None
        if grown.startswith(before):
            self.gained = grown[len(before) :]
            return ["append", path, self.gained]
        # A secret completed and replaced text already recorded: the redacted delta is the
        # part after what the two redactions share.
        self.gained = grown[_common_prefix_length(before, grown) :]
        return ["set", path, self.full()]


class _DeltaContext:
    """Redacts the deltas of one streamed block in the context of the text before them.

    A credential split across chunks ("Bearer " + "abc123...") is caught: the redacted delta
    is what the redacted text gained, identical to the delta for ordinary text, the
    placeholder where a secret completed. Only the text after the last safe cut is kept.
    """

    __slots__ = ("pending", "pending_redacted", "pending_cut")

    def __init__(self) -> None:
        self.pending = ""
        self.pending_redacted = ""
        self.pending_cut = 0

    def prepare(self, delta: str, safe_cut: Callable[[str], int]) -> tuple[str, str]:
        text = self.pending + delta
        cut = safe_cut(text) if len(text) > _CUT_AT else 0
        self.pending = text[cut:]
        return text[:cut], self.pending

    def advance(self, settled: str, pending: str) -> str:
        before = self.pending_redacted
        after = settled + pending
        self.pending_redacted = pending
        if after.startswith(before):
            return after[len(before) :]
        return after[_common_prefix_length(before, after) :]


def _common_prefix_length(a: str, b: str) -> int:
    limit = min(len(a), len(b))
    index = 0
    while index < limit and a[index] == b[index]:
        index += 1
    return index


def _lift_texts(partial: dict[str, Any]) -> list[tuple[int, str, str]]:
    """Take the block texts out of ``partial`` (blanking them in place: the dump is ours).
    They are redacted and diffed incrementally; the rest, small, as a whole."""
    content = partial.get("content")
    lifted: list[tuple[int, str, str]] = []
    if type(content) is not list:
        return lifted
    for index, block in enumerate(content):
        if type(block) is dict:
            for field in _TEXT_FIELDS:
                value = block.get(field)
                if type(value) is str and value:
                    block[field] = ""
                    lifted.append((index, field, value))
    return lifted


#: Delta events whose delta is the growth of a text field of the partial.
_DERIVED_DELTAS = {"text_delta": "text", "thinking_delta": "thinking"}

# The encodings of the hot path's two usual results, byte for byte what ``orjson.dumps`` makes
# of the equivalent dict (a property test holds the two paths to that).
def _append_template(event_type: str, index: int) -> bytes:
    """A delta appended to block ``index``: fill in the delta's JSON, twice."""
    field = _DERIVED_DELTAS[event_type]
    return b'{"type":"%s","content_index":%d,"delta":%%s,"partial_patch":[["append",["content",%d,"%s"],%%s]]}' % (
        event_type.encode(), index, index, field.encode()
    )


_NO_GROWTH = {
    kind: b'{"type":"%s","content_index":%%d,"delta":%%s,"partial_patch":[]}' % kind.encode()
    for kind in _DERIVED_DELTAS
}


def _growth_body(event_type: str, index: int, op: list[Any] | None, gained: str) -> bytes:
    """The event object of a delta whose block grew by ``op`` (None: its redaction did not
    change), ``gained`` being what the redacted text gained."""
    if op is None:
        return _NO_GROWTH[event_type] % (index, orjson.dumps(gained))
    if op[0] == "append":  # the same JSON as the dict, spelled out
        body = orjson.dumps(gained)
        return _append_template(event_type, index) % (body, body)
    return orjson.dumps({"type": event_type, "content_index": index, "delta": gained, "partial_patch": [op]})


def _fields_besides(kind: type, excluded: str) -> Callable[[dict[str, Any]], tuple[Any, ...]] | None:
    """A getter of the values, in a model's ``__dict__``, of every field of ``kind`` but
    ``excluded``; None when instances of ``kind`` may hold more than their fields (the hot
    path then gives way to the general one)."""
    fields = getattr(kind, "model_fields", None)
    config = getattr(kind, "model_config", {})
    if fields is None or excluded not in fields or config.get("extra") == "allow":
        return None
    names = [name for name in fields if name != excluded]
    if not names:
        return lambda values: ()
    if len(names) == 1:
        only = names[0]
        return lambda values: (values[only],)
    return itemgetter(*names)


def _unchanged(text: str) -> str:
    return text


def _never(text: str, previous: str) -> bool:
    return False


def _find_nothing(text: str, start: int) -> None:
    return None


#: The trigger of texts already redacted: nothing left to act on, every point a safe cut.
_NOTHING_TO_FIND = Trigger(_find_nothing, 1)

_MESSAGE_OTHERS = _fields_besides(AssistantMessage, "content")
assert _MESSAGE_OTHERS is not None, "AssistantMessage must not allow extra fields"
_TOOL_CALL_OTHERS = _fields_besides(ToolCall, "arguments")
assert _TOOL_CALL_OTHERS is not None, "ToolCall must not allow extra fields"

#: Event fields that are literals or integers by their type, so they cannot hold a secret.
_FIXED_EVENT_FIELDS = frozenset({"type", "content_index", "reason"})


class _LastGrowth:
    """The hot path's knowledge of the last partial of a growing block: the values it checks
    the next partial against, so that each event takes only the new partial apart."""

    __slots__ = (
        "partial", "message_rest", "content", "index", "field", "event_type", "template",
        "block_kind", "block_others", "block_rest", "text", "state",
    )

    @classmethod
    def of(cls, partial: Any, index: Any, event_type: Any, encoder: EventEncoder) -> _LastGrowth | None:
        """Take ``partial`` apart for the growth of its block ``index`` by ``event_type``
        deltas; None when the hot path cannot serve it (the general path then does)."""
        field = _DERIVED_DELTAS.get(event_type) if type(event_type) is str else None
        if field is None or type(partial) is not AssistantMessage or type(index) is not int:
            return None
        message = partial.__dict__
        content = message.get("content")
        if type(content) is not list or not 0 <= index < len(content):
            return None
        block = content[index]
        kind = type(block)
        others = encoder.field_getter(kind, field)
        if others is None:
            return None
        values = block.__dict__
        text = values.get(field)
        if type(text) is not str:
            return None
        state = encoder.growing_text(index, field, create=not text)
        if state is None or (state.raw is not text and state.raw != text):
            return None
        last = cls()
        try:
            last.message_rest = _MESSAGE_OTHERS(message)
            last.block_rest = others(values)
        except KeyError:  # built without validation, a field missing
            return None
        last.partial, last.content, last.index, last.field = partial, content, index, field
        last.event_type, last.template = event_type, encoder.append_line(event_type, index)
        last.block_kind, last.block_others, last.text, last.state = kind, others, text, state
        return last


class EventEncoder:
    """Turns one call's events into redacted ``event`` objects with ``partial_patch``.

    Per event the work is bounded by what changed: one redaction pass over the event's free
    fields, the new text tails and (only if its encoding changed) the rest of the partial.
    When only block texts grew, the patch is built directly from the growing texts;
    otherwise the full redacted partials are diffed with :func:`compute_patch`. Both are
    exact by construction (``append`` only where the new redacted text starts with the old
    one, everything else compared by its exact JSON encoding).
    """

    def __init__(
        self,
        redactor: Redactor,
        call_index: int = 0,
        *,
        texts_redacted: bool = False,
        parse_of: Callable[[int], StreamingJsonObject | None] | None = None,
        extends: Callable[[str, str], bool] | None = None,
    ) -> None:
        """``texts_redacted``: the block texts and deltas of the events are already redacted
        (by :class:`.stream_redaction.StreamRedaction`, which sees the whole stream), so they
        are written as they are: no text is redacted again, which keeps recording linear
        whatever the text looks like. Every other field is still redacted here.

        ``parse_of(index)``: the parse of tool call ``index``'s stored deltas that the stream
        redaction keeps (it has fed each delta before the event reaches this encoder), so
        that the arguments are not parsed twice (see :meth:`_parse_delta`).

        ``extends(text, previous)``: True when the stream redaction made ``text`` by appending
        to ``previous`` (the hot path then skips comparing the whole text so far); False says
        nothing, and the texts are compared."""
        self._head = b'{"type":"event","call_index":%d,"event_index":%%d,"t":%%d,"event":' % call_index
        self._line = self._head + b"%s}\n"
        self._remove = redactor.remove_secret_values
        if texts_redacted:
            self._redact, self._safe_cut, self._trigger = _unchanged, len, _NOTHING_TO_FIND
        else:
            self._redact = redactor.str_redactor()
            self._safe_cut = redactor.safe_cut
            self._trigger = redactor.trigger()
        self._texts: dict[tuple[int, str], _GrowingText] = {}
        self._deltas: dict[tuple[str, Any], _DeltaContext] = {}
        self._rest_bytes: tuple[bytes, tuple[int, ...]] | None = None
        self._rest: dict[str, Any] | None = None  # redacted, texts blanked
        self._previous: Any = None  # the previous event's partial, as an object
        self._last: _LastGrowth | None = None  # what the hot path knows of the previous partial
        self._getters: dict[tuple[type, str], Callable[[dict[str, Any]], tuple[Any, ...]] | None] = {}
        #: The arguments of each tool call still streaming, parsed from its (stored) deltas:
        #: only when those are already redacted (``texts_redacted``), see :meth:`_tool_line`.
        self._arguments: dict[int, StreamingJsonObject] | None = {} if texts_redacted else None
        self._parse_of = parse_of if texts_redacted else None
        self._extends = extends if texts_redacted and extends is not None else _never
        #: Deltas written from a :class:`Growth` since the growing block's raw text.
        self._light: list[str] = []
        #: Per tool call whose parse is ``parse_of``'s: its value and full-parse count as of
        #: the last delta encoded (the "before" of the next one).
        self._adopted: dict[int, tuple[Any, int]] = {}

    def line(self, event: AssistantMessageEvent, event_index: int, t: int) -> bytes:
        """The whole event line of one event, newline included; ``t`` is when the event
        arrived, in milliseconds since the call's request was sent.

        The hot path, inline here since it runs for nearly every event: a text or thinking
        delta whose partial is the previous one with the delta appended to its block. Content
        blocks and usage are immutable values that snapshots share until they change, so
        "nothing else changed" is identity checks (identity, not equality: ``True == 1``), and
        the partial is never dumped. What was learnt about the previous partial is carried
        over (``_LastGrowth``) rather than taken apart again. Any check that fails sends the
        event down the general path, which writes the same bytes (a property test holds the
        two to that).
        """
        if type(event) is Growth:
            if event.type == "toolcall_delta":
                return self._arguments_growth_line(event, event_index, t)
            return self._growth_line(event, event_index, t)
        if self._light:
            self._settle_light()
        fields = event.__dict__  # plain dict reads: pydantic attribute access costs more
        partial = fields.get("partial")
        if partial is None:
            return self._line % (event_index, t, self._encode_general(event))
        previous, self._previous = self._previous, partial
        index, event_type, last = fields.get("content_index"), fields.get("type"), self._last
        if event_type == "toolcall_delta" and self._arguments is not None:
            return self._line % (event_index, t, self._tool_line(event, partial, previous))
        if (
            last is None
            or last.partial is not previous
            or last.index != index
            or type(index) is not int  # not ``True`` for 1
            or last.event_type != event_type
        ):
            last = self._last = _LastGrowth.of(previous, index, event_type, self)
            if last is None:
                return self._line % (event_index, t, self._encode_general(event))
        # Exact classes only: ``isinstance`` on a pydantic class is a Python-level call.
        message = partial.__dict__ if type(partial) is AssistantMessage else None
        content = message.get("content") if message is not None else None
        before = last.content
        if type(content) is not list or len(content) != len(before):
            return self._line % (event_index, t, self._encode_general(event))
        block = content[index]  # in range: checked against the previous partial's content
        if type(block) is not last.block_kind:
            return self._line % (event_index, t, self._encode_general(event))
        values = block.__dict__
        try:
            rest, block_rest = _MESSAGE_OTHERS(message), last.block_others(values)
        except KeyError:  # built without validation, a field missing
            return self._line % (event_index, t, self._encode_general(event))
        text, old_text, delta = values.get(last.field), last.text, fields.get("delta")
        if (
            not all(map(is_, rest, last.message_rest))
            or not all(map(is_, block_rest, last.block_rest))
            or len(content) > 1
            and not (
                all(map(is_, content[:index], before[:index]))
                and all(map(is_, content[index + 1 :], before[index + 1 :]))
            )
            or type(delta) is not str
            or not delta
            or type(text) is not str
            or len(text) != len(old_text) + len(delta)
            or not text.endswith(delta)
            or not (self._extends(text, old_text) or text.startswith(old_text))
        ):
            return self._line % (event_index, t, self._encode_general(event))
        state = last.state
        if state.grow_clean(text, delta, self._safe_cut):  # the usual case: delta is what it gains
            gained = orjson.dumps(delta)
            line = last.template % (event_index, t, gained, gained)
        else:
            op = state.extend(text, self._redact, self._safe_cut, ["content", index, last.field])
            line = self._line % (event_index, t, _growth_body(event_type, index, op, state.gained))
        last.partial, last.message_rest, last.content = partial, rest, content
        last.block_rest, last.text = block_rest, text
        return line

    def _growth_line(self, growth: Growth, event_index: int, t: int) -> bytes:
        """The line of a delta the stream redaction hands on without its event: the hot
        path's clean growth, from the delta alone, when this encoder's last event is the one
        the growth extends (``anchor``, then only growths); otherwise that of its event. The
        block's raw text is joined once, at the next event (:meth:`_settle_light`)."""
        last, delta = self._last, growth.delta
        if (
            self._trigger is not _NOTHING_TO_FIND  # texts not known redacted: no trust
            or last is None
            or last.partial is not growth.anchor
            or self._previous is not growth.anchor
            or last.index != growth.index
            or last.event_type != growth.type
            or type(delta) is not str
            or not delta
        ):
            return self.line(growth.event(), event_index, t)
        last.state.take_clean(last.state.tail_raw + delta, self._safe_cut)
        self._light.append(delta)
        gained = orjson.dumps(delta)
        return last.template % (event_index, t, gained, gained)

    def _arguments_growth_line(self, growth: Growth, event_index: int, t: int) -> bytes:
        """The line of a tool-call delta the stream redaction hands on without its event:
        patched along the path its delta grew, like :meth:`_tool_line` but with no snapshot
        to check (the stage vouches for it), when this encoder's last event is the one the
        growth extends; otherwise that of its event."""
        index, delta = growth.index, growth.delta
        if (
            self._arguments is None  # texts not known redacted: no trust
            or self._previous is not growth.anchor
            or self._rest is None
            or type(index) is not int
            or type(delta) is not str
            or not delta
        ):
            return self.line(growth.event(), event_index, t)

        def event_of() -> AssistantMessageEvent:
            event = growth.event()
            self._previous = event.partial  # the stage's next growths extend this one
            return event

        return self._line % (event_index, t, self._tool_growth(index, delta, event_of))

    def _settle_light(self) -> None:
        """Bring the growing block's raw text up to the growths written since it was set."""
        last = self._last
        assert last is not None
        last.text = last.state.raw = "".join([last.text, *self._light])
        self._light.clear()

    def field_getter(
        self, kind: type, excluded: str
    ) -> Callable[[dict[str, Any]], tuple[Any, ...]] | None:
        """:func:`_fields_besides`, remembered for this call's events."""
        key = (kind, excluded)
        if key not in self._getters:
            self._getters[key] = _fields_besides(kind, excluded)
        return self._getters[key]

    def growing_text(self, index: int, field: str, *, create: bool = False) -> _GrowingText | None:
        """The state of a block's growing text; ``create`` one for a text that is still
        empty (the general path keeps none for an empty text: it starts from nothing)."""
        state = self._texts.get((index, field))
        if state is None and create:
            state = self._texts[(index, field)] = _GrowingText(self._trigger)
        return state

    def append_line(self, event_type: str, index: int) -> bytes:
        """The line of a delta that appends to block ``index``, to fill in with the event
        index, its time and the delta's JSON (twice)."""
        return self._head + _append_template(event_type, index) + b"}\n"

    def _encode_general(self, event: AssistantMessageEvent, *, fed: bool = False) -> bytes:
        """The event object of any event; ``fed``: a tool call's delta already went to its
        parse (see :meth:`_tool_line`)."""
        dump = type(event).__pydantic_serializer__.to_python(event, mode="json")
        partial = dump.pop("partial", None)
        # A text or thinking delta is what its block's text gained: its redaction comes from
        # the block's growing text (below), with no redaction work of its own.
        derived = _DERIVED_DELTAS.get(dump.get("type")) if type(partial) is dict else None
        delta = dump.pop("delta") if derived is not None and type(dump.get("delta")) is str else None
        if delta is None:
            derived = None
        self._redact_free_fields(dump)
        if type(partial) is not dict:
            if partial is not None:
                dump["partial"] = self._remove(partial)
            return orjson.dumps(dump)
        lifted = _lift_texts(partial)
        streaming = self._streamed_arguments(dump, partial, fed)
        # Arguments kept out of redaction or not: part of what the rest is.
        rest_bytes = (orjson.dumps(partial), tuple(index for index, _ in streaming))
        rest_changed = rest_bytes != self._rest_bytes
        if rest_changed:
            previous_full = self._full() if self._rest is not None else None
            self._rest, self._rest_bytes = self._remove(partial), rest_bytes
            for index, value in streaming:  # stored deltas parsed: redacted already
                self._rest["content"][index]["arguments"] = value
        texts, redact, cut = self._texts, self._redact, self._safe_cut
        ops: list[Any] = []
        for index, field, value in lifted:
            key = (index, field)
            state = texts.get(key)
            if state is None:
                state = texts[key] = _GrowingText(self._trigger)
            settled, tail = state.prepare(value, cut)
            op = state.advance(
                redact(settled) if settled else "", redact(tail) if tail else "", ["content", index, field]
            )
            if op is not None:
                ops.append(op)
        if derived is not None:
            dump["delta"] = self._derived_delta(dump, derived, delta, partial, lifted)
        if len(lifted) != len(texts):  # a text that was there is gone (blank or removed)
            live = {(index, field) for index, field, _ in lifted}
            for key in [key for key in texts if key not in live]:
                if texts.pop(key).raw and not rest_changed:
                    ops.append(["set", ["content", *key], ""])
        if not rest_changed:
            dump["partial_patch"] = ops
            return orjson.dumps(dump)
        current = self._full()
        patch = compute_patch(previous_full, current) if previous_full is not None else None
        if patch is None:
            dump["partial"] = current
        else:
            dump["partial_patch"] = patch
        return orjson.dumps(dump)

    # ------------------------------------------------------------------ tool calls

    def _streamed_arguments(self, dump: dict[str, Any], partial: dict[str, Any], fed: bool) -> list[tuple[int, Any]]:
        """Put, in the dumped ``partial``, the arguments of every tool call still streaming as
        parsed from its stored deltas (the stream redaction's rule, see
        :mod:`.stream_redaction`); return them, to be kept out of redaction. A
        ``toolcall_delta`` feeds its delta first; ``toolcall_end`` ends the parse (its
        arguments are whole, redacted by field name like any other value)."""
        streams = self._arguments
        if streams is None:
            return []
        kind, index = dump.get("type"), dump.get("content_index")
        if kind == "toolcall_end":
            streams.pop(index, None)
            self._adopted.pop(index, None)
        elif kind == "toolcall_delta" and type(dump.get("delta")) is str and not fed:
            self._parse_delta(index, dump["delta"])
        content = partial.get("content")
        placed = []
        for index, stream in streams.items():
            if type(content) is list and type(index) is int and 0 <= index < len(content):
                block = content[index]
                if type(block) is dict and block.get("type") == "toolCall":
                    value = stream.feed("")
                    block["arguments"] = value
                    placed.append((index, value))
        return placed

    def _parse_delta(self, index: Any, delta: str) -> tuple[Any, Any, bool]:
        """Feed a stored delta to its tool call's parse: (value before, value after, whether
        the parse stayed incremental, so that the two share every unchanged part). A parse the
        stream redaction keeps (``parse_of``) has been fed already and is only read: it is
        adopted at the tool call's first delta (when it holds exactly that delta), and given
        up, for one of our own holding the same text, if the stage starts another."""
        streams = self._arguments
        assert streams is not None
        stream = streams.get(index)
        shared = self._parse_of(index) if self._parse_of is not None and type(index) is int else None
        if stream is None:
            if shared is not None and shared.text == delta:
                stream = streams[index] = shared
                self._adopted[index] = ({}, 0)
            else:
                stream = streams[index] = StreamingJsonObject()
        seen = self._adopted.get(index)
        if seen is not None:
            if stream is shared:
                after = stream.feed("")
                self._adopted[index] = (after, stream.full_parses)
                return seen[0], after, stream.full_parses == seen[1]
            del self._adopted[index]  # no longer fed: a parse of our own, as far as it got
            text, stream = stream.text, StreamingJsonObject()
            streams[index] = stream
            stream.feed(text)
        before, parses = stream.feed(""), stream.full_parses
        after = stream.feed(delta)
        return before, after, stream.full_parses == parses

    def _tool_line(self, event: AssistantMessageEvent, partial: Any, previous: Any) -> bytes:
        """The event object of a ``toolcall_delta`` whose partial is the previous one with only
        the arguments of its block changed (identity checks, as for text growth): the patch is
        taken along the one changed path of the parsed arguments (:func:`growth_patch`), never
        from a dump of the whole partial. Anything else goes to the general path."""
        fields = event.__dict__
        index, delta = fields.get("content_index"), fields.get("delta")
        message = partial.__dict__ if type(partial) is AssistantMessage else None
        before = previous.__dict__ if type(previous) is AssistantMessage else None
        if (
            message is None
            or before is None
            or type(index) is not int
            or type(delta) is not str
            or self._rest is None
            or not delta
        ):
            return self._encode_general(event)
        content, old_content = message["content"], before["content"]
        if (
            len(content) != len(old_content)
            or not 0 <= index < len(content)
            or type(content[index]) is not ToolCall
            or type(old_content[index]) is not ToolCall
            or not all(map(is_, _MESSAGE_OTHERS(message), _MESSAGE_OTHERS(before)))
            or not all(map(is_, _TOOL_CALL_OTHERS(content[index].__dict__), _TOOL_CALL_OTHERS(old_content[index].__dict__)))
            or not all(map(is_, content[:index], old_content[:index]))
            or not all(map(is_, content[index + 1 :], old_content[index + 1 :]))
        ):
            return self._encode_general(event)
        return self._tool_growth(index, delta, lambda: event)

    def _tool_growth(self, index: int, delta: str, event_of: Callable[[], AssistantMessageEvent]) -> bytes:
        """The event object of a ``toolcall_delta`` known to grow only tool call ``index``'s
        arguments by ``delta`` (``event_of()``: its event, for the general path)."""
        old_value, value, incremental = self._parse_delta(index, delta)
        patch = growth_patch(old_value, value, ["content", index, "arguments"]) if incremental else None
        if patch is None:  # the parse gave up sharing, or a member went away: the general path
            self._rest_bytes = None
            return self._encode_general(event_of(), fed=True)
        rest = self._rest
        assert rest is not None
        rest_content = rest["content"] = list(rest["content"])
        rest_content[index] = {**rest_content[index], "arguments": value}
        self._rest_bytes = None  # the next general event compares the partial afresh
        return orjson.dumps(
            {"type": "toolcall_delta", "content_index": index, "delta": delta, "partial_patch": patch}
        )

    def _derived_delta(
        self,
        dump: dict[str, Any],
        field: str,
        delta: str,
        partial: dict[str, Any],
        lifted: list[tuple[int, str, str]],
    ) -> str:
        """The redacted delta, taken from the growing text when the block grew by exactly
        the delta; otherwise redacted in the context of the earlier deltas."""
        index = dump.get("content_index")
        state = self._texts.get((index, field))
        if state is not None and not state.reset:
            value = state.raw
            if len(value) == state.previous_length + len(delta) and value.endswith(delta):
                for lifted_index, lifted_field, _ in lifted:
                    if lifted_index == index and lifted_field == field:
                        return state.gained
        key = (dump.get("type"), index)
        context = self._deltas.get(key)
        if context is None:
            context = self._deltas[key] = _DeltaContext()
        settled, pending = context.prepare(delta, self._safe_cut)
        return context.advance(
            self._redact(settled) if settled else "", self._redact(pending) if pending else ""
        )

    def _redact_free_fields(self, dump: dict[str, Any]) -> None:
        """Redact, in place, every event field but the partial; a streamed delta in the
        context of the deltas before it."""
        kind = dump.get("type")
        delta = dump.get("delta")
        if type(delta) is str and type(kind) is str and kind.endswith("_delta"):
            key = (kind, dump.get("content_index"))
            context = self._deltas.get(key)
            if context is None:
                context = self._deltas[key] = _DeltaContext()
            settled, pending = context.prepare(delta, self._safe_cut)
            redact = self._redact
            dump["delta"] = context.advance(
                redact(settled) if settled else "", redact(pending) if pending else ""
            )
            if len(dump) == 3:  # type, content_index, delta: nothing else to redact
                return
            free = {k: v for k, v in dump.items() if k not in _FIXED_EVENT_FIELDS and k != "delta"}
        else:
            free = {k: v for k, v in dump.items() if k not in _FIXED_EVENT_FIELDS}
        if free:
            dump.update(self._remove(free))

    def _full(self) -> dict[str, Any]:
        """The current redacted partial, texts filled in."""
        rest = self._rest
        assert rest is not None
        if not self._texts:
            return rest
        content = list(rest["content"])
        for (index, field), state in self._texts.items():
            content[index] = {**content[index], field: state.full()}
        return {**rest, "content": content}
