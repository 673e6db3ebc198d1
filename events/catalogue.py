"""The domain events: one payload model per event type.

Every event is one entry of the event stream (``P:events``) with an envelope
``{id, type, at, thread_id, session_id, data}``; these models are its ``data``. Publishers
build a model, so a typo in a field name or a missing field is an error where it is made,
not a surprise for support, the psychologist or a webhook consumer. Fields marked
:data:`~events._base.Omitted` are absent from the data when they have no value.

Log event names (structlog's ``event``) are a different namespace and never reuse these.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from events._base import Omitted, Payload

__all__ = [
    "AgentFailed",
    "AgentReplied",
    "GuardPreempted",
    "HumanHandoffExpired",
    "HumanHandoffRequested",
    "HypothesisAccepted",
    "HypothesisAcceptedForAnamnese",
    "HypothesisDecided",
    "HypothesisDismissed",
    "HypothesisProposed",
    "MessageFailed",
    "MessageParked",
    "MessageReceived",
    "MessageSent",
    "MessageStatus",
    "PsychologistAnalysisCompleted",
    "PsychologistAnalysisFailed",
    "ReanalysisRequested",
    "RouterContinuity",
    "RouterRouted",
    "SessionClosed",
    "SessionClosedAbnormally",
    "SessionEndRequested",
    "SessionStarted",
    "SupportClaimed",
    "SupportQueueOpened",
    "SupportReleased",
    "SupportReplied",
]

# --- messages ------------------------------------------------------------------------


class MessageReceived(Payload):
    """A couple's message, as stored before it was acknowledged."""

    TYPE = "message.received"
    message_id: str
    channel: str
    kind: str
    text: str
    received_at: str
    provider_timestamp: str
    profile_name: Omitted[str] = None
    media: Omitted[list[dict[str, Any]]] = None
    location: Omitted[dict[str, Any]] = None
    payload: Omitted[dict[str, Any]] = None
    reaction: Omitted[dict[str, Any]] = None
    reply_to: Omitted[str] = None
    transcript: Omitted[str] = None
    """A voice note's transcript (what the guard and the agent read)."""
    media_problem: Omitted[str] = None
    """Why the media could not be used (the couple was asked to type it)."""
    not_answered: Omitted[str] = None
    """Why nothing answers it: ``not_served`` (a business number we do not serve)."""


class MessageSent(Payload):
    """A reply the provider accepted (``parts``: a long reply is split)."""

    TYPE = "message.sent"
    in_reply_to: str
    channel: str
    author: str
    text: str
    provider_message_ids: list[str]
    parts: int


class MessageFailed(Payload):
    """A reply that could not be delivered, or whose delivery is uncertain after a crash
    (``reason: delivery_uncertain``)."""

    TYPE = "message.failed"
    in_reply_to: str
    channel: str
    author: str
    error: Omitted[str] = None
    code: Omitted[int | str] = None
    attempts: Omitted[int] = None
    reason: Omitted[str] = None


class MessageParked(Payload):
    """The model is unreachable: the message waits (the couple was told once) and is
    tried again at ``retry_at``."""

    TYPE = "message.parked"
    message_id: str
    attempt: int
    retry_at: str
    outage_since: str


class MessageStatus(Payload):
    """A provider's delivery status (sent, delivered, read, failed, …) for a reply."""

    TYPE = "message.status"
    provider_message_id: str
    status: str
    in_reply_to: str | None
    error_code: str | None
    error_message: str | None
    provider_timestamp: str


# --- the turn ------------------------------------------------------------------------


class GuardPreempted(Payload):
    """The ConversationGuard answered (spec 023): no LLM call this turn."""

    TYPE = "guard.preempted"
    kind: str


class RouterContinuity(Payload):
    """The continuity classifier's decision (route stickiness spec, "Telemetria")."""

    TYPE = "router.continuity"
    decision: str
    confidence: float
    active_agent: str | None
    route_bypassed: bool
    profile_name: str
    model_decision: str | None
    accepted: bool
    reason: Omitted[str] = None
    latency_ms: Omitted[int] = None


class RouterRouted(Payload):
    """The enterprise router's choice (or its fallback to the default agent)."""

    TYPE = "router.routed"
    route: str
    intent: str | None
    domain: str
    method: str
    confidence: Omitted[float] = None
    reason: Omitted[str] = None
    latency_ms: Omitted[int] = None


class AgentReplied(Payload):
    """A domain agent answered (what it said, its tools, its LLM cost)."""

    TYPE = "agent.replied"
    in_reply_to: str
    outcome: str
    text: str
    agent: str | None
    route_decision: dict[str, Any] | None
    tool_calls: list[dict[str, Any]]
    llm_calls: int
    usage: dict[str, dict[str, int]]


