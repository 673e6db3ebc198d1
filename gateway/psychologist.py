"""The psychologist in the gateway (ADR 0015): its Redis storage and the stream consumer.

The domain — termination cause, triage, the tool loop, batch validation, the lifecycle —
is ``agent.psychologist``; this module stores what it produces and feeds it.

Redis (prefix ``P``):

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

Writes that must not tear are one Lua script each: storing an analysis (check-and-set of
the current pointer, hypotheses, indexes and its events), a hypothesis transition (only
from ``proposed``, and its events), a failed run (its event and record).

**Events and the analysed session.** The psychologist's events are published on the
analysed session's thread with an EMPTY envelope ``session_id``; ``data.session_id`` names
the analysed session. An event published with the session id would be appended to
``P:session:{S}:events`` — the very evidence set the analysis cites — so analysing a
session would change it, and a reanalysis would read its own previous analysis.

**Consumer.** :class:`PsychologistWorker` reads the event stream in the consumer group
``psychologist``: ``session.closed`` / ``session.closed_abnormally`` (any cause) and
``psychologist.reanalysis_requested`` (support's manual reanalysis, enqueued as an event
so it is durable and runs wherever a consumer runs). Other events are acknowledged at once.
A job is acknowledged when it completed, was skipped, or its attempts are spent; a worker
that dies leaves its entry pending, and another consumer claims it (``XAUTOCLAIM``) once
idle for ``MEL_CLAIM_IDLE_SECONDS`` — a live worker keeps its entries fresh. Attempts are
counted in Redis, so runs cut short by a crash count too.

Idempotency, two layers (ADR 0015, decision 5): a cheap pre-check skips the LLM for a
session that already has a current analysis, and the atomic "set current only if none"
write is the safety net against two workers racing: the loser's result is discarded (not
stored at all, not even superseded: only a manual reanalysis supersedes). A manual
reanalysis always runs and supersedes whatever is current.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import structlog
from redis.exceptions import ResponseError

from agent.llm import LLMClient
from agent.psychologist import (
    ANALYSIS_COMPLETED,
    ANALYSIS_FAILED,
    CLOSE_EVENT_TYPES,
    HYPOTHESIS_PROPOSED,
    AnalysisContext,
    AnalysisOutcome,
    HypothesisIn,
    HypothesisStatus,
    InvalidTransition,
    Psychologist,
    RulesError,
    Termination,
    assert_transition,
    classify_termination,
    event_for_transition,
    load_rules,
    tier_named,
)
from gateway.errors import ConfigError, GatewayError, NotFound
from gateway.metrics import Metrics
from gateway.settings import Settings
from gateway.store import _EMIT, NewEvent, Store, StoreDown, envelope, utc_now_iso

__all__ = [
    "GROUP",
    "REANALYSIS_REQUESTED",
    "TRIGGER_TYPES",
    "AnalysisConflict",
    "Job",
    "PsychologistStore",
    "PsychologistUnavailable",
    "PsychologistWorker",
    "SaveResult",
    "SessionLog",
    "SessionNotClosed",
    "UnknownHypothesis",
    "UnknownSession",
    "psychologist_worker",
]

log = structlog.get_logger("gateway.psychologist")

GROUP: Final = "psychologist"
REANALYSIS_REQUESTED: Final = "psychologist.reanalysis_requested"
TRIGGER_TYPES: Final = CLOSE_EVENT_TYPES | {REANALYSIS_REQUESTED}
"""The event types the consumer acts on."""

FAILURES_KEPT: Final = 20
OTHER_SESSIONS: Final = 20
"""How many of the thread's other sessions lend their ids to "exists, but elsewhere"."""
PREVIOUS_MAX: Final = 50
"""How many of the thread's earlier hypotheses go into the prompt (newest)."""
READ_COUNT: Final = 100


class UnknownSession(NotFound):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"unknown session {session_id!r}: no events recorded for it")


