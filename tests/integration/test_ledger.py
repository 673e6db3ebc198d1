"""The household ledger on a real Redis: expenses, budgets, goals, households."""

from __future__ import annotations

from datetime import date

import pytest
import redis.asyncio as aioredis

from agent.errors import LedgerError
from agent.ledger import Ledger, NewExpense, goal_key, normalise_category
from tests.integration.conftest import NOW

HH = "casa-1"


async def test_expenses_keep_o1_totals_per_month_and_category(ledger: Ledger) -> None:
    first = await ledger.record_expense(
        HH, NewExpense(date(2026, 6, 3), 4590, "mercado", "feira", "ana"), now=NOW
    )
    await ledger.record_expense(HH, NewExpense(date(2026, 6, 4), 1000, "mercado"), now=NOW)
    await ledger.record_expense(HH, NewExpense(date(2026, 6, 5), 150_000, "aluguel"), now=NOW)
    await ledger.record_expense(HH, NewExpense(date(2026, 5, 31), 999, "mercado"), now=NOW)

    june = await ledger.month_spending(HH, "2026-06")
    assert june.by_category == {"mercado": 5590, "aluguel": 150_000}
    assert june.counts == {"mercado": 2, "aluguel": 1}
    assert (june.total_cents, june.expense_count) == (155_590, 3)
    assert (await ledger.month_spending(HH, "2026-05")).total_cents == 999
    assert (await ledger.month_spending(HH, "2026-07")).total_cents == 0
    assert await ledger.months(HH) == ["2026-05", "2026-06"]

    latest = await ledger.expenses(HH, "2026-06")
    assert [e.amount_cents for e in latest] == [150_000, 1000, 4590]  # newest first
    assert latest[-1] == first
    assert (first.description, first.paid_by, first.month) == ("feira", "ana", "2026-06")


async def test_budgets_per_category_and_for_the_whole_month(ledger: Ledger) -> None:
    await ledger.set_budget(HH, "2026-06", 80_000, "Mercado ")
    await ledger.set_budget(HH, "2026-06", 20_000, "lazer")

    budgets = await ledger.budgets(HH, "2026-06")
    assert budgets.by_category == {"mercado": 80_000, "lazer": 20_000}
    assert budgets.total_cents is None
    assert budgets.effective_total_cents == 100_000  # no total set: the categories' sum

    await ledger.set_budget(HH, "2026-06", 300_000)
    await ledger.set_budget(HH, "2026-06", 90_000, "mercado")  # overwrite
    budgets = await ledger.budgets(HH, "2026-06")
    assert budgets.total_cents == budgets.effective_total_cents == 300_000
    assert budgets.by_category["mercado"] == 90_000
    assert (await ledger.budgets(HH, "2026-07")).effective_total_cents is None
    with pytest.raises(LedgerError):
        await ledger.set_budget(HH, "2026-06", -1)


async def test_goals_progress_with_atomic_contributions(ledger: Ledger) -> None:
    goal = await ledger.create_goal(HH, " Viagem   Nordeste ", 500_000, deadline=date(2026, 12, 1))
    assert (goal.name, goal.key, goal.saved_cents) == ("Viagem Nordeste", "viagem nordeste", 0)

    await ledger.contribute(HH, "viagem nordeste", 100_000, by="ana", now=NOW)
    after = await ledger.contribute(HH, "VIAGEM NORDESTE", 25_050, by="bia", now=NOW)

    assert after is not None
    assert (after.saved_cents, after.remaining_cents, after.percent) == (125_050, 374_950, 25.0)
    assert after.deadline == date(2026, 12, 1)
    assert await ledger.goal(HH, "Viagem Nordeste") == after
    assert await ledger.contribute(HH, "carro", 100) is None
    assert await ledger.goal(HH, "carro") is None
    with pytest.raises(LedgerError, match="já existe"):
        await ledger.create_goal(HH, "viagem NORDESTE", 1)


