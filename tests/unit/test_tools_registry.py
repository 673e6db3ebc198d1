"""The tool registry: schemas from the pydantic models; every model mistake becomes a text
the model reads as the tool result, never an exception."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from structlog.testing import capture_logs

from agent.dates import SAO_PAULO
from agent.errors import ToolError
from agent.money import MoneyCents
from agent.tools import Tool, ToolContext, ToolRegistry, default_registry

FINANCE_TOOLS = {
    "budgetTotal",
    "spendingByCategory",
    "budgetStatus",
    "recordExpense",
    "setBudget",
    "savingsGoalProgress",
    "contributeToGoal",
    "createSavingsGoal",
}
CTX = ToolContext("casa-1", None, datetime(2026, 6, 15, 10, 0, tzinfo=SAO_PAULO), "+5511999990000")


class AmountArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    amount: MoneyCents
    note: str = ""


async def echo_amount(args: AmountArgs, ctx: ToolContext) -> dict[str, Any]:
    return {"amount_cents": args.amount, "household": ctx.household_id}


async def refuse(args: AmountArgs, ctx: ToolContext) -> dict[str, Any]:
    raise ToolError("meta 'viagem' não existe")


async def explode(args: AmountArgs, ctx: ToolContext) -> dict[str, Any]:
    raise RuntimeError("redis went away")


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry(
        [
            Tool("echoAmount", "Echo.", AmountArgs, echo_amount),
            Tool("refuse", "Refuses.", AmountArgs, refuse),
            Tool("explode", "Explodes.", AmountArgs, explode),
        ]
    )


def _walk(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        return [node, *(n for value in node.values() for n in _walk(value))]
    if isinstance(node, list):
        return [n for value in node for n in _walk(value)]
    return []


def test_finance_schemas_are_generated_from_the_argument_models() -> None:
    schemas = default_registry().schemas()

    assert {schema["function"]["name"] for schema in schemas} == FINANCE_TOOLS
    by_name = {schema["function"]["name"]: schema["function"] for schema in schemas}
    budget_total = by_name["budgetTotal"]["parameters"]
    assert budget_total["type"] == "object"
    assert budget_total["required"] == ["month"]
    assert budget_total["properties"]["month"]["pattern"] == r"^\d{4}-(0[1-9]|1[0-2])$"
    assert budget_total["additionalProperties"] is False
    record = by_name["recordExpense"]["parameters"]
    assert record["required"] == ["amount", "category"]
    assert record["properties"]["amount"]["type"] == "string"  # reais as text, never a float
    assert record["properties"]["date"] == {
        "format": "date",
        "type": "string",
        "description": "AAAA-MM-DD; padrão: hoje",
    }
    for schema in schemas:
        assert schema["type"] == "function"
        assert schema["function"]["description"]
        nodes = _walk(schema["function"]["parameters"])
        assert not any("title" in node and isinstance(node["title"], str) for node in nodes)
        assert not any("anyOf" in node for node in nodes)
    json.dumps(schemas)  # JSON-able as is


def test_a_property_called_title_survives_the_cleanup() -> None:
    class TitleArgs(BaseModel):
        title: str

    async def noop(args: TitleArgs, ctx: ToolContext) -> dict[str, Any]:
        return {}

    params = Tool("t", "d", TitleArgs, noop).schema()["function"]["parameters"]
    assert params["properties"] == {"title": {"type": "string"}}
    assert params["required"] == ["title"]


async def test_a_valid_call_runs_the_handler(registry: ToolRegistry) -> None:
    outcome = await registry.run("echoAmount", '{"amount": "45,90"}', CTX)

    assert outcome.ok
    assert outcome.result == {"amount_cents": 4590, "household": "casa-1"}
    assert outcome.arguments == {"amount": "45,90"}
    assert json.loads(outcome.content()) == outcome.result


async def test_json_numbers_are_read_exactly_never_as_floats(registry: ToolRegistry) -> None:
    outcome = await registry.run("echoAmount", '{"amount": 19.99}', CTX)
    assert outcome.result == {"amount_cents": 1999, "household": "casa-1"}
    assert outcome.arguments == {"amount": "19.99"}

    too_precise = await registry.run("echoAmount", '{"amount": 0.105}', CTX)
    assert too_precise.error is not None
    assert "mais de 2 casas decimais" in too_precise.error


@pytest.mark.parametrize(
    ("name", "arguments", "fragments"),
    [
        ("nope", "{}", ["ferramenta desconhecida 'nope'", "echoAmount, refuse, explode"]),
        ("echoAmount", '{"amount": ', ["não são um JSON válido", "objeto JSON"]),
        ("echoAmount", '["45.90"]', ["devem ser um objeto JSON"]),
        ("echoAmount", "{}", ["argumentos inválidos para echoAmount", "amount: campo obrigatório"]),
        ("echoAmount", '{"amount": "-5"}', ["amount: o valor não pode ser negativo"]),
        ("echoAmount", '{"amount": "45.905"}', ["amount: valor 45.905 tem mais de 2 casas"]),
        ("echoAmount", '{"amount": "1", "x": 1}', ["x: campo desconhecido"]),
        ("refuse", '{"amount": "1"}', ["meta 'viagem' não existe"]),
    ],
)
async def test_mistakes_come_back_as_text_for_the_model(
    registry: ToolRegistry, name: str, arguments: str, fragments: list[str]
) -> None:
    outcome = await registry.run(name, arguments, CTX)

    assert not outcome.ok
    assert outcome.result is None
    assert outcome.error is not None
    for fragment in fragments:
        assert fragment in outcome.error
    assert json.loads(outcome.content()) == {"error": outcome.error}


async def test_an_empty_argument_string_means_no_arguments(registry: ToolRegistry) -> None:
    outcome = await registry.run("echoAmount", "  ", CTX)
    assert outcome.error is not None
    assert "amount: campo obrigatório ausente" in outcome.error


async def test_an_unexpected_failure_is_logged_and_reported_without_raising(
    registry: ToolRegistry,
) -> None:
    with capture_logs() as logs:
        outcome = await registry.run("explode", '{"amount": "1"}', CTX)

    assert outcome.error is not None
    assert "erro interno ao executar explode" in outcome.error
    assert "não invente números" in outcome.error
    assert [log["event"] for log in logs] == ["tool.failed"]
    assert logs[0]["tool"] == "explode"


async def test_finance_tools_without_a_ledger_say_the_data_is_unavailable() -> None:
    outcome = await default_registry().run("budgetTotal", '{"month": "2026-06"}', CTX)
    assert outcome.error == "os dados financeiros estão indisponíveis agora"


@pytest.mark.parametrize(
    ("name", "arguments", "fragment"),
    [
        ("budgetTotal", '{"month": "2026-13"}', "month: mês inválido '2026-13'"),
        ("budgetTotal", '{"month": "junho"}', "use o formato AAAA-MM"),
        ("budgetTotal", "{}", "month: campo obrigatório ausente"),
        ("recordExpense", '{"amount": "10", "category": "  "}', "categoria não pode ser vazia"),
        ("recordExpense", '{"amount": 45.999, "category": "x"}', "mais de 2 casas decimais"),
        ("recordExpense", '{"amount": "10", "category": "x", "date": "ontem"}', "date:"),
        ("setBudget", '{"amount": "-100"}', "negativo"),
        ("createSavingsGoal", '{"name": "viagem"}', "target_amount: campo obrigatório"),
    ],
)
async def test_finance_argument_errors_are_explained(
    name: str, arguments: str, fragment: str
) -> None:
    outcome = await default_registry().run(name, arguments, CTX)
    assert outcome.error is not None
    assert fragment in outcome.error
    assert outcome.error.endswith("Corrija e chame de novo.")


def test_a_tool_name_is_registered_once(registry: ToolRegistry) -> None:
    with pytest.raises(ValueError, match="already registered"):
        registry.register(Tool("refuse", "again", AmountArgs, refuse))
    assert registry.names == ["echoAmount", "refuse", "explode"]
    assert "refuse" in registry
    assert len(registry) == 3
