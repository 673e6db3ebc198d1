"""Admission: when a new turn may start. A process that serves webhooks and runs turns on
one event loop puts acknowledging first, so a delivery never queues behind a crowd of
turns (the providers time a webhook out after 10–15 s; what is acknowledged is stored, so
a turn can wait):

- while a crowd of webhook deliveries (more than ``crowd``: a burst) is being taken in
  this process, no turn starts until it thins. A few at a time are ordinary traffic and
  turns run between them: a gate that closed for every delivery would leave the CPU idle
  while acknowledgements wait on Redis, starving turns under steady load;
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


#: More webhook deliveries than this being taken at once is a burst. Each costs ~1 ms of
#: CPU, so the last of a crowd this size waits well under a second.
CROWD = 64


class Admission(PeriodicJob):
    name = "admission"

    def __init__(self, limit: float, interval: float = 0.02, crowd: int = CROWD) -> None:
        super().__init__(interval)
        self.limit = limit
        self.crowd = crowd
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
        """Return at once while the loop keeps time and no crowd of deliveries is being
        taken; otherwise once both hold again. Held turns then all pass: releasing them one
        per loop iteration starved turns under a steady load (the crowd threshold and the
        lag close the gate again if they are too many)."""
        if self._passable():
            return
        self.pauses += 1
        started = time.monotonic()
        while not self._passable():
            await (self._quiet if self._open.is_set() else self._open).wait()
        self.paused_seconds += time.monotonic() - started

    def _passable(self) -> bool:
        return self._open.is_set() and self._quiet.is_set()

    @contextlib.contextmanager
    def acknowledging_one(self) -> Iterator[None]:
        """Around taking one webhook delivery: no turn starts while they are a crowd."""
        self.acknowledging += 1
        if self.acknowledging > self.crowd:
            self._quiet.clear()
        try:
            yield
        finally:
            self.acknowledging -= 1
            if self.acknowledging <= self.crowd:
                self._quiet.set()

    def stop(self) -> None:
        super().stop()
        self._open.set()  # nobody waits on a gate that is no longer watched
        self._quiet.set()
