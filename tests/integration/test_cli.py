"""The console script's own commands, as an operator runs them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import structlog

from gateway.cli import main


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """``main`` configures structlog onto this test's captured stderr: undo it after."""
    yield
    structlog.reset_defaults()


def test_bad_configuration_is_one_clear_line_per_value_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PORT", "99999")
    monkeypatch.setenv("LLM_BASE_URL", "ftp://nope")
    assert main(["worker"]) == 2
    err = capsys.readouterr().err
    assert "PORT: Input should be less than or equal to 65535" in err
    assert "LLM_BASE_URL: must start with http:// or https://" in err


def test_ledger_import_loads_a_households_csv(
    redis_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    csv = tmp_path / "gastos.csv"
    csv.write_text(
        "date,amount,category,description,paid_by\n"
        '2026-06-03,"45,90",mercado,feira,+5511999990000\n'
        "2026-06-04,120.00,luz,conta de luz,+5511988887777\n"
        "2026-06-05,abc,mercado,quebrada,+5511999990000\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("MEL_DATA_DIR", str(tmp_path / "mel"))
    code = main(["ledger", "import", str(csv), "--household", "casa-ana-bia"])
    captured = capsys.readouterr()
    assert code == 1  # one bad line: reported, the valid ones imported
    assert "2 imported" in captured.out
    assert f"{csv}:4:" in captured.err  # the bad line's number (the header is line 1)
    keys = [k.decode() for k in client.keys("mel:ledger:{casa-ana-bia}:*")]
    assert keys, "the household's ledger was written"
    client.close()
