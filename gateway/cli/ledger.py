"""``mel-gateway ledger import FILE.csv --household H``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from agent import import_csv
from gateway.bootstrap import bootstrap
from gateway.settings import Settings

__all__ = ["register", "run_ledger_import"]


def register(sub: Any) -> None:
    ledger = sub.add_parser("ledger", help="household ledger tools")
    lsub = ledger.add_subparsers(dest="ledger_command", required=True)
    imp = lsub.add_parser("import", help="load expenses from a CSV file")
    imp.add_argument("file", type=Path)
    imp.add_argument("--household", required=True, help="household id (e.g. a phone number)")
    imp.set_defaults(
        run=lambda settings, args: asyncio.run(
            run_ledger_import(settings, args.file, args.household)
        )
    )


async def run_ledger_import(settings: Settings, path: Path, household: str) -> int:
    async with bootstrap(settings, "cli") as c:
        report = await import_csv(c.ledger, path, household)
    print(report.summary())
    for error in report.errors:
        print(f"  {path}:{error.line}: {error.message}", file=sys.stderr)
    return 0 if not report.errors else 1
