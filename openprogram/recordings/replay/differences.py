"""Where two request payloads first differ (:func:`find_first_difference`), and the
exception replay raises about it (:class:`ReplayMismatch`).

The rule is :mod:`.differences_plain`, written plainly; :func:`find_first_difference`, the
public name, gives the same answer faster by skipping equal subtrees
(:mod:`.differences_fast`). ``docs/tutorial.md`` shows the mismatch a replay raises.
"""

from __future__ import annotations

from typing import Any

from ..text_diff import common_prefix_length
from .differences_fast import fast_first_difference
from .differences_plain import (
    NON_DETERMINISTIC_FIELD_NAMES,
    ROOT_PATH,
    Difference,
    plain_first_difference,
)
from .volatile_shapes import volatile_hint

__all__ = [
    "NON_DETERMINISTIC_FIELD_NAMES",
    "REMAINING_CALLS",
    "ROOT_PATH",
    "Difference",
    "ReplayMismatch",
    "find_first_difference",
    "plain_first_difference",
    "short_repr",
]

REPR_LIMIT = 200

#: The field of a replay that ended with recorded calls left unused; its ``recorded`` is the
#: number of recorded calls and its ``incoming`` the number made.
REMAINING_CALLS = "remaining_calls"


def find_first_difference(recorded: Any, incoming: Any, path: str = "") -> Difference | None:
    """The first place where ``incoming`` differs from ``recorded``, as
    ``(field_path, recorded_value, incoming_value)``, or None when they are equal.

    ``path`` prefixes every reported path (``"context"`` gives ``context.messages[2]``); a
    difference at the top is reported at ``path`` itself, or ``<root>`` when it is empty.
    A value missing on one side (a dict key, a list element past the end) is reported as None.

    Same answer as :func:`plain_first_difference`, faster: replay compares whole contexts on
    every call.
    """
    return fast_first_difference(recorded, incoming, path)


# ============================================================================ exception


def short_repr(value: Any, limit: int = REPR_LIMIT) -> str:
    """``repr(value)``, cut to at most ``limit`` characters: a longer repr keeps its first
    ``limit - 3`` characters and ends in ``...``, so the result is exactly ``limit`` long."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return text[: limit - 3] + "..."


#: Characters a window shows before the first difference of two long strings.
WINDOW_CONTEXT = 60


def windows_around_difference(
    recorded: Any, incoming: Any, limit: int = REPR_LIMIT
) -> tuple[str, str, int] | None:
    """Two strings whose first difference lies past what :func:`short_repr` shows, each as a
    window of at most ``limit`` characters around that character (``...`` where cut), and the
    difference's position; None for anything else (the plain form shows the difference). A 3
    KB system prompt with one word changed would otherwise show two equal beginnings."""
    if type(recorded) is not str or type(incoming) is not str:
        return None
    first = common_prefix_length(recorded, incoming)
    if all(
        len(repr(text[: first + 1])) <= limit - 3 or len(repr(text)) <= limit
        for text in (recorded, incoming)
    ):
        return None  # the plain form already shows where they differ
    start = max(0, first - WINDOW_CONTEXT)
    return _window(recorded, start, limit), _window(incoming, start, limit), first


def _window(text: str, start: int, limit: int) -> str:
    """``repr`` of ``text`` from ``start``, as much as fits in ``limit`` characters with a
    ``...`` on each side that is cut."""
    lead = "..." if start else ""
    length = limit
    while True:
        segment = text[start : start + length]
        tail = "..." if start + length < len(text) else ""
        shown = f"{lead}{segment!r}{tail}"
        if len(shown) <= limit or length <= 1:
            return shown
        length -= max(1, len(shown) - limit)


class ReplayMismatch(AssertionError):
    """A replayed call asked for something other than what was recorded.

    An ``AssertionError`` so that test frameworks report it as a failed expectation. It
    pickles with all its attributes (pytest-xdist moves exceptions between processes).
    """

    def __init__(
        self,
        call_index: int,
        field_path: str,
        recorded: Any,
        incoming: Any,
        event_index: int | None = None,
        *,
        where: str | None = None,
        note: str | None = None,
    ) -> None:
        # Shown redacted by today's rules, both sides: a file written under older rules (or
        # edited) may hold a value that is a secret now, and this message reaches CI logs.
        from ..redaction import redact_text, remove_secret_values

        self.call_index = call_index
        self.field_path = redact_text(field_path)
        self.recorded = remove_secret_values(recorded)
        self.incoming = remove_secret_values(incoming)
        self.event_index = event_index
        #: Which lane and session the call was compared against, when the recording has a
        #: choice of them (``"lane 'c1', session 2 of 3"``); None otherwise.
        self.where = redact_text(where) if where else where
        #: What may explain the drift (an earlier answer that lost a value to redaction).
        self.note = note
        #: That the two values differ only in a volatile-looking part (a time, a uuid, a port),
        #: and the rule that covers it; None otherwise.
        self.volatile_hint = (
            None
            if field_path == REMAINING_CALLS
            else volatile_hint(self.field_path, self.recorded, self.incoming)
        )
        at = f"call {call_index} ({self.where})" if self.where else f"call {call_index}"
        notes = "".join(
            f"\n{text}"
            for text in (note, self.volatile_hint and f"note: {self.volatile_hint}")
            if text
        )
        super().__init__(
            f"replay mismatch at {at}, field {self.field_path}:{self._described()}{notes}"
        )

    def _described(self) -> str:
        """The two sides, from the end of the first line on: in words for the calls left
        unused, else both values (around the first difference of two long strings)."""
        recorded, incoming = self.recorded, self.incoming
        if self.field_path == REMAINING_CALLS and type(recorded) is int and type(incoming) is int:
            unused = recorded - incoming
            return f"\nmade {incoming} of its {recorded} recorded calls ({unused} left unused)"
        shown = windows_around_difference(recorded, incoming)
        if shown is None:
            return f"\nrecorded {short_repr(recorded)}, incoming {short_repr(incoming)}"
        recorded_text, incoming_text, first = shown
        return f" (first difference at character {first})\nrecorded {recorded_text}, incoming {incoming_text}"

    def __reduce__(self) -> tuple[Any, ...]:
        arguments = (
            self.call_index,
            self.field_path,
            self.recorded,
            self.incoming,
            self.event_index,
        )
        return (_rebuild_mismatch, (type(self), arguments, self.where, self.note), self.__dict__)


def _rebuild_mismatch(
    kind: type[ReplayMismatch],
    arguments: tuple[Any, ...],
    where: str | None,
    note: str | None = None,
) -> ReplayMismatch:
    """Unpickle a :class:`ReplayMismatch` with its keyword-only ``where`` and ``note``."""
    return kind(*arguments, where=where, note=note)
