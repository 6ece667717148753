"""Sessions chosen by every call, not only by the first.

A replay follows one session of a recording (what one command or one test run wrote). The
replayer picks it by its first call; two recorded runs of one command that differ only later
(the same first prompt, another tool result at the third turn) would then replay only in the
order they were recorded: the second run would follow the first session and fail where the
two part. :class:`ChoosingReplayProvider` lets a call that does not match the followed session
move the replay to another session that holds the same calls so far (compared as replay
compares requests: the recorded requests after ``ignore`` and ``normalize``) and whose next
call matches. ``docs/recordings-cli.md`` (``replay``, "sessions") describes the rule.

It is a subclass of :class:`~..replay.replayer.ReplayProvider` that hooks the two steps of
``take`` that check the followed session's next call and serve it; the rule belongs in the
replayer itself, and moves there when the replayer is next changed.
"""

from __future__ import annotations

from typing import Any

from ..file.reader import RecordedCall
from ..replay.replayer import ReplayProvider, first_request_difference

__all__ = ["ChoosingReplayProvider"]


class ChoosingReplayProvider(ReplayProvider):
    """A :class:`ReplayProvider` whose followed session can change at any call to one that
    agrees with every call made so far (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._switch: tuple[Any, RecordedCall] | None = None

    # The replayer's take(): the followed session's next call in the lane is checked, then
    # served (consumed, unless a fault answers it), both under the replayer's lock.

    def _check(self, call: RecordedCall, incoming: Any, session: Any, lane: str) -> None:
        difference = self._differs(call, incoming)
        if difference is None:
            return
        switch = self._agreeing_session(session, lane, incoming)
        if switch is None:
            raise self._mismatch(call, difference, session, lane)
        self._switch = switch

    def _served(self, session: Any, lane: str, call: RecordedCall, faults: Any) -> tuple[RecordedCall, Any]:
        # Switched before a fault may apply: a faulted request is answered from the session
        # that matched it (a cut serves its events), and the switch holds for its retry.
        if self._switch is not None:
            other, other_call = self._switch
            self._switch = None
            self._move(session, other)
            session, call = other, other_call
        return super()._served(session, lane, call, faults)

    def _agreeing_session(self, session: Any, lane: str, incoming: Any) -> tuple[Any, RecordedCall] | None:
        """The first session (in file order) not yet used by this replay that holds the calls
        ``session`` served so far, lane by lane, and whose next call in ``lane`` matches."""
        served = {name: self._cursors.get((session.number, name), 0) for name in session.lanes}
        for candidate in self._sessions:
            if candidate is session or candidate in self._used:
                continue
            calls = candidate.lanes.get(lane, [])
            position = served.get(lane, 0)
            if position >= len(calls):
                continue
            if all(self._same_prefix(session.lanes[name], candidate.lanes.get(name, []), count) for name, count in served.items()):
                if self._differs(calls[position], incoming) is None:
                    return candidate, calls[position]
        return None

    def _same_prefix(self, calls: list[RecordedCall], others: list[RecordedCall], count: int) -> bool:
        if len(others) < count:
            return False
        return all(
            first_request_difference(self._compared(a), self._compared(b)) is None
            for a, b in zip(calls[:count], others[:count], strict=True)
        )

    def _compared(self, call: RecordedCall) -> dict[str, Any]:
        """A recorded request as replay compares it (filtered, default options filled in)."""
        if not self._filter:
            return self._with_options(call.request)
        recorded = self._filtered.get(call.call_index)
        if recorded is None:
            recorded = self._filtered[call.call_index] = self._filter.apply(self._with_options(call.request))
        return self._with_options(recorded)

    def _move(self, old: Any, new: Any) -> None:
        """Follow ``new`` instead of ``old`` from where ``old`` was, lane by lane; ``old`` is
        as unused as it was before this replay began."""
        self._used[self._used.index(old)] = new
        self._session = new
        for name in list(old.lanes):
            count = self._cursors.pop((old.number, name), 0)
            if count:
                self._cursors[(new.number, name)] = count

    # What ``update`` needs to know of the replay.

    def consumed_calls(self) -> list[RecordedCall]:
        """Every recorded call this replay has served, in file order."""
        with self._lock:
            served = [
                call
                for session in self._used
                for name, calls in session.lanes.items()
                for call in calls[: self._cursors.get((session.number, name), 0)]
            ]
        return sorted(served, key=lambda call: call.call_index)

    def followed_sessions(self) -> list[str | None]:
        """The keys of the sessions this replay followed, in the order it followed them."""
        with self._lock:
            return [session.key for session in self._used]
