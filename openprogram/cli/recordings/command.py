"""``openprogram recordings VERB``: the verbs wired into argparse, and the dispatch.

Every verb is one handler declared together with its arguments in its group's module
(``openprogram recordings --help`` lists them, in the order of the groups here). The handlers
parse and print; what is active, what may be deleted, what a folder holds and how a file is
repaired are the library's (:mod:`openprogram.recordings.store`). These commands manage files
and configuration directly and never initialise the provider runtime, so they work whatever
the configuration holds: they are how a user recovers from a record/replay setting that blocks
every provider call. They also start fast: at load time these modules import only the standard
library and the light state, store and activation modules, and pydantic (through the strict
reader) only when a command has to read a recording.
"""

from __future__ import annotations

import argparse

from ..errors import EXIT_FAILURE, EXIT_USAGE, CliError
from . import compare, inspecting, lifecycle, maintain, page
from .verb import Verb

#: The verbs, in the order ``--help`` lists them (and docs/recordings-cli.md's usage block).
VERBS: dict[str, Verb] = {
    entry.name: entry
    for group in (lifecycle, inspecting, compare, page, maintain)
    for entry in group.VERBS.entries
}


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "recordings",
        help="record model calls, replay them offline, and manage recordings",
        description=(
            "Manage record/replay of model calls. Configuration changes take effect at the next "
            "start. Recordings hold prompts and outputs (credentials are redacted)."
        ),
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    for entry in VERBS.values():
        entry.arguments(verbs.add_parser(entry.name, help=entry.help))
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from openprogram.config import ConfigError

    entry = VERBS[args.verb]
    try:
        return entry.handler(args)
    except ConfigError as error:
        usage = "invalid profile name" in str(error)
        suffix = "; nothing was changed" if entry.mutating else ""
        raise CliError(f"{error}{suffix}", EXIT_USAGE if usage else EXIT_FAILURE) from None
