"""Every import path of openprogram 0.1.0 still works: code written against the first release
keeps importing (docs/architecture.md, "The public import paths").

The names are those each public module of 0.1.0 listed in ``__all__`` or defined at its top
level, plus ``RecordingFileError`` from ``openprogram.providers.replay``, whose reader raises
it (0.1.0 imported it there), less the old reader's memory-tuning constants
(``KEEP_EVENTS_BUDGET``, ``EVENT_OBJECT_OVERHEAD``), which were never documented. Generated
once from the 0.1.0 sources; never edited to make a test pass: a name removed from here is an
incompatible change."""

from __future__ import annotations

import importlib

import pytest

IMPORT_PATHS_0_1_0: dict[str, list[str]] = {
    "openprogram.providers": [
        "ApiProvider", "AssistantMessage", "AssistantMessageEvent", "Context", "EventDone",
        "EventError", "EventStart", "EventTextDelta", "EventTextEnd", "EventTextStart",
        "EventThinkingDelta", "EventThinkingEnd", "EventThinkingStart", "EventToolCallDelta",
        "EventToolCallEnd", "EventToolCallStart", "FauxProvider", "FauxResponse", "ImageContent",
        "Message", "Model", "ModelCost", "NON_DETERMINISTIC_FIELD_NAMES", "PLACEHOLDER",
        "ProviderRuntimeInitializationError", "RECORDING_FORMAT_VERSION",
        "RecordedCallInterrupted", "RecordingFileError", "RecordingProvider", "RecordingSink",
        "ReplayMismatch", "ReplayProvider", "SECRET_FIELD_NAMES", "SimpleStreamOptions",
        "StopReason", "StreamOptions", "TextContent", "ThinkingContent", "Tool", "ToolCall",
        "ToolResultMessage", "Usage", "UsageCost", "UserMessage", "complete", "complete_simple",
        "configure_provider_transform", "faux_error", "faux_text", "faux_thinking",
        "faux_tool_call", "faux_tool_calls", "find_first_difference", "get_api_provider",
        "get_model", "initialize_provider_runtime", "read_recording_file", "register_api_provider",
        "register_builtins", "remove_secret_values", "resolve_provider_key", "stream",
        "stream_simple", "use_recording",
    ],
    "openprogram.providers.replay": [
        "NON_DETERMINISTIC_FIELD_NAMES", "RecordedCall", "RecordedCallInterrupted", "Recording",
        "RecordingFileError", "ReplayMismatch", "ReplayProvider", "find_first_difference",
        "read_recording_file",
    ],
    "openprogram.providers.recording": [
        "PLACEHOLDER", "RECORDING_FORMAT_VERSION", "RecordingFileError", "RecordingProvider",
        "RecordingSink", "SECRET_FIELD_NAMES", "remove_secret_values",
    ],
    "openprogram.providers.scoped": [
        "RecordingScope", "ScopedMode", "use_recording",
    ],
    "openprogram.providers.types": [
        "AssistantContent", "AssistantMessage", "AssistantMessageEvent", "CacheRetention",
        "Context", "EVENT_ADAPTER", "EVENT_CLASSES", "EventDone", "EventError", "EventStart",
        "EventTextDelta", "EventTextEnd", "EventTextStart", "EventThinkingDelta",
        "EventThinkingEnd", "EventThinkingStart", "EventToolCallDelta", "EventToolCallEnd",
        "EventToolCallStart", "ImageContent", "MESSAGE_ADAPTER", "Message", "Model", "ModelCost",
        "ReasoningLevel", "SimpleStreamOptions", "StopReason", "StreamOptions",
        "TERMINAL_EVENT_TYPES", "TextContent", "ThinkingContent", "Tool", "ToolCall",
        "ToolResultMessage", "Usage", "UsageCost", "UserContent", "UserMessage", "now_ms",
    ],
    "openprogram.providers.stream": [
        "complete", "complete_simple", "stream", "stream_simple",
    ],
    "openprogram.providers.api_registry": [
        "ApiProvider", "ProviderTransform", "configure_provider_transform", "get_api_provider",
        "get_original_provider", "installed_transform", "lookup_registered_provider",
        "register_api_provider", "register_api_providers", "registered_apis",
        "unregister_api_provider",
    ],
    "openprogram.providers.credentials": [
        "KEYLESS_PROVIDERS", "MIN_SECRET_LENGTH", "key_required", "known_secret_values",
        "missing_key_message", "note_secret_value", "provider_env_vars", "resolve_provider_key",
    ],
    "openprogram.providers.models": [
        "ANTHROPIC_BASE_URL", "GOOGLE_BASE_URL", "OPENAI_BASE_URL", "all_models", "builtin_models",
        "configured_models", "custom_model", "get_model", "split_model_ref",
    ],
    "openprogram.providers.faux": [
        "DEFAULT_FAUX_PROVIDER", "FAUX_API", "FauxBlock", "FauxProvider", "FauxResponder",
        "FauxResponse", "FauxScript", "FauxText", "FauxThinking", "FauxToolCall", "chunk_fixed",
        "chunk_text", "echo_response", "faux_error", "faux_text", "faux_thinking",
        "faux_tool_call", "faux_tool_calls",
    ],
    "openprogram.providers.register": [
        "builtin_providers", "register_builtins",
    ],
    "openprogram.agent": [
        "AgentContext", "AgentEndEvent", "AgentEvent", "AgentLoopConfig", "AgentStartEvent",
        "AgentTool", "AgentToolResult", "MessageEndEvent", "MessageStartEvent",
        "MessageUpdateEvent", "ToolExecutionEndEvent", "ToolExecutionStartEvent",
        "ToolExecutionUpdateEvent", "TurnEndEvent", "TurnStartEvent", "agent_loop",
        "validate_arguments",
    ],
    "openprogram.testing": [
        "LlmRecording", "MARKER", "MODES", "file_stem", "legacy_recording_path", "llm_recording",
        "pytest_addoption", "pytest_collection_modifyitems", "pytest_configure",
        "pytest_runtest_call", "pytest_runtest_makereport", "record_mode", "recording_path",
    ],
    "openprogram.tools": [
        "BUILTIN_TOOL_NAMES", "CALCULATOR", "DEFAULT_TOOL_NAMES", "MAX_EXPONENT", "MAX_LISTED",
        "MAX_READ_BYTES", "builtin_tools", "confined_path", "evaluate_arithmetic",
    ],
}


@pytest.mark.parametrize("module", sorted(IMPORT_PATHS_0_1_0))
def test_every_0_1_0_import_path_still_works(module):
    imported = importlib.import_module(module)
    missing = [name for name in IMPORT_PATHS_0_1_0[module] if not hasattr(imported, name)]
    assert missing == []


def test_the_reader_error_is_the_same_class_everywhere():
    from openprogram.providers import RecordingFileError
    from openprogram.providers.recording import RecordingFileError as from_recording
    from openprogram.providers.replay import RecordingFileError as from_replay

    assert RecordingFileError is from_recording is from_replay
