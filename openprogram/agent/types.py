"""The agent loop's own vocabulary: tools, their results, the loop's configuration and the
events it emits."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..providers.types import (
    AssistantMessage,
    AssistantMessageEvent,
    ImageContent,
    Message,
    Model,
    SimpleStreamOptions,
    TextContent,
    ToolResultMessage,
    UserContent,
)


class AgentToolResult(BaseModel):
    """What a tool returns. ``content`` is what the model sees; ``details`` is for the
    application (UIs, logs) and is not sent to the model."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    content: list[UserContent] = Field(default_factory=list)
    details: Any = None
    is_error: bool = False

    @classmethod
    def text(cls, text: str, *, is_error: bool = False, details: Any = None) -> AgentToolResult:
        return cls(content=[TextContent(text=text)], is_error=is_error, details=details)


ToolUpdate = Callable[[AgentToolResult], None]
ToolExecute = Callable[
    [str, dict[str, Any], asyncio.Event | None, ToolUpdate], Awaitable[AgentToolResult]
]


class AgentTool(BaseModel):
    """A tool the model may call. ``execute(tool_call_id, args, signal, on_update)`` runs only
    after ``args`` validated against ``parameters`` (a JSON Schema object)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    execute: ToolExecute
    label: str | None = None


class AgentContext(BaseModel):
    """The conversation the loop extends. ``messages`` grows as the run goes on."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    system_prompt: str | None = None
    messages: list[Message] = Field(default_factory=list)
    tools: list[AgentTool] = Field(default_factory=list)


class AgentLoopConfig(SimpleStreamOptions):
    """The model to call, every :class:`SimpleStreamOptions` field, and the turn limit."""

    model: Model
    max_turns: int = Field(default=50, ge=1)

    def stream_options(self, signal: asyncio.Event | None) -> SimpleStreamOptions:
        fields = {name: getattr(self, name) for name in SimpleStreamOptions.model_fields}
        fields["signal"] = signal if signal is not None else self.signal
        return SimpleStreamOptions.model_construct(**fields)


# ----------------------------------------------------------------------------- events


class _Event(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)


class AgentStartEvent(_Event):
    type: Literal["agent_start"] = "agent_start"


class TurnStartEvent(_Event):
    type: Literal["turn_start"] = "turn_start"
    turn: int


class MessageStartEvent(_Event):
    type: Literal["message_start"] = "message_start"
    message: Message


class MessageUpdateEvent(_Event):
    type: Literal["message_update"] = "message_update"
    message: AssistantMessage
    assistant_message_event: AssistantMessageEvent


class MessageEndEvent(_Event):
    type: Literal["message_end"] = "message_end"
    message: Message


class ToolExecutionStartEvent(_Event):
    type: Literal["tool_execution_start"] = "tool_execution_start"
    tool_call_id: str
    tool_name: str
    args: dict[str, Any]


class ToolExecutionUpdateEvent(_Event):
    type: Literal["tool_execution_update"] = "tool_execution_update"
    tool_call_id: str
    tool_name: str
    partial_result: AgentToolResult


class ToolExecutionEndEvent(_Event):
    type: Literal["tool_execution_end"] = "tool_execution_end"
    tool_call_id: str
    tool_name: str
    result: AgentToolResult
    is_error: bool


class TurnEndEvent(_Event):
    type: Literal["turn_end"] = "turn_end"
    message: AssistantMessage
    tool_results: list[ToolResultMessage]


class AgentEndEvent(_Event):
    type: Literal["agent_end"] = "agent_end"
    messages: list[Message]


AgentEvent = (
    AgentStartEvent
    | TurnStartEvent
    | MessageStartEvent
    | MessageUpdateEvent
    | MessageEndEvent
    | ToolExecutionStartEvent
    | ToolExecutionUpdateEvent
    | ToolExecutionEndEvent
    | TurnEndEvent
    | AgentEndEvent
)

__all__ = [
    "AgentContext",
    "AgentEndEvent",
    "AgentEvent",
    "AgentLoopConfig",
    "AgentStartEvent",
    "AgentTool",
    "AgentToolResult",
    "ImageContent",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "ToolExecutionEndEvent",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "TurnEndEvent",
    "TurnStartEvent",
]
