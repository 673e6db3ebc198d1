"""The household ledger in Redis: expenses, monthly budgets, savings goals, households.

Every key of one household carries the household id as a hash tag —
``mel:ledger:{<household>}:…`` — so the whole household lives in one slot (Redis Cluster
friendly) and multi-key scripts and transactions stay legal. Money is integer cents.

Layout (``H`` = household, ``M`` = ``YYYY-MM``)::

    mel:ledger:{H}:expenses:M     stream   one entry per expense, field "json"
    mel:ledger:{H}:spent:M        hash     category → cents (HINCRBY: O(1) totals)
    mel:ledger:{H}:count:M        hash     category → number of expenses
    mel:ledger:{H}:months         set      months that have expenses
    mel:ledger:{H}:imported       set      fingerprints of imported CSV rows (idempotent import)
    mel:ledger:{H}:budgets:M      hash     category → cents; "__total__" = the month's total
    mel:ledger:{H}:goals          hash     goal key → JSON (name, target, deadline, created_at)
    mel:ledger:{H}:goals:saved    hash     goal key → cents saved
    mel:ledger:{H}:goals:log      stream   contributions
    mel:ledger:{H}:members        set      the WhatsApp numbers linked to the household
    mel:household-of:<number>     string   the number's household (absent: the number alone)
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import redis.asyncio as aioredis

from agent.dates import month_of, now_sao_paulo
from agent.errors import LedgerError

__all__ = [
    "TOTAL_BUDGET",
    "Expense",
    "Goal",
    "Ledger",
    "MonthBudgets",
    "MonthSpending",
    "NewExpense",
    "goal_key",
    "normalise_category",
]

TOTAL_BUDGET = "__total__"
"""The budgets-hash field holding a month's overall budget (categories may not use it)."""

_MAX_CATEGORY = 40
_MAX_DESCRIPTION = 200

# KEYS: stream, spent, count, months, imported | ARGV: json, category, cents, month, fingerprint
_RECORD_EXPENSE = """
if ARGV[5] ~= '' and redis.call('SADD', KEYS[5], ARGV[5]) == 0 then
  return false
end
local id = redis.call('XADD', KEYS[1], '*', 'json', ARGV[1])
redis.call('HINCRBY', KEYS[2], ARGV[2], ARGV[3])
redis.call('HINCRBY', KEYS[3], ARGV[2], 1)
redis.call('SADD', KEYS[4], ARGV[4])
return id
"""

# KEYS: goals, saved, log | ARGV: goal key, cents, log json
_CONTRIBUTE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return false
end
local saved = redis.call('HINCRBY', KEYS[2], ARGV[1], ARGV[2])
redis.call('XADD', KEYS[3], '*', 'json', ARGV[3])
return {saved, redis.call('HGET', KEYS[1], ARGV[1])}
"""


def normalise_category(text: str) -> str:
    """``"  Mercado   do Mês "`` → ``"mercado do mês"``; raises ``ValueError`` when unusable."""
    category = " ".join(text.split()).casefold()
    if not category:
        raise ValueError("a categoria não pode ser vazia")
    if len(category) > _MAX_CATEGORY:
        raise ValueError(f"categoria longa demais (máximo {_MAX_CATEGORY} caracteres)")
    if category.startswith("__"):
        raise ValueError("categoria inválida")
    return category


def goal_key(name: str) -> str:
    """The lookup key of a goal name: case, accents and spacing ignored."""
    text = unicodedata.normalize("NFKD", " ".join(name.split()).casefold())
    return "".join(ch for ch in text if not unicodedata.combining(ch))


def _check_household(household_id: str) -> str:
    if not household_id or len(household_id) > 128 or re.search(r"[{}\s]", household_id):
        raise LedgerError(f"invalid household id {household_id!r}")
    return household_id


@dataclass(frozen=True)
class NewExpense:
    """An expense to record (already validated: cents > 0, category normalised)."""

    day: date
    amount_cents: int
    category: str
    description: str = ""
    paid_by: str | None = None

    def to_json(self, recorded_at: datetime) -> str:
        return json.dumps(
            {
                "date": self.day.isoformat(),
                "amount_cents": self.amount_cents,
                "category": self.category,
                "description": self.description,
                "paid_by": self.paid_by,
                "recorded_at": recorded_at.isoformat(),
            },
            ensure_ascii=False,
        )


@dataclass(frozen=True)
class Expense:
    """A recorded expense; ``id`` is its stream entry id."""

    id: str
    day: date
    amount_cents: int
    category: str
    description: str
    paid_by: str | None
    recorded_at: datetime | None

    @property
    def month(self) -> str:
        return month_of(self.day)

    @classmethod
    def from_entry(cls, entry_id: str, raw: str) -> Expense:
        data = json.loads(raw)
        recorded = data.get("recorded_at")
        return cls(
            id=entry_id,
            day=date.fromisoformat(data["date"]),
            amount_cents=int(data["amount_cents"]),
            category=data["category"],
            description=data.get("description") or "",
            paid_by=data.get("paid_by"),
            recorded_at=datetime.fromisoformat(recorded) if recorded else None,
        )


@dataclass(frozen=True)
class MonthSpending:
    """What a household spent in one month, by category (cents and counts)."""

    month: str
    by_category: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total_cents(self) -> int:
        return sum(self.by_category.values())

    @property
    def expense_count(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class MonthBudgets:
    """A month's budgets: an optional overall total and per-category amounts (cents)."""

    month: str
    total_cents: int | None = None
    by_category: dict[str, int] = field(default_factory=dict)

    @property
    def effective_total_cents(self) -> int | None:
        """The overall budget when set, else the sum of category budgets, else ``None``."""
        if self.total_cents is not None:
            return self.total_cents
        return sum(self.by_category.values()) if self.by_category else None


