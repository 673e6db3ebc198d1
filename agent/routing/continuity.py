"""The semantic continuity classifier: CONTINUE / ROUTE / HUMAN_HANDOFF / END_SESSION.

A light LLM profile (``ROUTE_STICKINESS_LLM_PROFILE``, default ``route_continuity``) reads
only what the spec lists — the active agent, the agents' capability descriptions (derived
from their intents), the previous intent and domain, the last
``ROUTE_STICKINESS_HISTORY_TURNS`` turns and the current message — and answers
``{"decision": ..., "confidence": 0..1}`` (at most ``ROUTE_STICKINESS_MAX_TOKENS`` tokens,
JSON mode). It does not answer the user, pick another agent, run tools or apply business
rules.

There are no regexes, phrase lists or language rules about the user's text here. The code
keeps only the spec's technical rules, and is fail-safe: it never forces continuity when
in doubt.

* a decision is accepted only with a confidence above the threshold ("somente decisões
  acima do threshold"): ``confidence > threshold``; at or below it → ``ROUTE``;
* a timeout, an LLM error, any other failure, a body that is not JSON or not the schema
  → ``ROUTE`` (the enterprise router runs);
* ``CONTINUE`` without an active agent → ``ROUTE``;
* ``HUMAN_HANDOFF`` and ``END_SESSION`` above the threshold are accepted with or without an
  active agent (so even on a thread's first turn).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

import structlog
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from agent.errors import LLMError
from agent.llm import LLMClient, Usage
from agent.messages import ChatMessage
from agent.prompts import CONTINUITY_SYSTEM_PROMPT
from agent.routing._context import current_message, parse_json_object, recent_turns
from agent.routing.agents import DomainAgents
from agent.routing.config import SessionControlConfig
from events import RouterContinuity

__all__ = [
    "CONTINUE",
    "DECISIONS",
    "END_SESSION",
    "HUMAN_HANDOFF",
    "ROUTE",
    "ContinuityAnswer",
    "ContinuityClassifier",
    "ContinuitySignal",
    "Decision",
]

log = structlog.get_logger(__name__)

Decision = Literal["CONTINUE", "ROUTE", "HUMAN_HANDOFF", "END_SESSION"]
CONTINUE: Final = "CONTINUE"
ROUTE: Final = "ROUTE"
HUMAN_HANDOFF: Final = "HUMAN_HANDOFF"
END_SESSION: Final = "END_SESSION"
DECISIONS: Final[tuple[Decision, ...]] = (CONTINUE, ROUTE, HUMAN_HANDOFF, END_SESSION)


def _upper(value: object) -> object:
    """A technical normalisation of the label's case and spacing (the model's, not the
    user's text)."""
    return value.strip().upper() if isinstance(value, str) else value


class ContinuityAnswer(BaseModel):
    """The classifier's JSON answer; extra keys are ignored."""

    model_config = ConfigDict(extra="ignore")

    decision: Annotated[Decision, BeforeValidator(_upper)]
    confidence: Annotated[float, Field(ge=0, le=1, strict=True)]


@dataclass(frozen=True)
class ContinuitySignal:
    """The classifier's outcome for one turn.

    ``decision`` is what session control acts on (after the fail-safe rules);
    ``model_decision`` is what the model said (``None`` when it gave nothing usable).
    ``accepted`` says whether the model's decision was taken as it was; ``reason`` says why
    not. ``confidence`` is the model's (0.0 when it gave none).
    """

    decision: Decision
    confidence: float
    accepted: bool
    reason: str | None
    usage: Usage
    profile_name: str
    model_decision: Decision | None = None
    active_agent: str | None = None
    llm_calls: int = 1
    latency_ms: int | None = None

    @property
    def route_bypassed(self) -> bool:
        """Whether the enterprise router is skipped (CONTINUE, or a global node)."""
        return self.decision != ROUTE

    def event(self) -> RouterContinuity:
        """The ``router.continuity`` event (its data is also the turn's
        ``continuity_signal``)."""
        return RouterContinuity(
            decision=self.decision,
            confidence=self.confidence,
            active_agent=self.active_agent,
            route_bypassed=self.route_bypassed,
            profile_name=self.profile_name,
            model_decision=self.model_decision,
            accepted=self.accepted,
            reason=self.reason,
            latency_ms=self.latency_ms,
        )

    def event_data(self) -> dict[str, Any]:
        """The ``router.continuity`` event's data (also the turn's ``continuity_signal``)."""
        return self.event().data()


