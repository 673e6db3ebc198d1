"""A job that runs every ``interval`` seconds until stopped, and waits out Redis outages."""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod

import structlog

from gateway.store import StoreDown

__all__ = ["PeriodicJob"]

log = structlog.get_logger("gateway.workers.periodic")


class PeriodicJob(ABC):
    name = "periodic"

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._stopping = asyncio.Event()

    @abstractmethod
    async def tick(self) -> None:
        """One pass."""

    async def run(self) -> None:
        while not self._stopping.is_set():
            try:
                await self.tick()
            except StoreDown as exc:
                log.warning("periodic.redis_unavailable", job=self.name, error=str(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.interval)

    def stop(self) -> None:
        self._stopping.set()