class UnknownHypothesis(NotFound):
    def __init__(self, hypothesis_id: str) -> None:
        super().__init__(f"unknown hypothesis {hypothesis_id!r}")


class SessionNotClosed(GatewayError):
    """A reanalysis of a session that has not closed (nothing to analyse yet)."""

    status = 409


class PsychologistUnavailable(GatewayError):
    """No psychologist consumer has ever run on this Redis: a request would never be read."""

    status = 503


class AnalysisConflict(GatewayError):
    """The current analysis kept changing under a manual reanalysis (retry it)."""

    status = 409


def _now_ms() -> int:
    return int(time.time() * 1000)


def _new_id(kind: str) -> str:
    """Time-ordered and unique, like session ids: ``a_<unix ms hex>_<random>``."""
    return f"{kind}_{_now_ms():x}_{uuid.uuid4().hex[:12]}"


def _s(value: Any) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def _json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False)


def _flat(fields: Mapping[str, str]) -> list[str]:
    out: list[str] = []
    for key, value in fields.items():
        out += [key, value]
    return out


def _ms_of(iso: str | None) -> int:
    if not iso:
        return _now_ms()
    try:
        return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return _now_ms()


# --- Lua -----------------------------------------------------------------------------

_SAVE_ANALYSIS = (
    _EMIT
    + """
-- Store an analysis as THE current one, if the current pointer is what the caller saw:
-- '' for a first analysis (SET NX semantics), the old id for a reanalysis (which is then
-- marked superseded, never deleted, and its hypotheses leave the current indexes).
-- KEYS: current, analyses, analysis, insights, thread hypotheses, events, old analysis
--       (or ''), then one hash per new hypothesis
-- ARGV[1]: {expected, id, analysis: [k, v…], hypotheses: [[id, [k, v…]]…], score, at,
--           thread_id, maxlen, events: [[type, data]…]}
local p = cjson.decode(ARGV[1])
local current = redis.call('GET', KEYS[1]) or ''
if current ~= p['expected'] then return {0, current, {}} end
if current ~= '' then
  redis.call('HSET', KEYS[7], 'status', 'superseded', 'superseded_at', p['at'],
    'superseded_by', p['id'])
  local old = cjson.decode(redis.call('HGET', KEYS[7], 'hypothesis_ids') or '[]')
  for _, h in ipairs(old) do
    redis.call('ZREM', KEYS[4], h)
    redis.call('ZREM', KEYS[5], h)
  end
end
redis.call('HSET', KEYS[3], unpack(p['analysis']))
redis.call('RPUSH', KEYS[2], p['id'])
redis.call('SET', KEYS[1], p['id'])
for i, h in ipairs(p['hypotheses']) do
  redis.call('HSET', KEYS[7 + i], unpack(h[2]))
  redis.call('ZADD', KEYS[4], p['score'], h[1])
  redis.call('ZADD', KEYS[5], p['score'], h[1])
end
local ids = emit(KEYS[6], p['maxlen'], p['at'], p['thread_id'], '', '', p['events'])
return {1, current, ids}
"""
)

_TRANSITION = (
    _EMIT
    + """
-- Move a hypothesis out of 'proposed' (and only from there), publishing its events.
-- KEYS: hypothesis, events   ARGV[1]: {fields: [k, v…], at, maxlen, events}
local p = cjson.decode(ARGV[1])
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {'missing', ''} end
if status ~= 'proposed' then return {'conflict', status} end
redis.call('HSET', KEYS[1], unpack(p['fields']))
local thread_id = redis.call('HGET', KEYS[1], 'thread_id') or ''
return {'ok', emit(KEYS[2], p['maxlen'], p['at'], thread_id, '', '', p['events'])}
"""
)

