"""Recording at the provider boundary, at its public import path.

The engine lives in :mod:`openprogram.recordings` (see ``docs/architecture.md``); this module
is the stable face that application code imports.
"""

from ..recordings.format import RECORDING_FORMAT_VERSION, RecordingFileError
from ..recordings.recorder import RecordingProvider
from ..recordings.redaction import PLACEHOLDER, SECRET_FIELD_NAMES, remove_secret_values
from ..recordings.sink import RecordingSink

__all__ = [
    "PLACEHOLDER",
    "RECORDING_FORMAT_VERSION",
    "RecordingFileError",
    "RecordingProvider",
    "RecordingSink",
    "SECRET_FIELD_NAMES",
    "remove_secret_values",
]
