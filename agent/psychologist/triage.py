"""Triage: how much model a session's analysis deserves.

Below :data:`HEAVY_THRESHOLD` events a session is typically someone opening it and
trading a couple of messages, too little behavioural signal to pay for a strong model
(ADR 0015, decision 7). The tier names the LLM profile — not a model — so the operator
keeps choosing both models in the profiles file, and the costs really differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["HEAVY", "HEAVY_THRESHOLD", "LIGHT", "TIERS", "Tier", "TierName", "tier_named", "triage"]

TierName = Literal["light", "heavy"]


@dataclass(frozen=True)
class Tier:
    """An analysis tier: the LLM profile, the iteration bound and the cost budget."""

    name: TierName
    profile: str
    max_iterations: int
    budget_micro_usd: int


LIGHT: Final = Tier("light", "psychologist_light", max_iterations=4, budget_micro_usd=50_000)
HEAVY: Final = Tier("heavy", "psychologist", max_iterations=8, budget_micro_usd=300_000)
TIERS: Final[dict[str, Tier]] = {LIGHT.name: LIGHT, HEAVY.name: HEAVY}

HEAVY_THRESHOLD: Final = 20
"""Sessions with at least this many events get the heavy tier."""


def triage(event_count: int) -> Tier:
    """Fewer than :data:`HEAVY_THRESHOLD` events → :data:`LIGHT`, else :data:`HEAVY`."""
    if event_count < 0:
        raise ValueError(f"event_count must be >= 0, got {event_count}")
    return LIGHT if event_count < HEAVY_THRESHOLD else HEAVY


def tier_named(name: str) -> Tier:
    """The tier called ``name`` (``"light"`` / ``"heavy"``), for a forced reanalysis."""
    try:
        return TIERS[name]
    except KeyError:
        raise ValueError(f"unknown tier {name!r} (known: {', '.join(TIERS)})") from None
