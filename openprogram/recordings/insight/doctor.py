"""Two recordings of one run, compared for what differs only because it is volatile: the rules
that make a replay overlook it (``openprogram recordings doctor A B``, ``pytest --llm-doctor``).

Every request field that differs between the two is looked at: one whose values differ only in
parts shaped like a date, a time, a uuid, a port, a temporary path, a hex id or a counter
(:mod:`..replay.volatile_shapes`) is covered by a ``normalize`` rule of that shape (or, for a
setting whose whole value is such a part, by ``ignore`` of that field); any other difference
is listed apart, as meaningful, and no rule hides it. Each rule names the fields it covers and
an example of the two values.

What follows from the model's answers is not compared: a replay serves the recorded answers, so
the answers resent in later requests (and the ids of the tool calls in them) always match. When
the two recordings' answers differ in more than volatile values, the calls of that lane after
it followed different answers and are not compared either (that is said).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..replay.differences import NON_DETERMINISTIC_FIELD_NAMES, windows_around_difference
from ..replay.differences_plain import index_path, key_path
from ..replay.replayer import CATALOG_ONLY_MODEL_FIELDS
from ..replay.volatile import RequestFilter
from ..replay.volatile_shapes import (
    SHAPES,
    VolatileShape,
    covering_shapes,
    example_of,
    looks_like_epoch,
    toml_string,
)
from .usage import terminal_message

__all__ = [
    "DOCTOR_SCHEMA_VERSION",
    "DoctorReport",
    "FieldDifference",
    "ProposedRule",
    "diagnose",
    "render_report",
]

DOCTOR_SCHEMA_VERSION = 1
#: A report lists at most this many meaningful differences (the rest are counted).
MAX_LISTED = 200
#: Settings (not text a model reads) whose whole value may be ignored rather than rewritten.
_SETTINGS_ROOTS = ("model.", "options.")
_MESSAGE = re.compile(r"context\.messages\[(\d+)\]")


@dataclass(frozen=True)
class FieldDifference:
    """A request field that differs: the calls (their ``call_index`` in A and in B), the lane,
    the field and the two values."""

    lane: str
    call_a: int
    call_b: int
    field: str
    a: Any
    b: Any

    def to_json(self) -> dict[str, Any]:
        return {
            "lane": self.lane,
            "call_a": self.call_a,
            "call_b": self.call_b,
            "field": self.field,
            "a": self.a,
            "b": self.b,
        }


@dataclass
class ProposedRule:
    """A rule for one shape of volatile value: ``normalize`` (``regex`` -> ``replacement``,
    applied to every text of both requests) or ``ignore`` (``pattern``, one field), with the
    fields it covers and the first example of the two values."""

    kind: str
    shape: str
    example: tuple[Any, Any]
    regex: str | None = None
    replacement: str | None = None
    pattern: str | None = None
    fields: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        rule: dict[str, Any] = {"kind": self.kind, "shape": self.shape}
        if self.kind == "normalize":
            rule.update(regex=self.regex, replacement=self.replacement)
        else:
            rule["pattern"] = self.pattern
        rule.update(fields=list(self.fields), example={"a": self.example[0], "b": self.example[1]})
        return rule


@dataclass
class DoctorReport:
    """What :func:`diagnose` found."""

    compared: int = 0
    rules: list[ProposedRule] = field(default_factory=list)
    meaningful: list[FieldDifference] = field(default_factory=list)
    #: Meaningful differences past :data:`MAX_LISTED` (counted, not listed).
    unlisted: int = 0
    #: Calls left uncompared, and why (a lane only one recording has, answers that differ).
    notes: list[str] = field(default_factory=list)

    @property
    def ignore(self) -> list[str]:
        return [
            rule.pattern
            for rule in self.rules
            if rule.kind == "ignore" and rule.pattern is not None
        ]

    @property
    def normalize(self) -> list[tuple[str, str]]:
        return [
            (rule.regex, rule.replacement)
            for rule in self.rules
            if rule.kind == "normalize" and rule.regex is not None and rule.replacement is not None
        ]

    @property
    def clean(self) -> bool:
        """Nothing meaningful differs and every call was compared."""
        return not self.meaningful and not self.unlisted and not self.notes

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": DOCTOR_SCHEMA_VERSION,
            "calls_compared": self.compared,
            "rules": [rule.to_json() for rule in self.rules],
            "record_replay": {
                "ignore": self.ignore,
                "normalize": [list(rule) for rule in self.normalize],
            },
            "meaningful": [difference.to_json() for difference in self.meaningful],
            "meaningful_unlisted": self.unlisted,
            "notes": list(self.notes),
        }

    def project_snippet(self) -> str:
        """The rules as a ``[tool.openprogram.record_replay]`` table, each with its shape, the
        fields it covers and an example in a comment."""
        lines = ["[tool.openprogram.record_replay]"]
        if self.ignore:
            lines.append("ignore = [")
            lines.extend(
                f"    {toml_string(rule.pattern or '')},  # {_about(rule)}"
                for rule in self.rules
                if rule.kind == "ignore"
            )
            lines.append("]")
        if self.normalize:
            lines.append("normalize = [")
            lines.extend(
                f"    [{toml_string(rule.regex or '')}, {toml_string(rule.replacement or '')}],  # {_about(rule)}"
                for rule in self.rules
                if rule.kind == "normalize"
            )
            lines.append("]")
        return "\n".join(lines)

    def marker_keywords(self) -> str:
        """The same rules as the marker's keywords."""
        parts = []
        if self.ignore:
            parts.append(
                "ignore=[" + ", ".join(_python_string(pattern) for pattern in self.ignore) + "]"
            )
        if self.normalize:
            rules = ", ".join(
                f"({_python_string(regex)}, {_python_string(replacement)})"
                for regex, replacement in self.normalize
            )
            parts.append(f"normalize=[{rules}]")
        return "@pytest.mark.llm_recording(" + ", ".join(parts) + ")"


