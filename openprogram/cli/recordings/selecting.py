"""Which recording a verb's argument names: a managed ID (checked, a malformed one is a usage
error), a path, or a bare name of a file in this folder for the verbs that only read; and the
hint for one that is not there. Also whether a file is the active recording, or being
recorded into.

What a selector resolves to is the library's (:mod:`openprogram.recordings.store.store`);
this module turns its answers into the command line's messages and exit codes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from openprogram.recordings.modes.activation import CMD

from ..errors import EXIT_USAGE, CliError

FIX_LIST = f"{CMD} list"


def check_id_argument(recording_id: str) -> str:
    """A malformed ID typed on the command line is a usage error (exit 2)."""
    from openprogram.recordings.store.store import SelectorError, check_recording_id

    try:
        return check_recording_id(recording_id)
    except SelectorError as error:
        raise CliError(str(error), EXIT_USAGE) from None


def names_local_file(selector: str) -> bool:
    """A bare name that is not a valid recording ID but is a file in this folder."""
    from openprogram.recordings.store.store import SelectorError, check_recording_id, is_managed_id

    if not is_managed_id(selector) or not os.path.isfile(selector):
        return False
    try:
        check_recording_id(selector)
    except SelectorError:
        return True
    return False


def resolve_for_reading(selector: str) -> Path:
    """A managed ID, or a path. A bare name that is not a valid ID but names a file here
    (``before.jsonl``) is read as that file: reading cannot harm anything."""
    from openprogram.recordings.store.store import absence_of, resolve_selector

    if names_local_file(selector):
        return Path(selector).absolute()
    path = resolve_selector(selector, mode="replay")
    absence = absence_of(path)
    if absence is not None:
        raise CliError(f"recording file {path}: {absence[1]}; {_where_to_look(selector)}")
    return path


def _where_to_look(selector: str) -> str:
    """The hint for a recording that is not there: a test's recording by its path (found below
    this folder), or the two listings."""
    import shlex

    from openprogram.recordings.store.listing import recordings_named
    from openprogram.recordings.store.store import is_managed_id

    if is_managed_id(selector):
        named = recordings_named(selector, Path.cwd())
        if named:
            paths = " or ".join(shlex.quote(os.path.relpath(path)) for path in named)
            return f"a test's recording is named by its path: {paths}"
    return (
        f"see '{FIX_LIST}' (managed recordings) or '{FIX_LIST} FOLDER' (a test suite's recordings/)"
    )


def is_active(path: Path, current: dict[str, Any]) -> bool:
    """Whether ``path`` is the recording the configuration makes active (the one rule:
    :func:`openprogram.recordings.modes.activation.active_recording`)."""
    from openprogram.recordings.modes.activation import active_recording
    from openprogram.recordings.store.managed import same_file

    return same_file(path, active_recording(current))


def safe_live(path: Path) -> bool:
    from openprogram.recordings.file.writer_lock import is_being_recorded

    try:
        return is_being_recorded(path)
    except OSError:
        return False
