"""What a volatile value looks like: dates, times, uuids, ports, temporary paths, hex ids and
counters, each with the ``normalize`` rule that makes a replay overlook it (``volatile.py``).

Two values that differ only in such a part are a run's clock or ids, not what the agent asked:
a drift report says so and names the rule that covers it, and ``openprogram recordings
doctor`` proposes the rules for two recordings of one run (docs/recordings-cli.md). Each shape
is a regular expression that :class:`~.volatile.RequestFilter` accepts as it is, so a
proposed rule can be pasted into a project file or a marker.

The shapes are narrow on purpose: a number that changed (``6*7`` to ``6*8``) is what the test
asked, and a counter is a number only after a word that names one (``run 12``, ``attempt=3``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["SHAPES", "VolatileShape", "covering_shapes", "looks_like_epoch", "volatile_hint"]

#: Longer texts are not examined (a drift report must stay quick to build).
MAX_EXAMINED = 200_000


@dataclass(frozen=True)
class VolatileShape:
    """A kind of volatile value and its ``normalize`` rule (``regex`` -> ``replacement``)."""

    name: str
    regex: str
    replacement: str

    @property
    def pattern(self) -> re.Pattern[str]:
        return _compiled(self.regex)

    def apply(self, text: str) -> str:
        return self.pattern.sub(self.replacement, text)

    @property
    def rule(self) -> tuple[str, str]:
        return (self.regex, self.replacement)


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _compiled(regex: str) -> re.Pattern[str]:
    pattern = _PATTERNS.get(regex)
    if pattern is None:
        pattern = _PATTERNS[regex] = re.compile(regex)
    return pattern


#: In the order they are applied: a longer shape before the shapes of its parts.
SHAPES: tuple[VolatileShape, ...] = (
    VolatileShape(
        "uuid",
        r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
        "<uuid>",
    ),
    VolatileShape(
        "datetime",
        r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?",
        "<datetime>",
    ),
    VolatileShape("date", r"\b\d{4}-\d{2}-\d{2}\b", "<date>"),
    VolatileShape("time", r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b", "<time>"),
    VolatileShape("epoch", r"\b1[5-9]\d{8}(?:\d{3}|\.\d+)?\b", "<epoch>"),
    VolatileShape(
        "temporary path",
        r"(?:/private)?(?:/tmp|/var/tmp|/var/folders/[\w.-]+/[\w.-]+/T)(?:/pytest-of-[\w.-]+/pytest-\d+)?/[\w.-]+",
        "<tmp>",
    ),
    VolatileShape(
        "port",
        r"((?://[\w.-]+|//\[[0-9a-fA-F:]+\]|\blocalhost|\b127\.0\.0\.1|\b0\.0\.0\.0):)\d{1,5}\b",
        r"\1<port>",
    ),
    VolatileShape(
        "hex id",
        r"(?<![0-9A-Za-z])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{8,}(?![0-9A-Za-z])",
        "<hex>",
    ),
    VolatileShape(
        "counter",
        r"(\b(?i:run|attempt|retry|request|req|seq|sequence|iteration|counter|pid|job|build|session)[ #:=_-]*)\d+\b",
        r"\1<n>",
    ),
)


def _applied(shapes: Sequence[VolatileShape], text: str) -> str:
    for shape in shapes:
        text = shape.apply(text)
    return text


def covering_shapes(a: str, b: str) -> tuple[VolatileShape, ...] | None:
    """The fewest shapes whose rules make ``a`` and ``b`` equal (in :data:`SHAPES` order), or
    None when no set of them does (the texts differ in something else too). Equal texts need
    none."""
    if a == b:
        return ()
    if len(a) > MAX_EXAMINED or len(b) > MAX_EXAMINED or _applied(SHAPES, a) != _applied(SHAPES, b):
        return None
    needed = list(SHAPES)
    for shape in reversed(
        SHAPES
    ):  # the general shapes go first, so one datetime rule wins over a date and a time
        trial = [other for other in needed if other is not shape]
        if _applied(trial, a) == _applied(trial, b):
            needed = trial
    return tuple(needed)


def example_of(shape: VolatileShape, a: str, b: str) -> tuple[str, str]:
    """The first value of ``shape`` that differs between ``a`` and ``b`` (its text in each)."""
    found_a = [match.group(0) for match in shape.pattern.finditer(a)]
    found_b = [match.group(0) for match in shape.pattern.finditer(b)]
    for one, other in zip(found_a, found_b, strict=False):
        if one != other:
            return one, other
    return (found_a or [""])[0], (found_b or [""])[0]


def looks_like_epoch(a: Any, b: Any) -> bool:
    """Two whole numbers that both read as Unix times (seconds or milliseconds, 2017 to 2033)."""

    def epoch(value: Any) -> bool:
        return type(value) is int and (
            1_500_000_000 <= value < 2_000_000_000 or 1_500_000_000_000 <= value < 2_000_000_000_000
        )

    return a != b and epoch(a) and epoch(b)


def volatile_hint(field: str, recorded: Any, incoming: Any) -> str | None:
    """For a drift report: that the two values differ only in a volatile-looking part, and the
    rule that covers it; None when they do not (or are no text)."""
    doctor = "('openprogram recordings doctor A B' proposes every such rule for two recordings of the test)"
    if looks_like_epoch(recorded, incoming):
        return (
            "the two values differ only in what looks like a time (a Unix timestamp); a replay overlooks "
            f"the field with this rule in [tool.openprogram.record_replay] (or the marker's ignore=):\n"
            f'  ignore = ["{field}"]\n{doctor}'
        )
    if type(recorded) is not str or type(incoming) is not str:
        return None
    shapes = covering_shapes(recorded, incoming)
    if not shapes:
        return None
    names = [f"a {shape.name}" for shape in shapes]
    named = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    examples = "; ".join(
        "{} {!r} / {!r}".format(shape.name, *example_of(shape, recorded, incoming))
        for shape in shapes
    )
    rules = ", ".join(
        f"[{toml_string(shape.regex)}, {toml_string(shape.replacement)}]" for shape in shapes
    )
    return (
        f"the two values differ only in {named} ({examples}); a replay overlooks "
        f"{'it with this rule' if len(shapes) == 1 else 'them with these rules'} in [tool.openprogram.record_replay] "
        f"(or the marker's normalize=):\n  normalize = [{rules}]\n{doctor}"
    )


def toml_string(text: str) -> str:
    """``text`` as a TOML string: a literal string (no escapes, as a regex reads best) when it
    can be one, else a basic string (JSON's escapes are TOML's)."""
    import json

    if "'" not in text and not any(ord(char) < 32 or ord(char) == 127 for char in text):
        return f"'{text}'"
    return json.dumps(text)
