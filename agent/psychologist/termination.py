"""Why a session ended: a deterministic classification of the close reason.

Recognising ``idle_timeout`` versus a lost worker versus an exception message is pattern
matching, not semantics, so no model is asked: :func:`classify_termination` maps the
reason string the gateway stored with the close to a :class:`Termination`, and the
prompt gives the model that cause as a FACT to analyse the consequences of (ADR 0015,
decision 6).

Reasons the gateway writes:

=======================  =====================================================
``user_ended``           the couple asked to end (END_SESSION)
``idle_timeout``         the inactivity sweeper closed it
``support_closed``       a support agent closed it
``error: <message>``     an unrecoverable processing error (the message is kept)
``worker_lost[: …]``     the worker running a turn died mid-turn
=======================  =====================================================

Anything else (or no reason) is ``unknown``, with the raw reason as the detail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, get_args

from events import SessionClosed, SessionClosedAbnormally

__all__ = [
    "ABNORMAL_CAUSES",
    "CLOSE_EVENT_TYPES",
    "SESSION_CLOSED",
    "SESSION_CLOSED_ABNORMALLY",
    "TERMINATION_CAUSES",
    "Termination",
    "TerminationCause",
    "classify_termination",
]

SESSION_CLOSED: Final = SessionClosed.TYPE
SESSION_CLOSED_ABNORMALLY: Final = SessionClosedAbnormally.TYPE
CLOSE_EVENT_TYPES: Final = frozenset({SESSION_CLOSED, SESSION_CLOSED_ABNORMALLY})
"""The event types that trigger an analysis."""

TerminationCause = Literal[
    "user_ended", "idle_timeout", "support_closed", "processing_error", "worker_lost", "unknown"
]
TERMINATION_CAUSES: Final[tuple[TerminationCause, ...]] = get_args(TerminationCause)

ABNORMAL_CAUSES: Final[frozenset[TerminationCause]] = frozenset({"processing_error", "worker_lost"})
"""Causes that are abnormal even when the close was published as ``session.closed``."""

_DETAIL_MAX = 500
_PLAIN: Final[dict[str, TerminationCause]] = {
    "user_ended": "user_ended",
    "idle_timeout": "idle_timeout",
    "support_closed": "support_closed",
}

_DESCRIPTIONS: Final[dict[TerminationCause, str]] = {
    "user_ended": "O casal pediu para encerrar o atendimento (END_SESSION).",
    "idle_timeout": (
        "A sessão foi encerrada por inatividade: o casal parou de escrever e o tempo "
        "limite de inatividade expirou."
    ),
    "support_closed": "Um atendente do suporte humano encerrou a sessão.",
    "processing_error": "A sessão caiu por um erro irrecuperável no processamento de um turno.",
    "worker_lost": (
        "O processo que atendia um turno morreu no meio dele (worker perdido); o turno "
        "pode ter ficado sem resposta ou com resposta incompleta."
    ),
    "unknown": "O motivo do encerramento não foi reconhecido pelo sistema.",
}


@dataclass(frozen=True)
class Termination:
    """The classified end of a session.

    ``reason`` is the raw close reason (``None`` when none was stored); ``detail`` the
    part worth showing (the error message, the worker note, an unrecognised reason);
    ``description`` a PT-BR sentence stating the cause, for the prompt and the UI.
    """

    cause: TerminationCause
    abnormal: bool
    event_type: str
    reason: str | None = None
    detail: str | None = None

    @property
    def description(self) -> str:
        text = _DESCRIPTIONS[self.cause]
        if self.detail:
            label = "Motivo registrado" if self.cause == "unknown" else "Detalhe"
            text = f"{text} {label}: {self.detail}"
        return text

    def as_dict(self) -> dict[str, object]:
        """JSON-able form, for storage and event payloads."""
        return {
            "cause": self.cause,
            "abnormal": self.abnormal,
            "event_type": self.event_type,
            "reason": self.reason,
            "detail": self.detail,
            "description": self.description,
        }


def classify_termination(reason: str | None, event_type: str) -> Termination:
    """Classify a close ``reason`` published with ``event_type``.

    ``session.closed_abnormally`` is abnormal whatever the reason; ``session.closed`` is
    abnormal only for a processing error or a lost worker. Any other event type is a
    programming error (:class:`ValueError`).
    """
    if event_type not in CLOSE_EVENT_TYPES:
        raise ValueError(
            f"not a session close event: {event_type!r} "
            f"(expected {SESSION_CLOSED!r} or {SESSION_CLOSED_ABNORMALLY!r})"
        )
    cause, detail = _match(reason)
    abnormal = event_type == SESSION_CLOSED_ABNORMALLY or cause in ABNORMAL_CAUSES
    return Termination(cause, abnormal, event_type, reason, detail)


def _match(reason: str | None) -> tuple[TerminationCause, str | None]:
    text = (reason or "").strip()
    if not text:
        return "unknown", None
    head, sep, rest = text.partition(":")
    keyword = head.strip().lower()
    if not sep and keyword in _PLAIN:
        return _PLAIN[keyword], None
    if keyword == "error":
        return "processing_error", _clip(rest)
    if keyword == "worker_lost":
        return "worker_lost", _clip(rest)
    return "unknown", _clip(text)


def _clip(text: str) -> str | None:
    text = text.strip()
    if not text:
        return None
    return text if len(text) <= _DETAIL_MAX else text[: _DETAIL_MAX - 1] + "…"