@dataclass(frozen=True)
class Goal:
    """A savings goal with what has been saved so far."""

    key: str
    name: str
    target_cents: int
    saved_cents: int
    deadline: date | None
    created_at: datetime | None

    @property
    def remaining_cents(self) -> int:
        return max(self.target_cents - self.saved_cents, 0)

    @property
    def percent(self) -> float:
        """Progress in percent, one decimal (display only; money stays in cents)."""
        if self.target_cents <= 0:
            return 100.0
        return round(self.saved_cents * 1000 // self.target_cents / 10, 1)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _json_field(fields: dict[Any, Any]) -> str:
    raw = fields.get(b"json", fields.get("json"))
    if raw is None:
        raise LedgerError("malformed ledger entry: no 'json' field")
    return _text(raw)


def _int_map(raw: dict[Any, Any]) -> dict[str, int]:
    return {_text(k): int(v) for k, v in raw.items()}


class Ledger:
    """Household-scoped finance data in Redis. Works with clients with or without
    ``decode_responses``."""

    def __init__(self, redis: aioredis.Redis, prefix: str = "mel") -> None:
        self.redis = redis
        self.prefix = prefix
        self._record = redis.register_script(_RECORD_EXPENSE)
        self._contribute = redis.register_script(_CONTRIBUTE)

    # -- keys -----------------------------------------------------------------------------

    def key(self, household_id: str, *parts: str) -> str:
        """``{prefix}:ledger:{{household_id}}:part:…`` (the household id is the hash tag)."""
        tail = ":".join(parts)
        return f"{self.prefix}:ledger:{{{_check_household(household_id)}}}:{tail}"

    def _household_of_key(self, number: str) -> str:
        return f"{self.prefix}:household-of:{number}"

    # -- households -----------------------------------------------------------------------

    async def link_household(self, household_id: str, numbers: Iterable[str]) -> None:
        """Make ``numbers`` share ``household_id`` (moving a number out of its old one)."""
        _check_household(household_id)
        cleaned = [number.strip() for number in numbers if number.strip()]
        if not cleaned:
            return
        async with self.redis.pipeline(transaction=False) as pipe:
            for number in cleaned:
                pipe.get(self._household_of_key(number))
            previous = await pipe.execute()
        async with self.redis.pipeline(transaction=False) as pipe:
            for number, old in zip(cleaned, previous, strict=True):
                if old is not None and _text(old) != household_id:
                    pipe.srem(self.key(_text(old), "members"), number)
                pipe.set(self._household_of_key(number), household_id)
            pipe.sadd(self.key(household_id, "members"), *cleaned)
            await pipe.execute()

    async def unlink(self, number: str) -> str | None:
        """Take ``number`` out of its household (it keeps its own, empty ledger from now
        on); the household it left, or None when it was in none."""
        number = number.strip()
        old = await self.redis.get(self._household_of_key(number))
        if old is None:
            return None
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.srem(self.key(_text(old), "members"), number)
            pipe.delete(self._household_of_key(number))
            await pipe.execute()
        return _text(old)

    async def household_for(self, number: str) -> str:
        """The household of a WhatsApp number; by default the number itself (alone)."""
        found = await self.redis.get(self._household_of_key(number.strip()))
        return _text(found) if found is not None else number.strip()

    async def members(self, household_id: str) -> set[str]:
        """Numbers linked to a household (empty when nobody was linked explicitly)."""
        raw = await self.redis.smembers(self.key(household_id, "members"))
        return {_text(number) for number in raw}

    # -- expenses -------------------------------------------------------------------------

    async def record_expense(
        self, household_id: str, expense: NewExpense, *, now: datetime | None = None
    ) -> Expense:
        """Record one expense (stream entry + O(1) totals, atomically, one round trip)."""
        ids = await self.record_expenses(household_id, [expense], now=now)
        entry_id = ids[0]
        if entry_id is None:  # pragma: no cover - without a fingerprint nothing is a duplicate
            raise LedgerError("expense not recorded")
        return self._expense(entry_id, expense, now)

    async def record_expenses(
        self,
        household_id: str,
        expenses: Sequence[NewExpense],
        *,
        fingerprints: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> list[str | None]:
        """Record many expenses in one round trip. With ``fingerprints``, an expense whose
        fingerprint was seen before is skipped (``None`` in the result) — atomically."""
        if fingerprints is not None and len(fingerprints) != len(expenses):
            raise LedgerError("one fingerprint per expense")
        if not expenses:
            return []
        recorded_at = now or now_sao_paulo()
        imported = self.key(household_id, "imported")
        months = self.key(household_id, "months")
        async with self.redis.pipeline(transaction=False) as pipe:
            for index, expense in enumerate(expenses):
                month = month_of(expense.day)
                await self._record(
                    keys=[
                        self.key(household_id, "expenses", month),
                        self.key(household_id, "spent", month),
                        self.key(household_id, "count", month),
                        months,
                        imported,
                    ],
                    args=[
                        expense.to_json(recorded_at),
                        expense.category,
                        expense.amount_cents,
                        month,
                        fingerprints[index] if fingerprints is not None else "",
                    ],
                    client=pipe,
                )
            results = await pipe.execute()
        return [_text(result) if result is not None else None for result in results]

    def _expense(self, entry_id: str, expense: NewExpense, now: datetime | None) -> Expense:
        return Expense(
            id=entry_id,
            day=expense.day,
            amount_cents=expense.amount_cents,
            category=expense.category,
            description=expense.description,
            paid_by=expense.paid_by,
            recorded_at=now,
        )

    async def expenses(self, household_id: str, month: str, *, limit: int = 50) -> list[Expense]:
        """The month's latest expenses, newest first."""
        raw = await self.redis.xrevrange(self.key(household_id, "expenses", month), count=limit)
        return [
            Expense.from_entry(_text(entry_id), _json_field(fields))
            for entry_id, fields in raw or ()
            if entry_id is not None and fields is not None
        ]

    async def months(self, household_id: str) -> list[str]:
        """Months with at least one expense, sorted."""
        raw = await self.redis.smembers(self.key(household_id, "months"))
        return sorted(_text(month) for month in raw)

    async def month_spending(self, household_id: str, month: str) -> MonthSpending:
        spending, _ = await self.month_overview(household_id, month)
        return spending

    # -- budgets --------------------------------------------------------------------------

    async def set_budget(
        self, household_id: str, month: str, amount_cents: int, category: str | None = None
    ) -> None:
        """Set the month's budget for a category, or the month's total when ``None``."""
        if amount_cents < 0:
            raise LedgerError("a budget cannot be negative")
        field_name = TOTAL_BUDGET if category is None else normalise_category(category)
        await self.redis.hset(self.key(household_id, "budgets", month), field_name, amount_cents)

    async def budgets(self, household_id: str, month: str) -> MonthBudgets:
        _, budgets = await self.month_overview(household_id, month)
        return budgets

    async def month_overview(
        self, household_id: str, month: str
    ) -> tuple[MonthSpending, MonthBudgets]:
        """Spending and budgets of a month in one round trip."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.key(household_id, "spent", month))
            pipe.hgetall(self.key(household_id, "count", month))
            pipe.hgetall(self.key(household_id, "budgets", month))
            spent, counts, budgets = await pipe.execute()
        by_category = _int_map(budgets)
        total = by_category.pop(TOTAL_BUDGET, None)
        return (
            MonthSpending(month, _int_map(spent), _int_map(counts)),
            MonthBudgets(month, total, by_category),
        )

    # -- savings goals --------------------------------------------------------------------

    async def create_goal(
        self,
        household_id: str,
        name: str,
        target_cents: int,
        *,
        deadline: date | None = None,
        now: datetime | None = None,
    ) -> Goal:
        """Create a goal; a goal with the same name (case/accents ignored) is an error."""
        display = " ".join(name.split())
        key = goal_key(display)
        if not key:
            raise LedgerError("o nome da meta não pode ser vazio")
        if target_cents <= 0:
            raise LedgerError("o valor da meta precisa ser maior que zero")
        created_at = now or now_sao_paulo()
        meta = {
            "name": display,
            "target_cents": target_cents,
            "deadline": deadline.isoformat() if deadline else None,
            "created_at": created_at.isoformat(),
        }
        created = await self.redis.hsetnx(
            self.key(household_id, "goals"), key, json.dumps(meta, ensure_ascii=False)
        )
        if not created:
            raise LedgerError(f"já existe uma meta chamada {display!r}")
        return Goal(key, display, target_cents, 0, deadline, created_at)

    async def goals(self, household_id: str) -> list[Goal]:
        """Every goal of the household, in creation order (same instant: by name)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.key(household_id, "goals"))
            pipe.hgetall(self.key(household_id, "goals:saved"))
            metas, saved = await pipe.execute()
        saved_by_key = _int_map(saved)
        goals = [
            _goal(_text(key), _text(raw), saved_by_key.get(_text(key), 0))
            for key, raw in metas.items()
        ]
        return sorted(goals, key=lambda goal: (goal.created_at is None, goal.created_at, goal.key))

    async def goal(self, household_id: str, name: str) -> Goal | None:
        """The goal called ``name`` (case/accents ignored), or ``None``."""
        key = goal_key(name)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hget(self.key(household_id, "goals"), key)
            pipe.hget(self.key(household_id, "goals:saved"), key)
            meta, saved = await pipe.execute()
        if meta is None:
            return None
        return _goal(key, _text(meta), int(saved or 0))

    async def contribute(
        self,
        household_id: str,
        name: str,
        amount_cents: int,
        *,
        by: str | None = None,
        now: datetime | None = None,
    ) -> Goal | None:
        """Add to a goal atomically; ``None`` when there is no such goal."""
        if amount_cents <= 0:
            raise LedgerError("a contribuição precisa ser maior que zero")
        key = goal_key(name)
        entry = {
            "goal": key,
            "amount_cents": amount_cents,
            "by": by,
            "at": (now or now_sao_paulo()).isoformat(),
        }
        result = await self._contribute(
            keys=[
                self.key(household_id, "goals"),
                self.key(household_id, "goals:saved"),
                self.key(household_id, "goals:log"),
            ],
            args=[key, amount_cents, json.dumps(entry, ensure_ascii=False)],
        )
        if result is None:
            return None
        saved, meta = result
        return _goal(key, _text(meta), int(saved))


def _goal(key: str, raw: str, saved_cents: int) -> Goal:
    data = json.loads(raw)
    deadline = data.get("deadline")
    created = data.get("created_at")
    return Goal(
        key=key,
        name=data["name"],
        target_cents=int(data["target_cents"]),
        saved_cents=saved_cents,
        deadline=date.fromisoformat(deadline) if deadline else None,
        created_at=datetime.fromisoformat(created) if created else None,
    )
