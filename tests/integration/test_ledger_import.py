"""CSV import into the ledger: valid rows in, bad lines reported, re-imports idempotent."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.errors import LedgerError
from agent.ledger import Ledger
from agent.ledger_import import ImportLineError, import_csv

HH = "casa-1"

CSV = """\
date,amount,category,description,paid_by
2026-06-01,"45,90",Mercado,feira,Ana
2026-06-02,120.00,aluguel,,Bia
2026-06-02,45,90,mercado,sem aspas,Ana
2026-06-31,10.00,lazer,cinema,Ana
2026-06-03,-5.00,lazer,estorno,Ana
2026-06-03,12.345,lazer,três casas,Ana
2026-06-04,"1.234,56",viagem,passagens,
03/06/2026,8.50,padaria,pão,Bia
2026-06-05,3.00,,sem categoria,Ana
2026-06-05,3.50,café,,Ana
2026-06-05,3.50,café,,Ana
"""


def _write(tmp_path: Path, text: str, name: str = "gastos.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return path


async def test_valid_rows_are_imported_and_bad_lines_reported(
    ledger: Ledger, tmp_path: Path
) -> None:
    report = await import_csv(ledger, _write(tmp_path, CSV), HH)

    assert (report.rows, report.imported, report.duplicates) == (11, 6, 0)
    assert not report.ok
    assert [error.line for error in report.errors] == [4, 5, 6, 7, 10]
    by_line = {error.line: error.message for error in report.errors}
    assert "must be quoted" in by_line[4]
    assert "bad date '2026-06-31'" in by_line[5]
    assert "negative" in by_line[6]
    assert "more than 2 decimal places" in by_line[7]
    assert "bad category" in by_line[10]
    assert "empty" in by_line[10]
    assert report.summary() == "11 rows: 6 imported, 0 already there, 5 with errors"

    june = await ledger.month_spending(HH, "2026-06")
    assert june.by_category == {
        "mercado": 4590,
        "aluguel": 12000,
        "viagem": 123456,
        "padaria": 850,
        "café": 700,  # two identical rows in one file are two real coffees
    }
    expenses = await ledger.expenses(HH, "2026-06")
    feira = next(e for e in expenses if e.description == "feira")
    assert (feira.paid_by, feira.day.isoformat()) == ("Ana", "2026-06-01")
    assert next(e for e in expenses if e.category == "viagem").paid_by is None


async def test_importing_the_same_file_again_changes_nothing(
    ledger: Ledger, tmp_path: Path
) -> None:
    path = _write(tmp_path, CSV)
    await import_csv(ledger, path, HH)

    again = await import_csv(ledger, path, HH)

    assert (again.imported, again.duplicates, len(again.errors)) == (0, 6, 5)
    assert (await ledger.month_spending(HH, "2026-06")).total_cents == 141_596


async def test_an_overlapping_export_adds_only_the_new_rows(ledger: Ledger, tmp_path: Path) -> None:
    header = "date,amount,category,description,paid_by\n"
    rows = ["2026-06-05,3.50,café,,Ana\n", "2026-06-06,20.00,farmácia,,Bia\n"]
    await import_csv(ledger, _write(tmp_path, header + rows[0], "a.csv"), HH)

    report = await import_csv(ledger, _write(tmp_path, header + "".join(rows), "b.csv"), HH)

    assert (report.imported, report.duplicates) == (1, 1)
    # the same file imported into another household is new there
    other = await import_csv(ledger, tmp_path / "b.csv", "casa-2")
    assert other.imported == 2


async def test_semicolons_a_bom_column_order_and_extra_columns(
    ledger: Ledger, tmp_path: Path
) -> None:
    text = (
        "\ufeffCategory;Amount;Date;Banco\n"
        "mercado;45,90;2026-06-01;nubank\n"
        "lazer;10;01/06/2026;itau\n"
    )

    report = await import_csv(ledger, _write(tmp_path, text), HH)

    assert (report.imported, report.errors) == (2, [])
    assert (await ledger.month_spending(HH, "2026-06")).total_cents == 5590


async def test_a_short_line_is_reported(ledger: Ledger, tmp_path: Path) -> None:
    text = "date,amount,category\n2026-06-01,10\n2026-06-01,10,ok\n"

    report = await import_csv(ledger, _write(tmp_path, text), HH)

    assert report.errors == [ImportLineError(2, "missing columns")]
    assert report.imported == 1


async def test_a_header_without_the_required_columns_imports_nothing(
    ledger: Ledger, tmp_path: Path
) -> None:
    with pytest.raises(LedgerError, match="lacks the column\\(s\\) amount"):
        await import_csv(ledger, _write(tmp_path, "date,valor,category\n2026-06-01,1,x\n"), HH)
    with pytest.raises(LedgerError, match="cannot read"):
        await import_csv(ledger, tmp_path / "missing.csv", HH)
    assert await ledger.months(HH) == []


async def test_a_large_file_is_imported_in_batches(ledger: Ledger, tmp_path: Path) -> None:
    lines = [f"2026-05-{1 + i % 28:02d},{i % 100}.01,cat{i % 7},item {i}," for i in range(1203)]
    path = _write(tmp_path, "date,amount,category,description,paid_by\n" + "\n".join(lines))

    report = await import_csv(ledger, path, HH)

    assert (report.rows, report.imported, report.errors) == (1203, 1203, [])
    spending = await ledger.month_spending(HH, "2026-05")
    assert spending.expense_count == 1203
    assert spending.total_cents == sum((i % 100) * 100 + 1 for i in range(1203))
