"""The built-in model catalog and ``get_model("provider/model-id")``.

Prices are dollars per million tokens as published by each vendor; custom models (for a local
server, say) come from the project's ``[tool.openprogram]`` table (``pyproject.toml`` or
``openprogram.toml``, committed with the code) and from the ``models`` list of the user's
configuration, which overrides a project entry of the same provider and id.
"""

from __future__ import annotations

import copy
import os
import stat
from typing import Any

from .types import Model, ModelCost

OPENAI_BASE_URL = "https://api.openai.com/v1"
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
GOOGLE_BASE_URL = "https://generativelanguage.googleapis.com"


def _model(
    provider: str,
    model_id: str,
    api: str,
    base_url: str,
    prices: tuple[float, float, float, float],
    *,
    name: str,
    reasoning: bool = False,
    images: bool = True,
    context_window: int = 128000,
    max_tokens: int = 8192,
) -> Model:
    return Model(
        id=model_id,
        name=name,
        api=api,
        provider=provider,
        base_url=base_url,
        reasoning=reasoning,
        input=["text", "image"] if images else ["text"],
        cost=ModelCost(
            input=prices[0], output=prices[1], cache_read=prices[2], cache_write=prices[3]
        ),
        context_window=context_window,
        max_tokens=max_tokens,
    )


_CATALOG: list[Model] = [
    Model(
        id="echo",
        name="Faux echo (offline, deterministic)",
        api="faux",
        provider="faux",
        base_url="",
        input=["text"],
    ),
    _model(
        "openai",
        "gpt-4o-mini",
        "openai-completions",
        OPENAI_BASE_URL,
        (0.15, 0.6, 0.075, 0),
        name="GPT-4o mini",
        max_tokens=16384,
    ),
    _model(
        "openai",
        "gpt-4.1-mini",
        "openai-completions",
        OPENAI_BASE_URL,
        (0.4, 1.6, 0.1, 0),
        name="GPT-4.1 mini",
        context_window=1047576,
        max_tokens=32768,
    ),
    _model(
        "openai",
        "gpt-5",
        "openai-responses",
        OPENAI_BASE_URL,
        (1.25, 10, 0.125, 0),
        name="GPT-5",
        reasoning=True,
        context_window=400000,
        max_tokens=128000,
    ),
    _model(
        "openai",
        "gpt-5-mini",
        "openai-responses",
        OPENAI_BASE_URL,
        (0.25, 2, 0.025, 0),
        name="GPT-5 mini",
        reasoning=True,
        context_window=400000,
        max_tokens=128000,
    ),
    _model(
        "openai",
        "o4-mini",
        "openai-responses",
        OPENAI_BASE_URL,
        (1.1, 4.4, 0.275, 0),
        name="o4-mini",
        reasoning=True,
        context_window=200000,
        max_tokens=100000,
    ),
    _model(
        "anthropic",
        "claude-sonnet-4-5",
        "anthropic-messages",
        ANTHROPIC_BASE_URL,
        (3, 15, 0.3, 3.75),
        name="Claude Sonnet 4.5",
        reasoning=True,
        context_window=200000,
        max_tokens=64000,
    ),
    _model(
        "anthropic",
        "claude-haiku-4-5",
        "anthropic-messages",
        ANTHROPIC_BASE_URL,
        (1, 5, 0.1, 1.25),
        name="Claude Haiku 4.5",
        reasoning=True,
        context_window=200000,
        max_tokens=64000,
    ),
    _model(
        "anthropic",
        "claude-opus-4-1",
        "anthropic-messages",
        ANTHROPIC_BASE_URL,
        (15, 75, 1.5, 18.75),
        name="Claude Opus 4.1",
        reasoning=True,
        context_window=200000,
        max_tokens=32000,
    ),
    _model(
        "google",
        "gemini-2.5-flash",
        "google-generative-ai",
        GOOGLE_BASE_URL,
        (0.3, 2.5, 0.075, 0),
        name="Gemini 2.5 Flash",
        reasoning=True,
        context_window=1048576,
        max_tokens=65536,
    ),
    _model(
        "google",
        "gemini-2.5-pro",
        "google-generative-ai",
        GOOGLE_BASE_URL,
        (1.25, 10, 0.31, 0),
        name="Gemini 2.5 Pro",
        reasoning=True,
        context_window=1048576,
        max_tokens=65536,
    ),
    _model(
        "google",
        "gemini-2.0-flash",
        "google-generative-ai",
        GOOGLE_BASE_URL,
        (0.1, 0.4, 0.025, 0),
        name="Gemini 2.0 Flash",
        context_window=1048576,
        max_tokens=8192,
    ),
    _model(
        "groq",
        "llama-3.3-70b-versatile",
        "openai-completions",
        "https://api.groq.com/openai/v1",
        (0.59, 0.79, 0, 0),
        name="Llama 3.3 70B (Groq)",
        images=False,
        context_window=131072,
        max_tokens=32768,
    ),
    _model(
        "openrouter",
        "openai/gpt-4o-mini",
        "openai-completions",
        "https://openrouter.ai/api/v1",
        (0.15, 0.6, 0.075, 0),
        name="GPT-4o mini (OpenRouter)",
        max_tokens=16384,
    ),
]


