"""The psychologist: one analysis of one closed session, as a bounded tool loop.

:meth:`Psychologist.analyze` builds the prompt, forces the mandatory tool
``emit_hypotheses`` and loops (ADR 0015, decision 2): a rejected batch goes back to the
model with the validation text verbatim as the tool result, a reply without the tool call
gets a nudge, and the loop ends only when a batch is accepted — or at the tier's bound:
``max_iterations`` model calls, or a metered cost above the tier's budget. An LLM failure
ends it too. Whatever the model does, ``analyze`` returns an :class:`AnalysisOutcome`
(never raises for it); the caller stores an accepted outcome and publishes a failed one.

Storage, idempotency and events are the gateway's: this module does no I/O but the LLM.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import structlog

from agent.errors import LLMError
from agent.llm import LLMClient, Usage
from agent.messages import ChatMessage, ToolCallRequest
from agent.psychologist.hypotheses import (
    EMIT_HYPOTHESES,
    BatchResult,
    HypothesisIn,
    emit_hypotheses_tool,
    validate_batch,
)
from agent.psychologist.prompt import DEFAULT_AGENTS, NUDGE, AgentInfo, build_messages
from agent.psychologist.termination import Termination
from agent.psychologist.triage import Tier, triage

__all__ = [
    "BUDGET_EXCEEDED",
    "FORCE_EMIT_HYPOTHESES",
    "LLM_ERROR_PREFIX",
    "MAX_ITERATIONS",
    "TRUNCATED_NOTE",
    "AnalysisContext",
    "AnalysisOutcome",
    "Psychologist",
]

log = structlog.get_logger(__name__)

FORCE_EMIT_HYPOTHESES: Final[dict[str, Any]] = {
    "type": "function",
    "function": {"name": EMIT_HYPOTHESES},
}
"""The ``tool_choice`` that forces the mandatory tool."""

BUDGET_EXCEEDED: Final = "budget_exceeded"
MAX_ITERATIONS: Final = "max_iterations"
LLM_ERROR_PREFIX: Final = "llm_error: "
TRUNCATED_NOTE: Final = (
    "\nSua resposta foi cortada pelo limite de tokens de saída: envie menos hipóteses ou "
    "descrições mais curtas."
)
"""Appended to a rejection when the reply hit the output limit (``finish_reason=length``)."""


@dataclass(frozen=True)
class AnalysisContext:
    """Everything one analysis needs.

    ``events`` are the session's envelopes, oldest first (docs/architecture.md, "Events").
    ``session_event_ids`` are the ids the session recorded as its own (default: the ids
    of ``events``); evidence must be among them. ``known_event_ids``, when given, are all
    ids that exist anywhere, so an id of another session is reported as such.
    ``previous_hypotheses`` are the thread's earlier hypotheses as dicts (``status``,
    ``target_agent``, ``title``, ``description``, ``confidence``, ``session_id``);
    dismissed ones are left out of the prompt. ``tier=None`` triages by event count.
    """

    session_id: str
    thread_id: str
    events: Sequence[Mapping[str, Any]]
    rules: str
    termination: Termination
    previous_hypotheses: Sequence[Mapping[str, Any]] = ()
    known_event_ids: Collection[str] | None = None
    tier: Tier | None = None
    session_event_ids: Collection[str] | None = None
    agents: Sequence[AgentInfo] = DEFAULT_AGENTS

    def evidence_ids(self) -> Collection[str]:
        """The ids evidence may cite."""
        if self.session_event_ids is not None:
            return frozenset(self.session_event_ids)
        return frozenset(str(event["id"]) for event in self.events if event.get("id"))


@dataclass(frozen=True)
class AnalysisOutcome:
    """How an analysis ended, with what it cost.

    ``ok`` with the accepted ``hypotheses``, or ``failure``: ``"budget_exceeded"``,
    ``"max_iterations"`` or ``"llm_error: <reason>"``. ``iterations`` counts model calls
    made (a failed one included); ``usage`` sums what the answered ones reported;
    ``model`` is the model that answered last (``""`` if none did). ``errors`` are the
    texts sent back to the model, in order (rejections and nudges).
    """

    ok: bool
    hypotheses: list[HypothesisIn]
    failure: str | None
    tier: str
    profile: str
    model: str
    iterations: int
    usage: Usage
    rejected_batches: int
    errors: list[str] = field(default_factory=list)
    budget_micro_usd: int = 0
    max_iterations: int = 0

    def metering(self) -> dict[str, Any]:
        """The cost record of this analysis (JSON-able), for storage, events and metrics."""
        return {
            "tier": self.tier,
            "profile": self.profile,
            "model": self.model,
            "iterations": self.iterations,
            "llm_calls": self.usage.calls,
            "prompt_tokens": self.usage.prompt_tokens,
            "completion_tokens": self.usage.completion_tokens,
            "cost_micro_usd": self.usage.cost_micro_usd,
            "budget_micro_usd": self.budget_micro_usd,
            "max_iterations": self.max_iterations,
            "rejected_batches": self.rejected_batches,
        }


class Psychologist:
    """Analyses closed sessions with the LLM profile of the tier (``psychologist`` or
    ``psychologist_light``). ``max_tokens`` overrides the profile's output limit."""

    def __init__(self, llm: LLMClient, *, max_tokens: int | None = None) -> None:
        self.llm = llm
        self.max_tokens = max_tokens

    async def analyze(self, ctx: AnalysisContext) -> AnalysisOutcome:
        """Run the tool loop for ``ctx``; never raises for what the model does.

        A batch that validates ends the run successfully even when the call that produced
        it crossed the budget (that cost is spent and recorded); otherwise crossing the
        budget ends the run with ``budget_exceeded``.
        """
        run = _Run(self, ctx)
        outcome = await run.loop()
        log.info(
            "psychologist.analyzed",
            session_id=ctx.session_id,
            ok=outcome.ok,
            failure=outcome.failure,
            tier=outcome.tier,
            model=outcome.model,
            iterations=outcome.iterations,
            rejected_batches=outcome.rejected_batches,
            hypotheses=len(outcome.hypotheses),
            prompt_tokens=outcome.usage.prompt_tokens,
            completion_tokens=outcome.usage.completion_tokens,
            cost_micro_usd=outcome.usage.cost_micro_usd,
        )
        return outcome


