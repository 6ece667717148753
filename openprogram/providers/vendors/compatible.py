"""The OpenAI-compatible servers whose streams the tests cover, with the quirks of each.

One list, read by ``openprogram models list`` and checked against the tests and
docs/vendors.md, so that what the product claims to support is what is tested. A quirk is
what a server sends differently from OpenAI's own Chat Completions stream; ``covered_by``
names the transcript scenarios (in tests/vendors/test_vendor_contract.py) or tests that serve that
shape from 127.0.0.1 to the real SDK.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CompatibleServer:
    name: str
    quirks: tuple[str, ...]
    covered_by: tuple[str, ...]


COMPATIBLE_SERVERS: tuple[CompatibleServer, ...] = (
    CompatibleServer(
        "OpenAI",
        ("usage in a chunk of its own after finish_reason (stream_options.include_usage)",),
        ("plain", "usage_only_final", "one_tool_call", "several_tool_calls"),
    ),
    CompatibleServer(
        "OpenRouter",
        (
            "no finish_reason from some hosts: [DONE] ends the answer",
            "reasoning in delta.reasoning_details (text, summary, encrypted items sent back)",
            "web search citations as delta.annotations",
        ),
        (
            "no_finish_reason",
            "no_finish_reason_tool_call",
            "reasoning_details",
            "openrouter_annotations",
        ),
    ),
    CompatibleServer(
        "Snowflake Cortex",
        ("no finish_reason: [DONE] ends the answer", "reasoning in delta.reasoning_details"),
        ("no_finish_reason", "reasoning_details"),
    ),
    CompatibleServer(
        "Groq",
        (
            "usage under x_groq.usage in the last chunk",
            "tools run by compound models in delta.executed_tools",
        ),
        ("groq_executed_tools",),
    ),
    CompatibleServer(
        "DeepSeek, Kimi",
        ("reasoning in delta.reasoning_content, interleaved with the answer",),
        ("thinking", "several_text_blocks"),
    ),
    CompatibleServer(
        "vLLM", ("reasoning in delta.reasoning", "no API key"), ("thinking_in_the_reasoning_field",)
    ),
    CompatibleServer(
        "Mistral",
        ("list-typed delta.content: thinking parts holding text parts, then text parts",),
        ("list_typed_content",),
    ),
    CompatibleServer(
        "Ollama, llama.cpp, LM Studio",
        ("no API key (a placeholder is sent)",),
        ("test_openai_sdk_vendors_need_no_key_on_a_local_server",),
    ),
)

__all__ = ["COMPATIBLE_SERVERS", "CompatibleServer"]
