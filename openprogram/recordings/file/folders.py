"""The folders openprogram creates for recordings and reports (a test's
``recordings/<module>/``, ``llm-reports/``, a new recording's parents): owner-only (0700) at
every level it creates, since what goes in them holds prompts and model outputs
(docs/recordings-cli.md). ``Path.mkdir(parents=True, mode=...)`` gives the mode to the last
folder only; the parents get the umask's default (0755). A folder that already exists is left
as it is: it may be the user's own, or shared.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = ["make_private_folders"]


def make_private_folders(folder: Path) -> list[Path]:
    """Create ``folder`` and every missing folder above it, each 0700 (whatever the umask), and
    return the ones created, outermost first. Raises ``OSError`` as ``os.mkdir`` does, with the
    folder it could not create as its ``filename`` (``FileExistsError`` when ``folder`` is
    something else than a folder); one that appears meanwhile is left alone."""
    missing: list[Path] = []
    probe = folder
    while not os.path.lexists(probe) and probe.parent != probe:
        missing.append(probe)
        probe = probe.parent
    created = []
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            continue  # made by someone else meanwhile: not ours to change
        os.chmod(directory, 0o700)  # a umask that removes the owner's bits
        created.append(directory)
    if not folder.is_dir():  # as Path.mkdir(exist_ok=True) says of a file in the way
        raise FileExistsError(errno.EEXIST, "exists and is not a folder", str(folder))
    return created
