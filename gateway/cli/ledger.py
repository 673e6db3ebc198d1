"""``mel-gateway ledger import FILE.csv --household H``."""

from __future__ import annotations

import sys
from pathlib import Path

from agent import import_csv
from gateway.bootstrap import bootstrap
from gateway.settings import Settings

__all__ = ["run_ledger_import"]


async def run_ledger_import(settings: Settings, path: Path, household: str) -> int:
    async with bootstrap(settings, "cli") as c:
        report = await import_csv(c.ledger, path, household)
    print(report.summary())
    for error in report.errors:
        print(f"  {path}:{error.line}: {error.message}", file=sys.stderr)
    return 0 if not report.errors else 1
