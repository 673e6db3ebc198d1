"""Route stickiness benchmark (the spec's "benchmark recomendado").

The same multi-turn PT-BR conversations run twice through ``SessionControl`` — stickiness
off, then on — with the real openai client, the real domain agents and their tools on a
real (embedded) Redis ledger, against the fake chat-completions server on loopback. Each
profile has its own model name and a realistic latency: router 700 ms, continuity
classifier 250 ms, agent 1.2 s per call. To finish in seconds every latency is divided by
``SCALE`` (10) and every measured time is multiplied back by it, so the figures read as
production milliseconds (the loopback HTTP overhead, ~1-3 ms a call, is multiplied too;
the table shows how much of each run is the latency model itself). Token counts are what
the fake server counts on the real requests (~4 characters a token): the real prompts,
tool schemas, histories and replies.

The classifier's and the router's answers are scripted per turn (``Turn``): a responder
finds the turn by its exact message and returns what the script says — it never reads
what the message means. The script is written to be realistic: follow-ups that stay with
the agent, switches of domain, two follow-ups the classifier is unsure about (below the
threshold), a request for a person the guard does not catch, and conversations ending
with a request to close.

As the spec demands, time saved is attributed to stickiness only on turns with
``route_bypassed`` and no router call in the same turn; the classifier's cost on the
other turns is shown on its own line, not netted into the savings.

Run it with ``python -m bench.stickiness_bench`` (``--turns`` prints every turn); the
table is also written to ``bench/RESULTS.md`` under "Route stickiness".
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from agent.dates import SAO_PAULO
from agent.ledger import Ledger, NewExpense
from agent.llm import LLMClient, LLMResponse, OpenAICompatibleLLM, Usage
from agent.messages import ChatMessage
from agent.profiles import LLMProfiles, load_profiles
from agent.routing import RouteState, SessionControlConfig, TurnResult, build_session_control
from gateway.store.embedded import EmbeddedRedis
from guard import ConversationGuard, GuardInput
from tests.fakes.llm import FakeLLM, Reply, Scripted, error, text, tool_call

SCALE = 10
"""Latencies are divided by this to run fast; measured times are multiplied back."""
LATENCY_S = {"router": 0.700, "route_continuity": 0.250, "agent": 1.200}
"""Production-like latency of one call, per profile."""
MODELS = {"router": "bench-router", "route_continuity": "bench-continuity", "agent": "bench-agent"}
ROLE_OF_MODEL = {model: role for role, model in MODELS.items()}
PROFILES = ("route_continuity", "router", "agent")
NOW = datetime(2026, 6, 15, 10, 30, tzinfo=SAO_PAULO)
BUSINESS = "+14155238886"
RESULTS = Path(__file__).with_name("RESULTS.md")
HEADING = "## Route stickiness"


# -- the script --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One user message and what each model answers to it.

    ``decision``/``confidence``: the classifier's answer. ``agent``/``intent``: the router's
    (asked every turn with stickiness off; with it on, only when the classifier routes).
    ``tool``: the call the agent makes first, if any; ``reply``: its final text.
    """

    text: str
    decision: str
    confidence: float
    agent: str
    intent: str
    reply: str
    tool: tuple[str, dict[str, Any]] | None = None


@dataclass(frozen=True)
class Conversation:
    name: str
    number: str
    turns: tuple[Turn, ...]


