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

Held turns pass in the order they came, ``batch`` per loop iteration, so deliveries that
arrive meanwhile get the loop between batches (one per iteration starved turns under
steady load; all at once let a herd of turns delay the tail of a burst's deliveries).
Turns already running go on either way; only their start waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Iterator

from gateway.workers.periodic import PeriodicJob

__all__ = ["Admission"]


#: More webhook deliveries than this being taken at once is a burst. Each costs ~1 ms of
#: CPU, so the last of a crowd this size waits well under a second.
CROWD = 64
#: Held turns let through per event-loop iteration once the gate opens: deliveries that
#: arrive meanwhile get the loop between batches, and a crowd closes the gate again.
BATCH = 16


class Admission(PeriodicJob):
    name = "admission"

    def __init__(
        self, limit: float, interval: float = 0.02, crowd: int = CROWD, batch: int = BATCH
    ) -> None:
        super().__init__(interval)
        self.limit = limit
        self.crowd = crowd
        self.batch = batch
        self.lag = 0.0
        """The latest measure, in seconds."""
        self.pauses = 0
        """Turns that waited at the gate, since start."""
        self.paused_seconds = 0.0
        """Their total wait, since start."""
        self.acknowledging = 0
        """Webhook deliveries being taken in this process right now."""
        self._last: float | None = None
        self._on_time = True  # the loop keeps time
        self._held: deque[asyncio.Future[None]] = deque()  # oldest first
        self._releasing = False
        self._stopped = False

    async def tick(self) -> None:
        now = time.monotonic()
        if self._last is not None:
            self.lag = max(0.0, now - self._last - self.interval)
        self._last = now
        if self.lag > self.limit:
            self._on_time = False
        elif self.lag < self.limit / 2:
            self._on_time = True
            self._release_soon()

    async def admit(self) -> None:
        """Return at once while the loop keeps time, no crowd of deliveries is being taken
        and no turn is held; otherwise once the gate opens, in the order they came,
        ``batch`` per loop iteration."""
        if self._passable() and not self._held:
            return
        self.pauses += 1
        started = time.monotonic()
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._held.append(turn)
        self._release_soon()
        await turn
        self.paused_seconds += time.monotonic() - started

    def _passable(self) -> bool:
        return self._stopped or (self._on_time and self.acknowledging <= self.crowd)

    def _release_soon(self) -> None:
        if self._held and not self._releasing:
            self._releasing = True
            asyncio.get_running_loop().call_soon(self._release)

    def _release(self) -> None:
        self._releasing = False
        released = 0
        while self._held and released < self.batch and self._passable():
            turn = self._held.popleft()
            if not turn.done():  # not cancelled meanwhile
                turn.set_result(None)
                released += 1
        if self._passable():
            self._release_soon()

    @contextlib.contextmanager
    def acknowledging_one(self) -> Iterator[None]:
        """Around taking one webhook delivery: no turn starts while they are a crowd."""
        self.acknowledging += 1
        try:
            yield
        finally:
            self.acknowledging -= 1
            self._release_soon()

    def stop(self) -> None:
        super().stop()
        self._stopped = True  # nobody waits on a gate that is no longer watched
        self._release_soon()
