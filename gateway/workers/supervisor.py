"""The background jobs of one process, run together: started at once, stopped with a
bounded drain, and watched — a job that dies is reported so the process can exit rather
than stay up doing nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import structlog

from gateway.workers.consumer import StreamConsumer
from gateway.workers.periodic import PeriodicJob

__all__ = ["JobDied", "Supervisor"]

log = structlog.get_logger("gateway.workers.supervisor")


class JobDied(Exception):
    """A background job ended on its own (a bug, or something Redis outages don't cover)."""


class Supervisor:
    def __init__(
        self,
        consumers: Sequence[StreamConsumer],
        periodic: Sequence[PeriodicJob] = (),
        *,
        grace: float = 10.0,
    ) -> None:
        self.consumers = list(consumers)
        self.periodic = list(periodic)
        self.grace = grace
        self._tasks: dict[asyncio.Task[None], str] = {}
        self._stopping = False

    def start(self) -> None:
        jobs: list[StreamConsumer | PeriodicJob] = [*self.consumers, *self.periodic]
        for job in jobs:
            task = asyncio.create_task(job.run(), name=job.name)
            self._tasks[task] = job.name

    @property
    def running(self) -> bool:
        return bool(self._tasks) and not any(t.done() for t in self._tasks)

    async def wait(self) -> None:
        """Return when a job ends by itself; raise ``JobDied`` saying which and why."""
        done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
        if self._stopping:
            return
        task = next(iter(done))
        name = self._tasks[task]
        error = task.exception() if not task.cancelled() else None
        log.error("supervisor.job_died", job=name, error=repr(error))
        raise JobDied(f"background job {name!r} stopped: {error!r}")

    async def stop(self) -> None:
        """Stop the periodic jobs; drain the consumers (bounded); cancel what is left."""
        self._stopping = True
        for job in self.periodic:
            job.stop()
        await asyncio.gather(*(c.drain(self.grace) for c in self.consumers))
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            # bounded: a library that swallows a cancellation must not hang the shutdown
            _done, stuck = await asyncio.wait(self._tasks, timeout=self.grace)
            for task in stuck:
                log.warning("supervisor.stuck_on_shutdown", job=task.get_name())
        self._tasks = {}