CONVERSATIONS = (
    Conversation(
        "orçamento → fatura → fim",
        "+5511900000001",
        (
            Turn("quanto a gente já gastou esse mês?", "ROUTE", 0.97, "budget_agent",
                 "month_total", "Em junho vocês gastaram R$ 2.154,90 de R$ 3.000,00 (71,8%). "
                 "Quer ver por categoria?", ("budgetTotal", {"month": "2026-06"})),
            Turn("e em mercado, quanto foi?", "CONTINUE", 0.96, "budget_agent",
                 "spending_by_category", "Mercado: R$ 640,00 em junho, 29,7% do total. Quer "
                 "definir um teto pra mercado?", ("spendingByCategory", {"month": "2026-06"})),
            Turn("isso tá dentro do que a gente combinou?", "CONTINUE", 0.93, "budget_agent",
                 "budget_status", "Sim: o teto de mercado é R$ 800,00 e ainda restam "
                 "R$ 160,00. Quer ver as outras categorias?", ("budgetStatus", {})),
            Turn("anota aí 52 reais de padaria hoje", "CONTINUE", 0.95, "budget_agent",
                 "record_expense", "Anotei R$ 52,00 em padaria hoje. Quer ver como ficou o mês?",
                 ("recordExpense", {"amount": "52.00", "category": "padaria"})),
            Turn("e a fatura do cartão, já fechou?", "ROUTE", 0.95, "invoice_agent",
                 "invoice_summary", "A fatura de junho está em R$ 589,90 com 3 compras. Quer "
                 "ver a lista?", ("cardInvoice", {"month": "2026-06"})),
            Turn("tem uma compra de 199 que eu não reconheço", "CONTINUE", 0.94,
                 "invoice_agent", "dispute_charge", "Não achei compra de R$ 199,00 na fatura "
                 "de junho; as compras são de R$ 89,90, R$ 250,00 e R$ 250,00. Quer que eu "
                 "explique como contestar?", ("cardInvoice", {"month": "2026-06"})),
            Turn("como faço pra contestar?", "CONTINUE", 0.97, "invoice_agent",
                 "dispute_charge", "Pelo app do banco: abra a fatura, toque na compra e escolha "
                 "'contestar'. Guarde o protocolo. Quer que eu anote um lembrete?"),
            Turn("obrigado, pode encerrar", "END_SESSION", 0.98, "invoice_agent",
                 "dispute_charge", "Por nada! Qualquer coisa é só chamar."),
        ),
    ),
    Conversation(
        "metas → orçamento → fim",
        "+5511900000002",
        (
            Turn("quanto falta pra meta da viagem?", "ROUTE", 0.96, "savings_agent",
                 "goal_progress", "Faltam R$ 3.800,00 para a viagem (R$ 1.200,00 de "
                 "R$ 5.000,00). Quer guardar algo hoje?", ("savingsGoalProgress",
                                                          {"goal": "viagem"})),
            Turn("e se a gente guardar 300 por mês, dá tempo?", "CONTINUE", 0.92,
                 "savings_agent", "goal_progress", "Com o prazo em dezembro, a ferramenta "
                 "calculou R$ 634,00 por mês; com R$ 300,00 não fecha. Quer rever o prazo?"),
            Turn("guarda 300 na viagem então", "CONTINUE", 0.96, "savings_agent",
                 "contribute_to_goal", "Guardei R$ 300,00 na viagem: agora são R$ 1.500,00 "
                 "(30%). Quer ver as outras metas?", ("contributeToGoal",
                                                     {"goal": "viagem", "amount": "300.00"})),
            Turn("quero criar outra meta, reserva de emergência de 10 mil", "CONTINUE", 0.91,
                 "savings_agent", "create_goal", "Criei a meta reserva de emergência de "
                 "R$ 10.000,00. Quer definir um prazo?", ("createSavingsGoal",
                                                         {"name": "reserva de emergência",
                                                          "target_amount": "10000.00"})),
            Turn("e quanto sobrou do orçamento esse mês?", "ROUTE", 0.97, "budget_agent",
                 "month_total", "Restam R$ 845,10 do orçamento de junho. Quer ver por "
                 "categoria?", ("budgetTotal", {"month": "2026-06"})),
            Turn("valeu, era só isso", "END_SESSION", 0.95, "budget_agent", "month_total",
                 "Imagina! Até a próxima."),
        ),
    ),
    Conversation(
        "dúvidas → fatura → pessoa",
        "+5511900000003",
        (
            Turn("oi mel, tudo bem?", "ROUTE", 0.99, "budget_agent", "month_total",
                 "Oi! Tudo ótimo. Posso ajudar com orçamento, metas ou a fatura do cartão."),
            Turn("quero ver como estão os gastos", "CONTINUE", 0.86, "budget_agent",
                 "spending_by_category", "Em junho: aluguel R$ 1.200,00, mercado R$ 640,00, "
                 "cartão R$ 589,90. Quer ver o orçamento?", ("spendingByCategory", {})),
            Turn("e lazer?", "CONTINUE", 0.95, "budget_agent", "spending_by_category",
                 "Lazer: R$ 0,00 em junho até agora. Quer definir um teto?",
                 ("spendingByCategory", {"month": "2026-06"})),
            Turn("põe 400 de teto pra lazer", "CONTINUE", 0.94, "budget_agent", "set_budget",
                 "Feito: orçamento de lazer em junho é R$ 400,00. Quer ver o total do mês?",
                 ("setBudget", {"amount": "400.00", "category": "lazer"})),
            Turn("a parcela da tv entrou na fatura?", "ROUTE", 0.93, "invoice_agent",
                 "invoice_summary", "Não vi parcela de TV na fatura de junho; há 3 compras "
                 "no cartão. Quer a lista?", ("cardInvoice", {})),
            Turn("quero ser transferido", "HUMAN_HANDOFF", 0.96, "invoice_agent",
                 "dispute_charge", "Sou a mel, assistente virtual, e por aqui sou só eu. "
                 "Posso te ajudar com a fatura?"),
        ),
    ),
    Conversation(
        "registro de gastos → fatura → metas → fim",
        "+5511900000004",
        (
            Turn("gastei 120 no posto", "ROUTE", 0.97, "budget_agent", "record_expense",
                 "Anotei R$ 120,00 em combustível hoje. Quer ver quanto já foi de transporte?",
                 ("recordExpense", {"amount": "120.00", "category": "combustível"})),
            Turn("e 35 de farmácia também", "CONTINUE", 0.97, "budget_agent", "record_expense",
                 "Anotei R$ 35,00 em farmácia. Quer ver o total do mês?",
                 ("recordExpense", {"amount": "35.00", "category": "farmácia"})),
            Turn("quanto já foi de transporte?", "CONTINUE", 0.92, "budget_agent",
                 "spending_by_category", "Combustível: R$ 120,00 em junho. Quer definir um "
                 "teto?", ("spendingByCategory", {"month": "2026-06"})),
            Turn("passei no cartão, vai cair na fatura de julho?", "ROUTE", 0.91,
                 "invoice_agent", "invoice_summary", "Eu não tenho a data de fechamento do "
                 "cartão; posso registrar a compra como compra no cartão. Quer?"),
            Turn("então registra como compra no cartão", "CONTINUE", 0.95, "invoice_agent",
                 "record_card_purchase", "Registrei R$ 120,00 no cartão. Quer ver a fatura?",
                 ("recordExpense", {"amount": "120.00", "category": "cartão",
                                    "description": "posto"})),
            Turn("e a meta do carro, como tá?", "ROUTE", 0.98, "savings_agent",
                 "goal_progress", "Carro: R$ 8.000,00 de R$ 30.000,00 (26,7%). Quer guardar "
                 "algo?", ("savingsGoalProgress", {"goal": "carro"})),
            Turn("obrigada, pode fechar", "END_SESSION", 0.97, "savings_agent",
                 "goal_progress", "De nada! Até mais."),
        ),
    ),
    Conversation(
        "fatura em detalhe → orçamento → fim",
        "+5511900000005",
        (
            Turn("qual o valor da fatura desse mês?", "ROUTE", 0.98, "invoice_agent",
                 "invoice_summary", "A fatura de junho está em R$ 589,90 com 3 compras. "
                 "Quer a lista?", ("cardInvoice", {"month": "2026-06"})),
            Turn("quais foram as maiores compras?", "CONTINUE", 0.95, "invoice_agent",
                 "invoice_summary", "As maiores: R$ 250,00 (cartão nubank) duas vezes e "
                 "R$ 89,90 na farmácia. Quer ver por cartão?"),
            Turn("essa de 89,90 na farmácia foi a Ana?", "CONTINUE", 0.93, "invoice_agent",
                 "invoice_summary", "Sim, a de R$ 89,90 na farmácia foi registrada pela Ana. "
                 "Quer ver as outras?"),
            Turn("dá pra parcelar a fatura?", "CONTINUE", 0.88, "invoice_agent",
                 "invoice_summary", "Parcelamento é com o banco; eu não tenho essa opção. "
                 "Posso te mostrar o total pra vocês decidirem."),
            Turn("e no orçamento geral, a gente estourou?", "ROUTE", 0.96, "budget_agent",
                 "budget_status", "Não estouraram: usaram 71,8% de R$ 3.000,00. Mercado "
                 "está em 80% do teto. Quer detalhes?", ("budgetStatus", {})),
            Turn("qual categoria pesou mais?", "CONTINUE", 0.94, "budget_agent",
                 "spending_by_category", "Aluguel, com R$ 1.200,00 (55,7%). Depois mercado, "
                 "R$ 640,00. Quer definir tetos?"),
            Turn("beleza, encerra o atendimento", "END_SESSION", 0.99, "budget_agent",
                 "month_total", "Combinado! Até a próxima."),
        ),
    ),
)  # fmt: skip


