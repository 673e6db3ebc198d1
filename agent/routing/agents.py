"""The domain agents: one :class:`~agent.chat.AgentChat` configuration per subject.

An agent is defined by an :class:`AgentSpec` — name, domain, intents, tool names and a
PT-BR focus for its prompt — and becomes a :class:`DomainAgent` once given the LLM and the
ledger. Its capability description is derived from its intents
(:func:`describe_capabilities`), never written by hand: the router and the continuity
classifier read exactly that.

The invoice agent's data: the ledger has no card statements, so the invoice is the month's
expenses under the category "cartão" (see ``agent.tools.finance.card_invoice``); the agent
reads it with ``cardInvoice``, records card purchases with ``recordExpense`` and compares
with the rest of the month with ``spendingByCategory``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent.chat import AgentChat, AskResult
from agent.dates import now_sao_paulo
from agent.ledger import Ledger
from agent.llm import LLMClient
from agent.messages import ChatMessage
from agent.prompts import (
    BUDGET_AGENT_FOCUS,
    INVOICE_AGENT_FOCUS,
    SAVINGS_AGENT_FOCUS,
    build_domain_prompt,
)
from agent.tools.base import ToolRegistry
from agent.tools.finance import registry_for

__all__ = [
    "BUDGET_AGENT",
    "DEFAULT_AGENT_NAME",
    "DEFAULT_AGENT_SPECS",
    "INVOICE_AGENT",
    "SAVINGS_AGENT",
    "AgentSpec",
    "DomainAgent",
    "DomainAgents",
    "Intent",
    "build_domain_agents",
    "describe_capabilities",
]


@dataclass(frozen=True)
class Intent:
    """Something an agent handles: an identifier and a PT-BR description."""

    name: str
    description: str


def describe_capabilities(intents: Sequence[Intent]) -> str:
    """The capability description derived from an agent's intents (one clause each)."""
    return "; ".join(f"{intent.description} ({intent.name})" for intent in intents)


@dataclass(frozen=True)
class AgentSpec:
    """What a domain agent is, without its runtime (LLM, ledger)."""

    name: str
    domain: str
    intents: tuple[Intent, ...]
    tool_names: tuple[str, ...]
    focus: str
    """The PT-BR focus section of its system prompt (``agent.prompts``)."""

    def __post_init__(self) -> None:
        if not self.intents:
            raise ValueError(f"agent {self.name!r} needs at least one intent")
        names = [intent.name for intent in self.intents]
        if len(set(names)) != len(names):
            raise ValueError(f"agent {self.name!r} has duplicate intents")

    @property
    def capability_description(self) -> str:
        return describe_capabilities(self.intents)

    def intent(self, name: str | None) -> Intent | None:
        return next((intent for intent in self.intents if intent.name == name), None)


BUDGET_AGENT = AgentSpec(
    name="budget_agent",
    domain="budget",
    intents=(
        Intent("month_total", "quanto o casal gastou no mês comparado ao orçamento total"),
        Intent("spending_by_category", "quanto foi gasto em cada categoria no mês"),
        Intent("budget_status", "situação do orçamento por categoria: gasto, restante e % usado"),
        Intent("record_expense", "registrar um gasto do casal"),
        Intent("set_budget", "definir o orçamento do mês ou de uma categoria"),
    ),
    tool_names=("budgetTotal", "spendingByCategory", "recordExpense", "setBudget", "budgetStatus"),
    focus=BUDGET_AGENT_FOCUS,
)
SAVINGS_AGENT = AgentSpec(
    name="savings_agent",
    domain="savings",
    intents=(
        Intent("goal_progress", "progresso das metas de economia: guardado, alvo, falta, prazo"),
        Intent("contribute_to_goal", "guardar um valor numa meta de economia existente"),
        Intent("create_goal", "criar uma meta de economia com valor alvo e prazo"),
    ),
    tool_names=("savingsGoalProgress", "contributeToGoal", "createSavingsGoal"),
    focus=SAVINGS_AGENT_FOCUS,
)
INVOICE_AGENT = AgentSpec(
    name="invoice_agent",
    domain="card_invoice",
    intents=(
        Intent("invoice_summary", "valor da fatura do cartão no mês e as compras lançadas nela"),
        Intent("record_card_purchase", "registrar uma compra feita no cartão de crédito"),
        Intent("dispute_charge", "dúvida ou contestação de uma cobrança da fatura do cartão"),
    ),
    tool_names=("cardInvoice", "recordExpense", "spendingByCategory"),
    focus=INVOICE_AGENT_FOCUS,
)
DEFAULT_AGENT_SPECS = (BUDGET_AGENT, SAVINGS_AGENT, INVOICE_AGENT)
DEFAULT_AGENT_NAME = BUDGET_AGENT.name