class _Run:
    """The state of one ``analyze`` call."""

    def __init__(self, psychologist: Psychologist, ctx: AnalysisContext) -> None:
        self.psychologist = psychologist
        self.ctx = ctx
        self.tier = ctx.tier or triage(len(ctx.events))
        self.session_ids = ctx.evidence_ids()
        self.targets = [agent.name for agent in ctx.agents]
        self.usage = Usage()
        self.model = ""
        self.iterations = 0
        self.rejected = 0
        self.errors: list[str] = []

    def _outcome(
        self, hypotheses: list[HypothesisIn] | None = None, failure: str | None = None
    ) -> AnalysisOutcome:
        return AnalysisOutcome(
            ok=failure is None,
            hypotheses=list(hypotheses or []),
            failure=failure,
            tier=self.tier.name,
            profile=self.tier.profile,
            model=self.model,
            iterations=self.iterations,
            usage=self.usage,
            rejected_batches=self.rejected,
            errors=list(self.errors),
            budget_micro_usd=self.tier.budget_micro_usd,
            max_iterations=self.tier.max_iterations,
        )

    def _validate(self, call: ToolCallRequest) -> BatchResult:
        termination = self.ctx.termination
        return validate_batch(
            call.arguments,
            session_event_ids=self.session_ids,
            known_event_ids=self.ctx.known_event_ids,
            abnormal=termination.abnormal,
            allowed_targets=self.targets,
            cause=termination.cause,
        )

    async def loop(self) -> AnalysisOutcome:
        ctx = self.ctx
        conversation = build_messages(
            session_id=ctx.session_id,
            thread_id=ctx.thread_id,
            events=ctx.events,
            rules=ctx.rules,
            termination=ctx.termination,
            previous_hypotheses=ctx.previous_hypotheses,
            agents=ctx.agents,
        )
        tools = [emit_hypotheses_tool()]
        while self.iterations < self.tier.max_iterations:
            self.iterations += 1
            try:
                response = await self.psychologist.llm.complete(
                    self.tier.profile,
                    conversation,
                    tools=tools,
                    tool_choice=FORCE_EMIT_HYPOTHESES,
                    max_tokens=self.psychologist.max_tokens,
                )
            except LLMError as exc:
                log.warning(
                    "psychologist.llm_failed",
                    session_id=ctx.session_id,
                    error=type(exc).__name__,
                    reason=exc.reason,
                    profile=exc.profile,
                )
                return self._outcome(failure=f"{LLM_ERROR_PREFIX}{exc.reason}")
            self.usage += response.usage
            self.model = response.model
            message = response.message
            if message.tool_calls:
                truncated = response.finish_reason == "length"
                accepted = self._answer_calls(message, conversation, truncated=truncated)
                if accepted is not None:
                    return self._outcome(accepted)
            else:
                if message.content.strip():
                    conversation.append(message)
                conversation.append(ChatMessage(role="user", content=NUDGE))
                self.errors.append(NUDGE)
            if self.usage.cost_micro_usd > self.tier.budget_micro_usd:
                return self._outcome(failure=BUDGET_EXCEEDED)
        return self._outcome(failure=MAX_ITERATIONS)

    def _answer_calls(
        self, message: ChatMessage, conversation: list[ChatMessage], *, truncated: bool
    ) -> list[HypothesisIn] | None:
        """Validate the calls of one reply: the accepted batch, or ``None`` after appending
        the reply and one tool result per call (each rejection verbatim; when the reply was
        cut by the output limit, a note saying so follows it)."""
        results: list[tuple[ToolCallRequest, str]] = []
        for call in message.tool_calls or ():
            if call.name != EMIT_HYPOTHESES:
                text = (
                    f"ferramenta desconhecida {call.name!r}; a única disponível é "
                    f"{EMIT_HYPOTHESES}."
                )
                self.errors.append(text)
                results.append((call, text))
                continue
            batch = self._validate(call)
            if batch.ok:
                return batch.hypotheses
            self.rejected += 1
            error = batch.error + (TRUNCATED_NOTE if truncated else "")
            self.errors.append(error)
            results.append((call, error))
        conversation.append(message)
        conversation.extend(
            ChatMessage(role="tool", tool_call_id=call.id, content=text) for call, text in results
        )
        return None
