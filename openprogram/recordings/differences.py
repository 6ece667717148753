"""Where two request payloads first differ, and the exception replay raises about it.

This module is the rule, written plainly (``docs/file-format.md`` states it for requests;
``docs/tutorial.md`` shows the mismatch a replay raises). Equality here is JSON equality, which is not
Python's ``==``:

* ``True``, ``1`` and ``1.0`` are three different values (Python says they are equal; a JSON
  round trip keeps them apart, so a replayed request must too);
* a key missing on one side and ``null`` on the other are equal, so recordings survive new
  optional fields;
* keys named in ``NON_DETERMINISTIC_FIELD_NAMES`` are ignored at any depth;
* lists and tuples are both arrays; NaN and infinities are null (what JSON stores for them).

Dicts are walked by sorted key and lists by index, so the same pair always yields the same
path. :func:`plain_first_difference` is that walk and nothing else: it reads alone and is the
reference the tests hold the shortcut to. :func:`find_first_difference`, the public name, gives
the same answer faster by skipping equal subtrees (:mod:`.differences_fast`).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = [
    "NON_DETERMINISTIC_FIELD_NAMES",
    "Difference",
    "ReplayMismatch",
    "find_first_difference",
    "plain_first_difference",
    "short_repr",
]

NON_DETERMINISTIC_FIELD_NAMES = frozenset({"timestamp"})

Difference = tuple[str, Any, Any]

ROOT_PATH = "<root>"
REPR_LIMIT = 200

SEQUENCES = (list, tuple)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


# ============================================================================ paths


def key_path(path: str, key: Any) -> str:
    """``path.key`` for an identifier key, ``path["key"]`` (JSON-quoted) for any other."""
    if isinstance(key, str) and _IDENTIFIER.match(key):
        return f"{path}.{key}" if path else key
    text = json.dumps(key, ensure_ascii=False) if isinstance(key, str) else repr(key)
    return f"{path}[{text}]"


def index_path(path: str, index: int) -> str:
    return f"{path}[{index}]"


def report(path: str, recorded: Any, incoming: Any) -> Difference:
    """The difference as returned: an empty path (the top) is spelled ``<root>``."""
    return (path or ROOT_PATH, recorded, incoming)


# ============================================================================ the rule


def _as_json(value: Any) -> Any:
    # JSON has no NaN or infinity: a recording stores them as null.
    if type(value) is float and not math.isfinite(value):
        return None
    return value


def scalars_equal(a: Any, b: Any) -> bool:
    """JSON equality of two values that are not both dicts nor both arrays."""
    a, b = _as_json(a), _as_json(b)
    if type(a) is not type(b):
        return False  # True vs 1, 1 vs 1.0, "1" vs 1
    return a == b


def sorted_keys(a: dict[Any, Any], b: dict[Any, Any]) -> list[Any]:
    """The keys of both dicts in the one order the walk visits them."""
    keys = a.keys() | b.keys()
    try:
        return sorted(keys)
    except TypeError:  # keys of mixed types: still one fixed order
        return sorted(keys, key=lambda key: (type(key).__name__, repr(key)))


def plain_first_difference(recorded: Any, incoming: Any, path: str = "") -> Difference | None:
    """What :func:`find_first_difference` returns, by a plain recursive walk (the reference)."""
    if isinstance(recorded, dict) and isinstance(incoming, dict):
        for key in sorted_keys(recorded, incoming):
            if key in NON_DETERMINISTIC_FIELD_NAMES:
                continue
            # A missing key reads as None: missing and null are equal.
            found = plain_first_difference(recorded.get(key), incoming.get(key), key_path(path, key))
            if found is not None:
                return found
        return None
    if isinstance(recorded, SEQUENCES) and isinstance(incoming, SEQUENCES):
        for index, (left, right) in enumerate(zip(recorded, incoming, strict=False)):  # to the shorter
            found = plain_first_difference(left, right, index_path(path, index))
            if found is not None:
                return found
        return length_difference(recorded, incoming, path)
    if scalars_equal(recorded, incoming):
        return None
    return report(path, recorded, incoming)


def length_difference(
    recorded: list[Any] | tuple[Any, ...], incoming: list[Any] | tuple[Any, ...], path: str
) -> Difference | None:
    """Two arrays equal as far as the shorter goes: the first extra element, None opposite."""
    shorter = min(len(recorded), len(incoming))
    if len(recorded) == len(incoming):
        return None
    return report(
        index_path(path, shorter),
        recorded[shorter] if len(recorded) > shorter else None,
        incoming[shorter] if len(incoming) > shorter else None,
    )


def find_first_difference(recorded: Any, incoming: Any, path: str = "") -> Difference | None:
    """The first place where ``incoming`` differs from ``recorded``, as
    ``(field_path, recorded_value, incoming_value)``, or None when they are equal.

    ``path`` prefixes every reported path (``"context"`` gives ``context.messages[2]``); a
    difference at the top is reported at ``path`` itself, or ``<root>`` when it is empty.
    A value missing on one side (a dict key, a list element past the end) is reported as None.

    Same answer as :func:`plain_first_difference`, faster: replay compares whole contexts on
    every call.
    """
    # Imported here: the shortcut is built from this module's rule, so it imports this one.
    from .differences_fast import fast_first_difference

    return fast_first_difference(recorded, incoming, path)


# ============================================================================ exception


def short_repr(value: Any, limit: int = REPR_LIMIT) -> str:
    """``repr(value)``, cut to at most ``limit`` characters: a longer repr keeps its first
    ``limit - 3`` characters and ends in ``...``, so the result is exactly ``limit`` long."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return text[: limit - 3] + "..."


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
    ) -> None:
        self.call_index = call_index
        self.field_path = field_path
        self.recorded = recorded
        self.incoming = incoming
        self.event_index = event_index
        #: Which lane and session the call was compared against, when the recording has a
        #: choice of them (``"lane 'c1', session 2 of 3"``); None otherwise.
        self.where = where
        at = f"call {call_index} ({where})" if where else f"call {call_index}"
        super().__init__(
            f"replay mismatch at {at}, field {field_path}:\n"
            f"recorded {short_repr(recorded)}, incoming {short_repr(incoming)}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        arguments = (self.call_index, self.field_path, self.recorded, self.incoming, self.event_index)
        return (_rebuild_mismatch, (type(self), arguments, self.where), self.__dict__)


def _rebuild_mismatch(kind: type, arguments: tuple[Any, ...], where: str | None) -> ReplayMismatch:
    """Unpickle a :class:`ReplayMismatch` with its keyword-only ``where``."""
    return kind(*arguments, where=where)
