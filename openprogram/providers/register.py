"""Built-in provider registration. Called by the runtime initialiser, never at import."""

from __future__ import annotations

from .api_registry import ApiProvider, register_api_providers


def builtin_providers() -> dict[str, ApiProvider]:
    """A fresh provider object for every built-in api. Vendor modules import their SDK lazily,
    inside a call, so building these is cheap."""
    from .faux import DEFAULT_FAUX_PROVIDER
    from .vendors.anthropic_messages import AnthropicMessagesProvider
    from .vendors.google_generative_ai import GoogleGenerativeAIProvider
    from .vendors.openai_completions import OpenAICompletionsProvider
    from .vendors.openai_responses import OpenAIResponsesProvider

    return {
        "openai-completions": OpenAICompletionsProvider(),
        "anthropic-messages": AnthropicMessagesProvider(),
        "openai-responses": OpenAIResponsesProvider(),
        "google-generative-ai": GoogleGenerativeAIProvider(),
        "faux": DEFAULT_FAUX_PROVIDER,
    }


def register_builtins() -> None:
    """Publish every built-in provider at once (all or none)."""
    register_api_providers(builtin_providers())
