"""Entry point: ``openprogram COMMAND ...`` and ``python -m openprogram``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from openprogram.config import ConfigError

from .errors import EXIT_FAILURE, EXIT_USAGE, CliError
from .terminal import terminal_safe

#: command name -> module in this package with ``add_parser(subparsers)`` and ``run(args)``.
COMMANDS: dict[str, str] = {
    "run": "run_cmd",
    "config": "config_cmd",
    "models": "models_cmd",
    "demo": "demo_cmd",
    "recordings": "recordings.command",
    "proxy": "proxy_cmd",
}


def build_parser() -> argparse.ArgumentParser:
    from openprogram import __version__

    parser = argparse.ArgumentParser(
        prog="openprogram",
        description="LLM agents whose model calls can be recorded once and replayed offline.",
    )
    parser.add_argument("--version", action="version", version=f"openprogram {__version__}")
    parser.add_argument(
        "--profile",
        metavar="NAME",
        help="use the state folder <home>/profiles/NAME (also OPENPROGRAM_PROFILE)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for module_name in COMMANDS.values():
        importlib.import_module(f"{__package__}.{module_name}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    return _settled(_run(argv))


def _settled(exit_status: int) -> int:
    """Settle an ``update`` run of this process with the status the command ends with (a run
    that failed leaves its recording as it was; a rewrite that failed turns 0 into 1). Only a
    command that started the provider runtime has one to settle."""
    runtime = sys.modules.get("openprogram.providers.initialization")
    if runtime is None:
        return exit_status
    settled: int = runtime.finish_process_update(exit_status)
    return settled


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.profile:
        os.environ["OPENPROGRAM_PROFILE"] = args.profile
    try:
        return int(args.handler(args) or 0)
    except CliError as error:
        print(f"openprogram: {terminal_safe(error, multiline=True)}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("openprogram: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_FAILURE
    except ConfigError as error:
        print(f"openprogram: {terminal_safe(error, multiline=True)}", file=sys.stderr)
        return EXIT_USAGE if "invalid profile name" in str(error) else EXIT_FAILURE


if __name__ == "__main__":
    raise SystemExit(main())