def _script_index() -> dict[str, Turn]:
    index: dict[str, Turn] = {}
    for conversation in CONVERSATIONS:
        for turn in conversation.turns:
            if turn.text in index:
                raise ValueError(f"message used twice in the script: {turn.text!r}")
            if ConversationGuard.evaluate(
                GuardInput([ChatMessage(role="user", content=turn.text)])
            ).preempt:
                raise ValueError(f"the guard answers {turn.text!r}: not a routing benchmark turn")
            index[turn.text] = turn
    return index


class ScriptResponder:
    """Answers each model from the script: the turn is found by its exact message."""

    def __init__(self) -> None:
        self.turns = _script_index()

    def __call__(self, body: dict[str, Any]) -> Scripted:
        role = ROLE_OF_MODEL.get(str(body.get("model")))
        messages = body.get("messages", [])
        if role in ("router", "route_continuity"):
            payload = json.loads(messages[-1]["content"])
            turn = self.turns[payload["current_message"]]
            if role == "router":
                return text(json.dumps({"route": turn.agent, "intent": turn.intent,
                                        "confidence": 0.95}))  # fmt: skip
            return text(json.dumps({"decision": turn.decision, "confidence": turn.confidence}))
        if role == "agent":
            last_user = next(m for m in reversed(messages) if m.get("role") == "user")
            turn = self.turns[last_user["content"]]
            if turn.tool is not None and messages[-1].get("role") != "tool":
                return tool_call(*turn.tool)
            return Reply(content=turn.reply)
        return error(500, f"unexpected model {body.get('model')!r}")


