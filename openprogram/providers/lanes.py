"""Lanes: which strand of an agent a provider call belongs to.

An agent that runs sub-agents as concurrent tools makes model calls whose order across the
sub-agents depends on timing. Replay must not: each call is made in a *lane* (a path of
segments, ``""`` for the root), a recording notes the lane of each request, and replay keeps
one strict order per lane, so calls of different lanes may arrive in any interleaving.

The lane is a context variable, so tasks started inside ``with lane(...)`` inherit it. A plain
thread does not: start it with ``contextvars.copy_context().run(...)`` (or enter ``lane`` in the
thread) to keep its calls in the lane. See ``docs/tutorial.md``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["ROOT_LANE", "current_lane", "lane", "lane_segment"]

ROOT_LANE = ""

_current: ContextVar[str] = ContextVar("openprogram_lane", default=ROOT_LANE)


def current_lane() -> str:
    """The lane of the calls made here: ``""`` (the root) or ``"a/b"``."""
    return _current.get()


@contextmanager
def lane(name: str) -> Iterator[str]:
    """Make the calls inside (and in the tasks started inside) in the child lane
    ``PARENT/name``; yields the full lane path."""
    if not isinstance(name, str) or not name or "/" in name:
        raise ValueError(
            f"a lane name must be a non-empty string without '/', not {_described(name)} "
            "(nest lane() blocks to make a path)"
        )
    parent = _current.get()
    path = f"{parent}/{name}" if parent else name
    token = _current.set(path)
    try:
        yield path
    finally:
        _current.reset(token)


def _described(name: object) -> str:
    """What a rejected lane name is, without quoting it: a lane name is the caller's text (a
    tool call id, a user's input) and may hold a key, which a message must not echo."""
    if not isinstance(name, str):
        return f"a {type(name).__name__}"
    if not name:
        return "an empty string"
    return f"a name of {len(name)} characters with '/' at character {name.index('/')}"


def lane_segment(text: str) -> str:
    """A usable lane name made from ``text`` (a tool call id, say): ``/`` becomes ``_``, and an
    empty text ``_``."""
    return text.replace("/", "_") or "_"
