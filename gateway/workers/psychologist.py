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
    CLOSE_EVENT_TYPES,
    AnalysisContext,
    AnalysisOutcome,
    Psychologist,
    RulesError,
    classify_termination,
    load_rules,
    tier_named,
)
from gateway.errors import ConfigError
from gateway.metrics import Metrics
from gateway.settings import Settings
from gateway.store.psychologist import (
    GROUP,
    REANALYSIS_REQUESTED,
    PsychologistStore,
    SessionLog,
    UnknownSession,
)
from gateway.store.threads import Store, StoreDown, as_str, envelope

__all__ = ["READ_COUNT", "Job", "PsychologistWorker", "psychologist_worker"]

log = structlog.get_logger("gateway.workers.psychologist")

READ_COUNT: Final = 100
"""Entries read per ``XREADGROUP`` (and the most jobs queued in a process)."""


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
        entries = [(as_str(eid), fields) for _stream, batch in res or [] for eid, fields in batch]
        await self._dispatch(entries)

    async def _claim_abandoned(self) -> None:
        res: Any = await self.store.redis.xautoclaim(
            self.store.keys.events, GROUP, self.consumer, self.claim_idle_ms, "0-0", count=50
        )
        claimed = [(as_str(eid), fields) for eid, fields in (res[1] if res else [])]
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