class AgentFailed(Payload):
    """The model failed, or the turn raised (``error``)."""

    TYPE = "agent.failed"
    in_reply_to: str
    outcome: str
    text: Omitted[str] = None
    agent: Omitted[str] = None
    route_decision: Omitted[dict[str, Any]] = None
    tool_calls: Omitted[list[dict[str, Any]]] = None
    llm_calls: Omitted[int] = None
    usage: Omitted[dict[str, dict[str, int]]] = None
    error: Omitted[str] = None


# --- sessions ------------------------------------------------------------------------


class SessionStarted(Payload):
    TYPE = "session.started"
    channel: str


class HumanHandoffRequested(Payload):
    """The couple asked for a person. ``source``: ``guard``, ``frustrated`` (anger and a
    request together), ``repeated_frustration``, ``loop_offer`` (a yes to the loop reply's
    offer) or ``continuity`` (the classifier)."""

    TYPE = "session.human_handoff.requested"
    source: str
    active_agent: str | None
    previous_intent: str | None
    previous_domain: str | None
    support_available: bool
    support: str
    """``available`` (handed to a person), ``out_of_hours`` or ``none`` (queued)."""
    reply: str
    confidence: Omitted[float] = None
    guard_kind: Omitted[str] = None


class HumanHandoffExpired(Payload):
    """Nobody took the handoff within ``HANDOFF_TIMEOUT``: the thread is back with the bot."""

    TYPE = "session.human_handoff.expired"


class SessionEndRequested(Payload):
    """The couple asked to end the session (the classifier's END_SESSION)."""

    TYPE = "session.end.requested"
    source: str
    active_agent: str | None
    previous_intent: str | None
    previous_domain: str | None
    confidence: float


class SessionClosed(Payload):
    """A session ended normally (``user_ended``, ``idle_timeout``, ``support_closed``;
    ``by``: the support person who closed it)."""

    TYPE = "session.closed"
    reason: str
    started_at: str | None
    closed_at: str
    by: Omitted[str] = None


class SessionClosedAbnormally(Payload):
    """A session ended by an error or a lost worker (``error: …``, ``worker_lost``)."""

    TYPE = "session.closed_abnormally"
    reason: str
    started_at: str | None
    closed_at: str


# --- support -------------------------------------------------------------------------


class SupportReplied(Payload):
    TYPE = "support.replied"
    reply_id: str
    text: str
    by: str


class SupportQueueOpened(Payload):
    """Support hours began: the requests for a person queued meanwhile, oldest first."""

    TYPE = "support.queue_opened"
    waiting: int
    thread_ids: list[str]


class SupportReleased(Payload):
    """The thread is back with the bot (support released it, or the handoff expired);
    ``by``: the support person who did it."""

    TYPE = "support.released"
    reason: str
    by: Omitted[str] = None


class SupportClaimed(Payload):
    """A support person took a thread: an open handoff, or a request that was waiting
    (``request``: ``open`` | ``waiting``). The claim is exclusive."""

    TYPE = "support.claimed"
    by: str
    request: str


# --- the psychologist (ADR 0015) --------------------------------------------------------


class HypothesisProposed(Payload):
    TYPE = "psychologist.hypothesis_proposed"
    hypothesis_id: str
    analysis_id: str
    session_id: str
    target_agent: str
    title: str
    confidence: int
    evidence_event_ids: list[str]
    termination_analysis: str | None


class HypothesisDecided(Payload):
    """The fields shared by a hypothesis' decisions (not an event type of its own)."""

    hypothesis_id: str
    analysis_id: str
    session_id: str
    target_agent: str
    title: str
    confidence: int
    status: str
    by: str
    note: str | None
    for_anamnese: bool


class HypothesisAccepted(HypothesisDecided):
    TYPE = "psychologist.hypothesis_accepted"


class HypothesisAcceptedForAnamnese(HypothesisDecided):
    """A distinct type (not a flag), so the Anamnese can filter on it (ADR 0015)."""

    TYPE = "psychologist.hypothesis_accepted_for_anamnese"


class HypothesisDismissed(HypothesisDecided):
    TYPE = "psychologist.hypothesis_dismissed"


class PsychologistAnalysisCompleted(Payload):
    """An analysis became the session's current one (with its cost)."""

    model_config = ConfigDict(frozen=True, extra="allow")  # the metering fields ride along

    TYPE = "psychologist.analysis_completed"
    session_id: str
    analysis_id: str
    trigger: str
    trigger_event_id: str
    requested_by: str | None
    supersedes: str | None
    hypothesis_ids: list[str]
    termination: str
    abnormal: bool


class PsychologistAnalysisFailed(Payload):
    TYPE = "psychologist.analysis_failed"
    session_id: str
    trigger: str
    trigger_event_id: str
    failure: str
    attempt: int
    max_attempts: int
    final: bool
    last_error: str | None
    metering: dict[str, Any] | None


class ReanalysisRequested(Payload):
    """Support asked for a new analysis of a closed session (queued for the consumer)."""

    TYPE = "psychologist.reanalysis_requested"
    session_id: str
    tier: str | None
    requested_by: str
