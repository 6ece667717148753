"""``openprogram config get|set|unset|list``: edit the profile's ``config.json``."""

from __future__ import annotations

import argparse
import sys

import orjson

from .errors import EXIT_USAGE, CliError


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "config", help="read and change the configuration (applies at the next start)"
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    get = verbs.add_parser("get", help="print one value as JSON")
    get.add_argument("key")
    set_ = verbs.add_parser("set", help="set a value (JSON, or a plain string)")
    set_.add_argument("key")
    set_.add_argument("value")
    unset = verbs.add_parser("unset", help="remove a value")
    unset.add_argument("key")
    verbs.add_parser("list", help="print the whole configuration")
    verbs.add_parser("path", help="print where the configuration file is")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from openprogram import config

    if args.verb == "path":
        print(config.config_path())
        return 0
    if args.verb == "list":
        print(
            orjson.dumps(
                config.load_config(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
            ).decode()
        )
        return 0
    if args.verb == "get":
        try:
            value = config.get_value(config.load_config(), args.key)
        except KeyError:
            raise CliError(f"'{args.key}' is not set in {config.config_path()}") from None
        print(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())
        return 0
    if args.verb == "set":
        try:
            value = config.validate_value(args.key, config.parse_cli_value(args.value))
        except config.ConfigError as error:
            raise CliError(f"{error}; nothing was written", EXIT_USAGE) from None
        try:
            with config.config_transaction() as current:
                config.set_value(current, args.key, value)
        except config.ConfigError as error:
            raise CliError(f"{error}; nothing was written", EXIT_USAGE) from None
        print(f"set {args.key} in {config.config_path()}; takes effect at the next start")
        return 0
    # unset
    with config.config_transaction() as current:
        removed = config.unset_value(current, args.key)
    if not removed:
        print(f"{args.key} was not set", file=sys.stderr)
        return 0
    print(f"removed {args.key} from {config.config_path()}; takes effect at the next start")
    return 0
