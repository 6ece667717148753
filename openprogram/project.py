"""Project configuration: what a project commits so that a clone replays its recorded tests
with a fresh state folder and no command run first (docs/project.md).

A ``[tool.openprogram]`` table in the nearest ``pyproject.toml``, or an ``openprogram.toml``
in the same place (searched from the current directory upward to the repository root or the
home; a ``pyproject.toml`` without the table is passed by, and so is a file another user owns
or may write), holds:

* ``models``: the same entries as the configuration's ``models`` (a local server, a gateway);
  the user's configuration overrides an entry of the same provider and id (a local port, say);
* ``record_replay``: ``ignore``, ``normalize`` and ``secret_env``, the rules a replay of the
  project's recordings needs, and ``cache_stable`` (fail a test whose calls break the prompt
  cache's prefix);
* ``proxy.upstream``: where the ``llm_proxy`` fixture's live calls go, by api (``API = URL``);
* ``budget``: the limits (``calls``, ``tokens``, ``cost``) of each recorded test that sets none.

Like :mod:`openprogram.state` this imports nothing of openprogram at import time, so every
layer may read it. The lookup is a few ``stat`` calls per folder up to the root, and a file is
parsed again only when it changes.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .state import ConfigError

__all__ = [
    "PROJECT_FILE_NAMES",
    "ProjectConfig",
    "ProjectSearch",
    "find_project_file",
    "project_config",
    "search_project_file",
    "secret_env_problem",
    "untrusted_reason",
]

#: Where a project's table may live, in the order looked at in each folder.
PROJECT_FILE_NAMES = ("openprogram.toml", "pyproject.toml")
#: A project file is a handful of settings and a model list.
MAX_PROJECT_BYTES = 1024 * 1024
_RECORD_REPLAY_KEYS = ("ignore", "normalize", "secret_env", "cache_stable")
_TOP_KEYS = ("models", "record_replay", "proxy", "budget")


@dataclass(frozen=True)
class ProjectConfig:
    """The project's table: where it was found and what it holds (validated)."""

    path: Path | None = None
    #: How a key is named in messages: ``[tool.openprogram] models`` or ``models``.
    table: str = ""
    models: list[dict[str, Any]] = field(default_factory=list)
    record_replay: dict[str, Any] = field(default_factory=dict)
    #: ``proxy.upstream``: api -> URL (checked as the proxy checks ``--upstream`` when used).
    proxy_upstream: dict[str, str] = field(default_factory=dict)
    #: ``budget``: the limits of a recorded test whose marker sets none (validated).
    budget: dict[str, Any] = field(default_factory=dict)
    #: Project files the search passed by unread, each with the reason (docs/project.md).
    passed_by: tuple[str, ...] = ()

    def where(self, key: str) -> str:
        """A key of this project as a message names it: the file and the key in it."""
        prefix = "tool.openprogram." if self.table == "[tool.openprogram]" else ""
        return f"{self.path}: {prefix}{key}"


_NO_PROJECT = ProjectConfig()
_cache: dict[tuple[Any, ...], ProjectConfig] = {}
#: Whether a ``pyproject.toml`` (by its stat stamp) has the table: most never do.
_tables: dict[tuple[Any, ...], bool] = {}


@dataclass(frozen=True)
class ProjectSearch:
    """Where the upward search found a project file (``path``, or None), and the files it passed
    by without reading them, each with the reason (another user's, or writable by others)."""

    path: Path | None
    passed_by: tuple[str, ...] = ()


def find_project_file(start: Path | None = None) -> Path | None:
    """The nearest project file from ``start`` (the current directory) upward, or None."""
    return search_project_file(start).path


def search_project_file(start: Path | None = None) -> ProjectSearch:
    """The upward search of docs/project.md ("Which file applies"): from ``start`` (the current
    directory) up to the first folder holding ``.git`` or the user's home, whichever comes
    first. A file in a shared parent folder (``/tmp``, a checkout root others can write) must
    not redirect this user's calls, so the search never goes past the repository or the home,
    and a file the user does not own, or that others may write, is passed by unread."""
    directory = os.path.abspath(start if start is not None else os.getcwd())
    home = _home()
    passed_by: list[str] = []
    while True:
        for name in PROJECT_FILE_NAMES:
            candidate = os.path.join(directory, name)
            try:
                info = os.stat(candidate)
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            distrust = untrusted_reason(candidate, info)
            if distrust is not None:
                passed_by.append(f"{candidate}: not read, {distrust}")
                continue
            if name == "openprogram.toml" or _has_table(candidate, info):
                return ProjectSearch(Path(candidate), tuple(passed_by))
        parent = os.path.dirname(directory)
        if (
            parent == directory
            or directory == home
            or os.path.lexists(os.path.join(directory, ".git"))
        ):
            return ProjectSearch(None, tuple(passed_by))
        directory = parent


