"""The psychologist's prompt: the session's log, the rules, the cause, earlier hypotheses.

The system message says what to do and how to answer (``emit_hypotheses`` only), with the
business rules and the agents a hypothesis may target. The user message holds the data:
the termination cause as a FACT, the thread's earlier non-dismissed hypotheses (not to be
repeated; they may be reinforced with new evidence) and the full event log, one event per
block, each headed by its id in brackets so the model can cite it.

Personal data stays out: phone numbers in any text are masked (the middle digits), the
couple's profile name, locations and media links are not rendered. Only string values are
masked, so ids, timestamps and counts stay intact.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent.messages import ChatMessage
from agent.psychologist.hypotheses import EMIT_HYPOTHESES
from agent.psychologist.lifecycle import HypothesisStatus
from agent.psychologist.termination import Termination

__all__ = [
    "DEFAULT_AGENTS",
    "NUDGE",
    "AgentInfo",
    "build_messages",
    "mask_phone_numbers",
    "render_event",
    "render_log",
]


@dataclass(frozen=True)
class AgentInfo:
    """An agent (or component) a hypothesis may target, and what it does."""

    name: str
    description: str


DEFAULT_AGENTS: Final[tuple[AgentInfo, ...]] = (
    AgentInfo(
        "budget_agent",
        "orçamento e gastos do mês (budgetTotal, spendingByCategory, budgetStatus, "
        "recordExpense, setBudget)",
    ),
    AgentInfo(
        "savings_agent",
        "metas de economia (savingsGoalProgress, contributeToGoal, createSavingsGoal)",
    ),
    AgentInfo(
        "invoice_agent",
        "fatura do cartão: valor, compras lançadas, contestação (cardInvoice, recordExpense, "
        "spendingByCategory)",
    ),
    AgentInfo("router", "enterprise router: escolhe agente, intent e domínio de cada turno"),
    AgentInfo(
        "continuity",
        "classificador de continuidade: CONTINUE / ROUTE / HUMAN_HANDOFF / END_SESSION",
    ),
    AgentInfo(
        "guard",
        "ConversationGuard: respostas canônicas, sem LLM, a frustração, loop e pedido de humano",
    ),
    AgentInfo(
        "gateway",
        "canal e sessões: recebimento, ordem, entrega, handoff, encerramento, timeouts",
    ),
    AgentInfo("support", "o atendimento humano: tempo de resposta ao handoff, devolução, fecho"),
)

NUDGE: Final = (
    f"Você respondeu sem chamar a ferramenta. Chame {EMIT_HYPOTHESES} com o lote de "
    "hipóteses (cada uma com evidence_event_ids desta sessão); nada é registrado de outro "
    "jeito."
)
"""The user message sent after a reply without the tool call."""

_TEXT_MAX = 1500
_VALUE_MAX = 300
_SPEAKERS: Final = {
    "message.received": "casal",
    "agent.replied": "mel",
    "agent.failed": "mel",
    "support.replied": "suporte",
}
_HIDDEN_KEYS: Final = frozenset({"profile_name", "text"})
_PHONE: Final = re.compile(r"(?<![\w.,/-])\+?\(?\d[\d\s().-]{6,}\d(?!\w|,\d)")
_NOT_A_PHONE: Final = re.compile(r"\d{4}-\d{2}-\d{2}|\d{13}-\d+$")
"""A date (``2026-06-03…``) or a Redis stream id (``1717405200000-0``)."""

_SYSTEM: Final = """\
Você é o psicólogo da mel, a assistente virtual de finanças de casais no WhatsApp. Depois
que uma sessão termina, você lê o log completo dela e explica por que ela foi bem ou mal
para o casal: qual agente, ferramenta, preempt do guard, decisão de roteamento ou parte do
sistema falhou com eles — para que o time corrija os agentes.

Como trabalhar
- Julgue a sessão contra as regras de negócio abaixo; aponte desvios concretos.
- Cada hipótese precisa de evidência: os ids de eventos DESTA sessão que a sustentam,
  copiados exatamente como aparecem entre colchetes no log (sem os colchetes).
- A causa do término é um FATO determinado pelo sistema: não a questione nem a adivinhe;
  analise as consequências dela para o casal. Quando a sessão terminou de forma anormal,
  ao menos uma hipótese precisa de termination_analysis.
- Não repita hipóteses anteriores da conversa. Se esta sessão reforça uma delas, diga
  isso na descrição e cite a evidência nova desta sessão.
- target_agent é um dos agentes listados abaixo. confidence é um número inteiro de 0 a
  100, calibrado pela força da evidência.
- Prefira poucas hipóteses bem sustentadas a muitas fracas. Nunca invente problemas.
- Responda SOMENTE chamando a ferramenta {tool} com o lote inteiro. Se o lote for
  rejeitado, a resposta da ferramenta diz o que corrigir: corrija e chame de novo.

Agentes que podem ser alvo
{agents}

