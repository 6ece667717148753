"""``use_recording(path, mode)``: record or replay the provider calls made inside a block.

The routing lives in a context variable that the registry consults before the process-wide
transform, so it is scoped to the code inside the ``with`` block and to the asyncio tasks it
starts (they copy the context), and it neither needs nor disturbs the one-shot transform of
the runtime lifecycle. Two tests running concurrently in one event loop, or in two threads,
each see only their own recording.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ...providers.api_registry import _scoped_route

if TYPE_CHECKING:
    from ...providers.faults import Fault
    from ..replay.replayer import ReplayProvider
    from .updating import UpdateSession

ScopedMode = Literal["record", "replay", "update"]
MODES = ("record", "replay", "update")


class RecordingScope:
    """What ``use_recording`` yields: the file, the mode, and (for replay) the provider, whose
    :meth:`assert_consumed` checks that every recorded call was used."""

    def __init__(self, path: Path, mode: ScopedMode) -> None:
        self.path = path
        self.mode = mode
        self.replay_provider: ReplayProvider | None = None
        self.sink: Any = None
        self.update: UpdateSession | None = None  # the UpdateSession of mode "update"
        self._wrapped: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def call_count(self) -> int:
        """Calls served so far (replay), recorded into this file by this scope (record), or
        both (update: replayed plus recorded)."""
        if self.update is not None:
            return len(self.update.replayed) + self.update.live_calls
        if self.replay_provider is not None:
            return self.replay_provider.call_count
        return len(self._wrapped)

    def assert_consumed(self) -> None:
        """Raise :class:`~..replay.differences.ReplayMismatch` when recorded calls were left
        unused (replay; update, when nothing drifted: the file then stays as it was)."""
        if self.replay_provider is not None:
            self.replay_provider.assert_consumed()
        if self.update is not None:
            self.update.assert_consumed()

    def route(self, api: str, original: Any) -> Any:
        """The registry's scoped lookup: every api to the one replayer, or each vendor
        provider wrapped by a recorder that shares this scope's sink."""
        if self.replay_provider is not None:
            return self.replay_provider
        if self.update is not None:
            return self.update.provider_for(api, original)
        if original is None:
            return None
        from ..record.recorder import RecordingProvider

        with self._lock:
            wrapped = self._wrapped.get(api)
            if wrapped is None or wrapped.wrapped_provider is not original:
                wrapped = RecordingProvider(original, self.sink)
                self._wrapped[api] = wrapped
            return wrapped


@contextlib.contextmanager
def use_recording(
    path: str | os.PathLike[str],
    mode: ScopedMode = "replay",
    *,
    ignore: Iterable[str] = (),
    normalize: Iterable[Sequence[str]] = (),
    values: Mapping[str, str] | None = None,
    secrets: Iterable[str] | None = None,
    faults: Fault | str | Iterable[Fault | str] | None = None,
    rechunk: int | str | None = None,
    pace: float | str | None = None,
) -> Iterator[RecordingScope]:
    """Route every provider lookup made inside the block to a recording.

    ``mode="replay"`` serves the recorded events offline (the file is validated strictly
    first) and never touches a vendor provider or a credential; ``mode="record"`` wraps the
    real providers and appends every call to ``path``; ``mode="update"`` replays the calls
    that match and records from the first that drifts, then rewrites ``path`` with both when
    the block ends without an exception, and only when a call drifted (see :mod:`.updating`;
    the outcome is ``scope.update.report``). ``ignore`` (field path patterns) and
    ``normalize`` (``(regex, replacement)`` pairs) make replay overlook volatile values in
    requests (see :mod:`.volatile`); they are checked in every mode, so a typo fails at once.
    ``values`` (``{name: text}``: a temporary folder, a port) are run-specific texts: the file
    stores every occurrence as ``{{name}}`` (requests and streamed events alike), and replay
    compares with, and serves, this run's texts. ``secrets`` are values to remove wherever they
    occur, whatever they look like (4 characters or more), besides the credentials the process
    knows of: a customer id, an internal host name.

    ``faults``, ``rechunk`` and ``pace`` replay what goes wrong (docs/tutorial.md, "Testing
    what goes wrong"): failures served instead of recorded answers (:class:`Fault` objects
    or ``kind[@call][:event][xtimes]`` specs), every stream re-split by a seed (``"random"``
    picks one and prints it), the recorded times waited (``"recorded"``, or a factor). They
    are checked in every mode and apply in ``replay`` only.
    """
    if mode not in MODES:
        raise ValueError(f"use_recording mode must be one of {', '.join(MODES)}, not {mode!r}")
    from ..redaction import (
        check_declared_secrets,
        check_run_values,
        use_declared_secrets,
        use_run_values,
    )
    from ..replay.options import ReplayOptions
    from ..replay.volatile import RequestFilter

    ignore, normalize = tuple(ignore), tuple(normalize)
    RequestFilter(ignore, normalize)  # raises ValueError for a bad pattern or regex
    replay_options = ReplayOptions.of(faults, rechunk, pace)  # raises ValueError, naming the option
    values = dict(check_run_values(values))
    declared = check_declared_secrets(secrets)  # raises ValueError for a bad value
    scope = RecordingScope(Path(path), mode)
    if mode == "replay":
        from .sessions import ChoosingReplayProvider

        scope.replay_provider = ChoosingReplayProvider(
            path, ignore=ignore, normalize=normalize, values=values, replay_options=replay_options
        )
    elif mode == "update":
        from .updating import UpdateSession

        scope.update = UpdateSession(path, ignore=ignore, normalize=normalize, values=values)
    else:
        from ..file.sink import RecordingSink

        scope.sink = RecordingSink(path)
    token = _scoped_route.set(scope.route)
    ended: str | None = "an interruption"
    try:
        with use_run_values(values), use_declared_secrets(declared):
            yield scope
        ended = None
    except BaseException as error:
        from .updating import ended_by

        ended = ended_by(type(error))
        raise
    finally:
        _scoped_route.reset(token)
        if scope.sink is not None:
            scope.sink.close()
        if scope.update is not None:
            scope.update.finish(ended)  # the report stays on scope.update.report