class DomainAgent:
    """An :class:`AgentSpec` with its own tools, prompt and profile, ready to answer."""

    def __init__(
        self,
        spec: AgentSpec,
        llm: LLMClient | None,
        ledger: Ledger | None,
        *,
        profile: str = "agent",
        max_tool_rounds: int = 4,
        clock: Callable[[], datetime] = now_sao_paulo,
        tools: ToolRegistry | None = None,
    ) -> None:
        self.spec = spec
        self.llm = llm
        self.ledger = ledger
        self.profile = profile
        self.max_tool_rounds = max_tool_rounds
        self.clock = clock
        self.tools = tools if tools is not None else registry_for(spec.tool_names)
        self.chat = AgentChat(
            llm,
            self.tools,
            ledger,
            profile=profile,
            system_prompt=self.system_prompt,
            max_tool_rounds=max_tool_rounds,
            clock=clock,
        )

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def domain(self) -> str:
        return self.spec.domain

    @property
    def intents(self) -> tuple[Intent, ...]:
        return self.spec.intents

    @property
    def capability_description(self) -> str:
        return self.spec.capability_description

    def system_prompt(self, now: datetime | None = None) -> str:
        """Its PT-BR system prompt, dated ``now`` (default: the clock's now)."""
        return build_domain_prompt(
            now or self.clock(), focus=self.spec.focus, capabilities=self.capability_description
        )

    async def ask(
        self,
        messages: Sequence[ChatMessage],
        past_turns_without_tool_call: int | None = None,
        *,
        thread_id: str | None = None,
        household_id: str | None = None,
    ) -> AskResult:
        """Guard, then the model (``AgentChat.ask``), with this agent's prompt and tools."""
        return await self.chat.ask(
            messages,
            past_turns_without_tool_call,
            thread_id=thread_id,
            household_id=household_id,
        )

    async def answer(
        self,
        messages: Sequence[ChatMessage],
        *,
        thread_id: str | None = None,
        household_id: str | None = None,
    ) -> AskResult:
        """The model alone (``AgentChat.answer``): for session control, which ran the guard."""
        return await self.chat.answer(messages, thread_id=thread_id, household_id=household_id)

    def card(self) -> dict[str, Any]:
        """What the router and the classifier are told about this agent."""
        return {
            "agent": self.name,
            "domain": self.domain,
            "capabilities": self.capability_description,
        }

    def __repr__(self) -> str:
        return f"DomainAgent({self.name!r}, tools={self.tools.names})"


class DomainAgents:
    """The agents by name, one of them the default (the fallback of every routing doubt)."""

    def __init__(self, agents: Iterable[DomainAgent], default: str = DEFAULT_AGENT_NAME) -> None:
        self._agents: dict[str, DomainAgent] = {}
        for agent in agents:
            if agent.name in self._agents:
                raise ValueError(f"agent {agent.name!r} is defined twice")
            self._agents[agent.name] = agent
        if default not in self._agents:
            raise ValueError(f"default agent {default!r} is not one of {list(self._agents)}")
        self.default_name = default

    @property
    def default(self) -> DomainAgent:
        return self._agents[self.default_name]

    @property
    def names(self) -> list[str]:
        return list(self._agents)

    def get(self, name: str | None) -> DomainAgent | None:
        return self._agents.get(name) if name is not None else None

    def __getitem__(self, name: str) -> DomainAgent:
        return self._agents[name]

    def __contains__(self, name: object) -> bool:
        return name in self._agents

    def __iter__(self) -> Iterator[DomainAgent]:
        return iter(self._agents.values())

    def __len__(self) -> int:
        return len(self._agents)

    def cards(self) -> list[dict[str, Any]]:
        """Every agent's capability card, for the continuity classifier."""
        return [agent.card() for agent in self]


def build_domain_agents(
    llm: LLMClient | None,
    ledger: Ledger | None,
    *,
    specs: Sequence[AgentSpec] = DEFAULT_AGENT_SPECS,
    default: str = DEFAULT_AGENT_NAME,
    profile: str = "agent",
    max_tool_rounds: int = 4,
    clock: Callable[[], datetime] = now_sao_paulo,
) -> DomainAgents:
    """The domain agents on one LLM client and one ledger."""
    return DomainAgents(
        (
            DomainAgent(
                spec, llm, ledger, profile=profile, max_tool_rounds=max_tool_rounds, clock=clock
            )
            for spec in specs
        ),
        default,
    )
