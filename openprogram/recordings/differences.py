"""Where two request payloads first differ, and the exception replay raises about it
(contract section 6).

Equality here is JSON equality, which is not Python's ``==``:

* ``True``, ``1`` and ``1.0`` are three different values (Python says they are equal; a JSON
  round trip keeps them apart, so a replayed request must too);
* a key missing on one side and ``null`` on the other are equal, so recordings survive new
  optional fields;
* keys named in ``NON_DETERMINISTIC_FIELD_NAMES`` are ignored at any depth;
* lists and tuples are both arrays; NaN and infinities are null (what JSON stores for them).

Dicts are walked by sorted key and lists by index, so the same pair always yields the same
path.

Replay compares whole contexts (thousands of messages) on every call, so the walk is not a
plain recursion. A subtree is accepted as equal when its ``orjson`` encodings are equal: that
runs at C speed and, unlike ``==``, tells ``true``, ``1`` and ``1.0`` apart. Equal encodings
always mean equal values; different encodings only mean "look closer", because of the rules
above. A list is encoded in chunks and only a chunk that differs is looked at element by
element. When an element proves equal although its encoding differed (every message
``timestamp`` differs between a recording and its replay), the rest of the list is encoded
without skipped keys (or with sorted keys), so it stays at C speed.
"""

from __future__ import annotations

import json
import math
import re
from collections import deque
from itertools import repeat
from typing import Any, NamedTuple

import orjson

__all__ = [
    "NON_DETERMINISTIC_FIELD_NAMES",
    "Difference",
    "ReplayMismatch",
    "find_first_difference",
    "short_repr",
]

NON_DETERMINISTIC_FIELD_NAMES = frozenset({"timestamp"})
_SKIPPED_KEYS = tuple(sorted(NON_DETERMINISTIC_FIELD_NAMES))

Difference = tuple[str, Any, Any]

ROOT_PATH = "<root>"
REPR_LIMIT = 200

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SEQUENCES = (list, tuple)
_SCALARS = (str, int, float, bool)
# Values that are not plain JSON (str/int/dict/list subclasses, datetimes, dataclasses) make
# orjson raise instead of encoding them like a JSON value: such subtrees are walked instead.
_ENCODE_OPTIONS = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)
_SORTED_OPTIONS = _ENCODE_OPTIONS | orjson.OPT_SORT_KEYS
# Elements per encoded chunk of a list: large enough that encoding runs at C speed, small
# enough that re-checking the one chunk that differs element by element costs little.
_CHUNK = 64


# ============================================================================ paths


def _key_path(path: str, key: Any) -> str:
    if isinstance(key, str) and _IDENTIFIER.match(key):
        return f"{path}.{key}" if path else key
    text = json.dumps(key, ensure_ascii=False) if isinstance(key, str) else repr(key)
    return f"{path}[{text}]"


def _index_path(path: str, index: int) -> str:
    return f"{path}[{index}]"


def _report(path: str, recorded: Any, incoming: Any) -> Difference:
    return (path or ROOT_PATH, recorded, incoming)


# ============================================================================ equality


def _encode(value: Any, sort_keys: bool = False) -> bytes | None:
    """The canonical bytes of a plain-JSON value, or None for anything else (which is then
    walked instead). Equal bytes mean equal JSON, ``true``/``1``/``1.0`` told apart."""
    try:
        return orjson.dumps(value, option=_SORTED_OPTIONS if sort_keys else _ENCODE_OPTIONS)
    except (orjson.JSONEncodeError, TypeError):
        return None


def _encodings_equal(a: Any, b: Any, sort_keys: bool = False) -> bool:
    """True only when ``a`` and ``b`` are certainly equal; False means "walk them"."""
    encoded = _encode(a, sort_keys)
    return encoded is not None and encoded == _encode(b, sort_keys)


def _as_json(value: Any) -> Any:
    # JSON has no NaN or infinity: a recording stores them as null, and so do the encodings
    # compared above, so the walk must agree.
    if type(value) is float and not math.isfinite(value):
        return None
    return value


def _scalars_equal(a: Any, b: Any) -> bool:
    a, b = _as_json(a), _as_json(b)
    if type(a) is not type(b):
        return False  # True vs 1, 1 vs 1.0, "1" vs 1
    return a == b