Regras de negócio
{rules}
"""


def mask_phone_numbers(text: str) -> str:
    """Mask every phone-number-like run of 8 to 15 digits in ``text``: the first two and
    the last two digits stay, the middle becomes ``*`` (``"+5511999990000"`` →
    ``"+55*********00"``). Runs that start like a date (``2026-06-03``) are left alone."""

    def mask(match: re.Match[str]) -> str:
        found = match.group(0)
        digits = re.sub(r"\D", "", found)
        if not 8 <= len(digits) <= 15 or _NOT_A_PHONE.match(found):
            return found
        plus = "+" if found.startswith("+") else ""
        return plus + digits[:2] + "*" * (len(digits) - 4) + digits[-2:]

    return _PHONE.sub(mask, text)


def _masked(value: Any) -> Any:
    """Strings masked (recursively); numbers, booleans and keys untouched."""
    if isinstance(value, str):
        return _clip(mask_phone_numbers(value), _VALUE_MAX)
    if isinstance(value, Mapping):
        return {str(key): _masked(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(item) for item in value]
    return value


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def _safe_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """The event data minus what is personal or rendered apart."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in _HIDDEN_KEYS or key == "tool_calls":
            continue
        if key == "location":
            out[key] = "[localização omitida]"
        elif key == "media" and isinstance(value, list):
            out[key] = [
                {k: m[k] for k in ("kind", "mime_type") if k in m}
                for m in value
                if isinstance(m, Mapping)
            ]
        else:
            out[key] = _masked(value)
    return out


def render_event(event: Mapping[str, Any]) -> str:
    """One event as the model reads it, e.g.:

    [1717405200000-0] 2026-06-03T12:00:00Z message.received
      casal: "qual o total do mês?"
      dados: {"kind": "text", "channel": "twilio"}
    """
    event_id = str(event.get("id", "?"))
    kind = str(event.get("type", "?"))
    at = str(event.get("at") or "")
    lines = [" ".join(part for part in (f"[{event_id}]", at, kind) if part)]
    data = event.get("data")
    data = data if isinstance(data, Mapping) else {}
    said = data.get("text")
    if isinstance(said, str) and said:
        speaker = _SPEAKERS.get(kind, "texto")
        shown = _clip(mask_phone_numbers(said), _TEXT_MAX)
        lines.append(f"  {speaker}: {json.dumps(shown, ensure_ascii=False)}")
    calls = data.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            if not isinstance(call, Mapping):
                continue
            arguments = _compact(_masked(call.get("arguments", {})))
            line = f"  ferramenta: {call.get('name', '?')}({arguments})"
            failure = call.get("error")
            line += f" → erro: {_masked(str(failure))}" if failure else " → ok"
            lines.append(line)
    rest = _safe_data(data)
    if rest:
        lines.append(f"  dados: {_compact(rest)}")
    return "\n".join(lines)


def render_log(events: Sequence[Mapping[str, Any]]) -> str:
    """The whole log, oldest first, one block per event."""
    if not events:
        return "(nenhum evento registrado)"
    return "\n".join(render_event(event) for event in events)


def _render_previous(previous: Sequence[Mapping[str, Any]]) -> str:
    shown = [h for h in previous if str(h.get("status", "proposed")) != HypothesisStatus.DISMISSED]
    if not shown:
        return "(nenhuma)"
    lines = []
    for h in shown:
        head = ", ".join(
            part
            for part in (
                f"status {h.get('status', 'proposed')}",
                f"alvo {h.get('target_agent', '?')}",
                f"confiança {h.get('confidence', '?')}",
                f"sessão {h['session_id']}" if h.get("session_id") else "",
            )
            if part
        )
        title = _masked(str(h.get("title", "")))
        description = _masked(str(h.get("description", "")))
        lines.append(f"- ({head}) {title}: {description}")
    return "\n".join(lines)


def build_messages(
    *,
    session_id: str,
    thread_id: str,
    events: Sequence[Mapping[str, Any]],
    rules: str,
    termination: Termination,
    previous_hypotheses: Sequence[Mapping[str, Any]] = (),
    agents: Sequence[AgentInfo] = DEFAULT_AGENTS,
) -> list[ChatMessage]:
    """The system and user messages of an analysis."""
    agent_lines = "\n".join(f"- {agent.name}: {agent.description}" for agent in agents)
    system = _SYSTEM.format(tool=EMIT_HYPOTHESES, agents=agent_lines, rules=rules.strip())
    abnormal = "ANORMAL" if termination.abnormal else "normal"
    analysis_rule = (
        "Ao menos uma hipótese precisa de termination_analysis."
        if termination.abnormal
        else "termination_analysis é opcional."
    )
    user = "\n".join(
        [
            f"Sessão {session_id} (conversa {mask_phone_numbers(thread_id)}), "
            f"{len(events)} eventos.",
            "",
            "Término da sessão (FATO, não questione):",
            f"- causa: {termination.cause} ({abnormal}); evento {termination.event_type}",
            f"- {_masked(termination.description)}",
            f"- {analysis_rule}",
            "",
            "Hipóteses anteriores desta conversa (não descartadas; não repita):",
            _render_previous(previous_hypotheses),
            "",
            "Log de eventos da sessão (mais antigo primeiro; cite os ids entre colchetes):",
            render_log(events),
        ]
    )
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]
