"""Built-in tools for ``openprogram run``: safe by construction.

``calculator`` evaluates arithmetic through an AST whitelist (no names, no calls, bounded
exponents). ``read_file`` and ``list_files`` are read-only and confined to the folder the
command runs in: a path that resolves outside it (``..``, an absolute path, a symlink that
leads out) is refused.
"""

from __future__ import annotations

import ast
import asyncio
import operator
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .agent.types import AgentTool, AgentToolResult, ToolUpdate

MAX_READ_BYTES = 64 * 1024
MAX_LISTED = 200
MAX_EXPONENT = 10_000

_BINARY: dict[type[ast.operator], Callable[[int | float, int | float], int | float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[int | float], int | float]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def evaluate_arithmetic(expression: str) -> int | float:
    """Evaluate ``+ - * / // % **`` and parentheses over numbers; ValueError otherwise."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from None
    return _evaluate(tree.body)


def _evaluate(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and (type(node.value) is int or type(node.value) is float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError(f"exponent {right} is too large (limit {MAX_EXPONENT})")
        try:
            return _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ValueError("division by zero") from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    raise ValueError(f"unsupported element in expression: {ast.unparse(node)!r}")


def _format_number(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return str(value)


async def _calculator(
    tool_call_id: str, args: dict[str, Any], signal: asyncio.Event | None, on_update: ToolUpdate
) -> AgentToolResult:
    try:
        return AgentToolResult.text(_format_number(evaluate_arithmetic(args["expression"])))
    except ValueError as error:
        return AgentToolResult.text(str(error), is_error=True)


def confined_path(root: Path, relative: str) -> Path:
    """``relative`` resolved inside ``root``; ValueError if it leads anywhere else."""
    root = root.resolve()
    candidate = (root / relative).resolve()
    if candidate != root and root not in candidate.parents:
        raise ValueError(f"'{relative}' is outside the working folder; use a path inside {root}")
    return candidate


def _read_file_tool(root: Path) -> AgentTool:
    async def read_file(
        tool_call_id: str, args: dict[str, Any], signal: asyncio.Event | None, on_update: ToolUpdate
    ) -> AgentToolResult:
        try:
            path = confined_path(root, args["path"])
        except ValueError as error:
            return AgentToolResult.text(str(error), is_error=True)
        if not path.is_file():
            return AgentToolResult.text(f"'{args['path']}' is not a file", is_error=True)
        with open(path, "rb") as handle:  # never more than the limit, however big the file
            data = handle.read(MAX_READ_BYTES + 1)
        text = data[:MAX_READ_BYTES].decode("utf-8", errors="replace")
        if len(data) > MAX_READ_BYTES:
            text += f"\n[truncated at {MAX_READ_BYTES} bytes]"
        return AgentToolResult.text(text)

    return AgentTool(
        name="read_file",
        description="Read a UTF-8 text file inside the working folder (first 64 KiB).",
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "path relative to the working folder"}
            },
            "required": ["path"],
            "additionalProperties": False,
        },
        execute=read_file,
    )


def _list_files_tool(root: Path) -> AgentTool:
    async def list_files(
        tool_call_id: str, args: dict[str, Any], signal: asyncio.Event | None, on_update: ToolUpdate
    ) -> AgentToolResult:
        try:
            folder = confined_path(root, args.get("path", "."))
        except ValueError as error:
            return AgentToolResult.text(str(error), is_error=True)
        if not folder.is_dir():
            return AgentToolResult.text(f"'{args.get('path', '.')}' is not a folder", is_error=True)
        names = sorted(entry.name + ("/" if entry.is_dir() else "") for entry in folder.iterdir())
        shown = names[:MAX_LISTED]
        if len(names) > MAX_LISTED:
            shown.append(f"[{len(names) - MAX_LISTED} more]")
        return AgentToolResult.text("\n".join(shown) or "(empty)")

    return AgentTool(
        name="list_files",
        description="List the entries of a folder inside the working folder.",
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "folder relative to the working folder"}
            },
            "additionalProperties": False,
        },
        execute=list_files,
    )


CALCULATOR = AgentTool(
    name="calculator",
    description="Evaluate an arithmetic expression (+ - * / // % ** and parentheses).",
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "e.g. (2 + 3) * 7"}},
        "required": ["expression"],
        "additionalProperties": False,
    },
    execute=_calculator,
)

BUILTIN_TOOL_NAMES = ("calculator", "read_file", "list_files")
DEFAULT_TOOL_NAMES = ("calculator",)


def builtin_tools(names: list[str] | tuple[str, ...], root: Path | None = None) -> list[AgentTool]:
    """The named built-in tools; file tools are confined to ``root`` (default: cwd)."""
    if isinstance(names, str):  # iterating it would name one tool per letter
        raise ValueError(f"tool names must be a list, e.g. ['{names}'], not the string '{names}'")
    root = root or Path.cwd()
    factories: dict[str, Callable[[], AgentTool]] = {
        "calculator": lambda: CALCULATOR,
        "read_file": lambda: _read_file_tool(root),
        "list_files": lambda: _list_files_tool(root),
    }
    unknown = [name for name in names if name not in factories]
    if unknown:
        raise ValueError(
            f"unknown tool {', '.join(unknown)}; built-in tools: {', '.join(BUILTIN_TOOL_NAMES)}"
        )
    return [factories[name]() for name in dict.fromkeys(names)]
