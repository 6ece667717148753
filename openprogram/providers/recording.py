"""Recording at the provider boundary, at its public import path.

The engine lives in :mod:`openprogram.recordings` (see ``docs/architecture.md``); this module
is the stable face that application code imports.
"""

from ..recordings.file.format import RECORDING_FORMAT_VERSION, RecordingFileError
from ..recordings.file.sink import RecordingSink
from ..recordings.record.recorder import RecordingProvider
from ..recordings.redaction import (
    PLACEHOLDER,
    SECRET_FIELD_NAMES,
    redact_lane,
    remove_secret_values,
)

__all__ = [
    "PLACEHOLDER",
    "RECORDING_FORMAT_VERSION",
    "RecordingFileError",
    "RecordingProvider",
    "RecordingSink",
    "SECRET_FIELD_NAMES",
    "redact_lane",
    "remove_secret_values",
]
