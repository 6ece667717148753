"""``use_recording``, record/replay scoped to a block of code, at its public import path.

The engine lives in :mod:`openprogram.recordings` (see ``docs/architecture.md``).
"""

from ..recordings.store.scoped import RecordingScope, ScopedMode, use_recording

__all__ = ["RecordingScope", "ScopedMode", "use_recording"]