class ContinuityClassifier:
    """Decides where a turn goes, from only the spec's inputs (see the module doc)."""

    def __init__(self, llm: LLMClient, config: SessionControlConfig | None = None) -> None:
        self.llm = llm
        self.config = config or SessionControlConfig()

    @property
    def profile(self) -> str:
        return self.config.profile

    def request(
        self,
        messages: Sequence[ChatMessage],
        *,
        agents: DomainAgents,
        active_agent: str | None,
        previous_intent: str | None,
        previous_domain: str | None,
    ) -> list[ChatMessage]:
        """The messages sent to the model: this system prompt and the spec's inputs as JSON."""
        payload = {
            "active_agent": active_agent,
            "agents": agents.cards(),
            "previous_intent": previous_intent,
            "previous_domain": previous_domain,
            "recent_turns": recent_turns(messages, self.config.history_turns),
            "current_message": current_message(messages),
        }
        return [
            ChatMessage(role="system", content=CONTINUITY_SYSTEM_PROMPT),
            ChatMessage(role="user", content=json.dumps(payload, ensure_ascii=False)),
        ]

    async def classify(
        self,
        messages: Sequence[ChatMessage],
        *,
        agents: DomainAgents,
        active_agent: str | None = None,
        previous_intent: str | None = None,
        previous_domain: str | None = None,
    ) -> ContinuitySignal:
        """Classify the conversation's last user message. Never raises for the model."""
        if active_agent is not None and active_agent not in agents:
            active_agent = None  # an agent that no longer exists is no active agent
        request = self.request(
            messages,
            agents=agents,
            active_agent=active_agent,
            previous_intent=previous_intent,
            previous_domain=previous_domain,
        )
        started = time.perf_counter()
        try:
            response = await self.llm.complete(
                self.profile,
                request,
                max_tokens=self.config.max_tokens,
                response_format={"type": "json_object"},
            )
        except LLMError as exc:
            failure = f"{type(exc).__name__}: {exc.reason}"
            return self._route(failure, active_agent, Usage(), _ms_since(started))
        except Exception as exc:  # fail-safe: any failure means the router runs
            log.exception("route_continuity.failed", profile=self.profile)
            return self._route(type(exc).__name__, active_agent, Usage(), _ms_since(started))
        elapsed = _ms_since(started)
        raw = parse_json_object(response.message.content)
        if raw is None:
            return self._route("invalid JSON", active_agent, response.usage, elapsed)
        try:
            answer = ContinuityAnswer.model_validate(raw)
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(part) for part in problem["loc"]) or "answer"
            failure = f"invalid answer: {where}: {problem['msg']}"
            return self._route(failure, active_agent, response.usage, elapsed)
        threshold = self.config.threshold
        reason: str | None = None
        decision: Decision = answer.decision
        if answer.confidence <= threshold:
            reason = f"confidence {answer.confidence:g} not above threshold {threshold:g}"
            decision = ROUTE
        elif decision == CONTINUE and active_agent is None:
            reason = "CONTINUE without an active agent"
            decision = ROUTE
        signal = ContinuitySignal(
            decision=decision,
            confidence=answer.confidence,
            accepted=reason is None,
            reason=reason,
            usage=response.usage,
            profile_name=self.profile,
            model_decision=answer.decision,
            active_agent=active_agent,
            latency_ms=elapsed,
        )
        log.info(
            "route_continuity.decided",
            decision=decision,
            model_decision=answer.decision,
            confidence=answer.confidence,
            accepted=signal.accepted,
            active_agent=active_agent,
            ms=elapsed,
        )
        return signal

    def _route(
        self, reason: str, active_agent: str | None, usage: Usage, latency_ms: int
    ) -> ContinuitySignal:
        log.warning("route_continuity.fallback", reason=reason, profile=self.profile)
        return ContinuitySignal(
            decision=ROUTE,
            confidence=0.0,
            accepted=False,
            reason=reason,
            usage=usage,
            profile_name=self.profile,
            active_agent=active_agent,
            latency_ms=latency_ms,
        )


def _ms_since(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)
