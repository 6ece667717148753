"""The state folder and reading ``config.json``: where they live and what they hold.

This is the bottom of the configuration stack and imports nothing of openprogram, so every
layer can read the configuration without importing another: the provider runtime, the
recordings store and the activation plan read through here, while :mod:`openprogram.config`
adds validation and the locked, atomic changes on top (see ``docs/recordings-cli.md`` for
how the folder is laid out).
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Any

import orjson

CONFIG_FILE_NAME = "config.json"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class ConfigError(Exception):
    """A configuration problem a user can fix; the message says where and how."""


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
    """Create ``path`` (and missing parents) as 0700; refuse a symlink in its place."""
    if path.is_symlink():
        raise ConfigError(f"{path} is a symbolic link; refusing to use it as a state folder")
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
    return path


def load_config(profile: str | None = None) -> dict[str, Any]:
    """The configuration as a dict; a missing file is an empty configuration."""
    path = config_path(profile)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror or error}") from None
    if not raw.strip():
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise ConfigError(
            f"{path} is not valid JSON ({error}); fix it or remove it to start afresh"
        ) from None
    if not isinstance(value, dict):
        raise ConfigError(f"{path} must hold a JSON object, not {type(value).__name__}")
    return value
