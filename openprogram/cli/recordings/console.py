"""What the verbs print besides their reports: lines escaped for the terminal, JSON, the
warning before content, and the confirmation asked on a terminal (never guessed on a pipe)."""

from __future__ import annotations

import sys
from typing import Any

from ..errors import EXIT_USAGE, CliError
from ..terminal import terminal_safe


def say(text: str, file: Any = None) -> None:
    """Print a line that may hold a file name or text from a recording, escaped for the
    terminal (see :mod:`openprogram.cli.terminal`)."""
    print(terminal_safe(text), file=file or sys.stdout)


def print_json(data: Any, indent: bool = True) -> None:
    import orjson

    option = orjson.OPT_INDENT_2 if indent else 0
    sys.stdout.write(orjson.dumps(data, option=option).decode() + "\n")


def warn_content() -> None:
    print(
        "warning: recordings hold prompts, model outputs, tool results and personal data "
        "(credentials are redacted); treat this output as confidential",
        file=sys.stderr,
    )


def confirm(
    assume_yes: bool,
    expected: str,
    prompt: str,
    action: str,
    unchanged: str = "nothing was deleted",
) -> None:
    """Ask on a terminal; never guess on a pipe (exit 2 without --yes)."""
    if assume_yes:
        return
    stdin = sys.stdin
    if stdin is None or not stdin.isatty():
        raise CliError(
            f"refusing to {action} without confirmation: stdin is not a terminal; add --yes",
            EXIT_USAGE,
        )
    print(prompt, end="", file=sys.stderr, flush=True)
    answer = stdin.readline()
    if answer.strip() != expected:
        raise CliError(f"not confirmed (expected '{expected}'); {unchanged}", EXIT_USAGE)
