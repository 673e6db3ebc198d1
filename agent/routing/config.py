"""Session-control settings: the route-stickiness spec's variables, under their meanings.

The gateway reads the environment (``ENABLE_ROUTE_STICKINESS``, ``ROUTE_STICKINESS_*``,
``HUMAN_HANDOFF_MESSAGE``, ``END_SESSION_MESSAGE``) and builds one of these; each field
names the variable it comes from. Invalid values are a ``ValueError`` at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DEFAULT_END_SESSION_MESSAGE",
    "DEFAULT_HUMAN_HANDOFF_MESSAGE",
    "SessionControlConfig",
]

DEFAULT_HUMAN_HANDOFF_MESSAGE = "Vou encaminhar seu atendimento para uma pessoa."
DEFAULT_END_SESSION_MESSAGE = "Atendimento encerrado. Obrigado pelo contato."


@dataclass(frozen=True)
class SessionControlConfig:
    """Route stickiness and the global nodes' replies (spec defaults)."""

    enabled: bool = False
    """``ENABLE_ROUTE_STICKINESS``: run the continuity classifier every turn."""
    profile: str = "route_continuity"
    """``ROUTE_STICKINESS_LLM_PROFILE``: the classifier's profile in ``llm_profiles.yaml``."""
    threshold: float = 0.90
    """``ROUTE_STICKINESS_CONFIDENCE_THRESHOLD``: minimum confidence to accept a decision."""
    history_turns: int = 2
    """``ROUTE_STICKINESS_HISTORY_TURNS``: recent turns sent to the classifier."""
    max_tokens: int = 80
    """``ROUTE_STICKINESS_MAX_TOKENS``: the classifier's output limit."""
    human_handoff_message: str = DEFAULT_HUMAN_HANDOFF_MESSAGE
    """``HUMAN_HANDOFF_MESSAGE``: the handoff node's reply when support is available."""
    end_session_message: str = DEFAULT_END_SESSION_MESSAGE
    """``END_SESSION_MESSAGE``: the end-session node's reply."""

    def __post_init__(self) -> None:
        if not self.profile.strip():
            raise ValueError("ROUTE_STICKINESS_LLM_PROFILE must not be empty")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError("ROUTE_STICKINESS_CONFIDENCE_THRESHOLD must be between 0 and 1")
        if self.history_turns < 0:
            raise ValueError("ROUTE_STICKINESS_HISTORY_TURNS must be >= 0")
        if self.max_tokens <= 0:
            raise ValueError("ROUTE_STICKINESS_MAX_TOKENS must be > 0")
        if not self.human_handoff_message.strip():
            raise ValueError("HUMAN_HANDOFF_MESSAGE must not be empty")
        if not self.end_session_message.strip():
            raise ValueError("END_SESSION_MESSAGE must not be empty")