# -- measuring -------------------------------------------------------------------------------


class TimedLLM:
    """An :class:`LLMClient` that records every call's profile and duration."""

    def __init__(self, inner: LLMClient) -> None:
        self.inner = inner
        self.calls: list[tuple[str, float]] = []

    async def complete(
        self, profile: str, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> LLMResponse:
        started = time.perf_counter()
        try:
            return await self.inner.complete(profile, messages, **kwargs)
        finally:
            self.calls.append((profile, time.perf_counter() - started))

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class TurnRecord:
    conversation: str
    index: int
    text: str
    outcome: str
    method: str
    bypassed: bool
    calls: dict[str, int]
    call_ms: dict[str, float]
    tokens: dict[str, int]
    total_ms: float
    model_ms: float
    """What the latency model alone accounts for (the calls made × their latency)."""

    @property
    def router_called(self) -> bool:
        return self.calls.get("router", 0) > 0

    @property
    def attributable(self) -> bool:
        """A turn whose savings the spec lets us attribute to stickiness."""
        return self.bypassed and not self.router_called


@dataclass
class Run:
    name: str
    records: list[TurnRecord] = field(default_factory=list)

    def total(self, attribute: str, profile: str) -> int:
        return sum(getattr(record, attribute).get(profile, 0) for record in self.records)

    def latencies(self) -> list[float]:
        return [record.total_ms for record in self.records]


def _profiles() -> LLMProfiles:
    base = load_profiles()
    return LLMProfiles(
        {
            name: profile.model_copy(update={"model": MODELS[name]}) if name in MODELS else profile
            for name, profile in base.profiles.items()
        },
        "bench-profiles.yaml",
    )


async def _seed(ledger: Ledger, household: str) -> None:
    month = "2026-06"
    await ledger.set_budget(household, month, 300_000)
    await ledger.set_budget(household, month, 80_000, "mercado")
    for day, cents, category, description, who in (
        (1, 120_000, "aluguel", "aluguel", "Bruno"),
        (3, 8_990, "cartão", "farmácia", "Ana"),
        (5, 25_000, "cartão nubank", "sapato", "Bruno"),
        (8, 64_000, "mercado", "compra do mês", "Ana"),
        (10, 25_000, "cartão nubank", "presente", "Ana"),
    ):
        expense = NewExpense(date(2026, 6, day), cents, category, description, who)
        await ledger.record_expense(household, expense, now=NOW)
    await ledger.create_goal(household, "viagem", 500_000, deadline=date(2026, 12, 20), now=NOW)
    await ledger.contribute(household, "viagem", 120_000, now=NOW)
    await ledger.create_goal(household, "carro", 3_000_000, now=NOW)
    await ledger.contribute(household, "carro", 800_000, now=NOW)


async def run_once(name: str, enabled: bool, redis_url: str) -> Run:
    client: aioredis.Redis = aioredis.from_url(redis_url)
    await client.flushdb()
    ledger = Ledger(client)
    latency = {MODELS[role]: seconds / SCALE for role, seconds in LATENCY_S.items()}
    run = Run(name)
    async with FakeLLM.running(responder=ScriptResponder(), latency_by_model=latency) as fake:
        timed = TimedLLM(OpenAICompatibleLLM(_profiles(), base_url=fake.base_url, environ={}))
        control = build_session_control(
            timed, ledger, SessionControlConfig(enabled=enabled), clock=lambda: NOW
        )
        try:
            for conversation in CONVERSATIONS:
                await _seed(ledger, conversation.number)
                await _converse(control, timed, conversation, run)
        finally:
            await timed.aclose()
            await client.aclose()
    return run


async def _converse(control: Any, timed: TimedLLM, conversation: Conversation, run: Run) -> None:
    thread_id = f"twilio:{BUSINESS}:{conversation.number}"
    history: list[ChatMessage] = []
    state = RouteState()
    past = 0
    for index, turn in enumerate(conversation.turns):
        message = ChatMessage(role="user", content=turn.text)
        timed.calls.clear()
        started = time.perf_counter()
        result: TurnResult = await control.turn([*history, message], state, past,
                                                thread_id=thread_id)  # fmt: skip
        elapsed = time.perf_counter() - started
        run.records.append(_record(conversation.name, index, turn.text, result, timed, elapsed))
        history += [message, result.reply]
        state = result.state
        if result.outcome in ("agent", "tool_limit"):
            past = 0 if result.ran_tools else past + 1
        if result.session_ended or result.human_handoff_requested:
            break  # the session is over, or a person takes the thread: the bot is muted


def _record(
    conversation: str, index: int, said: str, result: TurnResult, timed: TimedLLM, seconds: float
) -> TurnRecord:
    calls: dict[str, int] = {}
    call_ms: dict[str, float] = {}
    for profile, duration in timed.calls:
        calls[profile] = calls.get(profile, 0) + 1
        call_ms[profile] = call_ms.get(profile, 0.0) + duration * 1000 * SCALE
    usage: dict[str, Usage] = result.usage_by_profile
    return TurnRecord(
        conversation=conversation,
        index=index,
        text=said,
        outcome=result.outcome,
        method=result.route_decision.method if result.route_decision is not None else "-",
        bypassed=result.route_bypassed,
        calls=calls,
        call_ms=call_ms,
        tokens={profile: u.total_tokens for profile, u in usage.items()},
        total_ms=seconds * 1000 * SCALE,
        model_ms=sum(LATENCY_S.get(profile, 0.0) * 1000 * n for profile, n in calls.items()),
    )


# -- reporting -------------------------------------------------------------------------------


def percentile(values: Sequence[float], p: int) -> float:
    """The p-th percentile, linear between closest ranks (``statistics`` "inclusive")."""
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def _methods(run: Run) -> str:
    counts: dict[str, int] = {}
    for record in run.records:
        counts[record.method] = counts.get(record.method, 0) + 1
    return ", ".join(f"{name} {n}" for name, n in sorted(counts.items()))


def summary_rows(off: Run, on: Run) -> list[tuple[str, str, str]]:
    def row(
        label: str, a: float, b: float, unit: str = "", digits: int = 0
    ) -> tuple[str, str, str]:
        return (label, f"{a:,.{digits}f}{unit}", f"{b:,.{digits}f}{unit}")

    rows = [
        row("turns", len(off.records), len(on.records)),
        row("turns with route_bypassed", sum(r.bypassed for r in off.records),
            sum(r.bypassed for r in on.records)),
        ("route_decision.method", _methods(off), _methods(on)),
        row("llm.router calls", off.total("calls", "router"), on.total("calls", "router")),
        row("llm.route_continuity calls", off.total("calls", "route_continuity"),
            on.total("calls", "route_continuity")),
        row("llm.agent calls", off.total("calls", "agent"), on.total("calls", "agent")),
    ]  # fmt: skip
    for profile in PROFILES:
        rows.append(row(f"tokens {profile}", off.total("tokens", profile),
                        on.total("tokens", profile)))  # fmt: skip
    rows.append(row("tokens, all profiles", sum(off.total("tokens", p) for p in PROFILES),
                    sum(on.total("tokens", p) for p in PROFILES)))  # fmt: skip
    continuity = [
        r.call_ms["route_continuity"] for r in on.records if "route_continuity" in r.call_ms
    ]
    rows.append(("llm.route_continuity latency p50", "-",
                 f"{percentile(continuity, 50):,.0f} ms" if continuity else "-"))  # fmt: skip
    for p in (50, 95, 99):
        rows.append(row(f"turn latency p{p}", percentile(off.latencies(), p),
                        percentile(on.latencies(), p), " ms"))  # fmt: skip
    rows.append(row("all turns, total time", sum(off.latencies()), sum(on.latencies()), " ms"))
    rows.append(row("  of which the latency model", sum(r.model_ms for r in off.records),
                    sum(r.model_ms for r in on.records), " ms"))  # fmt: skip
    return rows


def _saved(pairs: Sequence[tuple[TurnRecord, TurnRecord]]) -> tuple[float, int]:
    """Time (ms) and tokens of the off run minus the on run, over paired turns."""
    ms = sum(a.total_ms - b.total_ms for a, b in pairs)
    tokens = sum(sum(a.tokens.values()) - sum(b.tokens.values()) for a, b in pairs)
    return ms, tokens


def savings_rows(off: Run, on: Run) -> list[tuple[str, str]]:
    pairs = list(zip(off.records, on.records, strict=True))
    bypass = [(a, b) for a, b in pairs if b.attributable]
    nodes = [(a, b) for a, b in bypass if b.outcome in ("human_handoff", "end_session")]
    sticky = [(a, b) for a, b in bypass if (a, b) not in nodes]
    other = [(a, b) for a, b in pairs if not b.attributable]
    total_off = sum(off.latencies())
    saved_ms, saved_tokens = _saved(bypass)
    sticky_ms, sticky_tokens = _saved(sticky)
    nodes_ms, nodes_tokens = _saved(nodes)
    extra_ms, extra_tokens = _saved(other)
    return [
        ("turns with route_bypassed and no llm.router call",
         f"{len(bypass)} of {len(pairs)} ({len(sticky)} CONTINUE, "
         f"{len(nodes)} handoff/end nodes)"),
        ("  saved on those turns (off − on)",
         f"{saved_ms:,.0f} ms ({saved_ms / total_off:.1%} of the off run), "
         f"{saved_tokens:,} tokens"),
        ("    CONTINUE (router skipped)",
         f"{sticky_ms:,.0f} ms ({sticky_ms / max(len(sticky), 1):,.0f} ms a turn), "
         f"{sticky_tokens:,} tokens"),
        ("    handoff/end nodes (router and agent skipped)",
         f"{nodes_ms:,.0f} ms ({nodes_ms / max(len(nodes), 1):,.0f} ms a turn), "
         f"{nodes_tokens:,} tokens"),
        ("other turns: the classifier's cost, not netted",
         f"{-extra_ms:+,.0f} ms, {-extra_tokens:+,} tokens over {len(other)} turns"),
        ("net change of total time", f"{(sum(on.latencies()) - total_off) / total_off:+.1%}"),
    ]  # fmt: skip


def per_turn_lines(off: Run, on: Run) -> list[str]:
    lines = [f"{'conversation / turn':<48} {'off ms':>7} {'on ms':>7}  on: method, bypass, "
             "continuity ms, router calls, tokens"]  # fmt: skip
    for a, b in zip(off.records, on.records, strict=True):
        label = f"{a.conversation[:22]} #{a.index + 1} {a.text[:20]}"
        lines.append(
            f"{label:<48} {a.total_ms:>7,.0f} {b.total_ms:>7,.0f}  {b.method}, "
            f"{'bypass' if b.bypassed else '-'}, {b.call_ms.get('route_continuity', 0):,.0f}, "
            f"{b.calls.get('router', 0)}, {b.tokens}"
        )
    return lines


def _md_label(label: str) -> str:
    """A table label, its indentation (two spaces a level) shown as "↳"."""
    depth = (len(label) - len(label.lstrip(" "))) // 2
    return "↳ " * depth + label.strip()


def markdown(off: Run, on: Run) -> str:
    out = [
        HEADING,
        "",
        "`python -m bench.stickiness_bench` — the same "
        f"{len(CONVERSATIONS)} PT-BR conversations ({len(off.records)} turns) with "
        "`ENABLE_ROUTE_STICKINESS` off and on; fake LLM on loopback with router 700 ms, "
        "classifier 250 ms, agent 1.2 s a call (run ÷10, reported ×10); tools on a real "
        "Redis ledger. Savings are attributed only to turns with `route_bypassed` and no "
        "`llm.router` call.",
        "",
        "| metric | stickiness off | stickiness on |",
        "|---|---|---|",
        *(f"| {_md_label(a)} | {b} | {c} |" for a, b, c in summary_rows(off, on)),
        "",
        "| savings (spec's attribution rule) | |",
        "|---|---|",
        *(f"| {_md_label(a)} | {b} |" for a, b in savings_rows(off, on)),
        "",
    ]
    return "\n".join(out)


def write_results(section: str, path: Path = RESULTS) -> None:
    """Add or replace this benchmark's section of ``RESULTS.md``; others are kept."""
    existing = path.read_text("utf-8") if path.exists() else "# Benchmark results\n"
    lines = existing.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == HEADING), None)
    if start is None:
        body = existing.rstrip("\n") + "\n\n" + section
    else:
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines)
        )
        kept_after = "\n".join(lines[end:])
        body = "\n".join(lines[:start]) + "\n" + section + ("\n" + kept_after if kept_after else "")
    path.write_text(body.rstrip("\n") + "\n", "utf-8")


