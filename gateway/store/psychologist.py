"""The psychologist's storage in Redis (ADR 0015): analyses, hypotheses, their indexes.

==================================  ======  ===============================================
``P:session:{S}:analysis:current``  string  id of the session's ONE current analysis
``P:session:{S}:analyses``          list    every analysis id of the session, oldest first
                                            (superseded ones are kept, never deleted)
``P:session:{S}:analysis:failures`` list    recent failed runs (JSON), newest first, capped
``P:analysis:{A}``                  hash    an analysis: status current|superseded, trigger,
                                            termination, cost (tokens, micro-USD, tier,
                                            model, iterations), hypothesis ids
``P:hypothesis:{H}``                hash    a hypothesis and its mutable status
                                            (proposed → accepted | dismissed)
``P:insights``                      zset    hypotheses of current analyses → created ms
``P:t:{T}:hypotheses``              zset    the same, for one thread (the next analysis's
                                            "earlier hypotheses")
``P:t:{T}:sessions``                zset    the thread's closed sessions → close ms (their
                                            events tell "another session" apart)
``P:psychologist:attempts``         hash    job (stream entry id) → runs started
==================================  ======  ===============================================

(``P`` is ``MEL_REDIS_PREFIX``.) Writes that must not tear are one Lua script each:
storing an analysis (a check-and-set of the current pointer — ``SET NX`` semantics for a
first analysis, "still the one I superseded" for a reanalysis — with the hypotheses, the
indexes and the events), a hypothesis transition (only out of ``proposed``, with its
events), a failed run (its event and its record).

**Events and the analysed session.** The psychologist's events are published on the
analysed session's thread with an EMPTY envelope ``session_id``; ``data.session_id`` names
the analysed session. An event published with the session id would be appended to
``P:session:{S}:events`` — the very evidence set the analysis cites — so analysing a
session would change it, and a reanalysis would read its own previous analysis.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import structlog

from agent.psychologist import (
    CLOSE_EVENT_TYPES,
    AnalysisOutcome,
    HypothesisIn,
    HypothesisStatus,
    InvalidTransition,
    Termination,
    assert_transition,
    event_for_transition,
    tier_named,
)
from events import (
    HypothesisProposed,
    PsychologistAnalysisCompleted,
    PsychologistAnalysisFailed,
    ReanalysisRequested,
    payload_type,
)
from gateway.clock import now_ms, utc_now_iso
from gateway.errors import Conflict, NotFound, Unavailable
from gateway.store._codec import as_str, dumps
from gateway.store.errors import translates_redis_errors
from gateway.store.events import encode_events

if TYPE_CHECKING:
    from gateway.store import Store

__all__ = [
    "GROUP",
    "REANALYSIS_REQUESTED",
    "TRIGGER_TYPES",
    "AnalysisConflict",
    "PsychologistStore",
    "PsychologistUnavailable",
    "SaveResult",
    "SessionLog",
    "SessionNotClosed",
    "UnknownHypothesis",
    "UnknownSession",
]

log = structlog.get_logger("gateway.store.psychologist")

GROUP: Final = "psychologist"
REANALYSIS_REQUESTED: Final = ReanalysisRequested.TYPE
TRIGGER_TYPES: Final = CLOSE_EVENT_TYPES | {REANALYSIS_REQUESTED}
"""The event types the consumer acts on."""

FAILURES_KEPT: Final = 20
OTHER_SESSIONS: Final = 20
"""How many of the thread's other sessions lend their ids to "exists, but elsewhere"."""
PREVIOUS_MAX: Final = 50
"""How many of the thread's earlier hypotheses go into the prompt (newest)."""


class UnknownSession(NotFound):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"unknown session {session_id!r}: no events recorded for it")


class UnknownHypothesis(NotFound):
    def __init__(self, hypothesis_id: str) -> None:
        super().__init__(f"unknown hypothesis {hypothesis_id!r}")


class SessionNotClosed(Conflict):
    """A reanalysis of a session that has not closed (nothing to analyse yet)."""


