"""The state folder and reading ``config.json``: where they live and what they hold.

This is the bottom of the configuration stack and imports nothing of openprogram, so every
layer can read the configuration without importing another: the provider runtime, the
recordings store and the activation plan read through here, while :mod:`openprogram.config`
adds validation and the locked, atomic changes on top (see ``docs/recordings-cli.md`` for
how the folder is laid out).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from typing import Any

import orjson

CONFIG_FILE_NAME = "config.json"
#: ``config.json`` is a handful of settings; anything bigger is not one (docs/recordings-cli.md).
MAX_CONFIG_BYTES = 1024 * 1024
#: How far past the size ``fstat`` reported a read goes before it stops (a file still growing).
READ_SLACK_BYTES = 64 * 1024
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class ConfigError(Exception):
    """A configuration problem a user can fix; the message says where and how."""


class FileRefusal(Exception):
    """A path that is not something to read: a FIFO, device, socket or folder, a symbolic
    link where none is allowed, or a file above its size limit. ``reason`` has no path (the
    caller names the file); ``kind`` is ``not_a_file``, ``symlink`` or ``too_large``."""

    def __init__(self, reason: str, kind: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


def read_regular_file(
    path: str | os.PathLike[str], limit: int, *, follow_symlinks: bool = True
) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.

    Checked on the opened descriptor, not the name, so nothing can be swapped in between:
    ``O_NONBLOCK`` makes opening a FIFO return at once instead of waiting for a writer, and
    ``fstat`` then refuses anything that is not a regular file (a FIFO, ``/dev/zero``, a
    folder) before a byte is read. The read stops a little past the size ``fstat`` reported,
    so a file that never ends cannot exhaust memory. Raises :class:`FileRefusal`, or the
    ``OSError`` of opening (missing, permission denied).
    """
    fd = open_regular_file(path, limit, follow_symlinks=follow_symlinks)
    try:
        return _read_bounded(fd, limit)
    finally:
        os.close(fd)


def open_regular_file(
    path: str | os.PathLike[str], limit: int, *, follow_symlinks: bool = True
) -> int:
    """A read-only descriptor of the regular file at ``path`` (the checks of
    :func:`read_regular_file`, for a caller that reads it line by line). The caller closes it."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ELOOP and not follow_symlinks:
            raise FileRefusal("is a symbolic link", "symlink") from None
        if error.errno == errno.ENXIO:  # a socket, or a FIFO's peer end
            raise FileRefusal("is not a regular file (a socket or device)", "not_a_file") from None
        raise
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise FileRefusal("is a folder, not a file", "not_a_file")
        if not stat.S_ISREG(info.st_mode):
            raise FileRefusal("is not a regular file (a FIFO, device or socket)", "not_a_file")
        if info.st_size > limit:
            raise FileRefusal(_too_large(info.st_size, limit), "too_large")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_bounded(fd: int, limit: int) -> bytes:
    """At most ``limit`` bytes (and a little past the size ``fstat`` reports) of ``fd``."""
    budget = min(os.fstat(fd).st_size + READ_SLACK_BYTES, limit + 1)
    chunks, total = [], 0
    while total < budget:
        chunk = os.read(fd, budget - total)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > limit:
        raise FileRefusal(_too_large(total, limit), "too_large")
    return b"".join(chunks)


def _too_large(size: int, limit: int) -> str:
    return f"is {size} bytes, above the limit of {limit} bytes"


def home_dir() -> Path:
    """``$OPENPROGRAM_HOME``, default ``~/.openprogram``."""
    configured = os.environ.get("OPENPROGRAM_HOME", "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".openprogram"


def active_profile() -> str | None:
    """The profile named by ``$OPENPROGRAM_PROFILE``, or None for the home folder itself."""
    profile = os.environ.get("OPENPROGRAM_PROFILE", "").strip()
    return profile or None


def state_dir(profile: str | None = None) -> Path:
    """The folder of the given (or active) profile: the home itself, or ``profiles/NAME``."""
    profile = profile if profile is not None else active_profile()
    if profile is None:
        return home_dir()
    if not NAME_PATTERN.match(profile):
        raise ConfigError(
            f"invalid profile name '{profile}': use letters, digits, '.', '_' or '-' "
            "(at most 64 characters, starting with a letter or digit)"
        )
    return home_dir() / "profiles" / profile


def config_path(profile: str | None = None) -> Path:
    return state_dir(profile) / CONFIG_FILE_NAME


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) as 0700, then check it with
    :func:`check_private_dir`; a path that cannot be created is a :class:`ConfigError` naming
    the component at fault."""
    if path.is_symlink():
        check_private_dir(path)  # raises, with the fix
    missing = []
    probe = path
    while not os.path.lexists(probe) and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError as error:
            raise ConfigError(
                f"cannot create the folder {folder}: {_os_reason(error, folder)}"
            ) from None
    check_private_dir(path)
    return path


def check_private_dir(path: Path) -> None:
    """Refuse a folder the program must not act in: a symbolic link (acting through it would
    touch files elsewhere), anything but a folder, or a folder of another user."""
    try:
        info = os.lstat(path)
    except OSError as error:
        raise ConfigError(f"cannot use the folder {path}: {_os_reason(error, path)}") from None
    if stat.S_ISLNK(info.st_mode):
        raise ConfigError(
            f"{path} is a symbolic link; refusing to act through it: replace it with a real "
            "folder (or set OPENPROGRAM_HOME to one)"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(
            f"{path} is a file, not a folder; move it away or set OPENPROGRAM_HOME to a folder"
        )
    if info.st_uid != os.getuid():
        raise ConfigError(
            f"{path} belongs to user id {info.st_uid}, not to you (user id {os.getuid()}); "
            "use a folder of your own (set OPENPROGRAM_HOME)"
        )


def load_config(profile: str | None = None) -> dict[str, Any]:
    """The configuration as a dict; a missing file is an empty configuration."""
    path = config_path(profile)
    try:
        raw = read_regular_file(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        return {}
    except FileRefusal as refusal:
        raise ConfigError(f"{path} {refusal.reason}; {_CONFIG_FIX}") from None
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {_os_reason(error, path)}") from None
    if not raw.strip():
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise ConfigError(f"{path} is not valid JSON ({error}); {_CONFIG_FIX}") from None
    if not isinstance(value, dict):
        raise ConfigError(
            f"{path} must hold a JSON object, not {type(value).__name__}; {_CONFIG_FIX}"
        )
    return value


_CONFIG_FIX = "fix it, or move it away to start with an empty configuration"


def _os_reason(error: OSError, path: Path) -> str:
    """The reason of an ``OSError`` on ``path``, naming the component at fault when a folder on
    the way is a file (``ENOTDIR``) or cannot be searched, which the bare error hides."""
    reason = error.strerror or str(error)
    if error.errno == errno.ENOTDIR:
        blocker = _first_non_folder(path)
        if blocker is not None:
            return f"{blocker} is a file, not a folder; remove it or set OPENPROGRAM_HOME elsewhere"
    if error.errno == errno.EACCES:
        return f"{reason} (check the permissions of {path} and of the folders above it)"
    return reason


def _first_non_folder(path: Path) -> Path | None:
    """The first ancestor of ``path`` that exists and is not a folder, if any."""
    for ancestor in reversed(path.parents):
        try:
            if not stat.S_ISDIR(os.stat(ancestor).st_mode):
                return ancestor
        except OSError:
            return None
    return None
