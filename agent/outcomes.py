"""How a turn ended: one enum shared by ``AgentChat``, session control and the gateway.

The values are the strings events and metrics carry (``agent.replied.outcome``,
``mel_turns{outcome}``), so a ``StrEnum`` compares equal to them.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Outcome"]


class Outcome(StrEnum):
    AGENT = "agent"
    """A domain agent answered."""
    TOOL_LIMIT = "tool_limit"
    """The agent hit the tool-round bound and apologised."""
    UNAVAILABLE = "unavailable"
    """No model is configured."""
    ERROR = "error"
    """The model failed for good: a bad answer, a refused request (or the turn raised)."""
    OUTAGE = "outage"
    """The model is unreachable for now (timeout, 5xx, no connection): the gateway parks
    the turn and tries again later."""
    PREEMPT_FRUSTRATED = "preempt:frustrated"
    PREEMPT_LOOP = "preempt:loop"
    PREEMPT_HUMAN_REQUEST = "preempt:human-request"
    """The guard answered (spec 023), with no LLM call."""
    HUMAN_HANDOFF = "human_handoff"
    """The continuity classifier sent the turn to the global handoff node."""
    END_SESSION = "end_session"
    """The continuity classifier sent the turn to the global end-session node."""
    WELCOME = "welcome"
    """The couple opened the chat (``request_welcome``): the greeting, no LLM."""
    MEDIA_UNUSABLE = "media_unusable"
    """A voice note (or an image the agent needed) could not be used: asked to type it."""
    MUTED = "muted"
    """A person has the thread: the bot stays silent."""
    IGNORED = "ignored"
    """Not something to answer (a reaction, an unsupported type, a number not served)."""

    @classmethod
    def preempt(cls, kind: str) -> Outcome:
        """The outcome of a guard preempt of ``kind`` (frustrated, loop, human-request)."""
        return cls(f"preempt:{kind}")

    @property
    def preempted(self) -> bool:
        return self.value.startswith("preempt:")

    @property
    def agent_tried(self) -> bool:
        """A domain agent ran the model to answer (the loop counter moves)."""
        return self in (Outcome.AGENT, Outcome.TOOL_LIMIT)
