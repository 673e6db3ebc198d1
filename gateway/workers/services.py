"""The background services a worker process runs: the turn worker, the session sweeper,
the support webhook forwarder, the psychologist (unless ``PSYCHOLOGIST_ENABLED=false`` or no
LLM is configured). Owned by ``serve`` (in-process) or ``mel-gateway worker``."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import structlog

from gateway.bootstrap import Components
from gateway.conversation.sessions import SessionSweeper
from gateway.settings import Settings
from gateway.workers.psychologist import PsychologistWorker, psychologist_worker
from gateway.workers.retention import run_retention
from gateway.workers.support_webhook import SupportWebhook
from gateway.workers.turns import Worker

__all__ = ["Services"]

log = structlog.get_logger("gateway.workers.services")


class Services:
    def __init__(self, components: Components, settings: Settings) -> None:
        c = components
        self.store = c.store
        self.settings = settings
        self.worker = Worker(
            c.store,
            c.runner,
            c.senders,
            metrics=c.metrics,
            concurrency=settings.mel_worker_concurrency,
            claim_idle=settings.mel_claim_idle_seconds,
        )
        self.sweeper = SessionSweeper(
            c.store,
            idle_timeout=settings.session_idle_timeout,
            handoff_timeout=settings.handoff_timeout,
            handoff_expired_message=settings.handoff_expired_message,
        )
        self.webhook = (
            SupportWebhook(
                c.store,
                settings.support_webhook_url,
                settings.support_webhook_secret,
                backoff=settings.support_webhook_backoff_seconds,
            )
            if settings.support_webhook_url and settings.support_webhook_secret
            else None
        )
        self.psychologist: PsychologistWorker | None = None
        if not settings.psychologist_enabled:
            log.info("psychologist.disabled", reason="PSYCHOLOGIST_ENABLED=false")
        elif c.llm is None:
            log.warning("psychologist.disabled", reason="no LLM configured (set LLM_BASE_URL)")
        else:
            self.psychologist = psychologist_worker(c.store, c.llm, settings, metrics=c.metrics)
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        jobs: dict[str, Coroutine[Any, Any, None]] = {
            "worker": self.worker.run(),
            "sweeper": self.sweeper.run(),
        }
        if self.webhook is not None:
            jobs["support_webhook"] = self.webhook.run()
        if self.psychologist is not None:
            jobs["psychologist"] = self.psychologist.run()
        jobs["raw_retention"] = run_retention(
            self.store.redis,
            self.store.keys.raw,
            max_count=self.settings.mel_raw_retention_count,
            max_age_days=self.settings.mel_raw_retention_days,
        )
        self._tasks = [asyncio.create_task(job, name=name) for name, job in jobs.items()]

    async def stop(self) -> None:
        """Bounded drain of in-flight turns (and analyses), then cancel everything."""
        grace = self.settings.mel_shutdown_grace_seconds
        self.sweeper.stop()
        drains = [self.worker.drain(grace)]
        if self.psychologist is not None:
            drains.append(self.psychologist.drain(grace))
        await asyncio.gather(*drains)
        for task in self._tasks:
            task.cancel()
        # bounded: a library that swallows a cancellation must not hang the shutdown
        _done, stuck = await asyncio.wait(self._tasks, timeout=grace) if self._tasks else ((), ())
        for task in stuck:
            log.warning("services.stuck_on_shutdown", task=task.get_name())
        self._tasks = []
