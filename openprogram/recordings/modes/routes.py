"""A mode turned into providers, in one place: :func:`route_for` and the :class:`Route` it builds.

The runtime (``record_replay`` configuration), ``use_recording``, the pytest plugin and
``openprogram proxy`` all ask here what a lookup of an api gets in a mode, so a mode means one
thing wherever it is set (``docs/architecture.md``, "The modes"):

- ``replay``: one :class:`~..replay.replayer.ReplayProvider` for every api, holding the file
  and nothing else (no vendor provider, no credential);
- ``record``: each vendor provider wrapped by a recorder, all of them writing to one sink;
- ``update``: an :class:`~.updating.UpdateSession` that replays while the requests match and
  records from the first that drifts;
- ``off``: the vendor provider itself, past whatever the process-wide configuration installed.

A route is the registry's lookup function (:meth:`Route.route`): the runtime installs it as the
process-wide transform, the others enter it for a block with
:func:`~openprogram.providers.api_registry.routed`. Whoever built a route closes it
(:meth:`Route.close`) with how the run ended; only an update cares.

:class:`ReplayRules` carries what a replay overlooks or adds (``ignore``, ``normalize``, run
values, faults, re-chunking, pacing, the note ending a mismatch): the one place a new replay
option goes, read by every mode that replays.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .vocabulary import OFF, RECORD, REPLAY, ROUTE_MODES, UPDATE, RouteMode, validate_record_mode

if TYPE_CHECKING:
    from ...providers.api_registry import ApiProvider
    from ..file.sink import RecordingSink
    from ..replay.options import ReplayOptions
    from ..replay.replayer import ReplayProvider
    from .updating import UpdateSession

__all__ = ["ReplayRules", "Route", "route_for"]


@dataclass(frozen=True)
class ReplayRules:
    """What a replay overlooks in requests and what it changes in what it serves.

    ``ignore`` (field path patterns) and ``normalize`` (``(regex, replacement)`` pairs) make
    replay overlook volatile values (:mod:`..replay.volatile`); ``values`` are run-specific
    texts stored as ``{{name}}``; ``options`` are the faults, re-chunking and pacing of a
    replay (:class:`~..replay.options.ReplayOptions`, replay only); ``note`` ends every
    mismatch the replay raises (how replay came to be on). Checked by whoever builds them
    (``use_recording`` checks each in every mode, so a typo fails at once)."""

    ignore: tuple[str, ...] = ()
    normalize: tuple[tuple[str, str], ...] = ()
    values: Mapping[str, str] = field(default_factory=dict)
    options: ReplayOptions | None = None
    note: str | None = None


class Route:
    """What every provider lookup gets while a mode is in force over one file (``path``
    None: ``off``). It is also what ``use_recording`` yields (its public name there is
    ``RecordingScope``): the file, the mode, the replay provider (``replay_provider``, in
    replay), the update session (``update``), the recording sink (``sink``, in record), and
    :meth:`assert_consumed`, which checks that every recorded call was used."""

    def __init__(self, path: Path | None, mode: RouteMode) -> None:
        self.path = path
        self.mode = mode
        self.replay_provider: ReplayProvider | None = None
        self.sink: RecordingSink | None = None
        self.update: UpdateSession | None = None
        self._wrapped: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def call_count(self) -> int:
        """Calls served so far (replay), recorded into this file by this route (record), or
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

    def route(self, api: str, original: ApiProvider | None) -> ApiProvider | None:
        """The registry's lookup: every api to the one replayer, to the update session, to the
        vendor provider itself (off), or each vendor provider wrapped by a recorder that
        shares this route's sink."""
        if self.replay_provider is not None:
            return self.replay_provider
        if self.update is not None:
            provider: ApiProvider = self.update.provider_for(api, original)
            return provider
        if self.sink is None or original is None:
            return original
        from ..record.recorder import RecordingProvider

        with self._lock:
            wrapped = self._wrapped.get(api)
            if wrapped is None or wrapped.wrapped_provider is not original:
                wrapped = RecordingProvider(original, self.sink)
                self._wrapped[api] = wrapped
            return wrapped

    def close(self, ended: str | None = None) -> None:
        """End the route: the sink closed, the update settled by how the run ended (``ended``
        None: normally; else ``"an exception (ValueError)"`` and the like, see
        :func:`.updating.ended_by`). Its report stays on :attr:`update`."""
        if self.sink is not None:
            self.sink.close()
        if self.update is not None:
            self.update.finish(ended)


def route_for(
    mode: str, path: str | os.PathLike[str] | None, rules: ReplayRules | None = None
) -> Route:
    """The route of ``mode`` over ``path``: the one place a mode becomes providers.

    Opens the file as the mode needs it: replay reads it strictly, update claims and reads it,
    record opens (or creates) it for appending; each raises
    :class:`~..file.format.RecordingFileError` for a file it cannot use, before any call.
    ``off`` takes no file. ``ValueError`` for a mode a route does not serve."""
    checked = validate_record_mode(mode, ROUTE_MODES, "a route's mode")
    rules = rules or ReplayRules()
    if checked == OFF:
        if path is not None:
            raise ValueError("mode off records nothing: it takes no recording file")
        return Route(None, OFF)
    if path is None:
        raise ValueError(f"mode {checked} needs a recording file")
    route = Route(Path(path), checked)
    if checked == REPLAY:
        from ..replay.replayer import ReplayProvider

        route.replay_provider = ReplayProvider(
            path,
            ignore=rules.ignore,
            normalize=rules.normalize,
            values=rules.values,
            replay_note=rules.note,
            replay_options=rules.options,
        )
    elif checked == UPDATE:
        from .updating import UpdateSession

        route.update = UpdateSession(
            path, ignore=rules.ignore, normalize=rules.normalize, values=rules.values
        )
    else:
        assert checked == RECORD
        from ..file.sink import RecordingSink

        route.sink = RecordingSink(path)
    return route
