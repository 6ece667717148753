"""Replay at the provider boundary, at its public import path.

The engine lives in :mod:`openprogram.recordings` (see ``docs/architecture.md``); this module
is the stable face that application code imports.
"""

from ..recordings.file.format import RecordingFileError
from ..recordings.file.reader import RecordedCall, Recording, read_recording_file
from ..recordings.replay.differences import (
    NON_DETERMINISTIC_FIELD_NAMES,
    ReplayMismatch,
    find_first_difference,
)
from ..recordings.replay.options import ReplayOptions
from ..recordings.replay.replayer import (
    RecordedCallInterrupted,
    ReplayProvider,
    ServedAnswer,
    served_answers,
)
from ..recordings.replay.volatile import normalizer

__all__ = [
    "NON_DETERMINISTIC_FIELD_NAMES",
    "RecordedCall",
    "RecordedCallInterrupted",
    "Recording",
    "RecordingFileError",
    "ReplayMismatch",
    "ReplayOptions",
    "ReplayProvider",
    "ServedAnswer",
    "find_first_difference",
    "normalizer",
    "read_recording_file",
    "served_answers",
]