_RECORD_FAILURE = (
    _EMIT
    + """
-- KEYS: failures, events   ARGV[1]: {record, at, thread_id, maxlen, kept, events}
local p = cjson.decode(ARGV[1])
local ids = emit(KEYS[2], p['maxlen'], p['at'], p['thread_id'], '', '', p['events'])
p['record']['event_id'] = ids[1]
redis.call('LPUSH', KEYS[1], cjson.encode(p['record']))
redis.call('LTRIM', KEYS[1], 0, p['kept'] - 1)
return ids
"""
)


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


class PsychologistStore:
    """Analyses, hypotheses and their indexes in Redis, next to the gateway's ``Store``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.redis = store.redis
        p = store.keys.prefix
        self.prefix = p
        self.insights_key = f"{p}:insights"
        self.attempts_key = f"{p}:psychologist:attempts"
        self._save = self.redis.register_script(_SAVE_ANALYSIS)
        self._transition = self.redis.register_script(_TRANSITION)
        self._failure = self.redis.register_script(_RECORD_FAILURE)

    # keys
    def current_key(self, session_id: str) -> str:
        return f"{self.prefix}:session:{session_id}:analysis:current"

    def analyses_key(self, session_id: str) -> str:
        return f"{self.prefix}:session:{session_id}:analyses"

    def failures_key(self, session_id: str) -> str:
        return f"{self.prefix}:session:{session_id}:analysis:failures"

    def analysis_key(self, analysis_id: str) -> str:
        return f"{self.prefix}:analysis:{analysis_id}"

    def hypothesis_key(self, hypothesis_id: str) -> str:
        return f"{self.prefix}:hypothesis:{hypothesis_id}"

    def thread_hypotheses_key(self, thread_id: str) -> str:
        return self.store.keys.thread(thread_id, "hypotheses")

    def thread_sessions_key(self, thread_id: str) -> str:
        return self.store.keys.thread(thread_id, "sessions")

    # --- the consumer group ------------------------------------------------------------

    async def ensure_group(self) -> None:
        """Create the group at the stream's end (``$``) the first time: sessions closed
        before any psychologist ever ran are not analysed unless asked for
        (``mel-gateway insights reanalyze``), rather than billing the whole history."""
        try:
            await self.redis.xgroup_create(self.store.keys.events, GROUP, id="$", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def group_exists(self) -> bool:
        try:
            groups: Any = await self.redis.xinfo_groups(self.store.keys.events)
        except ResponseError:  # no stream yet
            return False
        return any(_s(g["name"]) == GROUP for g in groups)

    async def next_attempt(self, job_id: str) -> int:
        return int(await self.redis.hincrby(self.attempts_key, job_id, 1))

    async def finish_job(self, job_id: str) -> None:
        """Acknowledge the job's entry and forget its attempts, together."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.xack(self.store.keys.events, GROUP, job_id)
            pipe.hdel(self.attempts_key, job_id)
            await pipe.execute()

    # --- sessions ------------------------------------------------------------------------

    async def session_log(self, session_id: str) -> SessionLog:
        """The session's events; :class:`UnknownSession` when it recorded none."""
        ids = await self.store.session_event_ids(session_id)
        events = await self.store.events_by_id(ids) if ids else []
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
        others = [_s(s) for s in raw if _s(s) != session_id][:OTHER_SESSIONS]
        if not others:
            return set()
        async with self.redis.pipeline(transaction=False) as pipe:
            for other in others:
                pipe.lrange(self.store.keys.session_events(other), 0, -1)
            lists: list[Any] = await pipe.execute()
        return {_s(i) for ids in lists for i in ids}

    async def has_current(self, session_id: str) -> bool:
        return bool(await self.redis.exists(self.current_key(session_id)))

    async def current_id(self, session_id: str) -> str | None:
        return _s(await self.redis.get(self.current_key(session_id))) or None

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
        score = _now_ms()
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
            "termination": _json(termination.as_dict()),
            "metering": _json(metering),
            "hypothesis_ids": _json(hypothesis_ids),
        }
        events: list[list[str]] = [
            [HYPOTHESIS_PROPOSED, _json(_proposed_data(hid, analysis_id, session_id, h))]
            for hid, h in hypotheses
        ]
        for _ in range(5):
            expected = (await self.current_id(session_id) or "") if supersede else ""
            completed = {
                "session_id": session_id,
                "analysis_id": analysis_id,
                "trigger": trigger,
                "trigger_event_id": trigger_event_id,
                "requested_by": requested_by,
                "supersedes": expected or None,
                "hypothesis_ids": hypothesis_ids,
                "termination": termination.cause,
                "abnormal": termination.abnormal,
                **metering,
            }
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
                "maxlen": self.store.events_maxlen,
                "events": [*events, [ANALYSIS_COMPLETED, _json(completed)]],
            }
            keys = [
                self.current_key(session_id),
                self.analyses_key(session_id),
                self.analysis_key(analysis_id),
                self.insights_key,
                self.thread_hypotheses_key(thread_id),
                self.store.keys.events,
                self.analysis_key(expected) if expected else "",
                *[self.hypothesis_key(hid) for hid in hypothesis_ids],
            ]
            res: Any = await self._save(keys=keys, args=[_json(payload)])
            stored, current, ids = bool(res[0]), _s(res[1]), [_s(i) for i in res[2] or []]
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
        data = {
            "session_id": session_id,
            "trigger": trigger,
            "trigger_event_id": trigger_event_id,
            "failure": failure,
            "attempt": attempt,
            "max_attempts": max_attempts,
            "final": final,
            "last_error": last_error or None,
            "metering": metering,
        }
        record = {**data, "at": utc_now_iso()}
        payload = {
            "record": record,
            "at": record["at"],
            "thread_id": thread_id,
            "maxlen": self.store.events_maxlen,
            "kept": FAILURES_KEPT,
            "events": [[ANALYSIS_FAILED, _json(data)]],
        }
        res: Any = await self._failure(
            keys=[self.failures_key(session_id), self.store.keys.events], args=[_json(payload)]
        )
        return [_s(i) for i in res]

    async def analysis(self, analysis_id: str, *, with_hypotheses: bool = True) -> dict[str, Any]:
        raw = await self.redis.hgetall(self.analysis_key(analysis_id))
        if not raw:
            raise NotFound(f"unknown analysis {analysis_id!r}")
        view = _analysis_view({_s(k): _s(v) for k, v in raw.items()})
        if with_hypotheses:
            view["hypotheses"] = await self.hypotheses(view["hypothesis_ids"])
        return view

    async def session_analyses(self, session_id: str) -> dict[str, Any]:
        """The current analysis, the superseded ones (newest first) and recent failures."""
        ids = [_s(i) for i in await self.redis.lrange(self.analyses_key(session_id), 0, -1)]
        analyses = [await self.analysis(aid) for aid in reversed(ids)]
        failures = [
            json.loads(_s(r)) for r in await self.redis.lrange(self.failures_key(session_id), 0, -1)
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
                pipe.hgetall(self.hypothesis_key(hid))
            found: list[Any] = await pipe.execute()
        return [_hypothesis_view({_s(k): _s(v) for k, v in h.items()}) for h in found if h]

    async def hypothesis(self, hypothesis_id: str) -> dict[str, Any]:
        found = await self.hypotheses([hypothesis_id])
        if not found:
            raise UnknownHypothesis(hypothesis_id)
        return found[0]

    async def current_hypotheses(self, limit: int = 500) -> list[dict[str, Any]]:
        """Hypotheses of current analyses across sessions, newest first, each with its
        session's termination."""
        raw: Any = await self.redis.zrevrange(self.insights_key, 0, limit - 1)
        found = await self.hypotheses([_s(h) for h in raw])
        analysis_ids = sorted({h["analysis_id"] for h in found})
        terminations: dict[str, Any] = {}
        if analysis_ids:
            async with self.redis.pipeline(transaction=False) as pipe:
                for aid in analysis_ids:
                    pipe.hget(self.analysis_key(aid), "termination")
                values: list[Any] = await pipe.execute()
            terminations = {
                aid: json.loads(_s(v)) if v else None
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
        found = await self.hypotheses([_s(h) for h in raw])
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
        data = {
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
        events = [[kind, _json({**data, "for_anamnese": for_anamnese})] for kind in types]
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
            "maxlen": self.store.events_maxlen,
            "events": events,
        }
        res: Any = await self._transition(
            keys=[self.hypothesis_key(hypothesis_id), self.store.keys.events],
            args=[_json(payload)],
        )
        verdict = _s(res[0])
        if verdict == "missing":
            raise UnknownHypothesis(hypothesis_id)
        if verdict == "conflict":
            raise InvalidTransition(_s(res[1]), target.value, hypothesis_id=hypothesis_id)
        ids = [_s(i) for i in res[1] or []]
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
        ids = await self.store.publish(recorded.thread_id, "", NewEvent(REANALYSIS_REQUESTED, data))
        log.info("psychologist.reanalysis_requested", session_id=session_id, tier=tier)
        return ids[0]


def _proposed_data(
    hypothesis_id: str, analysis_id: str, session_id: str, h: HypothesisIn
) -> dict[str, Any]:
    return {
        "hypothesis_id": hypothesis_id,
        "analysis_id": analysis_id,
        "session_id": session_id,
        "target_agent": h.target_agent,
        "title": h.title,
        "confidence": h.confidence,
        "evidence_event_ids": list(h.evidence_event_ids),
        "termination_analysis": h.termination_analysis,
    }


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
        "evidence_event_ids": _json(list(h.evidence_event_ids)),
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


# --- the consumer ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Job:
    """One stream entry that asks for an analysis."""

    entry_id: str
    type: str
    thread_id: str
    session_id: str
    manual: bool
    reason: str | None = None
    at: str | None = None
    tier: str | None = None
    requested_by: str | None = None

    @property
    def trigger(self) -> str:
        return "manual" if self.manual else "session_closed"

    @classmethod
    def from_envelope(cls, env: Mapping[str, Any]) -> Job | None:
        """The job an event asks for, or ``None`` (not ours, or nothing to analyse)."""
        data = env.get("data") or {}
        if env["type"] in CLOSE_EVENT_TYPES:
            session_id = env.get("session_id") or ""
            if not session_id:
                return None
            return cls(
                env["id"],
                env["type"],
                env.get("thread_id") or "",
                session_id,
                manual=False,
                reason=data.get("reason"),
                at=data.get("closed_at") or env.get("at"),
            )
        if env["type"] == REANALYSIS_REQUESTED and data.get("session_id"):
            return cls(
                env["id"],
                env["type"],
                env.get("thread_id") or "",
                str(data["session_id"]),
                manual=True,
                tier=data.get("tier"),
                requested_by=data.get("requested_by"),
            )
        return None


@dataclass(slots=True)
class _SessionLock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class PsychologistWorker:
    """Consumes close events and reanalysis requests; runs one analysis per session."""

    def __init__(
        self,
        store: Store,
        psychologist: Psychologist,
        *,
        rules: str,
        metrics: Metrics | None = None,
        max_attempts: int = 5,
        backoff: float = 5.0,
        claim_idle: float = 15.0,
        concurrency: int = 4,
        consumer: str | None = None,
    ) -> None:
        self.store = store
        self.db = PsychologistStore(store)
        self.psychologist = psychologist
        self.rules = rules
        self.metrics = metrics
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.claim_idle_ms = int(claim_idle * 1000)
        self.consumer = consumer or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._entries: set[str] = set()
        self._session_locks: dict[str, _SessionLock] = {}
        self._stopping = asyncio.Event()
        self._heartbeat_task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()
        """Set once the consumer group exists (closes from now on will be analysed)."""
        self.running = False

    # --- lifecycle ---------------------------------------------------------------------

    async def run(self) -> None:
        """Consume until ``stop()``; survives Redis outages (waits and retries)."""
        self.running = True
        self._heartbeat_task = asyncio.create_task(self._heartbeat(), name="psychologist:beat")
        last_claim = 0.0
        log.info("psychologist.start", consumer=self.consumer)
        try:
            while not self._stopping.is_set():
                try:
                    await self.db.ensure_group()
                    self.ready.set()
                    if time.monotonic() - last_claim > self.claim_idle_ms / 3000:
                        last_claim = time.monotonic()
                        await self._claim_abandoned()
                    await self._read_new()
                except StoreDown as exc:
                    log.warning("psychologist.redis_unavailable", error=str(exc))
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stopping.wait(), 1.0)
        finally:
            self.running = False
            if not self._stopping.is_set():  # cancelled, not stopped: nothing drains it
                self._heartbeat_task.cancel()

    def stop(self) -> None:
        self._stopping.set()

    async def stopped(self) -> None:
        await self._stopping.wait()

    async def drain(self, grace: float) -> tuple[int, int]:
        """Stop taking work; wait up to ``grace`` s for in-flight analyses; cancel the rest
        (their entries stay pending and another consumer resumes them)."""
        self.stop()
        pending = set(self._tasks)
        still: set[asyncio.Task[None]] = set()
        if pending:
            _done, still = await asyncio.wait(pending, timeout=grace)
            for task in still:
                task.cancel()
            await asyncio.gather(*still, return_exceptions=True)
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            await asyncio.gather(self._heartbeat_task, return_exceptions=True)
        finished, cancelled = len(pending) - len(still), len(still)
        if pending:
            log.info("psychologist.drained", finished=finished, cancelled=cancelled)
        return finished, cancelled

    # --- reading -----------------------------------------------------------------------

    async def _read_new(self) -> None:
        while len(self._tasks) >= READ_COUNT and not self._stopping.is_set():
            await asyncio.wait(set(self._tasks), return_when=asyncio.FIRST_COMPLETED)
        res: Any = await self.store.redis.xreadgroup(
            GROUP, self.consumer, {self.store.keys.events: ">"}, count=READ_COUNT, block=1000
        )
        entries = [(_s(eid), fields) for _stream, batch in res or [] for eid, fields in batch]
        await self._dispatch(entries)

    async def _claim_abandoned(self) -> None:
        res: Any = await self.store.redis.xautoclaim(
            self.store.keys.events, GROUP, self.consumer, self.claim_idle_ms, "0-0", count=50
        )
        claimed = [(_s(eid), fields) for eid, fields in (res[1] if res else [])]
        fresh = [(eid, f) for eid, f in claimed if eid not in self._entries]
        for entry_id, _ in fresh:
            log.info("psychologist.claimed", entry_id=entry_id)
        await self._dispatch(fresh)

    async def _dispatch(self, entries: Sequence[tuple[str, Any]]) -> None:
        """Spawn a job per relevant entry; acknowledge the rest at once."""
        ignored: list[str] = []
        for entry_id, fields in entries:
            if self._stopping.is_set():
                return  # delivered but not started: stays pending for another consumer
            env = envelope(entry_id, fields) if fields else None
            job = Job.from_envelope(env) if env is not None else None
            if job is None:
                ignored.append(entry_id)
            else:
                self._spawn(job)
        if ignored:
            await self.store.redis.xack(self.store.keys.events, GROUP, *ignored)

    def _spawn(self, job: Job) -> None:
        self._entries.add(job.entry_id)
        task = asyncio.create_task(self._guarded(job), name=f"psychologist:{job.session_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _heartbeat(self) -> None:
        """Keep this consumer's entries from looking abandoned while they are worked on —
        also after ``stop()``, until the drain has finished them."""
        while not (self._stopping.is_set() and not self._tasks):
            await asyncio.sleep(max(0.1, self.claim_idle_ms / 3000))
            if not self._entries:
                continue
            with contextlib.suppress(*StoreDown, ResponseError):
                await self.store.redis.xclaim(
                    self.store.keys.events,
                    GROUP,
                    self.consumer,
                    0,
                    list(self._entries),
                    justid=True,
                )

    async def _guarded(self, job: Job) -> None:
        structlog.contextvars.bind_contextvars(session_id=job.session_id, job=job.entry_id)
        try:
            async with self._session(job.session_id), self._slots:
                await self.process(job)
        except StoreDown as exc:
            log.warning("psychologist.redis_unavailable", error=str(exc))
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug: leave the entry pending, another claim retries it
            log.exception("psychologist.job_failed")
        finally:
            self._entries.discard(job.entry_id)

    @contextlib.asynccontextmanager
    async def _session(self, session_id: str) -> AsyncIterator[None]:
        """One job per session at a time in this process: a duplicate close delivered in
        the same batch waits, then meets the pre-check instead of a second LLM run."""
        held = self._session_locks.setdefault(session_id, _SessionLock())
        held.users += 1
        try:
            async with held.lock:
                yield
        finally:
            held.users -= 1
            if not held.users:
                del self._session_locks[session_id]

    # --- one job -----------------------------------------------------------------------

    async def process(self, job: Job) -> str:
        """Run a job to its end — retried with backoff up to ``max_attempts`` — and
        acknowledge it. Returns the last run's result (see :meth:`run_once`),
        ``exhausted`` when earlier runs died without a verdict, or ``stopped`` when shutdown
        interrupted the backoff (the entry stays pending)."""
        while True:
            attempt = await self.db.next_attempt(job.entry_id)
            if attempt > self.max_attempts:  # earlier runs died without a verdict
                await self.db.record_failure(
                    session_id=job.session_id,
                    thread_id=job.thread_id,
                    trigger=job.trigger,
                    trigger_event_id=job.entry_id,
                    failure="attempts_exhausted",
                    attempt=attempt - 1,
                    max_attempts=self.max_attempts,
                )
                self._count("exhausted", "none")
                result = "exhausted"
                break
            try:
                result = await self.run_once(job, attempt)
            except StoreDown:  # Redis is away: the entry stays pending, retried later
                raise
            except Exception as exc:
                log.exception("psychologist.run_crashed", attempt=attempt)
                reason = f"error: {type(exc).__name__}: {exc}"[:500]
                await self.db.record_failure(
                    session_id=job.session_id,
                    thread_id=job.thread_id,
                    trigger=job.trigger,
                    trigger_event_id=job.entry_id,
                    failure=reason,
                    attempt=attempt,
                    max_attempts=self.max_attempts,
                )
                self._count("failed", "none")
                result = "failed"
            if result != "failed" or attempt >= self.max_attempts:
                break
            delay = self.backoff * 2 ** (attempt - 1)
            log.info("psychologist.retry_later", attempt=attempt, delay=delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)
            if self._stopping.is_set():
                return "stopped"
        await self.db.finish_job(job.entry_id)
        return result

    async def run_once(self, job: Job, attempt: int = 1) -> str:
        """One analysis run: ``completed``, ``skipped`` (already analysed), ``discarded``
        (another worker's analysis became current first), ``failed`` (published; a retry
        may succeed) or ``failed_for_good`` (published; no retry can help)."""
        session_id = job.session_id
        if not job.manual and await self.db.has_current(session_id):
            log.info("psychologist.already_analysed")
            self._count("skipped", "none")
            return "skipped"
        try:
            recorded = await self.db.session_log(session_id)
        except UnknownSession:
            log.warning("psychologist.no_events")
            await self._fail_for_good(job, "no_events", attempt)
            return "failed_for_good"
        thread_id = recorded.thread_id or job.thread_id
        if not recorded.thread_id:
            recorded = SessionLog(session_id, thread_id, recorded.events)
        if job.manual:
            close = recorded.close_event()
            if close is None:
                await self._fail_for_good(job, "session_not_closed", attempt)
                return "failed_for_good"
            close_type, reason = close["type"], (close.get("data") or {}).get("reason")
            closed_at = (close.get("data") or {}).get("closed_at") or close.get("at")
        else:
            close_type, reason, closed_at = job.type, job.reason, job.at
        termination = classify_termination(reason, close_type)
        await self.db.note_closed_session(thread_id, session_id, _ms_of(closed_at))
        known = await self.db.other_sessions_event_ids(thread_id, session_id)
        previous = await self.db.thread_hypotheses(thread_id, exclude_session=session_id)
        ctx = AnalysisContext(
            session_id=session_id,
            thread_id=thread_id,
            events=recorded.events,
            rules=self.rules,
            termination=termination,
            previous_hypotheses=previous,
            known_event_ids=known | set(recorded.event_ids),
            tier=tier_named(job.tier) if job.tier else None,
            session_event_ids=recorded.event_ids,
        )
        outcome = await self.psychologist.analyze(ctx)
        self._meter(outcome)
        if not outcome.ok:
            await self.db.record_failure(
                session_id=session_id,
                thread_id=thread_id,
                trigger=job.trigger,
                trigger_event_id=job.entry_id,
                failure=outcome.failure or "unknown",
                attempt=attempt,
                max_attempts=self.max_attempts,
                outcome=outcome,
            )
            self._count("failed", outcome.tier)
            return "failed"
        saved = await self.db.save_analysis(
            session=recorded,
            outcome=outcome,
            termination=termination,
            trigger=job.trigger,
            trigger_event_id=job.entry_id,
            requested_by=job.requested_by,
            attempt=attempt,
            supersede=job.manual,
        )
        if not saved.stored:
            log.info("psychologist.discarded", current=saved.current_id)
            self._count("discarded", outcome.tier)
            return "discarded"
        log.info(
            "psychologist.stored",
            analysis_id=saved.analysis_id,
            superseded=saved.superseded_id,
            hypotheses=len(outcome.hypotheses),
        )
        self._count("completed", outcome.tier)
        return "completed"

    async def _fail_for_good(self, job: Job, failure: str, attempt: int) -> None:
        """A failure no retry can fix (nothing recorded for the session, still open)."""
        await self.db.record_failure(
            session_id=job.session_id,
            thread_id=job.thread_id,
            trigger=job.trigger,
            trigger_event_id=job.entry_id,
            failure=failure,
            attempt=attempt,
            max_attempts=self.max_attempts,
            final=True,
        )
        self._count("failed", "none")

    def _count(self, outcome: str, tier: str) -> None:
        if self.metrics is not None:
            self.metrics.psychologist_analyses.labels(outcome, tier).inc()

    def _meter(self, outcome: AnalysisOutcome) -> None:
        if self.metrics is None:
            return
        m, usage = self.metrics, outcome.usage
        model = outcome.model or "none"
        m.psychologist_cost.labels(outcome.tier, model).inc(usage.cost_micro_usd)
        m.psychologist_tokens.labels(outcome.tier, model, "prompt").inc(usage.prompt_tokens)
        m.psychologist_tokens.labels(outcome.tier, model, "completion").inc(usage.completion_tokens)


def psychologist_worker(
    store: Store, llm: LLMClient, settings: Settings, *, metrics: Metrics | None = None
) -> PsychologistWorker:
    """The consumer as configured; a rules file that cannot be used is a ConfigError."""
    path: Path | None = settings.psychologist_rules_path
    try:
        rules = load_rules(path)
    except RulesError as exc:
        raise ConfigError(f"PSYCHOLOGIST_RULES_PATH: {exc}") from None
    return PsychologistWorker(
        store,
        Psychologist(llm),
        rules=rules,
        metrics=metrics,
        max_attempts=settings.psychologist_max_attempts,
        backoff=settings.psychologist_retry_backoff_seconds,
        claim_idle=settings.mel_claim_idle_seconds,
    )
