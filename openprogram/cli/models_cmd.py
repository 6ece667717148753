"""``openprogram models list``: the built-in catalog and the configured custom models."""

from __future__ import annotations

import argparse

import orjson


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("models", help="list the models openprogram knows")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    listing = verbs.add_parser("list", help="list built-in and configured models")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from openprogram.providers.models import all_models

    models = all_models()
    if args.json:
        print(
            orjson.dumps(
                [m.model_dump(mode="json") for m in models], option=orjson.OPT_INDENT_2
            ).decode()
        )
        return 0
    rows = [("MODEL", "API", "CONTEXT", "$ IN/OUT PER 1M", "BASE URL")]
    for model in models:
        prices = f"{model.cost.input:g} / {model.cost.output:g}"
        rows.append(
            (
                f"{model.provider}/{model.id}",
                model.api,
                str(model.context_window),
                prices,
                model.base_url or "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    _print_compatible_servers()
    return 0


def _print_compatible_servers() -> None:
    """Which OpenAI-compatible servers the tests cover and what each does differently (see
    docs/vendors.md), so a user knows what to expect before pointing ``base_url`` at one."""
    from openprogram.providers.vendors.compatible import COMPATIBLE_SERVERS

    print()
    print("OpenAI-compatible servers covered by tests (api openai-completions):")
    for server in COMPATIBLE_SERVERS:
        print(f"  {server.name}: {'; '.join(server.quirks)}")
