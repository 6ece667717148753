"""``use_recording``, record/replay scoped to a block of code, at its public import path; and the
modes and routes it stands on, for the clients of the provider layer (``openprogram proxy``).

The engine lives in :mod:`openprogram.recordings` (see ``docs/architecture.md``).
"""

from ..recordings.modes.routes import ReplayRules, Route, route_for
from ..recordings.modes.scoped import RecordingScope, ScopedMode, use_recording
from ..recordings.modes.vocabulary import (
    PROXY_MODES,
    ProxyMode,
    RecordMode,
    validate_record_mode,
)

__all__ = [
    "PROXY_MODES",
    "ProxyMode",
    "RecordMode",
    "RecordingScope",
    "ReplayRules",
    "Route",
    "ScopedMode",
    "route_for",
    "use_recording",
    "validate_record_mode",
]
