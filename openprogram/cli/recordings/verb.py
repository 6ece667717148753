"""What a ``recordings`` verb is: its help, its arguments, its handler, and whether it changes
files or configuration; and the arguments several verbs share.

Each group module declares its verbs with ``@VERBS.verb(...)`` on a :class:`VerbGroup` of its
own, so a group needs nothing but this module to declare a verb, and :mod:`.command` lists
the groups' verbs without the groups knowing of each other.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

Handler = Callable[[argparse.Namespace], int]
Arguments = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class Verb:
    """One ``recordings`` verb: its help, its arguments, its handler, and whether it changes
    files or configuration (then a failure says that nothing was changed)."""

    name: str
    help: str
    handler: Handler
    arguments: Arguments
    mutating: bool = False


class VerbGroup:
    """The verbs of one group module, in the order it declares them."""

    def __init__(self) -> None:
        self.entries: list[Verb] = []

    def verb(
        self, name: str, help: str, *, arguments: Arguments | None = None, mutating: bool = False
    ) -> Callable[[Handler], Handler]:
        """Register the decorated handler as the verb ``name``, with its arguments."""

        def register(handler: Handler) -> Handler:
            self.entries.append(
                Verb(name, help, handler, arguments or (lambda parser: None), mutating)
            )
            return handler

        return register


def json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the stable JSON schema")


def confirm_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--yes", action="store_true", help="do not ask (needed when stdin is not a terminal)"
    )


def selector_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("selector", metavar="ID-or-PATH")
