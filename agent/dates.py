"""Calendar helpers: mel lives in America/Sao_Paulo, months are ``"YYYY-MM"``."""

from __future__ import annotations

import re
from datetime import date, datetime
from zoneinfo import ZoneInfo

__all__ = [
    "MONTH_PATTERN",
    "SAO_PAULO",
    "format_date_pt",
    "month_of",
    "now_sao_paulo",
    "parse_month",
]

SAO_PAULO = ZoneInfo("America/Sao_Paulo")
MONTH_PATTERN = r"^\d{4}-(0[1-9]|1[0-2])$"
_MONTH_RE = re.compile(MONTH_PATTERN)

_WEEKDAYS = (
    "segunda-feira",
    "terça-feira",
    "quarta-feira",
    "quinta-feira",
    "sexta-feira",
    "sábado",
    "domingo",
)
_MONTHS = (
    "janeiro",
    "fevereiro",
    "março",
    "abril",
    "maio",
    "junho",
    "julho",
    "agosto",
    "setembro",
    "outubro",
    "novembro",
    "dezembro",
)


def now_sao_paulo() -> datetime:
    """The current time, aware, in America/Sao_Paulo."""
    return datetime.now(SAO_PAULO)


def month_of(day: date | datetime) -> str:
    """``"YYYY-MM"`` of a date (an aware datetime is first converted to São Paulo time)."""
    if isinstance(day, datetime) and day.tzinfo is not None:
        day = day.astimezone(SAO_PAULO)
    return f"{day.year:04d}-{day.month:02d}"


def parse_month(value: str) -> str:
    """Validate ``"YYYY-MM"`` (month 01-12); return it unchanged or raise ``ValueError``."""
    text = value.strip()
    if not _MONTH_RE.match(text):
        raise ValueError(f"mês inválido {value!r}: use o formato AAAA-MM, ex. 2026-06")
    return text


def format_date_pt(day: date | datetime) -> str:
    """``"terça-feira, 2 de junho de 2026"``."""
    if isinstance(day, datetime) and day.tzinfo is not None:
        day = day.astimezone(SAO_PAULO)
    return f"{_WEEKDAYS[day.weekday()]}, {day.day} de {_MONTHS[day.month - 1]} de {day.year}"
