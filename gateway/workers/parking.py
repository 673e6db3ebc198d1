"""Wakes threads whose message was parked while the model was unreachable, when due."""

from __future__ import annotations

import structlog

from gateway.store import Store
from gateway.workers.periodic import PeriodicJob

__all__ = ["Unparker"]

log = structlog.get_logger("gateway.workers.parking")


class Unparker(PeriodicJob):
    name = "unparker"

    def __init__(self, store: Store, *, interval: float = 1.0) -> None:
        super().__init__(interval)
        self.store = store

    async def tick(self) -> None:
        woken = await self.store.threads.unpark_due()
        if woken:
            log.info("parking.woken", threads=len(woken))
