"""Changing ``config.json``: validation of every key, and changes that never leave a
half-written file behind. Where the file lives and how it is read is :mod:`openprogram.state`.

Every change is one transaction: take an exclusive lock, read, change, validate the whole
result, write a temporary file (0600) and rename it over the old one. A change that fails
validation writes nothing. Configuration applies at the next start of a process.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import fcntl
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from .state import (
    CONFIG_FILE_NAME,
    NAME_PATTERN,
    ConfigError,
    active_profile,
    config_path,
    ensure_private_dir,
    home_dir,
    load_config,
    state_dir,
)

LOCK_FILE_NAME = ".config.lock"

#: Re-exported from :mod:`openprogram.state`, where reading lives, so that
#: ``from openprogram.config import load_config, ConfigError`` keeps working.
__all__ = [
    "CONFIG_FILE_NAME",
    "LOCK_FILE_NAME",
    "NAME_PATTERN",
    "ConfigError",
    "active_profile",
    "config_path",
    "config_transaction",
    "ensure_private_dir",
    "get_value",
    "home_dir",
    "load_config",
    "parse_cli_value",
    "register_key",
    "set_value",
    "state_dir",
    "unset_value",
    "validate_value",
    "write_config_atomically",
]


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
            first: dict[str, Any] = getattr(error, "errors", lambda: [{}])()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "entry"
            raise ConfigError(
                f"entry {position}: {where}: {first.get('msg', str(error))} "
                "(each model needs id, api, provider and base_url)"
            ) from None
    return value


def _trusted_hosts(value: Any) -> Any:
    """Hosts your keys may go to besides the vendors' own and loopback (docs/project.md,
    "Security"): host names or addresses, no scheme, port or path."""
    example = 'e.g. ["llm-gateway.internal", "10.0.0.5"]'
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"must be a JSON list of host names, {example}")
    for item in value:
        if not _is_host(item):
            raise ConfigError(
                f"{item!r} is not a host name (no scheme, port, path or spaces), {example}"
            )
    return value


_HOST_NAME = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?\.?\Z")


def _is_host(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(text[1:-1] if text.startswith("[") and text.endswith("]") else text)
        return True
    except ValueError:
        return bool(_HOST_NAME.match(text)) and ".." not in text


def _tool_names(value: Any) -> Any:
    from .tools import BUILTIN_TOOL_NAMES

    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            f"must be a JSON list of tool names from: {', '.join(BUILTIN_TOOL_NAMES)}"
        )
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
    from .recordings.modes.vocabulary import CONFIG_MODES, validate_record_mode

    return validate_record_mode(value, CONFIG_MODES, error=ConfigError)


def _record_replay_file(value: Any) -> Any:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError("must be a recording ID or, for replay, a path to a recording file")
    return value


def _record_replay_ignore(value: Any) -> Any:
    from .recordings.replay.volatile import RequestFilter

    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(
            'must be a JSON list of field patterns, e.g. ["context.system_prompt", "options.metadata.*"]'
        )
    try:
        RequestFilter(ignore=value)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return value


def _record_replay_normalize(value: Any) -> Any:
    from .recordings.replay.volatile import RequestFilter

    if not isinstance(value, list):
        raise ConfigError(
            'must be a JSON list of [regex, replacement] pairs, e.g. [["\\d{4}-\\d\\d-\\d\\d", "<date>"]]'
        )
    try:
        RequestFilter(normalize=value)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return value


def _record_replay_secret_env(value: Any) -> Any:
    from .recordings.modes.activation import secret_env_problem

    problem = secret_env_problem(value)
    if problem is not None:
        raise ConfigError(problem)
    return value


def _check_record_replay(before: dict[str, Any], after: dict[str, Any]) -> None:
    """When a change touches ``record_replay``, the result must be usable as it stands: its
    activation plan (the one the runtime and ``recordings status`` use) must not block."""
    if before.get("record_replay") == after.get("record_replay"):
        return
    from .recordings.modes.activation import plan_activation

    plan = plan_activation(after)
    if plan.blocked:
        raise ConfigError(f"{plan.reason} (provider calls would be blocked at the next start)")


KEY_VALIDATORS: dict[str, Validator] = {
    "default_model": _model_ref,
    "models": _models,
    "trusted_hosts": _trusted_hosts,
    "tools.enabled": _tool_names,
    "run.max_turns": _positive_int,
    "record_replay.mode": _record_replay_mode,
    "record_replay.file": _record_replay_file,
    "record_replay.ignore": _record_replay_ignore,
    "record_replay.normalize": _record_replay_normalize,
    "record_replay.secret_env": _record_replay_secret_env,
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
    fd = _open_lock_file(folder / LOCK_FILE_NAME)
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


def _open_lock_file(lock_path: Path) -> int:
    """Open (creating) the lock file, refusing a symbolic link, folder or other non-file in its
    place with a message that says to remove it: it holds nothing and is recreated."""
    fix = f"remove it ('rm -r {lock_path}'); it holds nothing and is recreated"
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(lock_path, flags, 0o600)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ConfigError(f"{lock_path} is a symbolic link; {fix}") from None
        if error.errno == errno.EISDIR:
            raise ConfigError(f"{lock_path} is a folder, not a file; {fix}") from None
        raise ConfigError(f"cannot open {lock_path}: {error.strerror or error}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ConfigError(f"{lock_path} is not a regular file; {fix}")
    return fd


def write_config_atomically(path: Path, config: dict[str, Any]) -> None:
    """Write via a 0600 temporary file in the same folder, fsync, then rename over ``path``."""
    if path.is_symlink():
        raise ConfigError(f"{path} is a symbolic link; refusing to write through it")
    data = orjson.dumps(config, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    try:
        fd, temporary = tempfile.mkstemp(prefix=".config-", suffix=".tmp", dir=path.parent)
    except OSError as error:
        raise ConfigError(
            f"cannot write {path}: {error.strerror or error} (check the permissions of {path.parent})"
        ) from None
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
