"""The speed shortcuts of the strict reader (:mod:`.reader`), each beside what it replaces.

The reader's plain way is enough to be correct: apply each ``partial_patch`` to a dict and
validate the result (``docs/file-format.md`` describes the file). These shortcuts save time
and memory on large files and change no result; the tests hold them to the plain way.

* :class:`Snapshots` saves a full pydantic validation of the ``partial`` snapshot for nearly
  every streamed event, and lets the reader build no snapshot at all when a file is opened.
  It is correct because such a patch only appends to one string field of one content block,
  a field typed plain ``str`` (a grown string still validates), or changes nothing: the
  previous snapshot was already validated, blocks and usage are immutable values, so the new
  snapshot is the previous one with that block replaced by a copy whose string grew. Which
  patches qualify depends only on the snapshot's structure (block kinds, which fields hold a
  string), never on the text, so the reader checks them at open and grows the text only
  when the event is served; anything else returns None and takes the plain way.
* :func:`kept_for_later` keeps such an event as its validated object without its snapshot,
  slimmed, instead of a parsed line: the memory of a large recording. :func:`served_event`
  builds it back exactly: the values are the ones validation produced, only ``partial`` is
  put back.
* A served message or delta event whose fields set names every field of its class (what
  validation of a full dump gives) shares one such set per class with the others, instead
  of a copy each. It is correct because pydantic only ever adds field names to a model's
  fields set (an assignment adds the field assigned; ``model_copy`` copies the set first),
  so a set that already holds them all never changes: no consumer's assignment to one event
  is seen in another. A set missing a field is copied for each object.
* :func:`collector_paused` saves the cyclic collector's rescans while a file is read and kept.
  It is correct because reading creates no reference cycles, so a paused collector frees
  nothing late; afterwards the collector is as it was, the objects read now in its oldest
  generation.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from pydantic import BaseModel

__all__ = [
    "Snapshots",
    "appended_snapshot",
    "collector_paused",
    "DeltaKind",
    "kept_for_later",
    "promote_to_oldest_generation",
    "replaced",
    "served_event",
]

# The setters of the slots every pydantic model has, called directly: building an object
# this way costs about half of four ``object.__setattr__`` calls, which look each slot up.
_new = object.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
#: Per block class, the fields any grown string still validates for (see ``_free_text_fields``).
_FREE_TEXT_FIELDS: dict[type[BaseModel], frozenset[str]] = {}
#: ``(index, field, suffix)``: the one append a patch makes to a content block's string.
Append = tuple[int, str, str]
#: Field names appended to, one string object each (a file repeats them on every line).
_FIELD_NAMES: dict[str, str] = {}


def _free_text_fields(kind: type[BaseModel]) -> frozenset[str]:
    """The fields of ``kind`` annotated plainly ``str`` (or ``str | None``) with no
    constraint: appending to their string can never make the block invalid. A ``Literal``
    field such as ``type`` is not one of them (``"text"`` plus anything is not ``"text"``)."""
    fields = _FREE_TEXT_FIELDS.get(kind)
    if fields is None:
        fields = frozenset(
            name
            for name, info in kind.__pydantic_fields__.items()
            if info.annotation in (str, str | None) and not info.metadata
        )
        _FREE_TEXT_FIELDS[kind] = fields
    return fields


def _unvalidated(
    cls: type[BaseModel], values: dict[str, Any], fields_set: set[str], extra: Any
) -> Any:
    """An object of pydantic class ``cls`` holding ``values``, which validation produced."""
    built: BaseModel = _new(cls)
    _set_dict(built, values)
    _set_fields_set(built, fields_set)
    _set_extra(built, None if extra is None else dict(extra))
    _set_private(built, None)
    return built


class Snapshots:
    """The latest ``partial`` of one call, kept privately: each snapshot handed out is a new
    message object (with its own content list) sharing the immutable blocks, so whatever a
    consumer does to an event it received cannot change the next snapshot."""

    __slots__ = ("_cls", "_message", "_content", "_fields_set", "_complete", "_extra", "_accepted")

    def __init__(self, snapshot: Any) -> None:
        """Start from ``snapshot``, a validated message (it is copied, not kept)."""
        self._cls = type(snapshot)
        self._message = dict(snapshot.__dict__)
        self._content = list(self._message["content"])
        self._fields_set = set(snapshot.__pydantic_fields_set__)
        #: Whether the snapshots share that set (it holds every field: see the module's docstring).
        self._complete = _complete_fields_set(self._cls, self._fields_set)
        if self._complete:
            self._fields_set = _COMPLETE_FIELDS_SETS[self._cls]
        self._extra = snapshot.__pydantic_extra__
        #: Per block index, the field :meth:`append_to` last accepted there: which appends
        #: qualify depends only on the blocks' kinds, which growing text never changes.
        self._accepted: dict[int, str] = {}

    def append_of(self, patch: Any) -> Append | tuple[()] | None:
        """The append ``patch`` makes when it is one ``append`` to a free-text string field
        of a content block (nearly every streamed event), ``()`` when it is empty (the
        snapshot unchanged, as at a block's end), else None (the plain way: dict patch, full
        validation). Checks only; changes nothing. Written out in one piece: this runs for
        nearly every event of a file."""
        if type(patch) is not list or len(patch) != 1:
            return () if patch == [] else None
        op = patch[0]
        if type(op) is not list or len(op) != 3 or op[0] != "append":
            return None
        path, suffix = op[1], op[2]
        if (
            type(path) is not list
            or len(path) != 3
            or path[0] != "content"
            or type(suffix) is not str
        ):
            return None
        index, field = path[1], path[2]
        if type(index) is not int or type(field) is not str:
            return None
        return self.append_to(index, field, suffix)

    def append_to(self, index: int, field: str, suffix: str) -> Append | None:
        """:meth:`append_of` of the one patch ``["append", ["content", index, field], suffix]``
        (already taken apart, as by the reader's line template for a streamed delta)."""
        accepted = self._accepted.get(index)
        if accepted is not None and accepted == field:
            return index, accepted, suffix
        content = self._content
        if type(index) is not int or not 0 <= index < len(content):
            return None
        block = content[index]
        if type(block.__dict__.get(field)) is not str or field not in _free_text_fields(
            type(block)
        ):
            return None
        field = self._accepted[index] = _FIELD_NAMES.setdefault(field, field)
        return index, field, suffix

    def grow(self, append: Append | tuple[()]) -> None:
        """Apply what :meth:`append_of` accepted: the block is replaced by a copy whose
        string grew (blocks are immutable values, never changed in place)."""
        if not append:
            return
        index, field, suffix = append
        block = self._content[index]
        values = block.__dict__
        kind = type(block)
        # The one field that grew is a str, as validated before; the fields set is shared,
        # as between live snapshots: the block is immutable.
        self._content[index] = _unvalidated(
            kind,
            {**values, field: values[field] + suffix},
            block.__pydantic_fields_set__,
            block.__pydantic_extra__,
        )

    def served(self, kept: Any, append: Append | tuple[()]) -> Any:
        """``served_event(kept, snapshot)`` after ``grow(append)``, in one step: the block,
        the message and the event built with the slot setters directly, three objects per
        served event and no other call (this runs for nearly every event of a replay)."""
        content = self._content
        if append:
            index, field, suffix = append
            block = content[index]
            values = block.__dict__
            grown: BaseModel = _new(type(block))
            _set_dict(grown, {**values, field: values[field] + suffix})
            _set_fields_set(grown, block.__pydantic_fields_set__)
            extra = block.__pydantic_extra__
            _set_extra(grown, None if extra is None else dict(extra))
            _set_private(grown, None)
            content[index] = grown
        message: BaseModel = _new(self._cls)
        _set_dict(message, dict(self._message, content=content.copy()))
        fields_set = self._fields_set
        _set_fields_set(message, fields_set if self._complete else fields_set.copy())
        extra = self._extra
        _set_extra(message, None if extra is None else dict(extra))
        _set_private(message, None)
        if type(kept) is DeltaKind:
            event: BaseModel = _new(kept.cls)
            # a delta's append is never empty
            fields = {
                "type": kept.name,
                "content_index": append[0],  # type: ignore[misc]
                "delta": append[2],  # type: ignore[misc]
                "partial": message,
            }
            _set_dict(event, fields)
            _set_fields_set(event, _DELTA_FIELDS_SET)  # every field of the class: shared
        else:
            event = _new(type(kept))
            _set_dict(event, dict(kept.__dict__, partial=message))
            _set_fields_set(event, set(kept.__pydantic_fields_set__))
        _set_extra(event, None)
        _set_private(event, None)
        return event

    def snapshot(self) -> Any:
        """The latest snapshot as a new message object."""
        return _unvalidated(
            self._cls,
            {**self._message, "content": self._content.copy()},
            set(self._fields_set),
            self._extra,
        )


def appended_snapshot(previous: Any, patch: list[Any]) -> tuple[Any, Append] | None:
    """The next snapshot when ``patch`` is one append :meth:`Snapshots.append_of` accepts,
    with the append; None for any other patch. ``previous`` is not changed."""
    snapshots = Snapshots(previous)
    append = snapshots.append_of(patch)
    if not append:
        return None
    snapshots.grow(append)
    return snapshots.snapshot(), append


def kept_for_later(
    event: Any, append: Append | tuple[()], fields_sets: dict[type, frozenset[str]]
) -> tuple[Any, Append | tuple[()]] | None:
    """``(event, append)``: what the reader keeps of ``event``, a validated event whose
    snapshot is built when it is served (:func:`served_event`), or None when it cannot be
    built back that way (extra or private attributes).

    The kept object is never handed out, so it is slimmed: its ``partial`` (a stand-in) is
    dropped, its fields set is one shared frozen set per class, the appended field's name is
    one string per name, and a suffix equal to the event's ``delta`` is that same string."""
    if event.__pydantic_extra__ is not None or event.__pydantic_private__ is not None:
        return None
    fields = event.__dict__
    fields["partial"] = None  # keeps its place: the served event's fields stay in order
    fields_set = event.__pydantic_fields_set__
    shared = fields_sets.get(type(event))
    if shared is None or shared != fields_set:
        shared = fields_sets[type(event)] = frozenset(fields_set)
    _set_fields_set(event, shared)
    if append:
        index, name, suffix = append
        if fields.get("delta") == suffix:
            suffix = fields["delta"]
        append = (index, _FIELD_NAMES.setdefault(name, name), suffix)
    return event, append


#: One fields set naming every field, per class, shared by the objects served whose fields
#: set is complete (see the module's docstring).
_COMPLETE_FIELDS_SETS: dict[type[BaseModel], set[str]] = {}


def _complete_fields_set(cls: type[BaseModel], fields_set: set[str] | frozenset[str]) -> bool:
    """Whether ``fields_set`` names every field of ``cls`` (then its objects may share
    ``_COMPLETE_FIELDS_SETS[cls]``)."""
    shared = _COMPLETE_FIELDS_SETS.get(cls)
    if shared is None:
        shared = _COMPLETE_FIELDS_SETS[cls] = set(cls.__pydantic_fields__)
    return fields_set == shared


#: What validation makes the fields set of a stored delta (``type``, ``content_index``,
#: ``delta`` and ``partial``): every field of both delta classes, so one set is shared.
_DELTA_FIELDS_SET = {"type", "content_index", "delta", "partial"}


class DeltaKind(NamedTuple):
    """What the reader keeps, besides its append, of a text or thinking delta read in our
    writer's line form (a type, a block index, a delta string, a patch appending that delta):
    the event's class and type name, one shared value per kind. The event is built when it
    is served (:meth:`Snapshots.served`), with the block index and the delta its append holds;
    the line's form guarantees the types (docs/file-format.md, "Linear size")."""

    cls: type[BaseModel]
    name: str


def replaced(model: Any, **changes: Any) -> Any:
    """A copy of the validated pydantic object ``model`` with ``changes``, values of the types
    its fields take (a field of a snapshot, a snapshot of an event): no validation, no copy of
    what is shared. ``model_copy`` does the same at several times the cost."""
    return _unvalidated(
        type(model),
        {**model.__dict__, **changes},
        set(model.__pydantic_fields_set__).union(changes),
        model.__pydantic_extra__,
    )


def served_event(kept: Any, partial: Any) -> Any:
    """A new event equal to the one :func:`kept_for_later` kept, ``partial`` its snapshot."""
    return _unvalidated(
        type(kept), {**kept.__dict__, "partial": partial}, set(kept.__pydantic_fields_set__), None
    )


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector for the block; if it ends normally, move what it created
    to the oldest generation. A program that runs without the collector keeps it off."""
    # Reading allocates many objects and frees none, the worst case for the collector (each
    # collection rescans everything kept so far).
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
    promote_to_oldest_generation()


def promote_to_oldest_generation() -> None:
    """Move the objects just read straight to the collector's oldest generation.

    A replay keeps them to the end, yet the collector would scan them all at its next young
    collection and again at the next middle one before they reach the oldest (on the
    benchmark's recording that costs more than the whole replay). ``freeze`` then
    ``unfreeze`` moves every tracked object there in constant time, without a scan. Skipped
    when the program froze objects itself (a pre-fork server): ``unfreeze`` would undo that.
    Other young objects of the process are promoted too; that only defers collecting any
    cycle among them to the next full collection.
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
