"""Replacing a recording in one step: write a private temporary file beside it, ``fsync``,
then ``rename`` over it, so a reader sees the old file or the new one and never a mix, and a
failure leaves the old file as it was."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["replace_atomically"]


def replace_atomically(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Make ``path`` hold ``data`` (with permission bits ``mode``), atomically."""
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
