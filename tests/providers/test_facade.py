"""The stream facade: provider lookup, key resolution, complete()."""

from __future__ import annotations

import pytest

from openprogram.providers import credentials
from openprogram.providers.api_registry import register_api_provider
from openprogram.providers.faux import FauxProvider, faux_text
from openprogram.providers.stream import complete, complete_simple, stream, stream_simple
from openprogram.providers.types import (
    Context,
    Model,
    SimpleStreamOptions,
    StreamOptions,
    UserMessage,
)

CONTEXT = Context(messages=[UserMessage(content="hi")])


class KeyedFaux(FauxProvider):
    """A faux provider that claims to need credentials, like a vendor."""

    requires_credentials = True


def model(api: str, provider: str = "openai") -> Model:
    return Model(id="m", api=api, provider=provider)


def test_unknown_api_raises_lookup_error_naming_it():
    with pytest.raises(LookupError, match="no-such-api"):
        stream(model("no-such-api"), CONTEXT)


async def test_key_is_resolved_from_the_provider_environment(monkeypatch):
    provider = KeyedFaux([faux_text("a"), faux_text("b")])
    register_api_provider("keyed-test", provider)
    monkeypatch.setenv("OPENAI_API_KEY", "env-key-123456")
    await complete(model("keyed-test"), CONTEXT)
    await complete_simple(model("keyed-test"), CONTEXT, SimpleStreamOptions(temperature=0.5))
    assert provider.calls[0][2].api_key == "env-key-123456"
    assert isinstance(provider.calls[1][2], SimpleStreamOptions)
    assert provider.calls[1][2].api_key == "env-key-123456"
    assert provider.calls[1][2].temperature == 0.5


async def test_explicit_key_wins_and_missing_key_passes_none(monkeypatch):
    provider = KeyedFaux([faux_text("a"), faux_text("b")])
    register_api_provider("keyed-test-2", provider)
    monkeypatch.setenv("OPENAI_API_KEY", "env-key-123456")
    await complete(model("keyed-test-2"), CONTEXT, StreamOptions(api_key="explicit-key-1"))
    monkeypatch.delenv("OPENAI_API_KEY")
    await complete(model("keyed-test-2"), CONTEXT)
    assert provider.calls[0][2].api_key == "explicit-key-1"
    assert provider.calls[1][2] is None


async def test_environment_keys_can_be_withheld_for_a_block(monkeypatch):
    """A proxy's calls (docs/proxy.md, "Security"): inside the block, a call without a key of
    its own gets none from the environment, and a missing key says how to allow it; a key the
    call carries still goes, and outside the block the environment's is used again."""
    provider = KeyedFaux([faux_text("a"), faux_text("b"), faux_text("c")])
    register_api_provider("keyed-test-3", provider)
    monkeypatch.setenv("OPENAI_API_KEY", "env-key-123456")
    with credentials.withhold_environment_keys("start the proxy with --env-keys"):
        assert credentials.environment_keys_withheld()
        await complete(model("keyed-test-3"), CONTEXT)
        await complete(model("keyed-test-3"), CONTEXT, StreamOptions(api_key="client-key-1"))
        message = credentials.missing_key_message(model("keyed-test-3"))
    await complete(model("keyed-test-3"), CONTEXT)
    assert [call[2].api_key if call[2] else None for call in provider.calls] == [
        None,
        "client-key-1",
        "env-key-123456",
    ]
    assert "the request carried none" in message and message.endswith(
        "start the proxy with --env-keys"
    )
    assert not credentials.environment_keys_withheld()


async def test_resolver_is_never_called_when_credentials_are_not_required(monkeypatch):
    def fail(provider):
        raise AssertionError("the key resolver must not be called")

    monkeypatch.setattr(credentials, "resolve_provider_key", fail)
    provider = FauxProvider([faux_text("fine")])
    register_api_provider("keyless-test", provider)
    message = await complete(model("keyless-test"), CONTEXT)
    assert message.content[0].text == "fine"


async def test_stream_simple_yields_events_and_complete_returns_the_error_message():
    provider = FauxProvider([faux_text("x")])
    register_api_provider("facade-test", provider)
    types = [event.type async for event in stream_simple(model("facade-test"), CONTEXT)]
    assert types[0] == "start" and types[-1] == "done"
    failed = await complete(model("facade-test"), CONTEXT)  # queue now empty
    assert failed.stop_reason == "error"
    assert "no scripted response" in failed.error_message


def test_resolve_provider_key_reads_well_known_variables(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "g-key")
    monkeypatch.setenv("GROQ_API_KEY", "q-key")
    assert credentials.resolve_provider_key("google") == "g-key"
    assert credentials.resolve_provider_key("groq") == "q-key"
    assert credentials.resolve_provider_key("anthropic") is None
    assert credentials.provider_env_vars("my-host") == ("MY_HOST_API_KEY",)


def test_local_servers_need_no_key():
    assert not credentials.key_required(
        Model(
            id="q", api="openai-completions", provider="custom", base_url="http://127.0.0.1:8080/v1"
        )
    )
    assert not credentials.key_required(
        Model(
            id="q", api="openai-completions", provider="ollama", base_url="http://gpu-box:11434/v1"
        )
    )
    assert credentials.key_required(
        Model(
            id="q",
            api="openai-completions",
            provider="openai",
            base_url="https://api.openai.com/v1",
        )
    )
