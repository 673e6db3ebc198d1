"""Admission: when a new turn may start. A process that serves webhooks and runs turns on
one event loop puts acknowledging first, so a delivery never queues behind a crowd of
turns (the providers time a webhook out after 10–15 s; what is acknowledged is stored, so
a turn can wait):

- while a webhook delivery is being taken in this process, no turn starts;
- while the event loop runs late, no turn starts. The lag is how late a timer fires: every
  ``interval`` seconds the job notes how much later than asked it woke. Above ``limit`` the
  gate closes; it opens again once the lag is back under half the limit.

Turns already running go on either way; only their start waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

from gateway.workers.periodic import PeriodicJob

__all__ = ["Admission"]


class Admission(PeriodicJob):
    name = "admission"

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
        self.acknowledging = 0
        """Webhook deliveries being taken in this process right now."""
        self._quiet = asyncio.Event()
        self._quiet.set()
        self._queue = asyncio.Lock()  # held turns pass one by one (FIFO)

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
        """Return at once while the loop keeps time, no delivery is being taken and no
        turn is queued; otherwise once both hold again, one turn at a time: each held turn
        passes a full turn of the event loop after the one before, so deliveries that
        arrive meanwhile close the gate again (no herd of turns let loose at once)."""
        if self._passable() and not self._queue.locked():
            return
        self.pauses += 1
        started = time.monotonic()
        async with self._queue:
            while not self._passable():
                await (self._quiet if self._open.is_set() else self._open).wait()
            await asyncio.sleep(0)
        self.paused_seconds += time.monotonic() - started

    def _passable(self) -> bool:
        return self._open.is_set() and self._quiet.is_set()

    @contextlib.contextmanager
    def acknowledging_one(self) -> Iterator[None]:
        """Around taking one webhook delivery: no turn starts meanwhile."""
        self.acknowledging += 1
        self._quiet.clear()
        try:
            yield
        finally:
            self.acknowledging -= 1
            if not self.acknowledging:
                self._quiet.set()

    def stop(self) -> None:
        super().stop()
        self._open.set()  # nobody waits on a gate that is no longer watched
        self._quiet.set()
