"""Hypotheses and the validation of a batch: every one must cite real evidence.

The model hands its hypotheses over with the mandatory tool ``emit_hypotheses``
(arguments :class:`EmitHypothesesArgs`). :func:`validate_batch` checks the whole batch
and rejects it WHOLE when any hypothesis fails (ADR 0015, decision 3): a partial accept
would make the model believe part of it was recorded. The rejection text lists every
problem with the hypothesis index and goes back to the model verbatim as the tool result,
so it can correct itself on the next turn.

Checks: arguments are a JSON object with a non-empty ``hypotheses`` list; each hypothesis
has the required fields, an integer confidence 0–100 (``72.5`` and ``"72"`` are
rejected), a known target agent, and a non-empty list of evidence ids that exist AND
belong to the analysed session; when the session closed abnormally, at least one
hypothesis carries a ``termination_analysis``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator

from agent.tools.base import Tool, ToolContext

__all__ = [
    "EMIT_HYPOTHESES",
    "BatchResult",
    "EmitHypothesesArgs",
    "HypothesisIn",
    "emit_hypotheses_tool",
    "validate_batch",
]

EMIT_HYPOTHESES: Final = "emit_hypotheses"

_TOOL_DESCRIPTION = (
    "Registra o lote de hipóteses sobre a sessão analisada. Cada hipótese aponta o agente "
    "alvo, uma confiança inteira de 0 a 100 e os ids dos eventos DESTA sessão que a "
    "sustentam. O lote inteiro é rejeitado se qualquer hipótese for inválida; a resposta "
    "diz o que corrigir."
)

_EventId = Annotated[StrictStr, Field(min_length=1, max_length=64)]


def _required_text(max_length: int) -> Any:
    return Field(min_length=1, max_length=max_length)


class HypothesisIn(BaseModel):
    """One hypothesis as the model proposes it."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)

    target_agent: Annotated[StrictStr, _required_text(64)] = Field(
        description="O agente (ou componente) que falhou ou deve mudar; um da lista dada."
    )
    title: Annotated[StrictStr, _required_text(200)] = Field(
        description="Resumo da hipótese em uma frase curta."
    )
    description: Annotated[StrictStr, _required_text(4000)] = Field(
        description="O que aconteceu, por que é um problema e o que mudar no agente."
    )
    confidence: Annotated[int, Field(strict=True, ge=0, le=100)] = Field(
        description="Confiança na hipótese: número inteiro de 0 a 100."
    )
    evidence_event_ids: Annotated[list[_EventId], Field(min_length=1, max_length=50)] = Field(
        description="Ids dos eventos desta sessão que sustentam a hipótese (ao menos um), "
        "exatamente como aparecem no log, sem colchetes."
    )
    termination_analysis: Annotated[StrictStr, Field(max_length=4000)] | None = Field(
        default=None,
        description="Como a causa do término afetou o casal (obrigatório em ao menos uma "
        "hipótese quando a sessão terminou de forma anormal).",
    )

    @field_validator("evidence_event_ids")
    @classmethod
    def _unique(cls, ids: list[str]) -> list[str]:
        return list(dict.fromkeys(ids))

    @field_validator("termination_analysis")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value or None


