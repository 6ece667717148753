"""The managed recordings folder and recording selectors.

A selector without a path separator is a managed ID, stored as ``<state>/recordings/ID.jsonl``;
anything else is an explicit path (allowed for replay only). This module is deliberately light
(no pydantic, no SDK) because the ``recordings`` commands and the runtime initialiser both use
it, and the commands must start fast.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ...state import ConfigError, check_private_dir, ensure_private_dir, state_dir
from ..modes.vocabulary import CONFIG_MODES, WRITING_MODES
from ..modes.vocabulary import FILE_MODES as FILE_MODES
from ..modes.vocabulary import RecordMode as RecordMode

RECORDINGS_FOLDER = "recordings"
#: Where ``recordings view`` writes pages by default: in the state folder, never among
#: recordings that may be committed (``docs/recordings-cli.md``, ``view``).
REPORTS_FOLDER = "reports"
RECORDING_SUFFIX = ".jsonl"
RECORDING_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: The ``record_replay.mode`` values and the modes that use a recording file, from the one
#: vocabulary of modes (re-exported: the configuration check takes them from here).
VALID_MODES = CONFIG_MODES
#: The command group that manages recordings, as the messages that say what to run name it.
CMD = "openprogram recordings"
FIX_OFF = f"{CMD} off"


class SelectorError(ConfigError):
    """A recording selector that cannot be used; the message says why and what to type."""


def recordings_dir(profile: str | None = None) -> Path:
    return state_dir(profile) / RECORDINGS_FOLDER


def ensure_recordings_dir(profile: str | None = None) -> Path:
    """The managed folder, created 0700 (with the state folder) when missing."""
    return ensure_private_dir(checked_recordings_dir(profile))


def reports_dir(profile: str | None = None) -> Path:
    return state_dir(profile) / REPORTS_FOLDER


def ensure_reports_dir(profile: str | None = None) -> Path:
    """The reports folder, created 0700 (pages hold prompts and outputs) and checked like the
    managed folder: a real folder of this user, never a symbolic link."""
    folder = reports_dir(profile)
    try:
        return ensure_private_dir(folder)
    except ConfigError as error:
        raise ConfigError(f"reports folder: {error}") from None


def checked_recordings_dir(profile: str | None = None) -> Path:
    """The managed folder, checked before anything deletes or creates in it: a real folder of
    this user, not a symbolic link (``prune`` through a link would delete files elsewhere).
    A missing folder passes: there is nothing in it to act on."""
    folder = recordings_dir(profile)
    if os.path.lexists(folder):
        try:
            check_private_dir(folder)
        except ConfigError as error:
            raise ConfigError(f"recordings folder {error}") from None
    return folder


#: Kinds :func:`absence_of` reports: nothing there, or a folder above it cannot be searched.
MISSING, UNREACHABLE = "missing", "unreachable"


def absence_of(path: Path) -> tuple[str, str] | None:
    """None when something is at ``path``; else ``(kind, reason)``, telling a file that does
    not exist (:data:`MISSING`) from one behind a folder that cannot be searched
    (:data:`UNREACHABLE`), which ``os.path.exists`` would report as missing too."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return MISSING, "does not exist"
    except NotADirectoryError:
        return MISSING, "does not exist (a folder on its path is a file)"
    except PermissionError:
        return UNREACHABLE, (
            "cannot be reached: permission denied on a folder above it "
            f"(check the permissions of {path.parent} and the folders above it)"
        )
    except OSError as error:
        return UNREACHABLE, f"cannot be inspected: {error.strerror or error}"
    return None


def is_managed_id(selector: str) -> bool:
    return os.sep not in selector and "/" not in selector


def check_recording_id(recording_id: str) -> str:
    if not RECORDING_ID_PATTERN.match(recording_id) or recording_id.endswith(RECORDING_SUFFIX):
        raise SelectorError(
            f"invalid recording ID '{recording_id}': use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit, without the .jsonl suffix"
        )
    return recording_id


def managed_path(recording_id: str, profile: str | None = None) -> Path:
    return recordings_dir(profile) / f"{check_recording_id(recording_id)}{RECORDING_SUFFIX}"


def resolve_selector(selector: str, *, mode: str, profile: str | None = None) -> Path:
    """The file a ``record_replay.file`` selector names. Record mode accepts managed IDs only."""
    if not isinstance(selector, str) or not selector.strip():
        raise SelectorError(
            "record_replay.file is empty: set a recording with "
            "'openprogram recordings record --name NAME' or 'openprogram recordings replay ID'"
        )
    if is_managed_id(selector):
        return managed_path(selector, profile)
    if mode in WRITING_MODES:
        raise SelectorError(
            f"record mode needs a managed recording ID, not a path ('{selector}'); "
            "use 'openprogram recordings record --name NAME'"
        )
    return Path(selector).expanduser().absolute()


def managed_id_of(path: Path, profile: str | None = None) -> str | None:
    """The ID of ``path`` if it is a recording directly inside the managed folder."""
    folder = recordings_dir(profile).absolute()
    path = path.absolute()
    if path.parent != folder or path.suffix != RECORDING_SUFFIX:
        return None
    candidate = path.name[: -len(RECORDING_SUFFIX)]
    return candidate if RECORDING_ID_PATTERN.match(candidate) else None


def record_replay_settings(config: dict[str, Any]) -> tuple[str, str | None]:
    """``(mode, file)`` from a configuration dict; a missing subtree means off."""
    subtree = config.get("record_replay")
    if subtree is None:
        return "off", None
    if not isinstance(subtree, dict):
        return f"<invalid: {type(subtree).__name__}>", None
    mode = subtree.get("mode", "off")
    selector = subtree.get("file")
    return (mode if isinstance(mode, str) else repr(mode)), selector
