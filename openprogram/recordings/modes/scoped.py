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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from ...providers.api_registry import routed
from .routes import ReplayRules, Route, route_for
from .vocabulary import SCOPED_MODES, FileMode, validate_record_mode

if TYPE_CHECKING:
    from ...providers.faults import Fault

#: ``use_recording``'s modes (:mod:`.vocabulary`).
ScopedMode = FileMode
MODES = SCOPED_MODES
#: What ``use_recording`` yields: the route of its mode over its file (:class:`.routes.Route`).
RecordingScope = Route


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
    validate_record_mode(mode, SCOPED_MODES, "use_recording mode")
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
    rules = ReplayRules(
        ignore=ignore,
        normalize=tuple((regex, replacement) for regex, replacement in normalize),
        values=values,
        options=replay_options if mode == "replay" else None,
    )
    scope = route_for(mode, path, rules)
    ended: str | None = "an interruption"
    try:
        with routed(scope.route), use_run_values(values), use_declared_secrets(declared):
            yield scope
        ended = None
    except BaseException as error:
        from .updating import ended_by

        ended = ended_by(type(error))
        raise
    finally:
        scope.close(ended)  # an update's report stays on scope.update.report
