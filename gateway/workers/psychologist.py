"""The psychologist's consumer (ADR 0015): every closed session gets one analysis.

:class:`PsychologistWorker` reads the event stream in the consumer group ``psychologist``:
``session.closed`` / ``session.closed_abnormally`` (any cause) and
``psychologist.reanalysis_requested`` (support's manual reanalysis, enqueued as an event
so it is durable and runs wherever a consumer runs). Other events are acknowledged at once.
A job is acknowledged when it completed, was skipped, or its attempts are spent; a worker
that dies leaves its entry pending, and another consumer claims it (``XAUTOCLAIM``) once
idle for ``MEL_CLAIM_IDLE_SECONDS`` — a live worker keeps its entries fresh, also while it
drains. Attempts are counted in Redis, so runs cut short by a crash count too; a failed
run publishes ``psychologist.analysis_failed`` and is retried with doubling backoff.

Idempotency, two layers (ADR 0015, decision 5): a cheap pre-check skips the LLM for a
session that already has a current analysis (and jobs of one session run one at a time in
a process, so a duplicate delivered in the same batch meets the pre-check too); across
processes, the atomic "set current only if none" write is the safety net: the loser's
result is discarded — not stored at all, not even as superseded, since only a manual
reanalysis supersedes. A manual reanalysis always runs and supersedes what is current.

Context of a run: the session's full event log, the business rules, the termination
cause (classified, a fact), the thread's earlier non-dismissed hypotheses, and the ids of
the thread's other sessions (so evidence from "another session" is told apart).
Storage: :mod:`gateway.store.psychologist`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

from agent.psychologist import (
    CLOSE_EVENT_TYPES,
    AnalysisContext,
    AnalysisOutcome,
    Psychologist,
    classify_termination,
    tier_named,
)
from gateway.metrics import Metrics
from gateway.store import Store, StoreDown, envelope
from gateway.store.psychologist import (
    REANALYSIS_REQUESTED,
    PsychologistStore,
    SessionLog,
    UnknownSession,
)
from gateway.workers.consumer import StreamConsumer

__all__ = ["Job", "PsychologistWorker"]

log = structlog.get_logger("gateway.workers.psychologist")


def _ms_of(iso: str | None) -> int:
    """Unix ms of an ISO timestamp (now when missing or unreadable)."""
    now = int(time.time() * 1000)
    if not iso:
        return now
    try:
        return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return now


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


PREFETCH = 100
"""Events read per ``XREADGROUP``: most are not ours (acknowledged at once)."""


class PsychologistWorker(StreamConsumer):
    """Consumes close events and reanalysis requests; runs one analysis per session."""

    name = "psychologist"

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
        analysis_ttl_days: float = 365,
    ) -> None:
        db = PsychologistStore(store, ttl_days=analysis_ttl_days)
        super().__init__(
            db.group,
            concurrency=concurrency,
            prefetch=PREFETCH,
            claim_idle=claim_idle,
            consumer=consumer,
        )
        self.store = store
        self.db = db
        self.psychologist = psychologist
        self.rules = rules
        self.metrics = metrics
        self.max_attempts = max_attempts
        self.backoff = backoff
        self._session_locks: dict[str, _SessionLock] = {}

    def wants(self, entry_id: str, fields: Mapping[bytes, bytes]) -> bool:
        return bool(fields) and Job.from_envelope(envelope(entry_id, fields)) is not None

    async def handle(self, entry_id: str, fields: Mapping[bytes, bytes]) -> None:
        job = Job.from_envelope(envelope(entry_id, fields))
        if job is None:  # pragma: no cover - filtered by wants()
            return
        structlog.contextvars.bind_contextvars(session_id=job.session_id)
        async with self._session(job.session_id):
            await self.process(job)

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
                self._count("failed" if attempt >= self.max_attempts else "retried", "none")
                result = "failed"
            if result != "failed" or attempt >= self.max_attempts:
                break
            delay = self.backoff * 2 ** (attempt - 1)
            log.info("psychologist.retry_later", attempt=attempt, delay=delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopped(), delay)
            if self.stopping:
                return "stopped"
        await self.db.finish_job(job.entry_id)
        return result

    async def run_once(self, job: Job, attempt: int = 1) -> str:
        """One analysis run: ``completed``, ``skipped`` (already analysed), ``discarded``
        (another worker's analysis became current first), ``failed`` (published; a retry
        may succeed) or ``failed_for_good`` (published; no retry can help)."""
        session_id = job.session_id
        if await self._already_done(job):
            log.info("psychologist.already_analysed", manual=job.manual)
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
            self._count("failed" if attempt >= self.max_attempts else "retried", outcome.tier)
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

    async def _already_done(self, job: Job) -> bool:
        """The cheap pre-check, no LLM: a close of a session that has a current analysis,
        or a reanalysis request whose analysis is current already (its worker died
        between storing and acknowledging)."""
        if not job.manual:
            return await self.db.has_current(job.session_id)
        current = await self.db.current_id(job.session_id)
        if current is None:
            return False
        analysis = await self.db.analysis(current, with_hypotheses=False)
        return bool(analysis["trigger_event_id"] == job.entry_id)

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