class PsychologistUnavailable(Unavailable):
    """No psychologist consumer has ever run on this Redis: a request would never be read."""


class AnalysisConflict(Conflict):
    """The current analysis kept changing under a manual reanalysis (retry it)."""


def _new_id(kind: str) -> str:
    """Time-ordered and unique, like session ids: ``a_<unix ms hex>_<random>``."""
    return f"{kind}_{now_ms():x}_{uuid.uuid4().hex[:12]}"


def _flat(fields: Mapping[str, str]) -> list[str]:
    out: list[str] = []
    for key, value in fields.items():
        out += [key, value]
    return out


# --- storage ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionLog:
    """A session's events as recorded (oldest first) and its thread."""

    session_id: str
    thread_id: str
    events: list[dict[str, Any]]

    @property
    def event_ids(self) -> list[str]:
        return [str(e["id"]) for e in self.events]

    def close_event(self) -> dict[str, Any] | None:
        """The session's (last) close event, or ``None`` while it is open."""
        return next((e for e in reversed(self.events) if e["type"] in CLOSE_EVENT_TYPES), None)


@dataclass(frozen=True, slots=True)
class SaveResult:
    """``stored``: the analysis is now current. Otherwise ``current_id`` won the race."""

    stored: bool
    analysis_id: str
    current_id: str
    superseded_id: str | None
    event_ids: list[str]


