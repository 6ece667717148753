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
* :class:`EventShape` keeps such an event as its validated field values (a tuple) instead of
  an object or a parsed line: the memory of a large recording. Building the object back is
  exact: the values are the ones validation produced, only ``partial`` is put back.
* :func:`collector_paused` saves the cyclic collector's rescans while a file is read and kept.
  It is correct because reading creates no reference cycles, so a paused collector frees
  nothing late; afterwards the collector is as it was, the objects read now in its oldest
  generation.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "EventShape",
    "Snapshots",
    "appended_snapshot",
    "collector_paused",
    "promote_to_oldest_generation",
]

_setattr = object.__setattr__
#: Per block class, the fields any grown string still validates for (see ``_free_text_fields``).
_FREE_TEXT_FIELDS: dict[type, frozenset[str]] = {}
#: ``(index, field, suffix)``: the one append a patch makes to a content block's string.
Append = tuple[int, str, str]


def _free_text_fields(kind: type) -> frozenset[str]:
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


def _unvalidated(cls: type, values: dict[str, Any], fields_set: set[str], extra: Any) -> Any:
    """An object of pydantic class ``cls`` holding ``values``, which validation produced."""
    built = cls.__new__(cls)
    _setattr(built, "__dict__", values)
    _setattr(built, "__pydantic_fields_set__", fields_set)
    _setattr(built, "__pydantic_extra__", None if extra is None else dict(extra))
    _setattr(built, "__pydantic_private__", None)
    return built


class Snapshots:
    """The latest ``partial`` of one call, kept privately: each snapshot handed out is a new
    message object (with its own content list) sharing the immutable blocks, so whatever a
    consumer does to an event it received cannot change the next snapshot."""

    __slots__ = ("_cls", "_message", "_content", "_fields_set", "_extra")

    def __init__(self, snapshot: Any) -> None:
        """Start from ``snapshot``, a validated message (it is copied, not kept)."""
        self._cls = type(snapshot)
        self._message = dict(snapshot.__dict__)
        self._content = list(self._message["content"])
        self._fields_set = frozenset(snapshot.__pydantic_fields_set__)
        self._extra = snapshot.__pydantic_extra__

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
        if type(path) is not list or len(path) != 3 or path[0] != "content" or type(suffix) is not str:
            return None
        index, field = path[1], path[2]
        content = self._content
        if type(index) is not int or not 0 <= index < len(content) or type(field) is not str:
            return None
        block = content[index]
        if type(block.__dict__.get(field)) is not str or field not in _free_text_fields(type(block)):
            return None
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
            kind, {**values, field: values[field] + suffix}, block.__pydantic_fields_set__, block.__pydantic_extra__
        )

    def snapshot(self) -> Any:
        """The latest snapshot as a new message object."""
        return _unvalidated(
            self._cls, {**self._message, "content": self._content.copy()}, set(self._fields_set), self._extra
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


class EventShape:
    """The class and field names of a validated event kept as a tuple of its values
    (``partial`` left out), shared by every event of that shape in a recording."""

    __slots__ = ("cls", "names", "fields_set", "_key")

    def __init__(self, cls: type, names: tuple[str, ...], fields_set: frozenset[str]) -> None:
        self.cls, self.names, self.fields_set = cls, names, fields_set
        self._key = (cls, names, fields_set)

    @staticmethod
    def of(event: Any, shapes: dict[Any, EventShape]) -> tuple[EventShape, tuple[Any, ...]] | None:
        """The shape (one per distinct shape in ``shapes``) and the values of ``event``,
        a validated event with a ``partial``; None when it cannot be rebuilt from them
        (extra or private attributes)."""
        if event.__pydantic_extra__ is not None or event.__pydantic_private__ is not None:
            return None
        values = event.__dict__
        key = (type(event), tuple(values), frozenset(event.__pydantic_fields_set__))
        shape = shapes.get(key)
        if shape is None:
            shape = shapes[key] = EventShape(*key)
        return shape, tuple(None if name == "partial" else value for name, value in values.items())

    def build(self, values: tuple[Any, ...], partial: Any) -> Any:
        """The event these values came from, with ``partial`` as its snapshot."""
        fields = dict(zip(self.names, values, strict=True))
        fields["partial"] = partial
        return _unvalidated(self.cls, fields, set(self.fields_set), None)


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
