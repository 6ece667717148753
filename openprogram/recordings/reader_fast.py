"""The speed shortcuts of the strict reader (:mod:`.reader`), each beside what it replaces.

The reader's plain way is enough to be correct: apply each ``partial_patch`` to a dict and
validate the result (``docs/file-format.md`` describes the file). These shortcuts save time
on large files and change no result; the tests hold them to the plain way.

* :func:`appended_snapshot` saves a full pydantic validation of the ``partial`` snapshot for
  nearly every streamed event. It is correct because the patch only appends to one string
  field of one content block, a field typed plain ``str`` (a grown string still validates):
  the previous snapshot was already validated, blocks and usage are immutable values, so the
  new snapshot is the previous one with that block replaced by a copy whose string grew;
  anything else returns None and takes the plain way.
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

__all__ = ["appended_snapshot", "collector_paused", "promote_to_oldest_generation"]

_setattr = object.__setattr__
#: Per block class, the fields any grown string still validates for (see ``_free_text_fields``).
_FREE_TEXT_FIELDS: dict[type, frozenset[str]] = {}


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


def appended_snapshot(previous: Any, patch: list[Any]) -> tuple[Any, tuple[int, str, str]] | None:
    """The next snapshot when ``patch`` is one ``append`` to a string field of a content block
    (nearly every streamed event), with the append as ``(index, field, suffix)``; None for any
    other patch (the plain way: dict patch, full validation). ``previous`` is not changed.
    Written out in one piece: this runs for nearly every event of a file."""
    if len(patch) != 1:
        return None
    op = patch[0]
    if type(op) is not list or len(op) != 3 or op[0] != "append":
        return None
    path, suffix = op[1], op[2]
    if type(path) is not list or len(path) != 3 or path[0] != "content" or type(suffix) is not str:
        return None
    index, field = path[1], path[2]
    message = previous.__dict__
    content = message["content"]
    if type(index) is not int or not 0 <= index < len(content) or type(field) is not str:
        return None
    block = content[index]
    values = block.__dict__
    text = values.get(field)
    kind = type(block)
    if type(text) is not str or field not in _free_text_fields(kind):
        return None
    # Objects built without validation: the one field that grew is a str, as validated before.
    grown = kind.__new__(kind)  # an immutable value: never assigned to, so its set is shared
    _setattr(grown, "__dict__", {**values, field: text + suffix})
    _setattr(grown, "__pydantic_fields_set__", block.__pydantic_fields_set__)
    extra = block.__pydantic_extra__
    _setattr(grown, "__pydantic_extra__", None if extra is None else dict(extra))
    _setattr(grown, "__pydantic_private__", None)
    blocks = content.copy()  # the other blocks are immutable values: shared, as live
    blocks[index] = grown
    cls = type(previous)
    snapshot = cls.__new__(cls)
    _setattr(snapshot, "__dict__", {**message, "content": blocks})
    _setattr(snapshot, "__pydantic_fields_set__", set(previous.__pydantic_fields_set__))
    extra = previous.__pydantic_extra__
    _setattr(snapshot, "__pydantic_extra__", None if extra is None else dict(extra))
    _setattr(snapshot, "__pydantic_private__", None)
    return snapshot, (index, field, suffix)


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
