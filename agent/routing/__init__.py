"""Session control: domain agents, the enterprise router, the continuity classifier
(route stickiness) and the global human-handoff and end-session nodes.

:class:`SessionControl` is what the gateway calls per turn; ``session_control``'s module
doc gives the flow and the choices where the spec contradicts itself.
"""

from agent.routing.agents import (
    BUDGET_AGENT,
    DEFAULT_AGENT_NAME,
    DEFAULT_AGENT_SPECS,
    INVOICE_AGENT,
    SAVINGS_AGENT,
    AgentSpec,
    DomainAgent,
    DomainAgents,
    Intent,
    build_domain_agents,
    describe_capabilities,
)
from agent.routing.config import (
    DEFAULT_END_SESSION_MESSAGE,
    DEFAULT_HUMAN_HANDOFF_MESSAGE,
    SessionControlConfig,
)
from agent.routing.continuity import (
    CONTINUE,
    DECISIONS,
    END_SESSION,
    HUMAN_HANDOFF,
    ROUTE,
    ContinuityAnswer,
    ContinuityClassifier,
    ContinuitySignal,
    Decision,
)
from agent.routing.route import Route
from agent.routing.router import EnterpriseRouter, RouteDecision, RouteMethod
from agent.routing.session_control import (
    EVENT_END_REQUESTED,
    EVENT_GUARD_PREEMPTED,
    EVENT_HUMAN_HANDOFF_REQUESTED,
    EVENT_ROUTER_CONTINUITY,
    EVENT_ROUTER_ROUTED,
    NEXT_STATE_HUMAN_HANDOFF_REQUESTED,
    NEXT_STATE_SESSION_ENDED,
    RouteState,
    SessionControl,
    SupportStatus,
    TurnResult,
    build_session_control,
)

__all__ = [
    "BUDGET_AGENT",
    "CONTINUE",
    "DECISIONS",
    "DEFAULT_AGENT_NAME",
    "DEFAULT_AGENT_SPECS",
    "DEFAULT_END_SESSION_MESSAGE",
    "DEFAULT_HUMAN_HANDOFF_MESSAGE",
    "END_SESSION",
    "EVENT_END_REQUESTED",
    "EVENT_GUARD_PREEMPTED",
    "EVENT_HUMAN_HANDOFF_REQUESTED",
    "EVENT_ROUTER_CONTINUITY",
    "EVENT_ROUTER_ROUTED",
    "HUMAN_HANDOFF",
    "INVOICE_AGENT",
    "NEXT_STATE_HUMAN_HANDOFF_REQUESTED",
    "NEXT_STATE_SESSION_ENDED",
    "ROUTE",
    "SAVINGS_AGENT",
    "AgentSpec",
    "ContinuityAnswer",
    "ContinuityClassifier",
    "ContinuitySignal",
    "Decision",
    "DomainAgent",
    "DomainAgents",
    "EnterpriseRouter",
    "Intent",
    "Route",
    "RouteDecision",
    "RouteMethod",
    "RouteState",
    "SessionControl",
    "SessionControlConfig",
    "SupportStatus",
    "TurnResult",
    "build_domain_agents",
    "build_session_control",
    "describe_capabilities",
]
