"""The state directory and ``config.json``: where they live, how they are read, and how they
are changed without ever leaving a half-written file behind.

Every change is one transaction: take an exclusive lock, read, change, validate the whole
result, write a temporary file (0600) and rename it over the old one. A change that fails
validation writes nothing. Configuration applies at the next start of a process.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

CONFIG_FILE_NAME = "config.json"
LOCK_FILE_NAME = ".config.lock"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class ConfigError(Exception):
    """A configuration problem a user can fix; the message says where and how."""


# ----------------------------------------------------------------------------- locations


def home_dir() -> Path:
    """``$OPENPROGRAM_HOME``, default ``~/.openprogram``."""
    configured = os.environ.get("OPENPROGRAM_HOME", "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".openprogram"


def active_profile() -> str | None:
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


# ----------------------------------------------------------------------------- reading


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


# ----------------------------------------------------------------------------- dotted keys


def get_value(config: dict[str, Any], key: str) -> Any:
    """The value at dotted ``key``; ``KeyError`` when absent."""
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(key)
        node = node[part]
    return node


def set_value(config: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = config
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def unset_value(config: dict[str, Any], key: str) -> bool:
    """Remove dotted ``key``; True if it was there. Empty parent objects are removed too."""
    parts = key.split(".")
    trail = [config]
    node: Any = config
    for part in parts[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            return False
        trail.append(node)
    if parts[-1] not in node:
        return False
    del node[parts[-1]]
    for parent, part in zip(reversed(trail[:-1]), reversed(parts[:-1]), strict=True):
        if parent[part]:
            break
        del parent[part]
    return True


# ----------------------------------------------------------------------------- validation

Validator = Callable[[Any], Any]


def _model_ref(value: Any) -> Any:
    if not isinstance(value, str) or "/" not in value.strip("/"):
        raise ConfigError("must look like provider/model-id, e.g. faux/echo or openai/gpt-4o-mini")
    return value


def _models(value: Any) -> Any:
    from .providers.types import Model

    if not isinstance(value, list):
        raise ConfigError(
            'must be a JSON list of models, e.g. [{"id": "qwen2.5:0.5b", "api": '
            '"openai-completions", "provider": "ollama", "base_url": "http://127.0.0.1:11434/v1"}]'
        )
    for position, entry in enumerate(value):
        try:
            Model.model_validate(entry)
        except Exception as error:  # pydantic.ValidationError, kept lazy
            first = getattr(error, "errors", lambda: [{}])()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "entry"
            raise ConfigError(
                f"entry {position}: {where}: {first.get('msg', str(error))} "
                "(each model needs id, api, provider and base_url)"
            ) from None
    return value


def _tool_names(value: Any) -> Any:
    from .tools import BUILTIN_TOOL_NAMES

    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"must be a JSON list of tool names from: {', '.join(BUILTIN_TOOL_NAMES)}")
    unknown = [v for v in value if v not in BUILTIN_TOOL_NAMES]
    if unknown:
        raise ConfigError(
            f"unknown tool {', '.join(unknown)}; built-in tools: {', '.join(BUILTIN_TOOL_NAMES)}"
        )
    return value


def _positive_int(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError("must be a whole number of at least 1")
    return value


def _record_replay_mode(value: Any) -> Any:
    from .recordings.store import VALID_MODES

    if value not in VALID_MODES:
        raise ConfigError(f"must be one of {', '.join(VALID_MODES)}, not {value!r}")
    return value


def _record_replay_file(value: Any) -> Any:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError("must be a recording ID or, for replay, a path to a recording file")
    return value


def _check_record_replay(before: dict[str, Any], after: dict[str, Any]) -> None:
    """When a change touches ``record_replay``, the result must be usable as it stands."""
    if before.get("record_replay") == after.get("record_replay"):
        return
    from .recordings.store import check_record_replay

    check_record_replay(after)


KEY_VALIDATORS: dict[str, Validator] = {
    "default_model": _model_ref,
    "models": _models,
    "tools.enabled": _tool_names,
    "run.max_turns": _positive_int,
    "record_replay.mode": _record_replay_mode,
    "record_replay.file": _record_replay_file,
}

#: Checks of the whole configuration after a change, given (before, after); each raises
#: ConfigError, and then nothing is written.
WHOLE_CONFIG_CHECKS: list[Callable[[dict[str, Any], dict[str, Any]], None]] = [_check_record_replay]


def register_key(key: str, validator: Validator) -> None:
    KEY_VALIDATORS[key] = validator


def validate_value(key: str, value: Any) -> Any:
    validator = KEY_VALIDATORS.get(key)
    if validator is None:
        known = ", ".join(sorted(KEY_VALIDATORS))
        raise ConfigError(f"unknown configuration key '{key}'; known keys: {known}")
    try:
        return validator(value)
    except ConfigError as error:
        raise ConfigError(f"{key}: {error}") from None


def parse_cli_value(text: str) -> Any:
    """A value typed on the command line: JSON if it parses as JSON, else the plain string."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


# ----------------------------------------------------------------------------- writing


@contextlib.contextmanager
def config_transaction(profile: str | None = None) -> Iterator[dict[str, Any]]:
    """Lock, read, let the caller change the dict, validate, write atomically.

    If the body raises, or validation fails, the file is left exactly as it was.
    """
    folder = ensure_private_dir(state_dir(profile))
    lock_path = folder / LOCK_FILE_NAME
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        config = load_config(profile)
        before = copy.deepcopy(config)
        yield config
        for check in WHOLE_CONFIG_CHECKS:
            check(before, config)
        write_config_atomically(config_path(profile), config)
    finally:
        os.close(fd)


def write_config_atomically(path: Path, config: dict[str, Any]) -> None:
    """Write via a 0600 temporary file in the same folder, fsync, then rename over ``path``."""
    if path.is_symlink():
        raise ConfigError(f"{path} is a symbolic link; refusing to write through it")
    data = orjson.dumps(config, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    fd, temporary = tempfile.mkstemp(prefix=".config-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
