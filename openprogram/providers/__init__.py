"""The provider layer: typed messages, the streaming event protocol, the API registry, the
stream facade, and record/replay at the registry boundary.

Importing this package only defines names. It registers no provider, reads no configuration,
opens no recording and installs no transform; that happens in
``initialize_provider_runtime()``, on the first provider lookup. Names are resolved lazily so
that the import stays fast and pulls in no vendor SDK.

``openprogram.providers.stream`` is the facade's function, however modules are imported: the
facade lives in :mod:`.facade`, and the old module path ``openprogram.providers.stream`` (which
docs/tutorial.md imports from) never replaces the function on the package, as importing a
submodule otherwise would (see :class:`_Package`).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    # registry and facade
    "ApiProvider": "api_registry",
    "register_api_provider": "api_registry",
    "get_api_provider": "api_registry",
    "configure_provider_transform": "api_registry",
    "stream": "facade",
    "stream_simple": "facade",
    "complete": "facade",
    "complete_simple": "facade",
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
    "Fault": "faults",
    "parse_fault": "faults",
    "ReplayOptions": "replay",
}

_TYPE_NAMES = (
    "AssistantMessage",
    "AssistantMessageEvent",
    "Context",
    "EventDone",
    "EventError",
    "EventStart",
    "EventTextDelta",
    "EventTextEnd",
    "EventTextStart",
    "EventThinkingDelta",
    "EventThinkingEnd",
    "EventThinkingStart",
    "EventToolCallDelta",
    "EventToolCallEnd",
    "EventToolCallStart",
    "ImageContent",
    "Message",
    "Model",
    "ModelCost",
    "SimpleStreamOptions",
    "StopReason",
    "StreamOptions",
    "TextContent",
    "ThinkingContent",
    "Tool",
    "ToolCall",
    "ToolResultMessage",
    "Usage",
    "UsageCost",
    "UserMessage",
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


#: Submodules whose name is also a function the package exports: the function wins.
_SHADOWED_SUBMODULES = frozenset({"stream"})


class _Package(types.ModuleType):
    """This package's module type. The import system sets every submodule it imports as an
    attribute of its package; for ``openprogram.providers.stream`` that would replace the
    facade function of the same name (the contract's ``openprogram.providers.stream``) with
    the module, depending on what some code happened to import first. The module stays in
    ``sys.modules``, so ``from openprogram.providers.stream import complete`` still works."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SHADOWED_SUBMODULES and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    # The names __getattr__ resolves, each re-exported explicitly (``X as X``) so that a
    # type checker sees its real type; nothing here is imported at run time.
    from .api_registry import ApiProvider as ApiProvider
    from .api_registry import configure_provider_transform as configure_provider_transform
    from .api_registry import get_api_provider as get_api_provider
    from .api_registry import register_api_provider as register_api_provider
    from .credentials import resolve_provider_key as resolve_provider_key
    from .facade import complete as complete
    from .facade import complete_simple as complete_simple
    from .facade import stream as stream
    from .facade import stream_simple as stream_simple
    from .faults import Fault as Fault
    from .faults import parse_fault as parse_fault
    from .faux import FauxProvider as FauxProvider
    from .faux import FauxResponse as FauxResponse
    from .faux import faux_error as faux_error
    from .faux import faux_text as faux_text
    from .faux import faux_thinking as faux_thinking
    from .faux import faux_tool_call as faux_tool_call
    from .faux import faux_tool_calls as faux_tool_calls
    from .initialization import (
        ProviderRuntimeInitializationError as ProviderRuntimeInitializationError,
    )
    from .initialization import initialize_provider_runtime as initialize_provider_runtime
    from .lanes import current_lane as current_lane
    from .lanes import lane as lane
    from .models import get_model as get_model
    from .recording import PLACEHOLDER as PLACEHOLDER
    from .recording import RECORDING_FORMAT_VERSION as RECORDING_FORMAT_VERSION
    from .recording import SECRET_FIELD_NAMES as SECRET_FIELD_NAMES
    from .recording import RecordingFileError as RecordingFileError
    from .recording import RecordingProvider as RecordingProvider
    from .recording import RecordingSink as RecordingSink
    from .recording import remove_secret_values as remove_secret_values
    from .register import register_builtins as register_builtins
    from .replay import NON_DETERMINISTIC_FIELD_NAMES as NON_DETERMINISTIC_FIELD_NAMES
    from .replay import RecordedCallInterrupted as RecordedCallInterrupted
    from .replay import ReplayMismatch as ReplayMismatch
    from .replay import ReplayOptions as ReplayOptions
    from .replay import ReplayProvider as ReplayProvider
    from .replay import find_first_difference as find_first_difference
    from .replay import read_recording_file as read_recording_file
    from .scoped import use_recording as use_recording
    from .types import AssistantMessage as AssistantMessage
    from .types import AssistantMessageEvent as AssistantMessageEvent
    from .types import Context as Context
    from .types import EventDone as EventDone
    from .types import EventError as EventError
    from .types import EventStart as EventStart
    from .types import EventTextDelta as EventTextDelta
    from .types import EventTextEnd as EventTextEnd
    from .types import EventTextStart as EventTextStart
    from .types import EventThinkingDelta as EventThinkingDelta
    from .types import EventThinkingEnd as EventThinkingEnd
    from .types import EventThinkingStart as EventThinkingStart
    from .types import EventToolCallDelta as EventToolCallDelta
    from .types import EventToolCallEnd as EventToolCallEnd
    from .types import EventToolCallStart as EventToolCallStart
    from .types import ImageContent as ImageContent
    from .types import Message as Message
    from .types import Model as Model
    from .types import ModelCost as ModelCost
    from .types import SimpleStreamOptions as SimpleStreamOptions
    from .types import StopReason as StopReason
    from .types import StreamOptions as StreamOptions
    from .types import TextContent as TextContent
    from .types import ThinkingContent as ThinkingContent
    from .types import Tool as Tool
    from .types import ToolCall as ToolCall
    from .types import ToolResultMessage as ToolResultMessage
    from .types import Usage as Usage
    from .types import UsageCost as UsageCost
    from .types import UserMessage as UserMessage
