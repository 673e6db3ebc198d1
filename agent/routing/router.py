"""The enterprise router: which domain agent answers this turn, with which intent.

One call to the ``router`` profile with the agents' capability cards (derived from their
intents), the last few messages and the current one, asking for a JSON object. The answer
is validated with pydantic; whatever cannot be used — no LLM configured, an error or
timeout, a body that is not JSON, an agent that does not exist — falls back to the default
agent with ``method="default"`` and the reason. The domain always comes from the chosen
agent, never from the model. ``route`` never raises for what the model does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.errors import LLMError
from agent.llm import LLMClient, Usage
from agent.messages import ChatMessage
from agent.prompts import ROUTER_SYSTEM_PROMPT
from agent.routing._context import current_message, parse_json_object, recent_messages
from agent.routing.agents import DomainAgents
from agent.routing.route import Route
from events import RouterRouted

__all__ = ["EnterpriseRouter", "RouteDecision", "RouteMethod"]

log = structlog.get_logger(__name__)

RouteMethod = Literal["router", "default"]
"""``router``: the model's choice was used; ``default``: the fallback agent answered."""


@dataclass(frozen=True)
class RouteDecision:
    """Where a turn goes. ``usage``/``llm_calls`` are the router's own cost (0 when it did
    not call the model)."""

    route: str
    intent: str | None
    domain: str
    method: RouteMethod
    confidence: float | None = None
    reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    llm_calls: int = 0
    latency_ms: int | None = None
    profile: str = "router"

    def event(self) -> RouterRouted:
        """The ``router.routed`` event."""
        return RouterRouted(
            route=self.route,
            intent=self.intent,
            domain=self.domain,
            method=self.method,
            confidence=self.confidence,
            reason=self.reason,
            latency_ms=self.latency_ms,
        )

    def as_route(self) -> Route:
        """The turn's route decision."""
        metadata: dict[str, Any] = {}
        if self.confidence is not None:
            metadata["confidence"] = self.confidence
        if self.reason is not None:
            metadata["reason"] = self.reason
        return Route(self.route, self.intent, self.domain, self.method, metadata=metadata)


class _RouterAnswer(BaseModel):
    """The router's JSON answer; extra keys are ignored."""

    model_config = ConfigDict(extra="ignore")

    route: Annotated[str, Field(min_length=1, max_length=100)]
    intent: Annotated[str, Field(max_length=100)] | None = None
    confidence: Annotated[float, Field(ge=0, le=1)] | None = None


class EnterpriseRouter:
    """Picks the agent, intent and domain of a turn (``llm=None``: always the default)."""

    def __init__(
        self,
        llm: LLMClient | None,
        agents: DomainAgents,
        profile: str = "router",
        *,
        history_messages: int = 6,
        max_tokens: int | None = None,
    ) -> None:
        self.llm = llm
        self.agents = agents
        self.profile = profile
        self.history_messages = history_messages
        self.max_tokens = max_tokens

    def request(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        """The messages sent to the model for this conversation."""
        payload = {
            "agents": [
                {
                    **agent.card(),
                    "intents": [
                        {"name": intent.name, "description": intent.description}
                        for intent in agent.intents
                    ],
                }
                for agent in self.agents
            ],
            "recent_messages": recent_messages(messages, self.history_messages),
            "current_message": current_message(messages),
        }
        return [
            ChatMessage(role="system", content=ROUTER_SYSTEM_PROMPT),
            ChatMessage(role="user", content=json.dumps(payload, ensure_ascii=False)),
        ]

    def fallback(
        self,
        reason: str,
        *,
        usage: Usage | None = None,
        llm_calls: int = 0,
        latency_ms: int | None = None,
    ) -> RouteDecision:
        """The default agent, with why."""
        default = self.agents.default
        log.info("router.fallback", route=default.name, reason=reason)
        return RouteDecision(
            default.name,
            None,
            default.domain,
            "default",
            reason=reason,
            usage=usage or Usage(),
            llm_calls=llm_calls,
            latency_ms=latency_ms,
            profile=self.profile,
        )

    async def route(self, messages: Sequence[ChatMessage]) -> RouteDecision:
        """Route the conversation's last user message."""
        if self.llm is None:
            return self.fallback("no LLM configured")
        started = time.perf_counter()
        try:
            response = await self.llm.complete(
                self.profile,
                self.request(messages),
                max_tokens=self.max_tokens,
                response_format={"type": "json_object"},
            )
        except LLMError as exc:
            failure = f"{type(exc).__name__}: {exc.reason}"
            return self.fallback(failure, llm_calls=1, latency_ms=_ms_since(started))
        except Exception as exc:  # a routing failure must not cost the turn: log, fall back
            log.exception("router.failed", profile=self.profile)
            return self.fallback(type(exc).__name__, llm_calls=1, latency_ms=_ms_since(started))
        elapsed = _ms_since(started)
        usage = response.usage
        raw = parse_json_object(response.message.content)
        if raw is None:
            return self.fallback("invalid JSON", usage=usage, llm_calls=1, latency_ms=elapsed)
        try:
            answer = _RouterAnswer.model_validate(raw)
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(part) for part in problem["loc"]) or "answer"
            return self.fallback(
                f"invalid answer: {where}: {problem['msg']}",
                usage=usage,
                llm_calls=1,
                latency_ms=elapsed,
            )
        agent = self.agents.get(answer.route)
        if agent is None:
            return self.fallback(
                f"unknown agent {answer.route!r}", usage=usage, llm_calls=1, latency_ms=elapsed
            )
        intent = answer.intent if agent.spec.intent(answer.intent) is not None else None
        reason: str | None = None
        if answer.intent is not None and intent is None:
            reason = f"unknown intent {answer.intent!r} for {agent.name}"
        log.info("router.chose", route=agent.name, intent=intent, ms=elapsed)
        return RouteDecision(
            agent.name,
            intent,
            agent.domain,
            "router",
            confidence=answer.confidence,
            reason=reason,
            usage=usage,
            llm_calls=1,
            latency_ms=elapsed,
            profile=self.profile,
        )


def _ms_since(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)