def _about(rule: ProposedRule) -> str:
    a, b = rule.example
    return f"{rule.shape} in {', '.join(rule.fields)}; e.g. {_short(a)} / {_short(b)}"


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _python_string(text: str) -> str:
    """A Python literal of ``text``: a raw string when it can be one (a regex reads best)."""
    if '"' not in text and "\n" not in text and not text.endswith("\\"):
        return f'r"{text}"' if "\\" in text else f'"{text}"'
    return repr(text)


# ============================================================================ comparing


def _compared(request: Mapping[str, Any]) -> dict[str, Any]:
    """A request as a replay compares it: the model without its catalog metadata."""
    model = request.get("model")
    if isinstance(model, Mapping):
        model = {key: value for key, value in model.items() if key not in CATALOG_ONLY_MODEL_FIELDS}
    return {"model": model, "context": request.get("context"), "options": request.get("options")}


def leaf_differences(a: Any, b: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    """Every place where ``b`` differs from ``a``, down to the values that differ (the paths and
    the rule of ``find_first_difference``: a missing key reads as None, ``timestamp`` fields
    are not compared)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in sorted(set(a) | set(b), key=str):
            if key in NON_DETERMINISTIC_FIELD_NAMES:
                continue
            yield from leaf_differences(a.get(key), b.get(key), key_path(path, key))
        return
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        for index in range(max(len(a), len(b))):
            yield from leaf_differences(
                a[index] if index < len(a) else None,
                b[index] if index < len(b) else None,
                index_path(path, index),
            )
        return
    if a != b:
        yield path, a, b


def _from_answers(request: Mapping[str, Any], path: str) -> bool:
    """A field of an earlier answer resent in the request (or a tool result's id of a call in
    it): a replay serves the recorded answers, so these always match."""
    match = _MESSAGE.match(path)
    if match is None:
        return False
    context = request.get("context")
    messages = context.get("messages") if isinstance(context, Mapping) else None
    index = int(match.group(1))
    if (
        not isinstance(messages, list)
        or index >= len(messages)
        or not isinstance(messages[index], Mapping)
    ):
        return False
    message = messages[index]
    if message.get("role") == "assistant":
        return True
    rest = path[match.end() :]
    return message.get("role") == "toolResult" and rest in (".tool_call_id", ".tool_name")


def _answer(call: Any) -> Any:
    """What a call answered, as the next request resends it: content and stop reason, without
    the ids a vendor makes anew each run."""
    message = terminal_message(call) or {}
    content = []
    for block in message.get("content") or []:
        if isinstance(block, Mapping):
            content.append(
                {
                    key: value
                    for key, value in block.items()
                    if key not in ("id", "signature", "thinking_signature")
                }
            )
    return {
        "content": content,
        "stop_reason": message.get("stop_reason"),
        "error_message": message.get("error_message"),
    }


def _lanes(calls: list[Any]) -> dict[str, list[Any]]:
    lanes: dict[str, list[Any]] = {}
    for call in calls:
        lanes.setdefault(getattr(call, "lane", ""), []).append(call)
    return lanes


def _paired_lanes(
    a: dict[str, list[Any]], b: dict[str, list[Any]]
) -> list[tuple[str, list[Any], list[Any]]]:
    """Lanes of A with the lanes of B: by name, then the rest in order of first appearance
    (a lane named after a vendor's tool call id has a new name each run)."""
    pairs = [(name, a[name], b[name]) for name in a if name in b]
    rest_a = [name for name in a if name not in b]
    rest_b = [name for name in b if name not in a]
    pairs.extend(
        (name_a, a[name_a], b[name_b]) for name_a, name_b in zip(rest_a, rest_b, strict=False)
    )
    return pairs


class _Collector:
    """Sorts each difference into a rule (by shape) or the meaningful list."""

    def __init__(self, report: DoctorReport) -> None:
        self.report = report
        self.normalize: dict[str, ProposedRule] = {}
        self.ignore: dict[str, ProposedRule] = {}

    def add(self, lane: str, call_a: int, call_b: int, path: str, a: Any, b: Any) -> None:
        if looks_like_epoch(a, b):
            self._ignore(path, "epoch", (a, b))
            return
        shapes = covering_shapes(a, b) if type(a) is str and type(b) is str else None
        if not shapes:
            self._meaningful(FieldDifference(lane, call_a, call_b, path, a, b))
            return
        if (
            path.startswith(_SETTINGS_ROOTS)
            and len(shapes) == 1
            and shapes[0].pattern.fullmatch(a)
            and shapes[0].pattern.fullmatch(b)
        ):
            self._ignore(path, shapes[0].name, (a, b))
            return
        for shape in shapes:
            self._normalize(shape, path, example_of(shape, a, b))

    def _meaningful(self, difference: FieldDifference) -> None:
        if len(self.report.meaningful) < MAX_LISTED:
            self.report.meaningful.append(difference)
        else:
            self.report.unlisted += 1

    def _ignore(self, path: str, shape: str, example: tuple[Any, Any]) -> None:
        if path not in self.ignore:
            self.ignore[path] = ProposedRule("ignore", shape, example, pattern=path, fields=[path])

    def _normalize(self, shape: VolatileShape, path: str, example: tuple[str, str]) -> None:
        rule = self.normalize.get(shape.name)
        if rule is None:
            rule = self.normalize[shape.name] = ProposedRule(
                "normalize", shape.name, example, regex=shape.regex, replacement=shape.replacement
            )
        if path not in rule.fields:
            rule.fields.append(path)

    def finish(self) -> None:
        order = {shape.name: position for position, shape in enumerate(SHAPES)}
        self.report.rules = [
            *self.ignore.values(),
            *sorted(self.normalize.values(), key=lambda rule: order[rule.shape]),
        ]


def diagnose(calls_a: list[Any], calls_b: list[Any]) -> DoctorReport:
    """Compare two recordings' calls (``RecordedCall`` objects, in file order) lane by lane and
    call by call (see the module's docstring)."""
    report = DoctorReport()
    collector = _Collector(report)
    for lane, lane_a, lane_b in _paired_lanes(_lanes(calls_a), _lanes(calls_b)):
        shown = "the root lane" if not lane else f"lane {lane!r}"
        for position, (call_a, call_b) in enumerate(zip(lane_a, lane_b, strict=False)):
            report.compared += 1
            request_a, request_b = _compared(call_a.request), _compared(call_b.request)
            for path, a, b in leaf_differences(request_a, request_b, ""):
                if not _from_answers(request_b, path):
                    collector.add(lane, call_a.call_index, call_b.call_index, path, a, b)
            answer = _answer_difference(call_a, call_b)
            if answer is not None and position + 1 < max(len(lane_a), len(lane_b)):
                report.notes.append(
                    f"{shown}: the model answered call {call_a.call_index} (A) and {call_b.call_index} (B) differently "
                    f"at {answer}, so the later calls of the lane followed other answers and are not compared"
                )
                break
        else:
            if len(lane_a) != len(lane_b):
                report.notes.append(
                    f"{shown}: A made {len(lane_a)} call(s), B {len(lane_b)}; the extra ones are not compared"
                )
    named_a, named_b = set(_lanes(calls_a)), set(_lanes(calls_b))
    if len(named_a) != len(named_b):
        report.notes.append(
            f"A has {len(named_a)} lane(s), B {len(named_b)}; the lanes only one has are not compared"
        )
    collector.finish()
    RequestFilter(report.ignore, report.normalize)  # every proposal is a rule a replay accepts
    return report


def _answer_difference(call_a: Any, call_b: Any) -> str | None:
    """Where two calls' answers differ in more than volatile values (None: they do not)."""
    for path, a, b in leaf_differences(_answer(call_a), _answer(call_b), "answer"):
        if looks_like_epoch(a, b) or (type(a) is str and type(b) is str and covering_shapes(a, b)):
            continue
        return path
    return None


# ============================================================================ for people


def render_report(report: DoctorReport, path_a: object, path_b: object) -> str:
    """The report for people (``recordings doctor``, ``pytest --llm-doctor``): the proposed
    rules as a project table and as the marker's keywords, each rule with its shape, the fields
    it covers and an example; then the differences that do not look volatile; then what was not
    compared. Values are shown as ``repr`` on one line (a terminal escapes what is left)."""
    lines = [f"A: {path_a}", f"B: {path_b}", f"{report.compared} call(s) compared", ""]
    if report.rules:
        lines.append(
            "Volatile values (they differ only in a date, a time, an id, a port, a temporary path or a counter)."
        )
        lines.append(
            "A replay overlooks them with these rules, in pyproject.toml (or openprogram.toml, as [record_replay]):"
        )
        lines.append("")
        lines.extend(report.project_snippet().splitlines())
        lines.append("")
        lines.append("or on the test:")
        lines.append(report.marker_keywords())
        lines.append("")
        for rule in report.rules:
            what = (
                f"ignore {rule.pattern}"
                if rule.kind == "ignore"
                else f"normalize {rule.shape} -> {rule.replacement}"
            )
            lines.append(f"rule: {what}")
            lines.append(f"  covers {', '.join(rule.fields)}")
            lines.append(
                f"  e.g. A {_short(rule.example[0], 200)}, B {_short(rule.example[1], 200)}"
            )
        lines.append("")
    else:
        lines.append("No volatile values: no rule to propose.")
        lines.append("")
    if report.meaningful:
        lines.append(
            "Differences that do not look volatile (no rule hides them; a replay of one against the other fails on them):"
        )
        for difference in report.meaningful:
            lane = f" in lane {difference.lane!r}" if difference.lane else ""
            shown_a, shown_b = _pair(difference.a, difference.b)
            lines.append(
                f"  call {difference.call_a} (A) / {difference.call_b} (B){lane}: {difference.field}"
            )
            lines.append(f"    A: {shown_a}")
            lines.append(f"    B: {shown_b}")
        if report.unlisted:
            lines.append(f"  ... and {report.unlisted} more")
    else:
        lines.append("No other difference.")
    lines.extend(f"note: {note}" for note in report.notes)
    return "\n".join(lines)


def _pair(a: Any, b: Any) -> tuple[str, str]:
    """Two differing values on a line each: two long texts as windows around where they first
    differ (as a drift report shows them)."""
    windows = windows_around_difference(a, b)
    if windows is None:
        return _short(a, 200), _short(b, 200)
    return windows[0], windows[1]