class EmitHypothesesArgs(BaseModel):
    """The arguments of ``emit_hypotheses``: a non-empty batch."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hypotheses: Annotated[list[HypothesisIn], Field(min_length=1)] = Field(
        description="O lote de hipóteses (ao menos uma)."
    )


async def _validated_by_the_analyst(args: EmitHypothesesArgs, ctx: ToolContext) -> dict[str, Any]:
    raise RuntimeError("emit_hypotheses is validated by Psychologist.analyze, not a ToolRegistry")


_TOOL: Final = Tool(
    EMIT_HYPOTHESES, _TOOL_DESCRIPTION, EmitHypothesesArgs, _validated_by_the_analyst
)


def emit_hypotheses_tool() -> dict[str, Any]:
    """The OpenAI ``tools`` entry for ``emit_hypotheses`` (schema from the pydantic models)."""
    return _TOOL.schema()


@dataclass(frozen=True)
class BatchResult:
    """The verdict on one batch: the accepted hypotheses, or the error text for the model.

    ``error`` is ``""`` when ``ok``; ``problems`` are its lines, one per problem.
    """

    ok: bool
    hypotheses: list[HypothesisIn] = field(default_factory=list)
    error: str = ""
    problems: list[str] = field(default_factory=list)


def validate_batch(
    args: str | Mapping[str, Any],
    *,
    session_event_ids: Collection[str],
    known_event_ids: Collection[str] | None = None,
    abnormal: bool,
    allowed_targets: Collection[str] | None = None,
    cause: str | None = None,
) -> BatchResult:
    """Validate an ``emit_hypotheses`` call (its JSON arguments text, or the parsed object).

    ``session_event_ids`` are the ids of the analysed session's events; ``known_event_ids``
    every id that exists anywhere (when given, an id of another session is told apart from
    one that does not exist). ``allowed_targets`` restricts ``target_agent`` (matched
    case-insensitively, returned in the canonical spelling). ``cause`` only enriches the
    message when ``abnormal`` requires a termination analysis.
    """
    if isinstance(args, str):
        try:
            raw: Any = json.loads(args.strip() or "{}")
        except json.JSONDecodeError as exc:
            return _rejected(
                [f"os argumentos não são um JSON válido ({exc.msg}, posição {exc.pos})"]
            )
    else:
        raw = dict(args)
    checker = _Checker(session_event_ids, known_event_ids, allowed_targets)
    problems: list[str] = []
    if not isinstance(raw, dict):
        return _rejected(['os argumentos devem ser um objeto JSON: {"hypotheses": [...]}'])
    problems.extend(f"{key}: campo desconhecido (remova)" for key in raw if key != "hypotheses")
    items = raw.get("hypotheses")
    if items is None:
        problems.append("hypotheses: campo obrigatório ausente")
        return _rejected(problems)
    if not isinstance(items, list):
        problems.append("hypotheses: deve ser uma lista de hipóteses")
        return _rejected(problems)
    if not items:
        problems.append("hypotheses: a lista está vazia; envie ao menos uma hipótese")
        return _rejected(problems)
    accepted: list[HypothesisIn] = []
    with_analysis = 0
    for index, item in enumerate(items):
        hypothesis = checker.check(f"hypotheses[{index}]", item, problems)
        if hypothesis is not None:
            accepted.append(hypothesis)
        if isinstance(item, dict):
            analysis = item.get("termination_analysis")
            if isinstance(analysis, str) and analysis.strip():
                with_analysis += 1
    if abnormal and not with_analysis:
        why = f" ({cause})" if cause else ""
        problems.append(
            f"lote: a sessão terminou de forma anormal{why}; ao menos uma hipótese precisa "
            "de termination_analysis explicando como esse término afetou o casal"
        )
    if problems:
        return _rejected(problems)
    return BatchResult(True, accepted)


class _Checker:
    def __init__(
        self,
        session_ids: Collection[str],
        known_ids: Collection[str] | None,
        targets: Collection[str] | None,
    ) -> None:
        self.session_ids = session_ids
        self.known_ids = known_ids
        self.targets = {name.lower(): name for name in targets} if targets is not None else None

    def check(self, where: str, item: Any, problems: list[str]) -> HypothesisIn | None:
        if not isinstance(item, dict):
            problems.append(f"{where}: cada hipótese deve ser um objeto JSON")
            return None
        hypothesis: HypothesisIn | None = None
        try:
            hypothesis = HypothesisIn.model_validate(item)
        except ValidationError as exc:
            for error in exc.errors():
                loc = "".join(
                    f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]
                )
                problems.append(f"{where}{loc}: {_reason(error)}")
        ids = item.get("evidence_event_ids")
        if isinstance(ids, list):
            for position, event_id in enumerate(ids):
                if isinstance(event_id, str) and event_id.strip():
                    problem = self._evidence_problem(event_id.strip())
                    if problem:
                        problems.append(f"{where}.evidence_event_ids[{position}]: {problem}")
        target = item.get("target_agent")
        if self.targets is not None and isinstance(target, str) and target.strip():
            canonical = self.targets.get(target.strip().lower())
            if canonical is None:
                known = ", ".join(sorted(self.targets.values()))
                problems.append(
                    f"{where}.target_agent: agente desconhecido {target.strip()!r}; "
                    f"use um destes: {known}"
                )
                return None
            if hypothesis is not None and hypothesis.target_agent != canonical:
                hypothesis = hypothesis.model_copy(update={"target_agent": canonical})
        return hypothesis

    def _evidence_problem(self, event_id: str) -> str | None:
        if event_id in self.session_ids:
            return None
        if self.known_ids is None:
            return (
                f"o evento {event_id!r} não existe nesta sessão; cite apenas ids do log "
                "desta sessão"
            )
        if event_id in self.known_ids:
            return (
                f"o evento {event_id!r} pertence a outra sessão; cite apenas eventos desta sessão"
            )
        return f"o evento {event_id!r} não existe; cite apenas ids do log desta sessão"


def _rejected(problems: list[str]) -> BatchResult:
    count = len(problems)
    noun = "problema" if count == 1 else "problemas"
    error = (
        f"Lote rejeitado: nenhuma hipótese foi registrada. {count} {noun}:\n"
        + "\n".join(f"- {problem}" for problem in problems)
        + "\nCorrija todos e chame emit_hypotheses de novo com o lote inteiro."
    )
    return BatchResult(False, [], error, list(problems))


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:59] + "…"


def _reason(error: Mapping[str, Any]) -> str:
    """One pydantic error as PT-BR the model can act on."""
    kind = error.get("type", "")
    ctx = error.get("ctx") or {}
    got = f" (recebido: {_shown(error.get('input'))})"
    loc = error.get("loc") or ()
    field_name = next((part for part in reversed(loc) if isinstance(part, str)), "")
    if kind == "missing":
        return "campo obrigatório ausente"
    if kind == "extra_forbidden":
        return "campo desconhecido (remova)"
    if field_name == "confidence":
        return "deve ser um número inteiro de 0 a 100, sem aspas nem casas decimais" + got
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "deve ser um número inteiro" + got
    if kind == "string_type":
        return "deve ser um texto" + got
    if kind == "string_too_short":
        return "não pode ser vazio"
    if kind == "string_too_long":
        return f"texto longo demais (máximo {ctx.get('max_length')} caracteres)"
    if kind == "list_type":
        return "deve ser uma lista" + got
    if kind == "too_short" and field_name == "evidence_event_ids":
        return "lista vazia: cite ao menos um id de evento desta sessão"
    if kind == "too_short":
        return "a lista não pode ser vazia"
    if kind == "too_long":
        return f"itens demais (máximo {ctx.get('max_length')})"
    return str(error.get("msg", "valor inválido")).removeprefix("Value error, ")
