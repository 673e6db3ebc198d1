"""When support hours begin, the requests for a person made while nobody was there are
published again (``support.queue_opened``), so support starts with them."""

from __future__ import annotations

from collections.abc import Callable

import structlog

from agent.routing import SupportStatus
from events import SupportQueueOpened
from gateway.store import Store
from gateway.workers.periodic import PeriodicJob

__all__ = ["SupportQueue"]

log = structlog.get_logger("gateway.workers.support_queue")


class SupportQueue(PeriodicJob):
    name = "support_queue"

    def __init__(
        self,
        store: Store,
        support_status: Callable[[], SupportStatus],
        *,
        interval: float = 15.0,
    ) -> None:
        super().__init__(interval)
        self.store = store
        self.support_status = support_status

    async def tick(self) -> None:
        await self.check()

    async def check(self) -> bool:
        """Publish the queue if support just became available (once across processes)."""
        now_open = self.support_status() == "available"
        if not await self.store.threads.support_window_flipped(now_open):
            return False
        waiting = await self.store.threads.waiting_requests()
        if not waiting:
            return False
        await self.store.events.publish(
            "",
            "",
            SupportQueueOpened(
                waiting=len(waiting), thread_ids=[thread_id for thread_id, _ in waiting]
            ),
        )
        log.info("support_queue.opened", waiting=len(waiting))
        return True
