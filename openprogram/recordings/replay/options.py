"""What a replay does besides serving the recording as it was: :class:`ReplayOptions`.

One object, built and checked here, handed from ``use_recording``, the pytest plugin and
``openprogram proxy`` to the replayer, so the three places that set faults, re-chunking and
pacing share one meaning and one set of error messages (docs/tutorial.md, "Testing what goes
wrong"). None of them applies when recording.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ...providers.faults import Fault, faults_of

#: The pace that waits the recorded times as they are.
RECORDED_PACE = "recorded"
#: The word that asks for a seed picked at random (and printed, so the run can be repeated).
RANDOM_SEED = "random"
_SEED_LIMIT = 2**32


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class ReplayOptions:
    """``faults``: failures served instead of recorded answers (:class:`Fault`). ``rechunk``:
    the seed that re-splits every text, thinking and tool-argument stream (None: as recorded).
    ``pace``: the factor applied to the recorded times waited before and between events (None:
    no waiting; 1.0 is ``"recorded"``). Build one with :meth:`of`, which reads every spelling
    the API, the marker and the command line accept."""

    faults: tuple[Fault, ...] = ()
    rechunk: int | None = None
    pace: float | None = None

    @classmethod
    def of(
        cls,
        faults: Fault | str | Iterable[Fault | str] | None = None,
        rechunk: int | str | None = None,
        pace: float | int | str | None = None,
        *,
        announce: Callable[[str], None] = _to_stderr,
    ) -> ReplayOptions:
        """Check and normalise: fault specs parsed, ``rechunk="random"`` replaced by a seed
        picked now and announced, ``pace="recorded"`` (or a number as text) read as a
        factor. ``ValueError`` names the option and what it takes."""
        return cls(faults_of(faults), seed_of(rechunk, announce=announce), pace_of(pace))

    def __bool__(self) -> bool:
        return bool(self.faults) or self.rechunk is not None or self.pace is not None

    def merged(self, other: ReplayOptions) -> ReplayOptions:
        """These options (a whole run's) with ``other`` (one test's) on top: faults of both,
        ``other``'s seed and pace where it sets them."""
        return ReplayOptions(
            self.faults + other.faults,
            other.rechunk if other.rechunk is not None else self.rechunk,
            other.pace if other.pace is not None else self.pace,
        )

    def describe(self) -> str:
        """What is in force, in the words of the options (for reports and start-up lines)."""
        parts = []
        if self.faults:
            parts.append("faults " + ", ".join(fault.spec for fault in self.faults))
        if self.rechunk is not None:
            parts.append(f"rechunk seed {self.rechunk}")
        if self.pace is not None:
            parts.append(f"pace {RECORDED_PACE if self.pace == 1 else self.pace}")
        return "; ".join(parts) or "none"


def seed_of(value: int | str | None, *, announce: Callable[[str], None] = _to_stderr) -> int | None:
    """A re-chunking seed: an int >= 0, its digits, or ``"random"`` (picked and announced)."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text == RANDOM_SEED:
            seed = random.randrange(_SEED_LIMIT)
            announce(f"openprogram: rechunk seed {seed} (rechunk={seed} repeats this run)")
            return seed
        if text.isdigit():
            return int(text)
    elif type(value) is int and value >= 0:
        return value
    raise ValueError(f"rechunk takes a seed (an int >= 0) or {RANDOM_SEED!r}, not {value!r}")


def pace_of(value: float | int | str | None) -> float | None:
    """A pace factor: ``"recorded"`` (1.0), or a number > 0 (or its text) that scales the
    recorded times (0.5 waits half as long)."""
    if value is None:
        return None
    number: float | None = None
    if isinstance(value, str):
        text = value.strip()
        if text == RECORDED_PACE:
            return 1.0
        try:
            number = float(text)
        except ValueError:
            number = None
    elif isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    if number is None or not number > 0 or number == float("inf"):
        raise ValueError(
            f"pace takes {RECORDED_PACE!r} or a number > 0 that scales the recorded times (0.5: twice "
            f"as fast), not {value!r}"
        )
    return number


__all__ = ["RANDOM_SEED", "RECORDED_PACE", "ReplayOptions", "pace_of", "seed_of"]
