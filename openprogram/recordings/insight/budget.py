"""The limits a test's model calls keep to: ``calls``, ``tokens`` (``total_tokens``: input,
cached and output) and ``cost`` (dollars), any of them.

A project sets a default (``[tool.openprogram.budget]``, docs/project.md) and a test its own
(``@pytest.mark.llm_recording(budget={...})``), key by key: a key the marker names wins over
the project's, ``None`` lifts the project's limit for that test, and a key it does not name
keeps the project's. In a replay the recorded usage counts, so a change that makes an agent
call twice as often fails in CI before anyone pays for it (docs/tutorial.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .usage import CallUsage, dollars

__all__ = ["BUDGET_KEYS", "Budget", "BudgetOverrun", "budget_overrun"]

BUDGET_KEYS = ("calls", "tokens", "cost")
EXAMPLE = 'budget={"calls": 10, "tokens": 20000, "cost": 0.05}'


@dataclass(frozen=True)
class Budget:
    """Limits; None where there is none. ``named`` are the keys the source named (a ``None``
    it named lifts a default)."""

    calls: int | None = None
    tokens: int | None = None
    cost: float | None = None
    named: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return any(getattr(self, key) is not None for key in BUDGET_KEYS)

    @classmethod
    def parse(cls, value: Any, where: str, example: str = EXAMPLE) -> Budget:
        """A budget from a marker's ``budget=`` or a project's table. Raises ``ValueError``
        whose message starts with ``where`` and names the key and the fix (``example``)."""
        if not isinstance(value, Mapping):
            raise ValueError(
                f"{where} must be a table of {', '.join(BUDGET_KEYS)}, not {value!r}; e.g. {example}"
            )
        unknown = sorted(str(key) for key in value if key not in BUDGET_KEYS)
        if unknown:
            raise ValueError(
                f"{where}.{unknown[0]}: unknown limit; a budget takes {', '.join(BUDGET_KEYS)}, e.g. {example}"
            )
        limits: dict[str, Any] = {}
        for key in BUDGET_KEYS:
            if key not in value or value[key] is None:
                continue
            limit = value[key]
            whole = type(limit) is int
            number = whole or type(limit) is float
            if key != "cost" and not whole or not number or limit < 0:
                kind = "a number of dollars (0.05)" if key == "cost" else "a whole number"
                raise ValueError(f"{where}.{key} must be {kind}, 0 or more; not {limit!r}")
            limits[key] = float(limit) if key == "cost" else limit
        return cls(**limits, named=frozenset(str(key) for key in value))

    def over(self, default: Budget) -> Budget:
        """This budget, with ``default``'s limits for the keys this one does not name."""
        limits = {key: getattr(self if key in self.named else default, key) for key in BUDGET_KEYS}
        return Budget(**limits, named=self.named | default.named)


@dataclass(frozen=True)
class BudgetOverrun:
    """A limit a test's calls went past: which, the figure reached, and the call that crossed
    it (with the figure before it)."""

    limit_name: str
    limit: float
    figure: float
    crossed_by: CallUsage
    before: float

    def describe(self) -> str:
        over = self.figure - self.limit
        share = f", {over / self.limit:.0%}" if self.limit else ""
        call = self.crossed_by
        where = f" in lane {call.lane!r}" if call.lane else ""
        model = f" ({call.model})" if call.model else ""
        return (
            f"{self.limit_name} {self._shown(self.figure)} > budget {self._shown(self.limit)} "
            f"(over by {self._shown(over)}{share}); call {call.call}{where}{model} crossed it, "
            f"from {self._shown(self.before)} to {self._shown(self.before + self._of(call))}"
        )

    def _shown(self, value: float) -> str:
        return dollars(value) if self.limit_name == "cost" else str(int(value))

    def _of(self, call: CallUsage) -> float:
        return _figure(self.limit_name, call)


def _figure(name: str, call: CallUsage) -> float:
    if name == "calls":
        return 1
    if name == "tokens":
        return call.total_tokens
    return call.cost


def budget_overrun(budget: Budget, calls: Iterable[CallUsage]) -> list[BudgetOverrun]:
    """Every limit of ``budget`` that ``calls`` (in the order made) went past, each with the
    call that crossed it; empty when they kept to it."""
    calls = list(calls)
    found = []
    for name in BUDGET_KEYS:
        limit = getattr(budget, name)
        if limit is None:
            continue
        running = 0.0
        crossed: tuple[CallUsage, float] | None = None
        for call in calls:
            before = running
            running += _figure(name, call)
            if crossed is None and running > limit + (1e-12 if name == "cost" else 0):
                crossed = (call, before)
        if crossed is not None:
            found.append(BudgetOverrun(name, float(limit), running, crossed[0], crossed[1]))
    return found
