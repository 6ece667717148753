"""The built-in model catalog and ``get_model("provider/model-id")``.

Prices are dollars per million tokens as published by each vendor; custom models (for a local
server, say) come from the ``models`` list of the configuration.
"""

from __future__ import annotations

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
        cost=ModelCost(input=prices[0], output=prices[1], cache_read=prices[2], cache_write=prices[3]),
        context_window=context_window,
        max_tokens=max_tokens,
    )


_CATALOG: list[Model] = [
    Model(id="echo", name="Faux echo (offline, deterministic)", api="faux", provider="faux",
          base_url="", input=["text"]),
    _model("openai", "gpt-4o-mini", "openai-completions", OPENAI_BASE_URL, (0.15, 0.6, 0.075, 0),
           name="GPT-4o mini", max_tokens=16384),
    _model("openai", "gpt-4.1-mini", "openai-completions", OPENAI_BASE_URL, (0.4, 1.6, 0.1, 0),
           name="GPT-4.1 mini", context_window=1047576, max_tokens=32768),
    _model("openai", "gpt-5", "openai-responses", OPENAI_BASE_URL, (1.25, 10, 0.125, 0),
           name="GPT-5", reasoning=True, context_window=400000, max_tokens=128000),
    _model("openai", "gpt-5-mini", "openai-responses", OPENAI_BASE_URL, (0.25, 2, 0.025, 0),
           name="GPT-5 mini", reasoning=True, context_window=400000, max_tokens=128000),
    _model("openai", "o4-mini", "openai-responses", OPENAI_BASE_URL, (1.1, 4.4, 0.275, 0),
           name="o4-mini", reasoning=True, context_window=200000, max_tokens=100000),
    _model("anthropic", "claude-sonnet-4-5", "anthropic-messages", ANTHROPIC_BASE_URL,
           (3, 15, 0.3, 3.75), name="Claude Sonnet 4.5", reasoning=True, context_window=200000,
           max_tokens=64000),
    _model("anthropic", "claude-haiku-4-5", "anthropic-messages", ANTHROPIC_BASE_URL,
           (1, 5, 0.1, 1.25), name="Claude Haiku 4.5", reasoning=True, context_window=200000,
           max_tokens=64000),
    _model("anthropic", "claude-opus-4-1", "anthropic-messages", ANTHROPIC_BASE_URL,
           (15, 75, 1.5, 18.75), name="Claude Opus 4.1", reasoning=True, context_window=200000,
           max_tokens=32000),
    _model("google", "gemini-2.5-flash", "google-generative-ai", GOOGLE_BASE_URL,
           (0.3, 2.5, 0.075, 0), name="Gemini 2.5 Flash", reasoning=True,
           context_window=1048576, max_tokens=65536),
    _model("google", "gemini-2.5-pro", "google-generative-ai", GOOGLE_BASE_URL,
           (1.25, 10, 0.31, 0), name="Gemini 2.5 Pro", reasoning=True, context_window=1048576,
           max_tokens=65536),
    _model("google", "gemini-2.0-flash", "google-generative-ai", GOOGLE_BASE_URL,
           (0.1, 0.4, 0.025, 0), name="Gemini 2.0 Flash", context_window=1048576, max_tokens=8192),
    _model("groq", "llama-3.3-70b-versatile", "openai-completions",
           "https://api.groq.com/openai/v1", (0.59, 0.79, 0, 0), name="Llama 3.3 70B (Groq)",
           images=False, context_window=131072, max_tokens=32768),
    _model("openrouter", "openai/gpt-4o-mini", "openai-completions",
           "https://openrouter.ai/api/v1", (0.15, 0.6, 0.075, 0), name="GPT-4o mini (OpenRouter)",
           max_tokens=16384),
]


def builtin_models() -> list[Model]:
    return [model.model_copy(deep=True) for model in _CATALOG]


def custom_model(entry: dict[str, Any]) -> Model:
    """A model from a configuration entry; ``name`` defaults to the id."""
    return Model.model_validate(entry)


def configured_models() -> list[Model]:
    """Custom models from the configuration of the current profile."""
    from ..state import load_config

    entries = load_config().get("models") or []
    return [custom_model(entry) for entry in entries if isinstance(entry, dict)]


def all_models(*, include_configured: bool = True) -> list[Model]:
    models = builtin_models()
    if include_configured:
        custom = configured_models()
        keys = {(m.provider, m.id) for m in custom}
        models = [m for m in models if (m.provider, m.id) not in keys] + custom
    return models


def split_model_ref(ref: str) -> tuple[str, str]:
    provider, sep, model_id = ref.partition("/")
    if not sep or not provider or not model_id:
        raise LookupError(f"model reference '{ref}' must look like provider/model-id (e.g. faux/echo)")
    return provider, model_id


def get_model(ref: str, *, include_configured: bool = True) -> Model:
    """Resolve ``"provider/model-id"``; configured models override built-ins of the same name."""
    provider, model_id = split_model_ref(ref)
    for model in reversed(all_models(include_configured=include_configured)):
        if model.provider == provider and model.id == model_id:
            return model
    known = ", ".join(sorted(f"{m.provider}/{m.id}" for m in all_models(include_configured=include_configured)))
    raise LookupError(
        f"unknown model '{ref}'; known models: {known}. "
        "Add a custom one to the 'models' list of the configuration."
    )
