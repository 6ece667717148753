"""Volatile values in requests: fields replay does not compare (``ignore``) and text it
rewrites on both sides before comparing (``normalize``).

A prompt that carries the current time, a temporary folder or a request id differs at every
run; a test that records it once would fail on every later run. ``ignore`` names such fields
with the path language of ``find_first_difference`` (``context.system_prompt``,
``context.messages[*].content[*].text``, ``options.metadata.*``, ``model.headers["X-Trace"]``),
where ``*`` stands for any one key or index. ``normalize`` is a list of ``(regex,
replacement)`` pairs applied to every string of both the recorded and the incoming request.
See ``docs/tutorial.md`` ("Testing concurrent agents and volatile prompts").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = ["RequestFilter", "normalizer", "parse_field_pattern"]

ANY = object()  # the ``*`` segment of a pattern

_TOKEN = re.compile(
    r"""\.?(?P<name>[A-Za-z_][A-Za-z0-9_]*)   # .name (the first without the dot)
    | \.(?P<star>\*)                          # .*
    | \[(?P<index>\d+)\]                      # [3]
    | \[(?P<any>\*)\]                         # [*]
    | \[(?P<quoted>"(?:[^"\\]|\\.)*")\]       # ["X.Trace"]
    """,
    re.VERBOSE,
)
_ROOTS = ("model", "context", "options")


def parse_field_pattern(pattern: str) -> tuple[Any, ...]:
    """The segments of one ``ignore`` pattern: keys (str), indexes (int) and :data:`ANY`.

    Raises ``ValueError`` naming the pattern and where it stops making sense.
    """
    import json

    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"an ignore pattern must be a non-empty string, not {pattern!r}")
    segments: list[Any] = []
    position = 0
    while position < len(pattern):
        match = _TOKEN.match(pattern, position)
        if match is None or (position == 0 and pattern.startswith(".")):
            raise ValueError(
                f"ignore pattern {pattern!r}: cannot read it from character {position + 1} "
                "(write paths like context.messages[*].content[0].text or options.metadata.*)"
            )
        if match.group("name") is not None:
            segments.append(match.group("name"))
        elif match.group("index") is not None:
            segments.append(int(match.group("index")))
        elif match.group("quoted") is not None:
            segments.append(json.loads(match.group("quoted")))
        else:
            segments.append(ANY)
        position = match.end()
    if segments[0] not in _ROOTS:
        raise ValueError(f"ignore pattern {pattern!r} must start with one of {', '.join(_ROOTS)}")
    return tuple(segments)


def _compile_rules(rules: Iterable[Sequence[str]]) -> list[tuple[re.Pattern[str], str]]:
    compiled = []
    for position, rule in enumerate(rules):
        if (
            isinstance(rule, str)
            or len(rule) != 2
            or not all(isinstance(part, str) for part in rule)
        ):
            raise ValueError(
                f"normalize rule {position} must be a (regex, replacement) pair of strings, not {rule!r}"
            )
        regex, replacement = rule
        try:
            pattern = re.compile(regex)
        except re.error as error:
            raise ValueError(
                f"normalize rule {position}: invalid regex {regex!r}: {error}"
            ) from None
        _check_replacement(position, regex, pattern, replacement)
        compiled.append((pattern, replacement))
    return compiled


def _check_replacement(
    position: int, regex: str, pattern: re.Pattern[str], replacement: str
) -> None:
    """Refuse a replacement ``re.sub`` would refuse, now rather than at every later replay: a
    group the regex does not have (``\\9``, ``\\g<name>``) or an unknown escape (``\\q``).

    ``re`` checks a replacement only when it first substitutes a match, so it is expanded here
    against a match of the same groups: the regex with an empty alternative after it (on a line
    of its own, so a verbose regex's trailing comment cannot swallow it) matches the empty
    string, with every group unset (which expands to nothing)."""
    try:
        probe = re.compile(f"{regex}\n|", pattern.flags).match("")
        assert probe is not None  # the empty alternative always matches
        probe.expand(replacement)
    except (re.error, IndexError) as error:
        message = re.sub(r" at position \d+$", "", str(error))
        raise ValueError(
            f"normalize rule {position}: replacement {replacement!r} cannot be used with regex "
            f"{regex!r}: {message} (the regex has {pattern.groups} group(s); write \\\\ for a "
            "backslash)"
        ) from None


class RequestFilter:
    """``ignore`` and ``normalize`` compiled once; :meth:`apply` makes the view of a request's
    payloads that replay compares (a new structure; the input is not changed)."""

    def __init__(self, ignore: Iterable[str] = (), normalize: Iterable[Sequence[str]] = ()) -> None:
        self.patterns = [parse_field_pattern(pattern) for pattern in ignore]
        self.rules = _compile_rules(normalize)

    def __bool__(self) -> bool:
        return bool(self.patterns or self.rules)

    def apply(self, payloads: dict[str, Any]) -> dict[str, Any]:
        result = _normalized(payloads, self.rules) if self.rules else dict(payloads)
        for pattern in self.patterns:
            root = pattern[0]
            if root in result:
                result[root] = _blanked(result[root], pattern[1:], copied=bool(self.rules))
        return result


def normalizer(rules: Iterable[Sequence[str]]) -> Callable[[Any], Any]:
    """``normalize`` rules as one function of a value (every string in it rewritten), for
    whoever must see a request as replay compares it (the proxy's lanes). Raises ``ValueError``
    for a bad rule, as :class:`RequestFilter` does."""
    compiled = _compile_rules(rules)
    return lambda value: _normalized(value, compiled) if compiled else value


def _normalized(value: Any, rules: list[tuple[re.Pattern[str], str]]) -> Any:
    if isinstance(value, str):
        for regex, replacement in rules:
            value = regex.sub(replacement, value)
        return value
    if isinstance(value, dict):
        return {key: _normalized(item, rules) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_normalized(item, rules) for item in value]
    return value


def _blanked(value: Any, rest: tuple[Any, ...], *, copied: bool) -> Any:
    """``value`` with every match of the pattern ``rest`` set to ``None`` (which compares equal
    to a missing field, so an ignored field may also be absent on one side). Only the
    containers along the matched paths are copied, unless ``copied`` says they already are."""
    if not rest:
        return None
    head, tail = rest[0], rest[1:]
    result: dict[Any, Any] | list[Any]
    if isinstance(value, dict):
        keys = list(value) if head is ANY else ([head] if head in value else [])
        if not keys:
            return value
        result = value if copied else dict(value)
        for key in keys:
            result[key] = _blanked(value[key], tail, copied=copied)
        return result
    if isinstance(value, list):
        if head is ANY:
            indexes = range(len(value))
        elif isinstance(head, int) and head < len(value):
            indexes = range(head, head + 1)
        else:
            return value
        result = value if copied else list(value)
        for index in indexes:
            result[index] = _blanked(value[index], tail, copied=copied)
        return result
    return value
