"""Money: integer cents inside, Brazilian reais outside. Never a float.

Amounts arrive from the model (or a CSV) as text in reais — ``"45.90"``, ``"45,90"``,
``"1.234,56"``, ``"R$ 12"`` — or as an exact JSON number (the tool registry parses JSON
numbers as :class:`~decimal.Decimal`, so ``45.90`` never passes through a float). They are
stored as integer cents and shown as ``"R$ 1.234,56"``.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema

__all__ = [
    "MAX_CENTS",
    "MoneyCents",
    "NonNegativeMoneyCents",
    "format_brl",
    "money_fields",
    "parse_money",
]

MAX_CENTS = 100_000_000_000  # R$ 1 bilhão: anything above is a typo, not a household figure
_CENT = Decimal("0.01")
_GROUPED = {
    ".": re.compile(r"^\d{1,3}(\.\d{3})+$"),
    ",": re.compile(r"^\d{1,3}(,\d{3})+$"),
}


def _normalise_text(text: str) -> str:
    """``"R$ 1.234,56"`` → ``"1234.56"``; raises ``ValueError`` when it is not a number."""
    raw = text.strip().replace("\u00a0", " ")
    if raw.upper().startswith("R$"):
        raw = raw[2:]
    raw = raw.replace(" ", "")
    if raw.startswith("-"):
        raise ValueError("o valor não pode ser negativo")
    raw = raw.removeprefix("+")
    if not raw or not re.fullmatch(r"[\d.,]+", raw) or not raw[0].isdigit():
        raise ValueError(f'valor inválido {text!r}: use reais, ex. "45.90" ou "45,90"')
    dots, commas = raw.count("."), raw.count(",")
    if dots and commas:
        decimal_sep = "." if raw.rfind(".") > raw.rfind(",") else ","
        thousands_sep = "," if decimal_sep == "." else "."
        whole, _, frac = raw.rpartition(decimal_sep)
        if thousands_sep in frac or not _GROUPED[thousands_sep].match(whole):
            raise ValueError(f'valor inválido {text!r}: use reais, ex. "1234.56"')
        return whole.replace(thousands_sep, "") + "." + frac
    sep = "." if dots else "," if commas else ""
    if not sep:
        return raw
    if raw.count(sep) == 1:
        return raw.replace(sep, ".")
    if _GROUPED[sep].match(raw):  # "1.234.567": thousands separators only
        return raw.replace(sep, "")
    raise ValueError(f'valor inválido {text!r}: use reais, ex. "1234.56"')


def parse_money(value: object, *, allow_zero: bool = False) -> int:
    """An amount in reais (text, int or Decimal) → integer cents.

    Rejects floats (inexact), negatives, NaN/infinity, more than two decimal places,
    zero (unless ``allow_zero``) and absurd values, with a PT-BR message the model can act on.
    """
    if isinstance(value, bool | float):
        raise ValueError('valor em reais deve vir como texto, ex. "45.90"')
    if isinstance(value, int):
        amount = Decimal(value)
    elif isinstance(value, Decimal):
        amount = value
    elif isinstance(value, str):
        try:
            amount = Decimal(_normalise_text(value))
        except (
            InvalidOperation
        ) as exc:  # pragma: no cover - _normalise_text only lets digits through
            raise ValueError(f"valor inválido {value!r}") from exc
    else:
        raise ValueError(f'valor inválido {value!r}: use reais, ex. "45.90"')
    if not amount.is_finite():
        raise ValueError("valor inválido: precisa ser um número finito")
    if amount < 0:
        raise ValueError("o valor não pode ser negativo")
    if amount != amount.quantize(_CENT):
        raise ValueError(f'valor {value} tem mais de 2 casas decimais: use centavos, ex. "45.90"')
    cents = int(amount * 100)
    if cents == 0 and not allow_zero:
        raise ValueError("o valor precisa ser maior que zero")
    if cents > MAX_CENTS:
        raise ValueError("valor alto demais para um lançamento doméstico; confira o número")
    return cents


def format_brl(cents: int) -> str:
    """``123456`` → ``"R$ 1.234,56"``; negatives as ``"-R$ 10,00"``."""
    sign = "-" if cents < 0 else ""
    reais, centavos = divmod(abs(cents), 100)
    return f"{sign}R$ {reais:,}".replace(",", ".") + f",{centavos:02d}"


def money_fields(name: str, cents: int | None) -> dict[str, Any]:
    """Both forms every tool result shows: ``{"spent_cents": 123456, "spent": "R$ 1.234,56"}``."""
    return {f"{name}_cents": cents, name: None if cents is None else format_brl(cents)}


_MONEY_SCHEMA = {
    "type": "string",
    "description": 'valor em reais, como texto com até 2 casas decimais, ex. "45.90"',
}

MoneyCents = Annotated[
    int,
    BeforeValidator(lambda v: parse_money(v)),
    WithJsonSchema(_MONEY_SCHEMA),
]
"""A tool argument in reais (> 0) stored as integer cents."""

NonNegativeMoneyCents = Annotated[
    int,
    BeforeValidator(lambda v: parse_money(v, allow_zero=True)),
    WithJsonSchema(_MONEY_SCHEMA),
]
"""Same, zero allowed (e.g. a budget of R$ 0,00)."""