def untrusted_reason(path: str, info: os.stat_result) -> str | None:
    """Why a project file with this ``stat`` must not be read (None: it may be). A file is the
    user's when the user owns it (root's files count too, as OpenSSH counts them for its own
    configuration: only root can write them) and no one else may write it: not others, and not
    a group other than the user's own (a umask of 002 leaves files group-writable for the
    user's private group, which is the user)."""
    uid = os.getuid()
    if info.st_uid not in (uid, 0):
        return f"it belongs to user id {info.st_uid}, not to you (user id {uid}); a project file must be yours"
    if info.st_mode & stat.S_IWOTH or (info.st_mode & stat.S_IWGRP and info.st_gid != os.getgid()):
        return (
            f"others may write to it (mode {stat.S_IMODE(info.st_mode):04o}); "
            f"make it yours alone with: chmod go-w {shlex.quote(path)}"
        )
    return None


def _home() -> str | None:
    try:
        return os.path.abspath(os.path.expanduser("~"))
    except (KeyError, RuntimeError):  # no HOME and no passwd entry
        return None


def project_config(start: Path | None = None) -> ProjectConfig:
    """The project configuration that applies in ``start`` (the current directory); an empty
    one when there is no project file. Raises :class:`ConfigError` naming the file, the key
    and the fix for a table that is not valid. A file passed by is said once per process on
    stderr (and kept in ``passed_by`` for ``recordings status`` and the pytest header)."""
    search = search_project_file(start)
    _say_passed_by(search.passed_by)
    path = search.path
    if path is None:
        return ProjectConfig(passed_by=search.passed_by) if search.passed_by else _NO_PROJECT
    try:
        info = path.stat()
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}") from None
    stamp = (
        str(path),
        info.st_ino,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
        info.st_uid,
        info.st_mode,
    )
    cached = _cache.get(stamp)
    if cached is None:
        cached = _parse(path)
        _cache.clear()  # one project at a time: the cache holds the current one
        _cache[stamp] = cached
    return dataclasses.replace(cached, passed_by=search.passed_by) if search.passed_by else cached


_said: set[str] = set()


def _say_passed_by(lines: tuple[str, ...]) -> None:
    for line in lines:
        if line not in _said:
            _said.add(line)
            print(f"openprogram: project file {line}", file=sys.stderr)


# ============================================================================ reading


