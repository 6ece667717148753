"""Redact an incoming request only where it differs from the recorded one.

Replay compares each incoming request with the recorded request, which was redacted when it
was written; the rule is that the *redacted* incoming request must match
(``docs/file-format.md``). Redacting a whole 2,000-message context costs several times what
dumping it does, and on almost every call all of it is equal to the recording. A part that is
equal before redaction needs no redaction to match, so :func:`settle` redacts only the parts
(dict values, list elements, down to a depth) that differ raw, and leaves the equal ones as
they are. The comparison then runs once on the result, and a mismatch report shows redacted
values only: whatever differs has been redacted.

A part is redacted in isolation exactly as it would be inside the whole request, because a
dict is only descended into when none of its keys is a secret field name or changes under
redaction (otherwise the dict is redacted whole, keys and all).

One consequence is deliberate: a request identical to its recording matches even if the
recording holds a text today's rules would redact (a file recorded under an older redaction
version, a value that became a known secret since): the replay asks for what was recorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from ..redaction import Redactor, is_secret_field_name
from .differences import find_first_difference

__all__ = ["Settled", "settle"]

#: Differing list elements after which the rest of a list is compared element by element
#: instead of by one search over the remaining slice: keeps a list where every element differs
#: (a secret in every message) linear.
_SLICE_SEARCHES = 8


class Settled(NamedTuple):
    """A part of an incoming request made ready for comparison: ``value`` is the raw part
    where it equals the recorded one and redacted where it does not; ``differs`` says whether
    it still differs from the recorded part once redacted (the request does not match)."""

    value: Any
    differs: bool


def settle(recorded: Any, raw: Any, redactor: Redactor, depth: int) -> Settled:
    """``raw`` with each part that differs from ``recorded`` replaced by its redaction.

    ``depth`` is how many levels of dicts and lists may be descended into to find smaller
    parts; at depth 0 a differing value is redacted whole. The result shares every equal part
    with ``raw``, and ``raw`` is never mutated. Each level compares only its parts (a whole
    container is never compared before its parts are), so a request equal to its recording
    is compared once and not redacted at all.
    """
    if depth > 0 and type(raw) is dict and type(recorded) is dict and _plain_keys(raw, redactor):
        parts = {
            key: settle(recorded.get(key), value, redactor, depth - 1) for key, value in raw.items()
        }
        # A key only the recording has differs unless it reads as missing (null, a timestamp).
        recorded_only = {key: recorded[key] for key in recorded.keys() - raw.keys()}
        return Settled(
            {key: part.value for key, part in parts.items()},
            any(part.differs for part in parts.values())
            or (bool(recorded_only) and find_first_difference(recorded_only, {}) is not None),
        )
    if depth > 0 and type(raw) is list and type(recorded) is list:
        return _settle_list(recorded, raw, redactor, depth - 1)
    if find_first_difference(recorded, raw) is None:
        return Settled(raw, False)
    return _redacted(recorded, raw, redactor)


def _redacted(recorded: Any, raw: Any, redactor: Redactor) -> Settled:
    redacted = redactor.remove_secret_values(raw)
    return Settled(redacted, find_first_difference(recorded, redacted) is not None)


def _plain_keys(value: dict[Any, Any], redactor: Redactor) -> bool:
    """Whether every key of ``value`` survives redaction as it is (so its values may be
    redacted one by one)."""
    return all(
        type(key) is str and not is_secret_field_name(key) and redactor.redact_text(key) == key
        for key in value
    )


def _settle_list(recorded: list[Any], raw: list[Any], redactor: Redactor, depth: int) -> Settled:
    """Elements that differ are settled one by one, in order, up to the first that still
    differs once redacted: a comparison stops there, so nothing after it is ever read."""
    result = list(raw)
    for index in _differing_indices(recorded, raw):
        if index >= len(raw):  # the recorded list is longer
            return Settled(result, True)
        recorded_item = recorded[index] if index < len(recorded) else None
        part = _settled_part(recorded_item, raw[index], redactor, depth)
        result[index] = part.value
        if part.differs:
            return Settled(result, True)
    return Settled(result, False)


def _settled_part(recorded: Any, raw: Any, redactor: Redactor, depth: int) -> Settled:
    """:func:`settle` of a part already known to differ: a leaf is redacted without being
    compared raw again."""
    if depth > 0 and type(raw) in (dict, list) and type(recorded) is type(raw):
        return settle(recorded, raw, redactor, depth)
    return _redacted(recorded, raw, redactor)


def _differing_indices(recorded: list[Any], raw: list[Any]) -> Iterator[int]:
    """The indices at which the two lists differ, in order (one past the end of ``raw`` when
    ``recorded`` is longer): first by searches over the remaining slices (each at C speed),
    then one element at a time."""
    start = 0
    for _ in range(_SLICE_SEARCHES):
        found = find_first_difference(recorded[start:], raw[start:])
        if found is None:
            return
        index = start + _leading_index(found[0])
        yield index
        if index >= len(raw):
            return
        start = index + 1
    for index in range(start, max(len(raw), len(recorded))):
        if index >= len(raw):
            yield index
            return
        recorded_item = recorded[index] if index < len(recorded) else None
        if find_first_difference(recorded_item, raw[index]) is not None:
            yield index


def _leading_index(path: str) -> int:
    """``5`` for a difference reported at ``"[5]"`` or ``"[5].content"`` of a list."""
    return int(path[1 : path.index("]")])
