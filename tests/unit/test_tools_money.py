"""Money in the tools: reais in, integer cents inside, "R$ 1.234,56" out. Never a float."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.money import MAX_CENTS, format_brl, money_fields, parse_money


@pytest.mark.parametrize(
    ("value", "cents"),
    [
        ("45.90", 4590),
        ("45,90", 4590),
        ("45,9", 4590),
        ("45", 4500),
        (" R$ 1.234,56 ", 123456),
        ("1,234.56", 123456),
        ("1.234.567", 123456700),
        ("1.234.567,89", 123456789),
        ("R$\u00a012", 1200),
        ("+7.50", 750),
        ("0,05", 5),
        (Decimal("45.90"), 4590),
        (Decimal("45.900"), 4590),
        (45, 4500),
    ],
)
def test_amounts_in_reais_become_cents(value: object, cents: int) -> None:
    assert parse_money(value) == cents


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (45.9, "texto"),  # a float is never accepted: it is already inexact
        ("45.905", "mais de 2 casas decimais"),
        ("1.234", "mais de 2 casas decimais"),  # one dot is a decimal point: ask, don't guess
        (Decimal("0.001"), "mais de 2 casas decimais"),
        ("-10", "negativo"),
        ("R$ -10,00", "negativo"),
        (Decimal("-1"), "negativo"),
        (-3, "negativo"),
        ("NaN", "valor inválido"),
        ("inf", "valor inválido"),
        (Decimal("NaN"), "finito"),
        ("", "valor inválido"),
        ("dez reais", "valor inválido"),
        ("1,2,3", "valor inválido"),
        ("1.23,4.5", "valor inválido"),
        (",50", "valor inválido"),
        ("0", "maior que zero"),
        ("0,00", "maior que zero"),
        (True, "texto"),
        (None, "valor inválido"),
        ("2000000000", "alto demais"),
    ],
)
def test_bad_amounts_are_rejected_with_a_reason(value: object, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_money(value)


def test_zero_is_allowed_where_it_makes_sense() -> None:
    assert parse_money("0", allow_zero=True) == 0


@pytest.mark.parametrize(
    ("cents", "text"),
    [
        (123456, "R$ 1.234,56"),
        (0, "R$ 0,00"),
        (5, "R$ 0,05"),
        (4590, "R$ 45,90"),
        (100_000_000, "R$ 1.000.000,00"),
        (-1000, "-R$ 10,00"),
    ],
)
def test_cents_are_shown_the_brazilian_way(cents: int, text: str) -> None:
    assert format_brl(cents) == text


def test_results_carry_both_forms() -> None:
    assert money_fields("spent", 123456) == {"spent_cents": 123456, "spent": "R$ 1.234,56"}
    assert money_fields("budget", None) == {"budget_cents": None, "budget": None}


@given(st.integers(min_value=1, max_value=MAX_CENTS))
def test_what_is_shown_parses_back_to_the_same_cents(cents: int) -> None:
    assert parse_money(format_brl(cents)) == cents
    assert parse_money(f"{cents // 100}.{cents % 100:02d}") == cents
    assert parse_money(f"{cents // 100},{cents % 100:02d}") == cents
