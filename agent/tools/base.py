"""Tools the model may call: a pydantic model for the arguments, an async handler.

:class:`ToolRegistry` turns the argument models into the OpenAI ``tools`` list and runs
calls. Whatever the model gets wrong — an unknown tool, arguments that are not JSON,
arguments the model rejects — comes back as an error text the model reads as the tool
result, so it can correct itself. ``run`` never raises for those.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Generic, TypeVar

import structlog
from pydantic import BaseModel, ValidationError

from agent.errors import ToolError
from agent.ledger import Ledger

__all__ = [
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "ToolRegistry",
    "validation_error_text",
]

log = structlog.get_logger(__name__)

ArgsT = TypeVar("ArgsT", bound=BaseModel)


@dataclass(frozen=True)
class ToolContext:
    """What a handler may use: the household, its ledger, the current São Paulo time and
    who is asking (the sender's number, when known)."""

    household_id: str
    ledger: Ledger | None
    now: datetime
    actor: str | None = None

    def require_ledger(self) -> Ledger:
        """The ledger, or a :class:`ToolError` the model can explain to the user."""
        if self.ledger is None:
            raise ToolError("os dados financeiros estão indisponíveis agora")
        return self.ledger


@dataclass(frozen=True)
class Tool(Generic[ArgsT]):
    """A named, described tool; ``args_model`` validates arguments and gives the schema."""

    name: str
    description: str
    args_model: type[ArgsT]
    handler: Callable[[ArgsT, ToolContext], Awaitable[dict[str, Any]]]

    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry for this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": _clean_schema(self.args_model.model_json_schema()),
            },
        }


@dataclass(frozen=True)
class ToolOutcome:
    """One tool call's outcome: a JSON-able ``result``, or the ``error`` text."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def content(self) -> str:
        """What the model reads as the tool message."""
        payload = self.result if self.error is None else {"error": self.error}
        return json.dumps(payload, ensure_ascii=False, default=str)


class ToolRegistry:
    """The tools offered to the model, by name."""

    def __init__(self, tools: Iterable[Tool[Any]] = ()) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        self._schemas: list[dict[str, Any]] | None = None
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool[Any]) -> Tool[Any]:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        self._schemas = None
        return tool

    def get(self, name: str) -> Tool[Any] | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool[Any]]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """The OpenAI ``tools`` list, generated from the argument models (once)."""
        if self._schemas is None:
            self._schemas = [tool.schema() for tool in self._tools.values()]
        return self._schemas

    async def run(self, name: str, arguments_json: str, ctx: ToolContext) -> ToolOutcome:
        """Validate and run one call. Mistakes become an error text for the model; a
        :class:`ToolError` from the handler too; anything else is logged and reported to
        the model as an internal error (the turn goes on)."""
        tool = self._tools.get(name)
        if tool is None:
            available = ", ".join(self._tools) or "nenhuma"
            return ToolOutcome(
                name, error=f"ferramenta desconhecida {name!r}. Disponíveis: {available}."
            )
        try:
            # JSON numbers as Decimal: 45.90 never becomes a float on its way to cents.
            raw = json.loads(arguments_json.strip() or "{}", parse_float=Decimal)
        except json.JSONDecodeError as exc:
            return ToolOutcome(
                name,
                error=f"os argumentos de {name} não são um JSON válido ({exc.msg}); "
                'envie um objeto JSON, ex. {"month": "2026-06"}.',
            )
        if not isinstance(raw, dict):
            return ToolOutcome(name, error=f"os argumentos de {name} devem ser um objeto JSON.")
        arguments = _plain(raw)
        try:
            args = tool.args_model.model_validate(raw)
        except ValidationError as exc:
            return ToolOutcome(name, arguments, error=validation_error_text(name, exc))
        try:
            result = await tool.handler(args, ctx)
        except ToolError as exc:
            return ToolOutcome(name, arguments, error=str(exc))
        except Exception:
            log.exception("tool.failed", tool=name)
            return ToolOutcome(
                name,
                arguments,
                error=f"erro interno ao executar {name}; avise que não foi possível agora "
                "e não invente números.",
            )
        return ToolOutcome(name, arguments, result=result)


def validation_error_text(tool_name: str, exc: ValidationError) -> str:
    """A PT-BR description of what is wrong with the arguments, one line per field."""
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "argumentos"
        kind = error["type"]
        if kind == "missing":
            reason = "campo obrigatório ausente"
        elif kind == "extra_forbidden":
            reason = "campo desconhecido (remova)"
        else:
            reason = str(error["msg"]).removeprefix("Value error, ")
        problems.append(f"{where}: {reason}")
    return (
        f"argumentos inválidos para {tool_name}: "
        + "; ".join(problems)
        + ". Corrija e chame de novo."
    )


def _plain(value: Any) -> Any:
    """Arguments as recorded: JSON numbers that were parsed as Decimal become strings."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _clean_schema(node: Any, *, is_properties: bool = False) -> Any:
    """Trim a pydantic JSON schema for the model: drop ``title``s and collapse
    ``anyOf: [X, null]`` of optional fields into ``X`` (small models read it better)."""
    if isinstance(node, list):
        return [_clean_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    if is_properties:
        return {key: _clean_schema(value) for key, value in node.items()}
    cleaned = {
        key: _clean_schema(value, is_properties=key in ("properties", "$defs"))
        for key, value in node.items()
        if key != "title"
    }
    options = cleaned.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        other = next(option for option in options if option != {"type": "null"})
        del cleaned["anyOf"]
        if cleaned.get("default", 0) is None:
            del cleaned["default"]
        cleaned = {**other, **cleaned}
    return cleaned
