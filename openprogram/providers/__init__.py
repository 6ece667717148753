"""The provider layer: typed messages, the streaming event protocol, the API registry, the
stream facade, and record/replay at the registry boundary.

Importing this package only defines names. It registers no provider, reads no configuration,
opens no recording and installs no transform; that happens in
``initialize_provider_runtime()``, on the first provider lookup. Names are resolved lazily so
that the import stays fast and pulls in no vendor SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    # registry and facade
    "ApiProvider": "api_registry",
    "register_api_provider": "api_registry",
    "get_api_provider": "api_registry",
    "configure_provider_transform": "api_registry",
    "stream": "stream",
    "stream_simple": "stream",
    "complete": "stream",
    "complete_simple": "stream",
    "resolve_provider_key": "credentials",
    "initialize_provider_runtime": "initialization",
    "ProviderRuntimeInitializationError": "initialization",
    "register_builtins": "register",
    "get_model": "models",
    "lane": "lanes",
    "current_lane": "lanes",
    # faux
    "FauxProvider": "faux",
    "FauxResponse": "faux",
    "faux_text": "faux",
    "faux_thinking": "faux",
    "faux_tool_call": "faux",
    "faux_tool_calls": "faux",
    "faux_error": "faux",
    # record / replay
    "RECORDING_FORMAT_VERSION": "recording",
    "PLACEHOLDER": "recording",
    "SECRET_FIELD_NAMES": "recording",
    "remove_secret_values": "recording",
    "RecordingSink": "recording",
    "RecordingProvider": "recording",
    "RecordingFileError": "recording",
    "read_recording_file": "replay",
    "ReplayProvider": "replay",
    "ReplayMismatch": "replay",
    "RecordedCallInterrupted": "replay",
    "find_first_difference": "replay",
    "NON_DETERMINISTIC_FIELD_NAMES": "replay",
    "use_recording": "scoped",
}

_TYPE_NAMES = (
    "AssistantMessage", "AssistantMessageEvent", "Context", "EventDone", "EventError",
    "EventStart", "EventTextDelta", "EventTextEnd", "EventTextStart", "EventThinkingDelta",
    "EventThinkingEnd", "EventThinkingStart", "EventToolCallDelta", "EventToolCallEnd",
    "EventToolCallStart", "ImageContent", "Message", "Model", "ModelCost", "SimpleStreamOptions",
    "StopReason", "StreamOptions", "TextContent", "ThinkingContent", "Tool", "ToolCall",
    "ToolResultMessage", "Usage", "UsageCost", "UserMessage",
)
_EXPORTS.update({name: "types" for name in _TYPE_NAMES})

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'openprogram.providers' has no attribute '{name}'")
    value = getattr(importlib.import_module(f".{module_name}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .api_registry import (  # noqa: F401
        ApiProvider,
        configure_provider_transform,
        get_api_provider,
        register_api_provider,
    )
    from .stream import complete, complete_simple, stream, stream_simple  # noqa: F401
    from .types import *  # noqa: F401,F403
