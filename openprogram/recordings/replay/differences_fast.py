"""The speed shortcut of :func:`~.differences.find_first_difference`: equal subtrees are
skipped by comparing their ``orjson`` encodings, lists in chunks.

Replay compares whole contexts (thousands of messages) on every call, so the plain walk of
:mod:`.differences_plain` (one Python call per value) costs about as much as producing the payload.
Everything here gives exactly the plain walk's answer (``docs/file-format.md`` states the
rule; the tests hold this module to :func:`~.differences_plain.plain_first_difference` on random
pairs); only the work differs:

* A subtree is accepted as equal when its encodings are equal: that runs at C speed and,
  unlike ``==``, tells ``true``, ``1`` and ``1.0`` apart. Equal encodings always mean equal
  values; different encodings only mean "look closer" (a skipped ``timestamp``, a missing key
  against ``null``, another key order), and the walk then goes one level down.
* A list is encoded in chunks of ``_CHUNK`` elements and only a chunk that differs is looked
  at element by element, so a long list costs about one encoding of each side.
* When an element proves equal although its encoding differed (every message ``timestamp``
  differs between a recording and its replay), the rest of the list is encoded without the
  skipped keys (or with sorted keys), so it stays at C speed.
"""

from __future__ import annotations

from collections import deque
from itertools import repeat
from typing import Any, NamedTuple

import orjson

from .differences_plain import (
    NON_DETERMINISTIC_FIELD_NAMES,
    SEQUENCES,
    Difference,
    index_path,
    key_path,
    length_difference,
    report,
    scalars_equal,
    sorted_keys,
)

__all__ = ["fast_first_difference"]

_SKIPPED_KEYS = tuple(sorted(NON_DETERMINISTIC_FIELD_NAMES))
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


# ============================================================================ equal at C speed


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


def _surely_equal(a: Any, b: Any, sort_keys: bool = False) -> bool:
    """True only when ``a`` and ``b`` are certainly equal; False means "walk them"."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind in _SCALARS:
        equal: bool = a == b  # same type: == is JSON equality (NaN is left to the walk)
        return equal
    if kind is dict or kind is list:
        return _encodings_equal(a, b, sort_keys)
    return False


# ============================================================================ normalising lists


def _without_skipped_keys(value: Any) -> Any:
    if type(value) is dict and not NON_DETERMINISTIC_FIELD_NAMES.isdisjoint(value):
        return {k: v for k, v in value.items() if k not in NON_DETERMINISTIC_FIELD_NAMES}
    return value


def _strip_skipped_keys(items: list[Any]) -> list[Any]:
    """``items`` with the skipped keys of their dict elements removed (copies, never the
    originals)."""
    if not all(map(isinstance, items, repeat(dict))):
        return [_without_skipped_keys(item) for item in items]
    # All dicts: map over dict.copy and dict.pop runs at C speed, no Python-level loop.
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


# ============================================================================ the walk


def fast_first_difference(recorded: Any, incoming: Any, path: str = "") -> Difference | None:
    """:func:`~.differences_plain.plain_first_difference`'s answer, equal subtrees skipped."""
    if recorded is incoming:
        return None
    if isinstance(recorded, dict) and isinstance(incoming, dict):
        return _diff_dicts(recorded, incoming, path)
    if isinstance(recorded, SEQUENCES) and isinstance(incoming, SEQUENCES):
        return _diff_sequences(recorded, incoming, path)
    if scalars_equal(recorded, incoming):
        return None
    return report(path, recorded, incoming)


def _diff_dicts(a: dict[Any, Any], b: dict[Any, Any], path: str) -> Difference | None:
    for key in sorted_keys(a, b):
        if key in NON_DETERMINISTIC_FIELD_NAMES:
            continue
        left, right = a.get(key), b.get(key)  # missing reads as None, as in the plain walk
        if left is right:
            continue
        # Lists check themselves chunk by chunk: checking a whole list first would encode it
        # twice whenever it differs.
        if not (type(left) is list and type(right) is list) and _surely_equal(left, right):
            continue
        found = fast_first_difference(left, right, key_path(path, key))
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
    shorter = min(len(a), len(b))
    normalisation = _RAW
    for start in range(0, shorter, _CHUNK):
        stop = min(start + _CHUNK, shorter)
        left = normalisation.apply(_chunk(a, start, stop))
        right = normalisation.apply(_chunk(b, start, stop))
        if _encodings_equal(left, right, normalisation.sort_keys):
            continue  # a whole chunk equal in one C-speed comparison
        for index in range(start, stop):
            offset = index - start
            if _surely_equal(left[offset], right[offset], normalisation.sort_keys):
                continue
            found = fast_first_difference(a[index], b[index], index_path(path, index))
            if found is not None:
                return found
            # Equal, though encoded differently: compare the rest the way that makes it so.
            escalated = _escalate(normalisation, a[index], b[index])
            if escalated != normalisation:
                normalisation = escalated
                left[offset + 1 :] = normalisation.apply(_chunk(a, index + 1, stop))
                right[offset + 1 :] = normalisation.apply(_chunk(b, index + 1, stop))
    return length_difference(a, b, path)