async def test_goals_list_in_creation_order(ledger: Ledger) -> None:
    await ledger.create_goal(HH, "Reserva", 1_000_000, now=NOW.replace(day=1))
    await ledger.create_goal(HH, "Ímã de geladeira", 1_000, now=NOW.replace(day=2))

    goals = await ledger.goals(HH)

    assert [goal.name for goal in goals] == ["Reserva", "Ímã de geladeira"]
    assert goal_key("ÍMÃ  de Geladeira") == goals[1].key


async def test_households_link_two_numbers_to_one_budget(ledger: Ledger) -> None:
    ana, bia, caio = "+5511999990000", "+5511888880000", "+5521777770000"
    assert await ledger.household_for(ana) == ana  # alone by default

    await ledger.link_household("casa-ana-bia", [ana, bia])
    await ledger.set_budget(await ledger.household_for(ana), "2026-06", 250_000)

    bias_household = await ledger.household_for(bia)
    assert bias_household == "casa-ana-bia"
    assert (await ledger.budgets(bias_household, "2026-06")).total_cents == 250_000
    assert await ledger.members("casa-ana-bia") == {ana, bia}

    await ledger.link_household("casa-bia-caio", [bia, caio])  # bia moves
    assert await ledger.household_for(bia) == "casa-bia-caio"
    assert await ledger.members("casa-ana-bia") == {ana}
    assert await ledger.members("casa-bia-caio") == {bia, caio}


async def test_one_households_keys_share_a_hash_tag(ledger: Ledger, redis: aioredis.Redis) -> None:
    await ledger.record_expense(HH, NewExpense(date(2026, 6, 3), 100, "mercado"))
    await ledger.set_budget(HH, "2026-06", 100)
    await ledger.create_goal(HH, "reserva", 100)
    await ledger.contribute(HH, "reserva", 10)
    await ledger.record_expense("outra", NewExpense(date(2026, 6, 3), 100, "mercado"))

    keys = sorted(
        key.decode() if isinstance(key, bytes) else key
        for key in await redis.keys("mel:ledger:{casa-1}:*")
    )
    assert keys == [
        "mel:ledger:{casa-1}:budgets:2026-06",
        "mel:ledger:{casa-1}:count:2026-06",
        "mel:ledger:{casa-1}:expenses:2026-06",
        "mel:ledger:{casa-1}:goals",
        "mel:ledger:{casa-1}:goals:log",
        "mel:ledger:{casa-1}:goals:saved",
        "mel:ledger:{casa-1}:months",
        "mel:ledger:{casa-1}:spent:2026-06",
    ]
    assert Ledger(redis, prefix="x").key("h", "a", "b") == "x:ledger:{h}:a:b"


async def test_a_household_id_that_would_break_the_hash_tag_is_refused(ledger: Ledger) -> None:
    for bad in ("", "a}b", "{a}", "a b", "x" * 129):
        with pytest.raises(LedgerError, match="invalid household id"):
            await ledger.set_budget(bad, "2026-06", 100)


async def test_the_ledger_works_with_decoded_responses(redis_url: str) -> None:
    client: aioredis.Redis = aioredis.from_url(redis_url, decode_responses=True)
    try:
        await client.flushdb()
        ledger = Ledger(client)
        await ledger.record_expense(HH, NewExpense(date(2026, 6, 3), 100, "mercado", "pão"))
        await ledger.create_goal(HH, "reserva", 1000)
        await ledger.link_household(HH, ["+551100"])

        assert [e.description for e in await ledger.expenses(HH, "2026-06")] == ["pão"]
        assert (await ledger.contribute(HH, "reserva", 10)).saved_cents == 10  # type: ignore[union-attr]
        assert await ledger.household_for("+551100") == HH
    finally:
        await client.aclose()


def test_categories_are_normalised_and_checked() -> None:
    assert normalise_category("  Mercado   do MÊS ") == "mercado do mês"
    for bad in ("", "   ", "__total__", "x" * 41):
        with pytest.raises(ValueError, match="categoria"):
            normalise_category(bad)