def builtin_models() -> list[Model]:
    return [_fresh(model) for model in _CATALOG]


def custom_model(entry: dict[str, Any]) -> Model:
    """A model from a configuration entry; ``name`` defaults to the id."""
    return Model.model_validate(entry)


def configured_models() -> list[Model]:
    """Custom models: the project's, then the user's configuration's (current profile), a
    later entry of the same provider and id replacing an earlier one."""
    from ..project import project_config
    from ..state import load_config

    entries = [*project_config().models, *(load_config().get("models") or [])]
    return [custom_model(entry) for entry in entries if isinstance(entry, dict)]


def all_models(*, include_configured: bool = True) -> list[Model]:
    return [_fresh(model) for model in _catalog(include_configured).values()]


def split_model_ref(ref: str) -> tuple[str, str]:
    provider, sep, model_id = ref.partition("/")
    if not sep or not provider or not model_id:
        raise LookupError(
            f"model reference '{ref}' must look like provider/model-id (e.g. faux/echo)"
        )
    return provider, model_id


def get_model(ref: str, *, include_configured: bool = True) -> Model:
    """Resolve ``"provider/model-id"``; configured models override built-ins of the same name."""
    provider, model_id = split_model_ref(ref)
    catalog = _catalog(include_configured)
    model = catalog.get((provider, model_id))
    if model is not None:
        return _fresh(model)
    from ..project import find_project_file

    known = ", ".join(sorted(f"{p}/{m}" for p, m in catalog))
    project = find_project_file()
    where = (
        f"the project's {project}"
        if project is not None
        else "a [tool.openprogram] table in the project's pyproject.toml"
    )
    raise LookupError(
        f"unknown model '{ref}'; known models: {known}. A model is defined in {where} "
        "(models = [{id, api, provider, base_url}], committed with the code, so a clone and CI "
        "know it), or in your own configuration: openprogram config set models '[...]'"
    )


# ------------------------------------------------------------------- the cached catalog
#
# An agent resolves its model on every run, and a test suite runs many agents: rebuilding the
# catalog (and re-reading the configuration) each time was the largest cost of ``get_model``.
# The catalog is built once per process and rebuilt only when the configuration file changes,
# which one ``stat`` tells (its identity, size and change times).

_ConfigStamp = tuple[str, int, int, int, int] | tuple[str, None]

#: Built-in models by ``(provider, id)``, in catalog order.
_BUILTIN: dict[tuple[str, str], Model] = {(m.provider, m.id): m for m in _CATALOG}
_configured_cache: tuple[tuple[_ConfigStamp, _ConfigStamp], dict[tuple[str, str], Model]] | None = (
    None
)
#: How many times the catalog with configured models was built (tests count rebuilds).
catalog_builds = 0


def _catalog(include_configured: bool) -> dict[tuple[str, str], Model]:
    """Every model by ``(provider, id)``: built-ins, then configured ones, which replace a
    built-in of the same name and come last. The dict is shared: callers get copies."""
    if not include_configured:
        return _BUILTIN
    global _configured_cache, catalog_builds
    stamp = _config_stamp()
    cached = _configured_cache
    if stamp is not None and cached is not None and cached[0] == stamp:
        return cached[1]
    custom = {(m.provider, m.id): m for m in configured_models()}
    catalog = {key: model for key, model in _BUILTIN.items() if key not in custom}
    catalog.update(custom)
    catalog_builds += 1
    # A stamp of None (a file that is not a plain file, say) is never cached: the next call
    # reads the configuration again and reports what is wrong with it.
    _configured_cache = (stamp, catalog) if stamp is not None else None
    return catalog


def _config_stamp() -> tuple[_ConfigStamp, _ConfigStamp] | None:
    """What identifies the content of the configuration file and of the project file without
    reading them, or None when it cannot be told (then the caller reads them)."""
    from ..project import find_project_file
    from ..state import config_path

    user = _file_stamp(str(config_path()))
    project_file = find_project_file()
    project = _file_stamp(str(project_file)) if project_file is not None else ("", None)
    if user is None or project is None:
        return None
    return (user, project)


def _file_stamp(path: str) -> _ConfigStamp | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return (path, None)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return (path, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _fresh(model: Model) -> Model:
    """A copy the caller may change without changing the catalog: the model and its mutable
    parts, far cheaper than a deep copy of a pydantic model."""
    update: dict[str, Any] = {"input": list(model.input), "cost": model.cost.model_copy()}
    if model.headers is not None:
        update["headers"] = dict(model.headers)
    if model.compat is not None:
        update["compat"] = copy.deepcopy(model.compat)
    return model.model_copy(update=update)
