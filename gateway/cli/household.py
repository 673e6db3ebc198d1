"""``mel-gateway household link|unlink|show``: the two partners share one ledger."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from gateway.bootstrap import bootstrap
from gateway.households import household_of, link, unlink
from gateway.settings import Settings

__all__ = ["register"]


def register(sub: Any) -> None:
    household = sub.add_parser("household", help="link a couple's two numbers to one ledger")
    hsub = household.add_subparsers(dest="household_command", required=True)
    ln = hsub.add_parser("link", help="make these numbers share one household ledger")
    ln.add_argument("numbers", nargs="+", metavar="NUMBER", help="WhatsApp numbers, +55…")
    ln.add_argument(
        "--household", help="its id (default: the first number's household, kept as it is)"
    )
    un = hsub.add_parser("unlink", help="take a number out of its household")
    un.add_argument("number", metavar="NUMBER")
    show = hsub.add_parser("show", help="a number's household and its members")
    show.add_argument("number", metavar="NUMBER_OR_HOUSEHOLD")
    for parser in (ln, un, show):
        parser.add_argument("--json", action="store_true", help="one JSON document")
    household.set_defaults(run=lambda settings, args: asyncio.run(run_household(settings, args)))


async def run_household(settings: Settings, args: argparse.Namespace) -> int:
    async with bootstrap(settings, "cli") as c:
        if args.household_command == "link":
            found = await link(c.ledger, args.numbers, args.household)
        elif args.household_command == "unlink":
            left = await unlink(c.ledger, args.number)
            if args.json:
                print(json.dumps({"number": args.number, "left": left}))
            else:
                print(f"{args.number} left {left}" if left else f"{args.number}: in no household")
            return 0
        else:
            found = await household_of(c.ledger, args.number)
    if args.json:
        print(json.dumps(found.as_json()))
    else:
        print(f"household {found.id}: {', '.join(found.members)}")
    return 0