def _surely_equal(a: Any, b: Any, sort_keys: bool = False) -> bool:
    """True only when ``a`` and ``b`` are certainly equal; False means "walk them"."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind in _SCALARS:
        return a == b
    if kind is dict or kind is list:
        return _encodings_equal(a, b, sort_keys)
    return False


def _without_skipped_keys(value: Any) -> Any:
    if type(value) is dict and not NON_DETERMINISTIC_FIELD_NAMES.isdisjoint(value):
        return {k: v for k, v in value.items() if k not in NON_DETERMINISTIC_FIELD_NAMES}
    return value


def _strip_skipped_keys(items: list[Any]) -> list[Any]:
    """``items`` with the skipped keys of their dict elements removed (copies, never the
    originals), at C speed when every element is a dict: ``map`` over ``dict.copy`` and
    ``dict.pop``, no Python-level loop."""
    if not all(map(isinstance, items, repeat(dict))):
        return [_without_skipped_keys(item) for item in items]
    copies = list(map(dict.copy, items))
    for key in _SKIPPED_KEYS:
        deque(map(dict.pop, copies, repeat(key), repeat(None)), maxlen=0)
    return copies


class _Normalisation(NamedTuple):
    """How list elements are prepared before their encodings are compared. Both ways only
    remove what the comparison ignores anyway (skipped keys, key order)."""

    strip: bool
    sort_keys: bool

    def apply(self, items: list[Any]) -> list[Any]:
        return _strip_skipped_keys(items) if self.strip else items


_RAW = _Normalisation(strip=False, sort_keys=False)
# Tried in this order when an element turns out equal although its encoding differs:
# timestamps differ between a recording and every replay; key order differs only when a
# payload was built another way.
_ESCALATIONS = (
    _Normalisation(strip=True, sort_keys=False),
    _Normalisation(strip=False, sort_keys=True),
    _Normalisation(strip=True, sort_keys=True),
)


def _escalate(current: _Normalisation, a: Any, b: Any) -> _Normalisation:
    """The cheapest normalisation under which the equal pair ``a``, ``b`` encodes equally,
    so that the elements after it are compared at C speed again; else ``current``."""
    for candidate in _ESCALATIONS:
        if candidate.strip < current.strip or candidate.sort_keys < current.sort_keys:
            continue
        left, right = candidate.apply([a]), candidate.apply([b])
        if candidate != current and _encodings_equal(left, right, candidate.sort_keys):
            return candidate
    return current


# ============================================================================ walk


def _diff(a: Any, b: Any, path: str) -> Difference | None:
    if a is b:
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        return _diff_dicts(a, b, path)
    if isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES):
        return _diff_sequences(a, b, path)
    if _scalars_equal(a, b):
        return None
    return _report(path, a, b)


def _sorted_keys(a: dict[Any, Any], b: dict[Any, Any]) -> list[Any]:
    keys = a.keys() | b.keys()
    try:
        return sorted(keys)
    except TypeError:  # keys of mixed types: still one fixed order
        return sorted(keys, key=lambda key: (type(key).__name__, repr(key)))


def _diff_dicts(a: dict[Any, Any], b: dict[Any, Any], path: str) -> Difference | None:
    for key in _sorted_keys(a, b):
        if key in NON_DETERMINISTIC_FIELD_NAMES:
            continue
        # A missing key reads as None: missing and null are equal.
        left, right = a.get(key), b.get(key)
        if left is right:
            continue
        # Lists check themselves chunk by chunk: checking a whole list first would encode it
        # twice whenever it differs.
        if not (type(left) is list and type(right) is list) and _surely_equal(left, right):
            continue
        found = _diff(left, right, _key_path(path, key))
        if found is not None:
            return found
    return None


def _chunk(items: list[Any] | tuple[Any, ...], start: int, stop: int) -> list[Any]:
    """A new list of ``items[start:stop]`` (the caller may change it)."""
    chunk = items[start:stop]
    return chunk if type(chunk) is list else list(chunk)


def _diff_sequences(
    a: list[Any] | tuple[Any, ...], b: list[Any] | tuple[Any, ...], path: str
) -> Difference | None:
    """Chunks of elements are compared by their encodings, and only a chunk that differs is
    looked at element by element, so a long list costs about one encoding of each side."""
    shorter = min(len(a), len(b))
    normalisation = _RAW
    for start in range(0, shorter, _CHUNK):
        stop = min(start + _CHUNK, shorter)
        left = normalisation.apply(_chunk(a, start, stop))
        right = normalisation.apply(_chunk(b, start, stop))
        if _encodings_equal(left, right, normalisation.sort_keys):
            continue
        for index in range(start, stop):
            offset = index - start
            if _surely_equal(left[offset], right[offset], normalisation.sort_keys):
                continue
            found = _diff(a[index], b[index], _index_path(path, index))
            if found is not None:
                return found
            # Equal, though encoded differently: compare the rest the way that makes it so.
            escalated = _escalate(normalisation, a[index], b[index])
            if escalated != normalisation:
                normalisation = escalated
                left[offset + 1 :] = normalisation.apply(_chunk(a, index + 1, stop))
                right[offset + 1 :] = normalisation.apply(_chunk(b, index + 1, stop))
    if len(a) != len(b):
        return _report(
            _index_path(path, shorter),
            a[shorter] if len(a) > shorter else None,
            b[shorter] if len(b) > shorter else None,
        )
    return None


def find_first_difference(recorded: Any, incoming: Any, path: str = "") -> Difference | None:
    """The first place where ``incoming`` differs from ``recorded``, as
    ``(field_path, recorded_value, incoming_value)``, or None when they are equal.

    ``path`` prefixes every reported path (``"context"`` gives ``context.messages[2]``); a
    difference at the top is reported at ``path`` itself, or ``<root>`` when it is empty.
    A value missing on one side (a dict key, a list element past the end) is reported as None.
    """
    return _diff(recorded, incoming, path)


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
