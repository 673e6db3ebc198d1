"""Admission by event-loop lag: a process that serves webhooks and runs turns on one event
loop stops starting turns while the loop runs late, so acknowledging a delivery never
queues behind a crowd of turns (the providers time a webhook out after 10–15 s).

The lag is how late a timer fires: every ``interval`` seconds the job notes how much
later than asked it woke. Above ``limit`` the gate closes: turns already running go on,
new ones wait; it opens again once the lag is back under half the limit.
"""

from __future__ import annotations

import asyncio
import time

from gateway.workers.periodic import PeriodicJob

__all__ = ["LoopLag"]


class LoopLag(PeriodicJob):
    name = "loop_lag"

    def __init__(self, limit: float, interval: float = 0.02) -> None:
        super().__init__(interval)
        self.limit = limit
        self.lag = 0.0
        """The latest measure, in seconds."""
        self.pauses = 0
        """Turns that waited at the gate, since start."""
        self.paused_seconds = 0.0
        """Their total wait, since start."""
        self._last: float | None = None
        self._open = asyncio.Event()
        self._open.set()

    async def tick(self) -> None:
        now = time.monotonic()
        if self._last is not None:
            self.lag = max(0.0, now - self._last - self.interval)
        self._last = now
        if self.lag > self.limit:
            self._open.clear()
        elif self.lag < self.limit / 2:
            self._open.set()

    async def admit(self) -> None:
        """Return at once while the loop keeps time; otherwise once it does again."""
        if self._open.is_set():
            return
        self.pauses += 1
        started = time.monotonic()
        await self._open.wait()
        self.paused_seconds += time.monotonic() - started

    def stop(self) -> None:
        super().stop()
        self._open.set()  # nobody waits on a gate that is no longer watched
