"""Raw-delivery retention, applied every hour (the limits: ``gateway.store.raw``)."""

from __future__ import annotations

import structlog

from gateway.store import Store
from gateway.store.raw import trim_raw
from gateway.workers.periodic import PeriodicJob

__all__ = ["RawRetention"]

log = structlog.get_logger("gateway.workers.retention")


class RawRetention(PeriodicJob):
    name = "raw_retention"

    def __init__(
        self, store: Store, *, max_count: int | None, max_age_days: float | None,
        interval: float = 3600.0,
    ) -> None:  # fmt: skip
        super().__init__(interval)
        self.store = store
        self.max_count = max_count
        self.max_age_days = max_age_days

    async def tick(self) -> None:
        removed = await trim_raw(
            self.store.redis,
            self.store.keys.raw,
            max_count=self.max_count,
            max_age_days=self.max_age_days,
        )
        if removed:
            log.info("retention.trimmed", removed=removed)
