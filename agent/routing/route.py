"""The turn's route decision: where the turn went and why (route stickiness spec)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Route"]


@dataclass(frozen=True)
class Route:
    """``method``: ``router`` (the router's choice), ``default`` (its fallback),
    ``continuity`` (the classifier's say: the router was skipped), ``guard`` (the guard
    recognised a request for a person) or ``offer`` (a yes to the loop reply's offer of a
    person). ``handoff`` marks the global handoff node."""

    route: str
    intent: str | None
    domain: str | None
    method: str
    route_bypassed: bool = False
    handoff: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The spec's ``route_decision`` shape (``handoff`` only on the handoff node)."""
        out: dict[str, Any] = {
            "route": self.route,
            "intent": self.intent,
            "domain": self.domain,
            "method": self.method,
            "route_bypassed": self.route_bypassed,
        }
        if self.handoff:
            out["handoff"] = True
        out["metadata"] = dict(self.metadata)
        return out