def _has_table(path: str, info: os.stat_result) -> bool:
    """Whether a ``pyproject.toml`` has a ``[tool.openprogram]`` table: a cheap text test
    first, so most projects' files are never parsed; a file that fails to parse counts (the
    error is then reported where the table is read)."""
    if info.st_size > MAX_PROJECT_BYTES:
        return False
    stamp = (path, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    known = _tables.get(stamp)
    if known is None:
        known = _tables[stamp] = _read_has_table(path)
    return known


def _read_has_table(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            text = handle.read(MAX_PROJECT_BYTES + 1)
    except OSError:
        return False
    if b"openprogram" not in text or b"tool" not in text:
        return False
    import tomllib

    try:
        document = tomllib.loads(text.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return True
    tool = document.get("tool")
    return isinstance(tool, dict) and "openprogram" in tool


def _read_trusted(path: Path) -> bytes:
    """The file's bytes, its owner and mode checked again on the opened descriptor: a file
    swapped in after the search is not read either."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}") from None
    try:
        info = os.fstat(fd)
        distrust = (
            untrusted_reason(str(path), info)
            if stat.S_ISREG(info.st_mode)
            else "it is not a regular file"
        )
        if distrust is not None:
            raise ConfigError(f"{path}: not read, {distrust}")
        if info.st_size > MAX_PROJECT_BYTES:
            raise ConfigError(
                f"{path} is larger than {MAX_PROJECT_BYTES // 1024} KB; a project file is a few settings"
            )
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read(MAX_PROJECT_BYTES + 1)
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}") from None
    finally:
        os.close(fd)


def _parse(path: Path) -> ProjectConfig:
    import tomllib

    raw = _read_trusted(path)
    try:
        document = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(
            f"{path} is not valid TOML ({error}); fix it so openprogram can read its settings"
        ) from None
    if path.name == "pyproject.toml":
        table = document.get("tool", {}).get("openprogram")
        label = "[tool.openprogram]"
    else:
        table, label = document, ""
    if table is None:
        return ProjectConfig(path=path, table=label)
    project = ProjectConfig(path=path, table=label)
    if not isinstance(table, dict):
        raise ConfigError(f"{project.where('')[:-1]}openprogram must be a table")
    if "trusted_hosts" in table:
        raise ConfigError(
            f"{project.where('trusted_hosts')}: not a project setting: a project cannot choose where "
            "your keys go; each user trusts a host in their own configuration "
            """(openprogram config set trusted_hosts '["HOST"]')"""
        )
    unknown = sorted(set(table) - set(_TOP_KEYS))
    if unknown:
        raise ConfigError(
            f"{project.where(unknown[0])}: unknown key; a project file takes {', '.join(_TOP_KEYS)}"
        )
    models = _models(project, table.get("models", []))
    record_replay = _record_replay(project, table.get("record_replay", {}))
    upstream = _proxy_upstream(project, table.get("proxy", {}))
    budget = _budget(project, table.get("budget", {}))
    return ProjectConfig(
        path=path,
        table=label,
        models=models,
        record_replay=record_replay,
        proxy_upstream=upstream,
        budget=budget,
    )


def _budget(project: ProjectConfig, value: Any) -> dict[str, Any]:
    from .recordings.insight.budget import Budget

    table = "[tool.openprogram.budget]" if project.table else "[budget]"
    example = f"\n{table}\ncalls = 10\ntokens = 20000\ncost = 0.05"
    try:
        Budget.parse(value, project.where("budget"), example)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return dict(value)


def _proxy_upstream(project: ProjectConfig, value: Any) -> dict[str, str]:
    example = '[tool.openprogram.proxy.upstream]\n"openai-completions" = "http://127.0.0.1:8080/v1"'
    if not isinstance(value, dict) or sorted(value) not in ([], ["upstream"]):
        raise ConfigError(
            f"{project.where('proxy')} must be a table with one key, upstream, e.g.\n{example}"
        )
    upstream = value.get("upstream", {})
    if not isinstance(upstream, dict) or not all(isinstance(url, str) for url in upstream.values()):
        raise ConfigError(
            f"{project.where('proxy.upstream')} must be a table of API = URL strings, e.g.\n{example}"
        )
    return dict(upstream)


def _models(project: ProjectConfig, value: Any) -> list[dict[str, Any]]:
    from .providers.types import Model

    example = (
        '[[tool.openprogram.models]]\nid = "smollm2"\napi = "openai-completions"\n'
        'provider = "llamacpp"\nbase_url = "http://127.0.0.1:8080/v1"'
    )
    if not isinstance(value, list):
        raise ConfigError(f"{project.where('models')} must be a list of tables, e.g.\n{example}")
    for position, entry in enumerate(value):
        try:
            Model.model_validate(entry)
        except Exception as error:  # pydantic.ValidationError, kept lazy
            first: dict[str, Any] = getattr(error, "errors", lambda: [{}])()[0]
            where = ".".join(str(step) for step in first.get("loc", ())) or "entry"
            raise ConfigError(
                f"{project.where(f'models[{position}]')}: {where}: {first.get('msg', str(error))} "
                "(each model needs id, api and provider; a local server also base_url)"
            ) from None
    return [dict(entry) for entry in value]


def _record_replay(project: ProjectConfig, value: Any) -> dict[str, Any]:
    from .recordings.replay.volatile import RequestFilter

    if not isinstance(value, dict):
        raise ConfigError(
            f"{project.where('record_replay')} must be a table of {', '.join(_RECORD_REPLAY_KEYS)}"
        )
    unknown = sorted(set(value) - set(_RECORD_REPLAY_KEYS))
    if unknown:
        raise ConfigError(
            f"{project.where(f'record_replay.{unknown[0]}')}: not a project setting; a project sets "
            f"{', '.join(_RECORD_REPLAY_KEYS)} (the mode and the file are each user's own: "
            "openprogram config set record_replay.mode ...)"
        )
    shapes = {
        "ignore": 'a list of field patterns, e.g. ignore = ["context.system_prompt", "options.metadata.*"]',
        "normalize": 'a list of [regex, replacement] pairs, e.g. normalize = [["\\d{4}-\\d\\d-\\d\\d", "<date>"]]',
    }
    for key, shape in shapes.items():
        if key not in value:
            continue
        rules = value[key]
        if not isinstance(rules, list):
            raise ConfigError(f"{project.where(f'record_replay.{key}')} must be {shape}")
        try:
            RequestFilter(ignore=rules) if key == "ignore" else RequestFilter(normalize=rules)
        except (ValueError, TypeError) as error:
            raise ConfigError(f"{project.where(f'record_replay.{key}')}: {error}") from None
    if "cache_stable" in value and type(value["cache_stable"]) is not bool:
        raise ConfigError(
            f"{project.where('record_replay.cache_stable')} must be true or false, not {value['cache_stable']!r} "
            "(true fails a test whose calls break the prompt cache's prefix)"
        )
    if "secret_env" in value:
        problem = secret_env_problem(value["secret_env"])
        if problem is not None:
            raise ConfigError(f"{project.where('record_replay.secret_env')}: {problem}")
    return dict(value)


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def secret_env_problem(names: Any) -> str | None:
    """What is wrong with a ``record_replay.secret_env`` value (None: nothing)."""
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        return (
            'must be a JSON list of environment variable names, e.g. ["DB_URL", "INTERNAL_TOKEN"]'
        )
    bad = [name for name in names if not _ENV_NAME.match(name)]
    if bad:
        return f"{bad[0]!r} is not an environment variable name (letters, digits and _; not starting with a digit)"
    return None
