"""Import existing expenses from CSV into a household's ledger.

Format: a header ``date,amount,category,description,paid_by`` (``description`` and
``paid_by`` optional, column order free, extra columns ignored); ``;`` works as the
delimiter too (spreadsheets in pt-BR export that way). ``date`` is ``YYYY-MM-DD`` or
``DD/MM/YYYY``; ``amount`` is reais, ``45.90`` or ``"45,90"`` (quoted when the delimiter
is a comma) or ``1.234,56``.

Valid rows are imported and invalid ones reported with their line number; one bad line
does not stop the file. **Duplicates**: the import is idempotent — importing the same file
(or an overlapping export) twice records each row once. A row is identified by its
content plus its occurrence number within the file, so two identical rows in one file
(two coffees on the same day) are both kept, while re-imports are skipped and counted as
``duplicates``.
"""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

from agent.errors import LedgerError
from agent.ledger import Ledger, NewExpense, normalise_category
from agent.money import parse_money

__all__ = ["ImportLineError", "ImportReport", "ImportRow", "import_csv", "parse_expenses_csv"]

REQUIRED_COLUMNS = ("date", "amount", "category")
OPTIONAL_COLUMNS = ("description", "paid_by")
_BATCH = 500


@dataclass(frozen=True)
class ImportLineError:
    """A CSV line that was not imported, and why."""

    line: int
    message: str


@dataclass(frozen=True)
class ImportReport:
    """What an import did: rows read, imported, skipped as duplicates, and line errors."""

    household_id: str
    rows: int
    imported: int
    duplicates: int
    errors: list[ImportLineError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        return (
            f"{self.rows} rows: {self.imported} imported, {self.duplicates} already there, "
            f"{len(self.errors)} with errors"
        )


@dataclass(frozen=True)
class ImportRow:
    """A valid CSV line, ready to record."""

    line: int
    expense: NewExpense
    fingerprint: str


def _parse_date(text: str) -> date:
    value = text.strip()
    try:
        if "/" in value:
            return datetime.strptime(value, "%d/%m/%Y").date()
        return date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"bad date {text!r}: use YYYY-MM-DD or DD/MM/YYYY") from None


# The money and category checks explain themselves to the model in PT-BR; an operator
# importing a file reads English (the first matching phrase picks the explanation).
_AMOUNT_PROBLEMS = (
    ("negativo", "negative"),
    ("casas decimais", "more than 2 decimal places"),
    ("maior que zero", "not more than zero"),
    ("alto demais", "too large for a household expense"),
)
_CATEGORY_PROBLEMS = (("vazia", "empty"), ("longa demais", "too long"))


def _explained(problems: tuple[tuple[str, str], ...], reason: str, default: str) -> str:
    return next((english for pt, english in problems if pt in reason), default)


def _amount(text: str) -> int:
    try:
        return parse_money(text)
    except ValueError as exc:
        why = _explained(
            _AMOUNT_PROBLEMS, str(exc), 'not an amount in reais, e.g. 45.90 or "45,90"'
        )
        raise ValueError(f"bad amount {text!r}: {why}") from None


def _category(text: str) -> str:
    try:
        return normalise_category(text)
    except ValueError as exc:
        raise ValueError(
            f"bad category {text!r}: {_explained(_CATEGORY_PROBLEMS, str(exc), 'invalid')}"
        ) from None


def _fingerprint(expense: NewExpense, occurrence: int) -> str:
    key = "|".join(
        [
            expense.day.isoformat(),
            str(expense.amount_cents),
            expense.category,
            expense.description,
            expense.paid_by or "",
            str(occurrence),
        ]
    )
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def parse_expenses_csv(text: str) -> tuple[list[ImportRow], list[ImportLineError], int]:
    """Parse the CSV text: (valid rows, line errors, number of data rows).

    A header without the required columns raises :class:`LedgerError` (nothing to import).
    """
    text = text.removeprefix("\ufeff")
    first_line = text.split("\n", 1)[0]
    delimiter = ";" if ";" in first_line and "," not in first_line else ","
    reader = csv.DictReader(io.StringIO(text), delimiter=delimiter, restkey="__extra__")
    header = [(name or "").strip().lower() for name in reader.fieldnames or []]
    missing = [column for column in REQUIRED_COLUMNS if column not in header]
    if missing:
        raise LedgerError(
            f"the CSV header lacks the column(s) {', '.join(missing)}; expected: "
            "date,amount,category,description,paid_by"
        )
    reader.fieldnames = header
    rows: list[ImportRow] = []
    errors: list[ImportLineError] = []
    seen: Counter[tuple[object, ...]] = Counter()
    count = 0
    for record in reader:
        count += 1
        line = reader.line_num
        try:
            if record.get("__extra__"):
                raise ValueError(
                    'too many columns (an amount with a comma must be quoted, e.g. "45,90")'
                )
            if any(record.get(column) is None for column in REQUIRED_COLUMNS):
                raise ValueError("missing columns")
            description = (record.get("description") or "").strip()
            paid_by = (record.get("paid_by") or "").strip() or None
            if len(description) > 200:
                raise ValueError("description too long (200 characters at most)")
            expense = NewExpense(
                day=_parse_date(record["date"]),
                amount_cents=_amount(record["amount"]),
                category=_category(record["category"]),
                description=description,
                paid_by=paid_by,
            )
        except ValueError as exc:
            errors.append(ImportLineError(line, str(exc)))
            continue
        identity = (expense.day, expense.amount_cents, expense.category, description, paid_by)
        seen[identity] += 1
        rows.append(ImportRow(line, expense, _fingerprint(expense, seen[identity])))
    return rows, errors, count


async def import_csv(
    ledger: Ledger, path: Path | str, household_id: str, *, now: datetime | None = None
) -> ImportReport:
    """Import a CSV file into ``household_id``'s ledger (see the module doc for the format).

    Unreadable files and a bad header raise :class:`LedgerError`; bad lines are reported.
    """
    try:
        text = await asyncio.to_thread(Path(path).read_text, "utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise LedgerError(f"cannot read {path}: {exc}") from None
    rows, errors, count = parse_expenses_csv(text)
    imported = duplicates = 0
    for start in range(0, len(rows), _BATCH):
        batch = rows[start : start + _BATCH]
        ids = await ledger.record_expenses(
            household_id,
            [row.expense for row in batch],
            fingerprints=[row.fingerprint for row in batch],
            now=now,
        )
        new = sum(1 for entry_id in ids if entry_id is not None)
        imported += new
        duplicates += len(ids) - new
    return ImportReport(household_id, count, imported, duplicates, errors)