@translates_redis_errors
class PsychologistStore:
    """Analyses, hypotheses and their indexes in Redis, next to the gateway's ``Store``."""

    def __init__(self, store: Store, *, ttl_days: float = 365) -> None:
        self.store = store
        self.ttl = int(ttl_days * 86400)
        """Analyses, hypotheses and failures expire this long after they are written."""
        self.redis = store.redis
        self.keys = store.keys
        self.scripts = store.scripts
        self.group = store.group(store.keys.events, GROUP, start="$")

    def thread_hypotheses_key(self, thread_id: str) -> str:
        return self.keys.thread(thread_id, "hypotheses")

    def thread_sessions_key(self, thread_id: str) -> str:
        return self.keys.thread(thread_id, "sessions")

    # --- the consumer group ------------------------------------------------------------

    async def ensure_group(self) -> None:
        """Create the group at the stream's end (``$``) the first time: sessions closed
        before any psychologist ever ran are not analysed unless asked for
        (``mel-gateway insights reanalyze``), rather than billing the whole history."""
        await self.group.ensure()

    async def group_exists(self) -> bool:
        return await self.group.exists()

    async def stats(self) -> dict[str, int]:
        """Analyses completed and failed for good, since this Redis began."""
        raw = await self.redis.hgetall(self.keys.psychologist_stats)
        counts = {as_str(k): int(as_str(v)) for k, v in raw.items()}
        return {"completed": counts.get("completed", 0), "failed": counts.get("failed", 0)}

    async def next_attempt(self, job_id: str) -> int:
        return int(await self.redis.hincrby(self.keys.psychologist_attempts, job_id, 1))

    async def finish_job(self, job_id: str) -> None:
        """Acknowledge the job's entry and forget its attempts, together."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.xack(self.keys.events, GROUP, job_id)
            pipe.hdel(self.keys.psychologist_attempts, job_id)
            await pipe.execute()

    # --- sessions ------------------------------------------------------------------------

    async def session_log(self, session_id: str) -> SessionLog:
        """The session's events; :class:`UnknownSession` when it recorded none."""
        ids = await self.store.events.session_ids(session_id)
        events = await self.store.events.by_id(ids) if ids else []
        if not events:
            raise UnknownSession(session_id)
        thread_id = next((str(e["thread_id"]) for e in events if e.get("thread_id")), "")
        return SessionLog(session_id, thread_id, events)

    async def note_closed_session(self, thread_id: str, session_id: str, closed_ms: int) -> None:
        if thread_id:
            await self.redis.zadd(self.thread_sessions_key(thread_id), {session_id: closed_ms})

    async def other_sessions_event_ids(self, thread_id: str, session_id: str) -> set[str]:
        """Ids of the events of the thread's other (recent) closed sessions."""
        if not thread_id:
            return set()
        raw: Any = await self.redis.zrevrange(
            self.thread_sessions_key(thread_id), 0, OTHER_SESSIONS
        )
        others = [as_str(s) for s in raw if as_str(s) != session_id][:OTHER_SESSIONS]
        if not others:
            return set()
        async with self.redis.pipeline(transaction=False) as pipe:
            for other in others:
                pipe.lrange(self.keys.session_events(other), 0, -1)
            lists: list[Any] = await pipe.execute()
        return {as_str(i) for ids in lists for i in ids}

    async def has_current(self, session_id: str) -> bool:
        return bool(await self.redis.exists(self.keys.analysis_current(session_id)))

    async def current_id(self, session_id: str) -> str | None:
        return as_str(await self.redis.get(self.keys.analysis_current(session_id))) or None

    # --- analyses ------------------------------------------------------------------------

    async def save_analysis(
        self,
        *,
        session: SessionLog,
        outcome: AnalysisOutcome,
        termination: Termination,
        trigger: str,
        trigger_event_id: str,
        requested_by: str | None = None,
        attempt: int = 1,
        supersede: bool = False,
    ) -> SaveResult:
        """Store an accepted outcome as the session's current analysis, atomically.

        ``supersede=False`` (an automatic run): stored only if the session has no current
        analysis — otherwise nothing is written and ``stored`` is False. ``supersede=True``
        (a manual reanalysis): always stored; the previous current one is marked superseded.
        """
        analysis_id = _new_id("a")
        at = utc_now_iso()
        score = now_ms()
        session_id, thread_id = session.session_id, session.thread_id
        hypotheses = [(_new_id("h"), h) for h in outcome.hypotheses]
        hypothesis_ids = [hid for hid, _ in hypotheses]
        metering = {**outcome.metering(), "total_tokens": outcome.usage.total_tokens}
        analysis = {
            "id": analysis_id,
            "session_id": session_id,
            "thread_id": thread_id,
            "status": "current",
            "trigger": trigger,
            "trigger_event_id": trigger_event_id,
            "requested_by": requested_by or "",
            "attempt": str(attempt),
            "created_at": at,
            "event_count": str(len(session.events)),
            "termination": dumps(termination.as_dict()),
            "metering": dumps(metering),
            "hypothesis_ids": dumps(hypothesis_ids),
        }
        proposed = [_proposed(hid, analysis_id, session_id, h) for hid, h in hypotheses]
        for _ in range(5):
            expected = (await self.current_id(session_id) or "") if supersede else ""
            completed = PsychologistAnalysisCompleted(
                session_id=session_id,
                analysis_id=analysis_id,
                trigger=trigger,
                trigger_event_id=trigger_event_id,
                requested_by=requested_by,
                supersedes=expected or None,
                hypothesis_ids=hypothesis_ids,
                termination=termination.cause,
                abnormal=termination.abnormal,
                **metering,
            )
            payload = {
                "expected": expected,
                "id": analysis_id,
                "analysis": _flat(analysis),
                "hypotheses": [
                    [hid, _flat(_hypothesis_fields(hid, analysis_id, session_id, thread_id, h, at))]
                    for hid, h in hypotheses
                ],
                "score": score,
                "at": at,
                "thread_id": thread_id,
                "maxlen": self.store.events.maxlen,
                "events": encode_events([*proposed, completed]),
                "ttl": self.ttl,
            }
            keys = [
                self.keys.analysis_current(session_id),
                self.keys.analyses(session_id),
                self.keys.analysis(analysis_id),
                self.keys.insights,
                self.thread_hypotheses_key(thread_id),
                self.keys.events,
                self.keys.analysis(expected) if expected else "",
                self.keys.psychologist_stats,
                *[self.keys.hypothesis(hid) for hid in hypothesis_ids],
            ]
            res: Any = await self.scripts.run("save_analysis", keys, [dumps(payload)])
            stored, current, ids = bool(res[0]), as_str(res[1]), [as_str(i) for i in res[2] or []]
            if stored:
                return SaveResult(True, analysis_id, analysis_id, expected or None, ids)
            if not supersede:
                return SaveResult(False, analysis_id, current, None, [])
            # a concurrent reanalysis moved the pointer: supersede the new one instead
        raise AnalysisConflict(
            f"the current analysis of session {session_id!r} kept changing; try again"
        )

    async def record_failure(
        self,
        *,
        session_id: str,
        thread_id: str,
        trigger: str,
        trigger_event_id: str,
        failure: str,
        attempt: int,
        max_attempts: int,
        outcome: AnalysisOutcome | None = None,
        final: bool | None = None,
    ) -> list[str]:
        """Publish ``psychologist.analysis_failed`` and keep its record; no analysis.
        ``final``: no retry follows (default: when the attempts are spent)."""
        final = attempt >= max_attempts if final is None else final
        metering = outcome.metering() if outcome is not None else None
        last_error = (outcome.errors[-1] if outcome is not None and outcome.errors else "")[:2000]
        event = PsychologistAnalysisFailed(
            session_id=session_id,
            trigger=trigger,
            trigger_event_id=trigger_event_id,
            failure=failure,
            attempt=attempt,
            max_attempts=max_attempts,
            final=final,
            last_error=last_error or None,
            metering=metering,
        )
        record = {**event.data(), "at": utc_now_iso()}
        payload = {
            "record": record,
            "at": record["at"],
            "thread_id": thread_id,
            "maxlen": self.store.events.maxlen,
            "kept": FAILURES_KEPT,
            "ttl": self.ttl,
            "events": encode_events([event]),
        }
        res: Any = await self.scripts.run(
            "record_failure",
            [
                self.keys.analysis_failures(session_id),
                self.keys.events,
                self.keys.psychologist_stats,
            ],
            [dumps(payload)],
        )
        return [as_str(i) for i in res]

    async def analysis(self, analysis_id: str, *, with_hypotheses: bool = True) -> dict[str, Any]:
        raw = await self.redis.hgetall(self.keys.analysis(analysis_id))
        if not raw:
            raise NotFound(f"unknown analysis {analysis_id!r}")
        view = _analysis_view({as_str(k): as_str(v) for k, v in raw.items()})
        if with_hypotheses:
            view["hypotheses"] = await self.hypotheses(view["hypothesis_ids"])
        return view

    async def session_analyses(self, session_id: str) -> dict[str, Any]:
        """The current analysis, the superseded ones (newest first) and recent failures."""
        ids = [as_str(i) for i in await self.redis.lrange(self.keys.analyses(session_id), 0, -1)]
        analyses = [await self.analysis(aid) for aid in reversed(ids)]
        failures = [
            json.loads(as_str(r))
            for r in await self.redis.lrange(self.keys.analysis_failures(session_id), 0, -1)
        ]
        current = next((a for a in analyses if a["status"] == "current"), None)
        status = "analysed" if current else "failed" if failures else "not_analysed"
        return {
            "session_id": session_id,
            "status": status,
            "current": current,
            "superseded": [a for a in analyses if a["status"] != "current"],
            "failures": failures,
        }

    # --- hypotheses ----------------------------------------------------------------------

    async def hypotheses(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        if not ids:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for hid in ids:
                pipe.hgetall(self.keys.hypothesis(hid))
            found: list[Any] = await pipe.execute()
        return [_hypothesis_view({as_str(k): as_str(v) for k, v in h.items()}) for h in found if h]

    async def hypothesis(self, hypothesis_id: str) -> dict[str, Any]:
        found = await self.hypotheses([hypothesis_id])
        if not found:
            raise UnknownHypothesis(hypothesis_id)
        return found[0]

    async def current_hypotheses(self, limit: int = 500) -> list[dict[str, Any]]:
        """Hypotheses of current analyses across sessions, newest first, each with its
        session's termination."""
        raw: Any = await self.redis.zrevrange(self.keys.insights, 0, limit - 1)
        found = await self.hypotheses([as_str(h) for h in raw])
        analysis_ids = sorted({h["analysis_id"] for h in found})
        terminations: dict[str, Any] = {}
        if analysis_ids:
            async with self.redis.pipeline(transaction=False) as pipe:
                for aid in analysis_ids:
                    pipe.hget(self.keys.analysis(aid), "termination")
                values: list[Any] = await pipe.execute()
            terminations = {
                aid: json.loads(as_str(v)) if v else None
                for aid, v in zip(analysis_ids, values, strict=True)
            }
        for h in found:
            h["termination"] = terminations.get(h["analysis_id"])
        return found

    async def thread_hypotheses(
        self, thread_id: str, *, exclude_session: str
    ) -> list[dict[str, Any]]:
        """The thread's earlier hypotheses (current analyses of other sessions), not
        dismissed, oldest first — for the next analysis's prompt."""
        if not thread_id:
            return []
        raw: Any = await self.redis.zrevrange(
            self.thread_hypotheses_key(thread_id), 0, 4 * PREVIOUS_MAX
        )
        found = await self.hypotheses([as_str(h) for h in raw])
        kept = [
            h
            for h in found
            if h["session_id"] != exclude_session and h["status"] != HypothesisStatus.DISMISSED
        ][:PREVIOUS_MAX]
        return list(reversed(kept))

    async def transition(
        self,
        hypothesis_id: str,
        target: HypothesisStatus,
        *,
        by: str,
        for_anamnese: bool = False,
        note: str | None = None,
    ) -> tuple[dict[str, Any], list[str]]:
        """``proposed → target`` and its events, atomically.

        :class:`UnknownHypothesis` (404) when missing; :class:`InvalidTransition` (409)
        when not proposed — checked by the domain first, then again inside the script, so
        of two concurrent accepts exactly one wins.
        """
        current = await self.hypothesis(hypothesis_id)
        assert_transition(current["status"], target, hypothesis_id=hypothesis_id)
        at = utc_now_iso()
        data: dict[str, Any] = {
            "hypothesis_id": hypothesis_id,
            "analysis_id": current["analysis_id"],
            "session_id": current["session_id"],
            "target_agent": current["target_agent"],
            "title": current["title"],
            "confidence": current["confidence"],
            "status": target.value,
            "by": by,
            "note": note,
        }
        types = event_for_transition(target, for_anamnese=for_anamnese)
        data["for_anamnese"] = for_anamnese
        events = encode_events([payload_type(kind).model_validate(data) for kind in types])
        fields = {
            "status": target.value,
            "decided_at": at,
            "decided_by": by,
            "for_anamnese": "1" if for_anamnese else "",
            "note": note or "",
        }
        payload = {
            "fields": _flat(fields),
            "at": at,
            "maxlen": self.store.events.maxlen,
            "events": events,
        }
        res: Any = await self.scripts.run(
            "transition", [self.keys.hypothesis(hypothesis_id), self.keys.events], [dumps(payload)]
        )
        verdict = as_str(res[0])
        if verdict == "missing":
            raise UnknownHypothesis(hypothesis_id)
        if verdict == "conflict":
            raise InvalidTransition(as_str(res[1]), target.value, hypothesis_id=hypothesis_id)
        ids = [as_str(i) for i in res[1] or []]
        log.info(
            "psychologist.hypothesis_decided",
            hypothesis_id=hypothesis_id,
            status=target.value,
            for_anamnese=for_anamnese,
        )
        return await self.hypothesis(hypothesis_id), ids

    # --- manual reanalysis -----------------------------------------------------------------

    async def request_reanalysis(
        self, session_id: str, *, tier: str | None = None, by: str = "support"
    ) -> str:
        """Enqueue a manual reanalysis (an event the consumer group reads); its id.

        404 for an unknown session, 409 while it is open, 503 when no psychologist
        consumer has ever run (the request would sit unread), ``ValueError`` for an
        unknown tier.
        """
        if tier is not None:
            tier_named(tier)
        recorded = await self.session_log(session_id)
        if recorded.close_event() is None:
            raise SessionNotClosed(
                f"session {session_id!r} is still open: it is analysed when it closes"
            )
        if not await self.group_exists():
            raise PsychologistUnavailable(
                "no psychologist consumer has run yet: start `mel-gateway psychologist` "
                "(or serve/worker with PSYCHOLOGIST_ENABLED=true and an LLM configured)"
            )
        data = {"session_id": session_id, "tier": tier, "requested_by": by}
        ids = await self.store.events.publish(
            recorded.thread_id, "", ReanalysisRequested.model_validate(data)
        )
        log.info("psychologist.reanalysis_queued", session_id=session_id, tier=tier)
        return ids[0]


def _proposed(
    hypothesis_id: str, analysis_id: str, session_id: str, h: HypothesisIn
) -> HypothesisProposed:
    return HypothesisProposed(
        hypothesis_id=hypothesis_id,
        analysis_id=analysis_id,
        session_id=session_id,
        target_agent=h.target_agent,
        title=h.title,
        confidence=h.confidence,
        evidence_event_ids=list(h.evidence_event_ids),
        termination_analysis=h.termination_analysis,
    )


def _hypothesis_fields(
    hypothesis_id: str,
    analysis_id: str,
    session_id: str,
    thread_id: str,
    h: HypothesisIn,
    at: str,
) -> dict[str, str]:
    return {
        "id": hypothesis_id,
        "analysis_id": analysis_id,
        "session_id": session_id,
        "thread_id": thread_id,
        "status": HypothesisStatus.PROPOSED.value,
        "target_agent": h.target_agent,
        "title": h.title,
        "description": h.description,
        "confidence": str(h.confidence),
        "evidence_event_ids": dumps(list(h.evidence_event_ids)),
        "termination_analysis": h.termination_analysis or "",
        "created_at": at,
    }


def _hypothesis_view(f: Mapping[str, str]) -> dict[str, Any]:
    return {
        "id": f.get("id", ""),
        "status": f.get("status", ""),
        "target_agent": f.get("target_agent", ""),
        "title": f.get("title", ""),
        "description": f.get("description", ""),
        "confidence": int(f.get("confidence") or 0),
        "evidence_event_ids": json.loads(f.get("evidence_event_ids") or "[]"),
        "termination_analysis": f.get("termination_analysis") or None,
        "session_id": f.get("session_id", ""),
        "thread_id": f.get("thread_id", ""),
        "analysis_id": f.get("analysis_id", ""),
        "created_at": f.get("created_at", ""),
        "decided_at": f.get("decided_at") or None,
        "decided_by": f.get("decided_by") or None,
        "for_anamnese": bool(f.get("for_anamnese")),
        "note": f.get("note") or None,
    }


def _analysis_view(f: Mapping[str, str]) -> dict[str, Any]:
    return {
        "id": f.get("id", ""),
        "session_id": f.get("session_id", ""),
        "thread_id": f.get("thread_id", ""),
        "status": f.get("status", ""),
        "trigger": f.get("trigger", ""),
        "trigger_event_id": f.get("trigger_event_id") or None,
        "requested_by": f.get("requested_by") or None,
        "attempt": int(f.get("attempt") or 1),
        "created_at": f.get("created_at", ""),
        "superseded_at": f.get("superseded_at") or None,
        "superseded_by": f.get("superseded_by") or None,
        "event_count": int(f.get("event_count") or 0),
        "termination": json.loads(f.get("termination") or "null"),
        "cost": json.loads(f.get("metering") or "null"),
        "hypothesis_ids": json.loads(f.get("hypothesis_ids") or "[]"),
    }