async def run_all() -> tuple[Run, Run]:
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp) / "redis", appendonly=False)
        server.start()
        try:
            off = await run_once("off", False, server.url)
            on = await run_once("on", True, server.url)
        finally:
            server.stop()
    return off, on


def main(argv: Sequence[str] | None = None) -> None:
    import logging

    from gateway.logs import configure_logging

    args = list(sys.argv[1:] if argv is None else argv)
    configure_logging("console", "error")
    logging.getLogger("aiohttp").setLevel(logging.ERROR)
    off, on = asyncio.run(run_all())
    print("\n== route stickiness (times ×10 back to production scale) ==")
    rows = summary_rows(off, on)
    width = max(len(a) for a, _, _ in rows)
    print(f"{'':<{width}}  {'off':>14}  {'on':>14}")
    for a, b, c in rows:
        print(f"{a:<{width}}  {b:>14}  {c:>14}" if len(b) <= 14 else f"{a:<{width}}  {b}  |  {c}")
    print("-- savings, attributed only to turns with route_bypassed and no llm.router call")
    for a, b in savings_rows(off, on):
        print(f"{a:<{width}}  {b}")
    if "--turns" in args:
        print()
        print("\n".join(per_turn_lines(off, on)))
    write_results(markdown(off, on))
    print(f"(written to {RESULTS.name})")


if __name__ == "__main__":
    main()
