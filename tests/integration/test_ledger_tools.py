"""The finance tools through the registry, on the real ledger: what the model reads."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import pytest

from agent.ledger import Ledger, NewExpense
from agent.tools import ToolContext, ToolRegistry, default_registry
from tests.integration.conftest import NOW

HH = "casa-1"


@pytest.fixture
def ctx(ledger: Ledger) -> ToolContext:
    return ToolContext(HH, ledger, NOW, actor="+5511999990000")


@pytest.fixture
def tools() -> ToolRegistry:
    return default_registry()


async def _ok(tools: ToolRegistry, ctx: ToolContext, tool: str, /, **args: Any) -> Any:
    outcome = await tools.run(tool, json.dumps(args), ctx)
    assert outcome.error is None, outcome.error
    return outcome.result


async def _error(tools: ToolRegistry, ctx: ToolContext, tool: str, /, **args: Any) -> str:
    outcome = await tools.run(tool, json.dumps(args), ctx)
    assert outcome.error is not None, outcome.result
    return outcome.error


async def test_record_then_read_back_by_category_and_status(
    tools: ToolRegistry, ctx: ToolContext
) -> None:
    await _ok(tools, ctx, "setBudget", amount="800", category="Mercado")
    await _ok(tools, ctx, "setBudget", amount="200", category="lazer", month="2026-06")
    recorded = await _ok(
        tools, ctx, "recordExpense", amount="1.234,56", category="aluguel", date="2026-06-05"
    )
    await _ok(tools, ctx, "recordExpense", amount="850.10", category="mercado", paid_by="Bia")

    assert recorded["expense"]["amount_cents"] == 123456
    assert recorded["category_month"]["budget"] is None

    by_category = await _ok(tools, ctx, "spendingByCategory", month="2026-06")
    assert by_category["total"] == "R$ 2.084,66"
    assert [(c["category"], c["spent"], c["count"]) for c in by_category["categories"]] == [
        ("aluguel", "R$ 1.234,56", 1),
        ("mercado", "R$ 850,10", 1),
    ]
    assert by_category["categories"][0]["share_percent"] == 59.2

    status = await _ok(tools, ctx, "budgetStatus")
    assert status["month"] == "2026-06"
    lines = {line["category"]: line for line in status["categories"]}
    assert lines["mercado"]["remaining"] == "-R$ 50,10"
    assert lines["mercado"]["over_budget"] is True
    assert lines["mercado"]["percent_used"] == 106.2
    assert lines["lazer"]["spent_cents"] == 0
    assert lines["aluguel"]["budget_cents"] is None
    assert status["total"]["budget"] == "R$ 1.000,00"
    assert status["total"]["budget_source"] == "sum_of_categories"
    assert status["total"]["over_budget"] is True


async def test_record_expense_defaults_and_refusals(
    tools: ToolRegistry, ctx: ToolContext, ledger: Ledger
) -> None:
    recorded = await _ok(tools, ctx, "recordExpense", amount=12.5, category="padaria")
    assert recorded["expense"]["date"] == "2026-06-15"
    assert recorded["expense"]["paid_by"] == "+5511999990000"
    assert recorded["expense"]["amount"] == "R$ 12,50"

    future = await _error(tools, ctx, "recordExpense", amount="10", category="x", date="2026-06-16")
    assert "está no futuro" in future
    old = await _error(tools, ctx, "recordExpense", amount="10", category="x", date="1999-01-01")
    assert "improvável" in old
    assert (await ledger.month_spending(HH, "2026-06")).expense_count == 1


async def test_budget_total_prefers_the_month_total(
    tools: ToolRegistry, ctx: ToolContext, ledger: Ledger
) -> None:
    empty = await _ok(tools, ctx, "budgetTotal", month="2026-06")
    assert empty["budget"] is None
    assert empty["percent_used"] is None
    assert empty["budget_source"] is None

    await ledger.record_expense(HH, NewExpense(date(2026, 6, 1), 50_000, "mercado"))
    await _ok(tools, ctx, "setBudget", amount="100", category="mercado")
    await _ok(tools, ctx, "setBudget", amount="4000")

    total = await _ok(tools, ctx, "budgetTotal", month="2026-06")
    assert (total["budget"], total["spent"], total["remaining"]) == (
        "R$ 4.000,00",
        "R$ 500,00",
        "R$ 3.500,00",
    )
    assert total["percent_used"] == 12.5
    assert total["budget_source"] == "total"


async def test_savings_goals_through_the_tools(tools: ToolRegistry, ctx: ToolContext) -> None:
    assert "ainda não tem metas" in await _error(tools, ctx, "savingsGoalProgress", goal="x")

    created = await _ok(
        tools, ctx, "createSavingsGoal", name="Viagem", target_amount="6000", deadline="2026-12-20"
    )
    assert created["goal"]["target"] == "R$ 6.000,00"
    assert created["goal"]["months_left"] == 6
    assert created["goal"]["needed_per_month"] == "R$ 1.000,00"

    contributed = await _ok(tools, ctx, "contributeToGoal", goal="viagem", amount="1500,00")
    assert contributed["goal"]["saved"] == "R$ 1.500,00"
    assert contributed["goal"]["percent"] == 25.0
    assert contributed["goal"]["needed_per_month"] == "R$ 750,00"

    await _ok(tools, ctx, "createSavingsGoal", name="Reserva", target_amount="100")
    await _ok(tools, ctx, "contributeToGoal", goal="reserva", amount="150")
    progress = await _ok(tools, ctx, "savingsGoalProgress")
    assert progress["count"] == 2
    reserva = next(goal for goal in progress["goals"] if goal["name"] == "Reserva")
    assert (reserva["reached"], reserva["remaining"], reserva["percent"]) == (
        True,
        "R$ 0,00",
        150.0,
    )

    one = await _ok(tools, ctx, "savingsGoalProgress", goal="VIAGEM")
    assert one["goals"][0]["name"] == "Viagem"

    missing = await _error(tools, ctx, "contributeToGoal", goal="carro", amount="10")
    assert missing == "não existe meta 'carro'; metas existentes: Reserva, Viagem"
    assert "já existe" in await _error(
        tools, ctx, "createSavingsGoal", name="viagem", target_amount="1"
    )
    assert "precisa ser depois de hoje" in await _error(
        tools, ctx, "createSavingsGoal", name="Carro", target_amount="1", deadline="2026-06-15"
    )
