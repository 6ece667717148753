"""``openprogram run PROMPT``: one agent run with the configured model, streamed to the
terminal (or as JSON lines with ``--json``)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from .errors import EXIT_FAILURE, EXIT_USAGE, CliError

if TYPE_CHECKING:  # imported where used: ``openprogram recordings`` must start fast
    from openprogram.agent import AgentTool
    from openprogram.providers.types import Model

DEFAULT_MODEL = "faux/echo"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run the agent on a prompt",
        description=(
            "Run the agent loop on PROMPT with the configured model (default faux/echo, which "
            "needs no key: it echoes, and '/TOOL ARGS' lines make it call a tool)."
        ),
    )
    parser.add_argument("prompt", help="what to ask")
    parser.add_argument(
        "--model",
        metavar="PROVIDER/ID",
        help="model to use (default: config default_model, else faux/echo)",
    )
    parser.add_argument("--system", metavar="TEXT", help="system prompt")
    parser.add_argument(
        "--tool",
        action="append",
        metavar="NAME",
        help="enable a built-in tool (calculator, read_file, list_files); repeatable. "
        "Default: config tools.enabled, else calculator",
    )
    parser.add_argument("--no-tools", action="store_true", help="run without tools")
    parser.add_argument(
        "--max-turns", type=int, metavar="N", help="stop after N model calls (default 50)"
    )
    parser.add_argument("--json", action="store_true", help="print agent events as JSON lines")
    parser.add_argument(
        "--thinking", action="store_true", help="also print the model's thinking (to stderr)"
    )
    parser.set_defaults(handler=run)


#: Configuration keys ``run`` reads, checked the way ``config set`` checks them: a value
#: edited by hand into config.json is reported by key, not as a traceback.
RUN_SETTINGS = ("default_model", "models", "tools.enabled", "run.max_turns")


def run(args: argparse.Namespace) -> int:
    from openprogram.config import load_config

    settings = load_config()
    _check_settings(settings)
    model = _resolve_model(
        args.model or settings.get("default_model") or DEFAULT_MODEL, args.model is not None
    )
    tools = _resolve_tools(args, settings)
    max_turns = args.max_turns or (settings.get("run") or {}).get("max_turns") or 50
    if max_turns < 1:
        raise CliError("--max-turns must be at least 1", EXIT_USAGE)
    import asyncio

    return asyncio.run(_run(args, model, tools, max_turns))


def _check_settings(settings: dict[str, Any]) -> None:
    from openprogram.config import ConfigError, config_path, validate_value

    for key in RUN_SETTINGS:
        value: Any = settings
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is None:
            continue
        try:
            validate_value(key, value)
        except ConfigError as error:
            raise CliError(
                f"{config_path()}: {error}; fix it with 'openprogram config set {key} VALUE' "
                f"or remove it with 'openprogram config unset {key}'"
            ) from None


def _resolve_model(ref: str, from_option: bool) -> Model:
    from openprogram.providers.models import get_model

    try:
        return get_model(ref)
    except LookupError as error:
        where = "--model" if from_option else "config default_model"
        raise CliError(f"{where}: {error}", EXIT_USAGE) from None


def _resolve_tools(args: argparse.Namespace, settings: dict[str, Any]) -> list[AgentTool]:
    from openprogram.tools import DEFAULT_TOOL_NAMES, builtin_tools

    if args.no_tools:
        return []
    names = args.tool or (settings.get("tools") or {}).get("enabled") or list(DEFAULT_TOOL_NAMES)
    try:
        return builtin_tools(names)
    except ValueError as error:
        raise CliError(f"--tool: {error}", EXIT_USAGE) from None


async def _run(
    args: argparse.Namespace, model: Model, tools: list[AgentTool], max_turns: int
) -> int:
    from openprogram.agent import AgentContext, AgentLoopConfig, agent_loop
    from openprogram.providers.types import UserMessage
    from openprogram.recordings.file.format import RecordingFileError

    from .run_render import JsonRenderer, TextRenderer

    context = AgentContext(system_prompt=args.system, tools=tools)
    config = AgentLoopConfig(model=model, max_turns=max_turns)
    renderer = JsonRenderer() if args.json else TextRenderer(show_thinking=args.thinking)
    try:
        async for event in agent_loop([UserMessage(content=args.prompt)], context, config):
            renderer.handle(event)
    except AssertionError as error:  # ReplayMismatch and friends: a diagnosis, not a crash
        raise CliError(str(error)) from None
    except RecordingFileError as error:  # e.g. the disk filled up while recording
        raise CliError(
            f"{error}. Free some space and record anew, or stop recording with "
            "'openprogram recordings off'"
        ) from None
    except (LookupError, RuntimeError) as error:
        raise CliError(str(error)) from None
    final = next((m for m in reversed(context.messages) if m.role == "assistant"), None)
    if final is not None and final.stop_reason in ("error", "aborted"):
        if isinstance(renderer, TextRenderer):
            renderer.newline()
        print(f"openprogram: model call failed: {final.error_message}", file=sys.stderr)
        return EXIT_FAILURE
    return 0
