"""The finance tools over the household ledger.

Every figure mel states comes from one of these. Amounts go in as reais (text such as
``"45.90"``) and come out twice: integer cents and ``"R$ 1.234,56"``. Months are
``"YYYY-MM"``; "today" is São Paulo's.

The card invoice (``cardInvoice``) is read from the ledger too, which has no card
statements: a card purchase is an expense whose category is ``"cartão"`` or starts with
``"cartão "`` (``"cartão nubank"``, ``"cartão de crédito"``), and the month's invoice is
those expenses. It is offered by the invoice agent only (:func:`card_tools`), so
:func:`default_registry` keeps the eight tools it always had; :func:`registry_for` builds
a domain agent's registry from tool names.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from agent.dates import MONTH_PATTERN, SAO_PAULO, month_of, parse_month
from agent.errors import LedgerError, ToolError
from agent.ledger import Goal, MonthBudgets, MonthSpending, NewExpense, normalise_category
from agent.money import MoneyCents, NonNegativeMoneyCents, money_fields
from agent.tools.base import Tool, ToolContext, ToolRegistry

__all__ = [
    "CARD_CATEGORY",
    "BudgetStatusArgs",
    "BudgetTotalArgs",
    "CardInvoiceArgs",
    "ContributeToGoalArgs",
    "CreateSavingsGoalArgs",
    "RecordExpenseArgs",
    "SavingsGoalProgressArgs",
    "SetBudgetArgs",
    "SpendingByCategoryArgs",
    "card_tools",
    "default_registry",
    "finance_tools",
    "is_card_category",
    "registry_for",
]

CARD_CATEGORY = "cartão"
"""The expense category of card purchases (also any category starting with "cartão ")."""
_INVOICE_SCAN = 500  # newest expenses of the month read to list the invoice's charges
_INVOICE_ITEMS = 30  # charges listed at most (the total always covers them all)

Month = Annotated[
    str,
    AfterValidator(parse_month),
    Field(
        description="mês no formato AAAA-MM, ex. 2026-06",
        json_schema_extra={"pattern": MONTH_PATTERN},
    ),
]
Category = Annotated[
    str,
    AfterValidator(normalise_category),
    Field(description="categoria em poucas palavras, ex. mercado, aluguel, lazer"),
]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BudgetTotalArgs(_Args):
    month: Month


class SpendingByCategoryArgs(_Args):
    month: Month | None = Field(default=None, description="AAAA-MM; padrão: o mês atual")


class BudgetStatusArgs(_Args):
    month: Month | None = Field(default=None, description="AAAA-MM; padrão: o mês atual")


class RecordExpenseArgs(_Args):
    amount: MoneyCents
    category: Category
    description: Annotated[str, Field(max_length=200)] = ""
    date: dt.date | None = Field(default=None, description="AAAA-MM-DD; padrão: hoje")
    paid_by: Annotated[str, Field(max_length=60)] | None = Field(
        default=None, description="quem pagou (nome); padrão: quem está falando"
    )


class SetBudgetArgs(_Args):
    amount: NonNegativeMoneyCents
    month: Month | None = Field(default=None, description="AAAA-MM; padrão: o mês atual")
    category: Category | None = Field(
        default=None, description="categoria; omita para o orçamento total do mês"
    )


class SavingsGoalProgressArgs(_Args):
    goal: Annotated[str, Field(min_length=1, max_length=80)] | None = Field(
        default=None, description="nome da meta; omita para ver todas"
    )


class ContributeToGoalArgs(_Args):
    goal: Annotated[str, Field(min_length=1, max_length=80, description="nome da meta")]
    amount: MoneyCents


class CreateSavingsGoalArgs(_Args):
    name: Annotated[str, Field(min_length=1, max_length=80, description="nome da meta")]
    target_amount: MoneyCents
    deadline: dt.date | None = Field(default=None, description="prazo AAAA-MM-DD (opcional)")


class CardInvoiceArgs(_Args):
    month: Month | None = Field(default=None, description="AAAA-MM; padrão: o mês atual")


# -- helpers --------------------------------------------------------------------------------


def _today(ctx: ToolContext) -> dt.date:
    return ctx.now.astimezone(SAO_PAULO).date()


def _percent(part: int, whole: int | None) -> float | None:
    """``part / whole`` in percent with one decimal, exact integer arithmetic."""
    if not whole:
        return None
    return round(part * 1000 // whole / 10, 1)


def _months_between(start: dt.date, end: dt.date) -> int:
    return (end.year - start.year) * 12 + end.month - start.month


def _goal_out(goal: Goal, today: dt.date) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": goal.name,
        **money_fields("target", goal.target_cents),
        **money_fields("saved", goal.saved_cents),
        **money_fields("remaining", goal.remaining_cents),
        "percent": goal.percent,
        "reached": goal.saved_cents >= goal.target_cents,
        "deadline": goal.deadline.isoformat() if goal.deadline else None,
    }
    if goal.deadline is not None and goal.remaining_cents > 0:
        months_left = max(_months_between(today, goal.deadline), 1)
        per_month = -(-goal.remaining_cents // months_left)  # ceiling division
        out["months_left"] = months_left
        out.update(money_fields("needed_per_month", per_month))
    return out


def _line(spent: int, budget: int | None) -> dict[str, Any]:
    remaining = None if budget is None else budget - spent
    return {
        **money_fields("budget", budget),
        **money_fields("spent", spent),
        **money_fields("remaining", remaining),
        "percent_used": _percent(spent, budget),
        "over_budget": remaining is not None and remaining < 0,
    }


def _budget_total(month: str, spending: MonthSpending, budgets: MonthBudgets) -> dict[str, Any]:
    budget = budgets.effective_total_cents
    source = None
    if budgets.total_cents is not None:
        source = "total"
    elif budget is not None:
        source = "sum_of_categories"
    return {
        "month": month,
        **_line(spending.total_cents, budget),
        "budget_source": source,
        "expense_count": spending.expense_count,
    }


# -- handlers -------------------------------------------------------------------------------


async def budget_total(args: BudgetTotalArgs, ctx: ToolContext) -> dict[str, Any]:
    spending, budgets = await ctx.require_ledger().month_overview(ctx.household_id, args.month)
    return _budget_total(args.month, spending, budgets)


async def spending_by_category(args: SpendingByCategoryArgs, ctx: ToolContext) -> dict[str, Any]:
    month = args.month or month_of(ctx.now)
    spending = await ctx.require_ledger().month_spending(ctx.household_id, month)
    total = spending.total_cents
    rows = sorted(spending.by_category.items(), key=lambda item: (-item[1], item[0]))
    return {
        "month": month,
        **money_fields("total", total),
        "expense_count": spending.expense_count,
        "categories": [
            {
                "category": category,
                **money_fields("spent", cents),
                "count": spending.counts.get(category, 0),
                "share_percent": _percent(cents, total),
            }
            for category, cents in rows
        ],
    }


async def budget_status(args: BudgetStatusArgs, ctx: ToolContext) -> dict[str, Any]:
    month = args.month or month_of(ctx.now)
    spending, budgets = await ctx.require_ledger().month_overview(ctx.household_id, month)
    categories = sorted(set(budgets.by_category) | set(spending.by_category))
    return {
        "month": month,
        "total": _budget_total(month, spending, budgets),
        "categories": [
            {
                "category": category,
                **_line(spending.by_category.get(category, 0), budgets.by_category.get(category)),
            }
            for category in categories
        ],
    }


async def record_expense(args: RecordExpenseArgs, ctx: ToolContext) -> dict[str, Any]:
    ledger = ctx.require_ledger()
    today = _today(ctx)
    day = args.date or today
    if day > today:
        raise ToolError(f"a data {day.isoformat()} está no futuro; hoje é {today.isoformat()}")
    if day.year < 2000:
        raise ToolError(f"data {day.isoformat()} improvável; confira com o usuário")
    expense = await ledger.record_expense(
        ctx.household_id,
        NewExpense(
            day=day,
            amount_cents=args.amount,
            category=args.category,
            description=args.description.strip(),
            paid_by=(args.paid_by or ctx.actor or None),
        ),
        now=ctx.now,
    )
    spending, budgets = await ledger.month_overview(ctx.household_id, expense.month)
    return {
        "recorded": True,
        "expense": {
            "id": expense.id,
            "date": expense.day.isoformat(),
            **money_fields("amount", expense.amount_cents),
            "category": expense.category,
            "description": expense.description,
            "paid_by": expense.paid_by,
        },
        "category_month": {
            "month": expense.month,
            "category": expense.category,
            **_line(
                spending.by_category.get(expense.category, 0),
                budgets.by_category.get(expense.category),
            ),
        },
    }


async def set_budget(args: SetBudgetArgs, ctx: ToolContext) -> dict[str, Any]:
    month = args.month or month_of(ctx.now)
    await ctx.require_ledger().set_budget(ctx.household_id, month, args.amount, args.category)
    return {
        "saved": True,
        "month": month,
        "category": args.category,
        "scope": "category" if args.category else "month_total",
        **money_fields("budget", args.amount),
    }


async def savings_goal_progress(args: SavingsGoalProgressArgs, ctx: ToolContext) -> dict[str, Any]:
    ledger = ctx.require_ledger()
    today = _today(ctx)
    if args.goal is None:
        goals = await ledger.goals(ctx.household_id)
        return {"goals": [_goal_out(goal, today) for goal in goals], "count": len(goals)}
    goal = await ledger.goal(ctx.household_id, args.goal)
    if goal is None:
        raise ToolError(await _no_such_goal(ctx, args.goal))
    return {"goals": [_goal_out(goal, today)], "count": 1}


async def contribute_to_goal(args: ContributeToGoalArgs, ctx: ToolContext) -> dict[str, Any]:
    goal = await ctx.require_ledger().contribute(
        ctx.household_id, args.goal, args.amount, by=ctx.actor, now=ctx.now
    )
    if goal is None:
        raise ToolError(await _no_such_goal(ctx, args.goal))
    return {
        "contributed": True,
        **money_fields("amount", args.amount),
        "goal": _goal_out(goal, _today(ctx)),
    }


async def create_savings_goal(args: CreateSavingsGoalArgs, ctx: ToolContext) -> dict[str, Any]:
    today = _today(ctx)
    if args.deadline is not None and args.deadline <= today:
        raise ToolError(f"o prazo {args.deadline.isoformat()} precisa ser depois de hoje ({today})")
    try:
        goal = await ctx.require_ledger().create_goal(
            ctx.household_id, args.name, args.target_amount, deadline=args.deadline, now=ctx.now
        )
    except LedgerError as exc:
        raise ToolError(str(exc)) from None
    return {"created": True, "goal": _goal_out(goal, today)}


async def _no_such_goal(ctx: ToolContext, name: str) -> str:
    goals = await ctx.require_ledger().goals(ctx.household_id)
    if not goals:
        return f"não existe meta {name!r}: o casal ainda não tem metas (crie com createSavingsGoal)"
    names = ", ".join(goal.name for goal in goals)
    return f"não existe meta {name!r}; metas existentes: {names}"


def is_card_category(category: str) -> bool:
    """Whether an expense category (already normalised) is a card purchase."""
    return category == CARD_CATEGORY or category.startswith(CARD_CATEGORY + " ")


async def card_invoice(args: CardInvoiceArgs, ctx: ToolContext) -> dict[str, Any]:
    ledger = ctx.require_ledger()
    month = args.month or month_of(ctx.now)
    spending = await ledger.month_spending(ctx.household_id, month)
    cards = {c: cents for c, cents in spending.by_category.items() if is_card_category(c)}
    count = sum(spending.counts.get(category, 0) for category in cards)
    charges = [
        expense
        for expense in await ledger.expenses(ctx.household_id, month, limit=_INVOICE_SCAN)
        if is_card_category(expense.category)
    ][:_INVOICE_ITEMS]
    return {
        "month": month,
        **money_fields("total", sum(cards.values())),
        "charge_count": count,
        "by_card": [
            {"category": category, **money_fields("total", cents)}
            for category, cents in sorted(cards.items(), key=lambda item: (-item[1], item[0]))
        ],
        "charges": [
            {
                "id": expense.id,
                "date": expense.day.isoformat(),
                **money_fields("amount", expense.amount_cents),
                "category": expense.category,
                "description": expense.description,
                "paid_by": expense.paid_by,
            }
            for expense in charges
        ],
        "all_charges_listed": len(charges) == count,
    }


def finance_tools() -> list[Tool[Any]]:
    """The finance tools, in the order they are offered to the model."""
    return [
        Tool(
            "budgetTotal",
            "Total gasto no mês comparado ao orçamento total do mês (gasto, orçamento, "
            "quanto resta, % usado).",
            BudgetTotalArgs,
            budget_total,
        ),
        Tool(
            "spendingByCategory",
            "Quanto foi gasto em cada categoria no mês, do maior para o menor.",
            SpendingByCategoryArgs,
            spending_by_category,
        ),
        Tool(
            "budgetStatus",
            "Situação do orçamento do mês por categoria: orçamento, gasto, restante e % usado.",
            BudgetStatusArgs,
            budget_status,
        ),
        Tool(
            "recordExpense",
            "Registra um gasto do casal (valor em reais, categoria, descrição, data, quem pagou).",
            RecordExpenseArgs,
            record_expense,
        ),
        Tool(
            "setBudget",
            "Define o orçamento de uma categoria no mês, ou o orçamento total do mês se a "
            "categoria for omitida.",
            SetBudgetArgs,
            set_budget,
        ),
        Tool(
            "savingsGoalProgress",
            "Progresso das metas de economia (guardado, alvo, quanto falta, prazo).",
            SavingsGoalProgressArgs,
            savings_goal_progress,
        ),
        Tool(
            "contributeToGoal",
            "Registra um valor guardado para uma meta de economia existente.",
            ContributeToGoalArgs,
            contribute_to_goal,
        ),
        Tool(
            "createSavingsGoal",
            "Cria uma meta de economia com valor alvo e prazo opcional.",
            CreateSavingsGoalArgs,
            create_savings_goal,
        ),
    ]


def card_tools() -> list[Tool[Any]]:
    """The card-invoice tools (the invoice agent's own)."""
    return [
        Tool(
            "cardInvoice",
            "Fatura do cartão no mês: total, total por cartão e as compras lançadas "
            '(gastos com categoria "cartão" ou "cartão <nome>"), das mais recentes às '
            "mais antigas.",
            CardInvoiceArgs,
            card_invoice,
        ),
    ]


def default_registry() -> ToolRegistry:
    """A registry with every finance tool."""
    return ToolRegistry(finance_tools())


def registry_for(names: Iterable[str]) -> ToolRegistry:
    """A registry with the named tools (finance and card), in the order given; an unknown
    name is a ``ValueError``."""
    wanted = tuple(names)
    known = {tool.name: tool for tool in [*finance_tools(), *card_tools()]}
    missing = [name for name in wanted if name not in known]
    if missing:
        raise ValueError(f"unknown tools {missing}; known: {sorted(known)}")
    return ToolRegistry(known[name] for name in wanted)
