"""The rule of request comparison, written plainly: where two request payloads first differ.

Equality here is JSON equality, which is not Python's ``==`` (``docs/file-format.md`` states
the rule for requests):

* ``True``, ``1`` and ``1.0`` are three different values (Python says they are equal; a JSON
  round trip keeps them apart, so a replayed request must too);
* a key missing on one side and ``null`` on the other are equal, so recordings survive new
  optional fields;
* keys named in ``NON_DETERMINISTIC_FIELD_NAMES`` are ignored at any depth;
* lists and tuples are both arrays; NaN and infinities are null (what JSON stores for them).

Dicts are walked by sorted key and lists by index, so the same pair always yields the same
path. :func:`plain_first_difference` is that walk and nothing else: it reads alone and is the
reference the tests hold the shortcut (:mod:`.differences_fast`) to.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["NON_DETERMINISTIC_FIELD_NAMES", "Difference", "plain_first_difference"]

NON_DETERMINISTIC_FIELD_NAMES = frozenset({"timestamp"})

Difference = tuple[str, Any, Any]

ROOT_PATH = "<root>"

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
    equal: bool = a == b  # JSON scalars of one type: == gives a bool
    return equal


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
            found = plain_first_difference(
                recorded.get(key), incoming.get(key), key_path(path, key)
            )
            if found is not None:
                return found
        return None
    if isinstance(recorded, SEQUENCES) and isinstance(incoming, SEQUENCES):
        for index, (left, right) in enumerate(
            zip(recorded, incoming, strict=False)
        ):  # to the shorter
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
