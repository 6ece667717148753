"""Rendering agent events for a terminal: readable text, or JSON lines for scripts."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TextIO

import orjson

if TYPE_CHECKING:
    from openprogram.agent import AgentEvent


class TextRenderer:
    """Assistant text as it streams; tool calls and results on their own lines."""

    def __init__(
        self, *, show_thinking: bool = False, out: TextIO | None = None, indent: str = ""
    ) -> None:
        self.show_thinking = show_thinking
        self.out = out or sys.stdout
        self.indent = indent
        self.at_line_start = True
        self.transcript: list[str] = []

    def write(self, text: str) -> None:
        if text:
            self.transcript.append(text)
            if self.indent:
                lines = text.split("\n")
                text = "\n".join(
                    (self.indent + line if (i > 0 or self.at_line_start) and line else line)
                    for i, line in enumerate(lines)
                )
            self.out.write(text)
            self.out.flush()
            self.at_line_start = text.endswith("\n")

    @property
    def text(self) -> str:
        return "".join(self.transcript)

    def newline(self) -> None:
        if not self.at_line_start:
            self.write("\n")

    def handle(self, event: AgentEvent) -> None:
        if event.type == "message_update":
            inner = event.assistant_message_event
            if inner.type == "text_delta":
                self.write(inner.delta)
            elif inner.type == "thinking_delta" and self.show_thinking:
                sys.stderr.write(inner.delta)
                sys.stderr.flush()
        elif event.type == "message_end" and event.message.role == "assistant":
            self.newline()
        elif event.type == "tool_execution_start":
            self.newline()
            self.write(f"-> {event.tool_name}({orjson.dumps(event.args).decode()})\n")
        elif event.type == "tool_execution_end":
            text = "\n".join(getattr(block, "text", "[image]") for block in event.result.content)
            marker = "failed" if event.is_error else "returned"
            self.write(f"<- {event.tool_name} {marker}: {text}\n")


class JsonRenderer:
    """One JSON object per agent event. Streaming updates leave out the growing ``partial``
    snapshots so the output stays linear in the answer's length."""

    def handle(self, event: AgentEvent) -> None:
        data: dict[str, Any]
        if event.type == "message_update":
            data = {
                "type": "message_update",
                "assistant_message_event": event.assistant_message_event.model_dump(
                    mode="json", exclude={"partial"}
                ),
            }
        else:
            data = event.model_dump(mode="json")
        sys.stdout.write(orjson.dumps(data).decode() + "\n")
        sys.stdout.flush()
