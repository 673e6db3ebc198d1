"""A hypothesis's life: ``proposed → accepted | dismissed``, and the events it publishes.

Only a proposed hypothesis may change (ADR 0015, decision 4), which also rules out a
double accept racing itself: the second one is an :class:`InvalidTransition` (HTTP 409).
Every transition publishes its own immutable event; accepting a hypothesis for the next
stage (the Anamnese) publishes the DISTINCT type
``psychologist.hypothesis_accepted_for_anamnese`` as well, so a future consumer can filter
on the type without reading payloads.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from agent.psychologist.errors import InvalidTransition
from events import (
    HypothesisAccepted,
    HypothesisAcceptedForAnamnese,
    HypothesisDismissed,
    HypothesisProposed,
    PsychologistAnalysisCompleted,
    PsychologistAnalysisFailed,
)

__all__ = [
    "ANALYSIS_COMPLETED",
    "ANALYSIS_FAILED",
    "HYPOTHESIS_ACCEPTED",
    "HYPOTHESIS_ACCEPTED_FOR_ANAMNESE",
    "HYPOTHESIS_DISMISSED",
    "HYPOTHESIS_PROPOSED",
    "PSYCHOLOGIST_EVENT_TYPES",
    "HypothesisStatus",
    "assert_transition",
    "event_for_transition",
]

HYPOTHESIS_PROPOSED: Final = HypothesisProposed.TYPE
HYPOTHESIS_ACCEPTED: Final = HypothesisAccepted.TYPE
HYPOTHESIS_ACCEPTED_FOR_ANAMNESE: Final = HypothesisAcceptedForAnamnese.TYPE
HYPOTHESIS_DISMISSED: Final = HypothesisDismissed.TYPE
ANALYSIS_COMPLETED: Final = PsychologistAnalysisCompleted.TYPE
ANALYSIS_FAILED: Final = PsychologistAnalysisFailed.TYPE
PSYCHOLOGIST_EVENT_TYPES: Final = (
    HYPOTHESIS_PROPOSED,
    HYPOTHESIS_ACCEPTED,
    HYPOTHESIS_ACCEPTED_FOR_ANAMNESE,
    HYPOTHESIS_DISMISSED,
    ANALYSIS_COMPLETED,
    ANALYSIS_FAILED,
)


class HypothesisStatus(StrEnum):
    PROPOSED = "proposed"
    ACCEPTED = "accepted"
    DISMISSED = "dismissed"


_ALLOWED: Final = {
    HypothesisStatus.PROPOSED: frozenset({HypothesisStatus.ACCEPTED, HypothesisStatus.DISMISSED})
}


def _status(value: HypothesisStatus | str) -> HypothesisStatus:
    try:
        return HypothesisStatus(value)
    except ValueError:
        known = ", ".join(status.value for status in HypothesisStatus)
        raise ValueError(f"unknown hypothesis status {value!r} (known: {known})") from None


def assert_transition(
    current: HypothesisStatus | str,
    target: HypothesisStatus | str,
    *,
    hypothesis_id: str | None = None,
) -> None:
    """Raise :class:`InvalidTransition` unless ``current → target`` is allowed: only
    ``proposed → accepted`` and ``proposed → dismissed`` are. An unknown status string is
    a :class:`ValueError` (a bug, not a conflict)."""
    now, then = _status(current), _status(target)
    if then not in _ALLOWED.get(now, frozenset()):
        raise InvalidTransition(now.value, then.value, hypothesis_id=hypothesis_id)


def event_for_transition(
    target: HypothesisStatus | str, *, for_anamnese: bool = False
) -> list[str]:
    """The event types to publish when a hypothesis reaches ``target``, in order.

    ``accepted`` → ``psychologist.hypothesis_accepted`` (then
    ``psychologist.hypothesis_accepted_for_anamnese`` when ``for_anamnese``);
    ``dismissed`` → ``psychologist.hypothesis_dismissed``; ``proposed`` (a new
    hypothesis) → ``psychologist.hypothesis_proposed``.
    """
    status = _status(target)
    if for_anamnese and status is not HypothesisStatus.ACCEPTED:
        raise ValueError(f"only an accepted hypothesis goes to the Anamnese, not {status.value!r}")
    if status is HypothesisStatus.ACCEPTED:
        return [HYPOTHESIS_ACCEPTED, *([HYPOTHESIS_ACCEPTED_FOR_ANAMNESE] if for_anamnese else [])]
    if status is HypothesisStatus.DISMISSED:
        return [HYPOTHESIS_DISMISSED]
    return [HYPOTHESIS_PROPOSED]
