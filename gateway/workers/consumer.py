"""What every stream consumer shares (arq-style): a consumer group, a bounded pool of
tasks, claiming what dead consumers left, keeping its own entries fresh, stopping and a
bounded drain. A subclass says which entries it wants and how to handle one.

At most ``concurrency`` entries are handled at once; up to ``prefetch`` are read ahead
(in order: a consumer that wants few of the stream's entries, or handles them one at a
time, still reads in large batches). The loop: every ``claim_idle / 3`` seconds it takes
over entries another consumer left pending for ``claim_idle`` seconds (``XAUTOCLAIM``)
and resets the idle time of the ones it is still working on (so a live consumer's work is
never taken); in between it reads new entries, as many as it has room for. Redis outages
are waited out; any other error ends ``run`` with it, so the process can exit rather than
sit idle.

Acknowledging is the subclass's: an entry is acknowledged when its work is done (the turn
worker does it inside its last Lua script). Entries it does not want are acknowledged in
one call per read.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

import structlog

from gateway.store import ConsumerGroup, Entry, NoGroup, PoolExhausted, StoreDown
from gateway.workers.admission import Admission

__all__ = ["SPARED_SECONDS", "StreamConsumer", "consumer_name"]

log = structlog.get_logger("gateway.workers.consumer")

SPARED_SECONDS = 120.0
"""The longest a drain waits for work it must not cut short (a provider call in flight
and its retries end well before)."""


def consumer_name() -> str:
    """Unique per process: ``<host>-<pid>-<random>``."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class StreamConsumer(ABC):
    name = "consumer"
    """For logs and task names."""

    def __init__(
        self,
        group: ConsumerGroup,
        *,
        concurrency: int,
        claim_idle: float,
        prefetch: int | None = None,
        read_block_ms: int = 1000,
        consumer: str | None = None,
        admission: Admission | None = None,
    ) -> None:
        self.group = group
        self.concurrency = concurrency
        self.prefetch = max(prefetch or concurrency, concurrency)
        self.claim_idle_ms = int(claim_idle * 1000)
        self.read_block_ms = read_block_ms
        self.consumer = consumer or consumer_name()
        self.admission = admission
        self._tasks: dict[asyncio.Task[None], str] = {}
        self._held: list[Entry] = []  # busy when read: started when their work is free
        self._running = asyncio.Semaphore(concurrency)
        self._stopping = asyncio.Event()
        self.ready = asyncio.Event()
        """Set once the group exists (entries added from now on will be read)."""
        self.running = False

    # --- what a subclass says ----------------------------------------------------------

    def wants(self, entry_id: str, fields: Mapping[bytes, bytes]) -> bool:
        """Whether to handle this entry; the others are acknowledged at once."""
        return bool(fields)

    def busy(self, entry_id: str, fields: Mapping[bytes, bytes]) -> bool:
        """An entry this process is already working on under another id: it is held
        and started once that work is done (it may have come in just too late for it)."""
        return False

    @abstractmethod
    async def handle(self, entry_id: str, fields: Mapping[bytes, bytes]) -> None:
        """Do the entry's work (and acknowledge it when done)."""

    def spare(self, task: asyncio.Task[None]) -> bool:
        """Whether ``drain`` must let this task finish rather than cancel it."""
        return False

    async def housekeeping(self) -> None:  # noqa: B027 - an optional hook
        """Runs with each claim pass (every ``claim_idle / 3`` s), e.g. trimming."""

    # --- lifecycle ---------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def run(self) -> None:
        """Consume until ``stop()``. Survives Redis outages; raises anything else."""
        self.running = True
        last_claim = 0.0
        ensured = False
        log.info("consumer.start", consumer=self.name, id=self.consumer)
        try:
            while not self._stopping.is_set():
                try:
                    if not ensured:
                        await self.group.ensure()
                        ensured = True
                        self.ready.set()
                    if time.monotonic() - last_claim > self.claim_idle_ms / 3000:
                        last_claim = time.monotonic()
                        await self.group.touch(self.consumer, list(self._tasks.values()))
                        await self._claim_abandoned()
                        await self.housekeeping()
                    await self._read_new()
                except NoGroup:
                    ensured = False  # the stream was deleted (FLUSHALL, a new Redis)
                except PoolExhausted as exc:
                    log.warning("consumer.redis_pool_exhausted", consumer=self.name, error=str(exc))
                    await asyncio.sleep(0.1)
                except StoreDown as exc:
                    ensured = False
                    log.warning("consumer.redis_unavailable", consumer=self.name, error=str(exc))
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stopping.wait(), 1.0)
        finally:
            self.running = False

    def stop(self) -> None:
        self._stopping.set()

    async def stopped(self) -> None:
        """Returns once ``stop()`` was called (by a signal handler, say)."""
        await self._stopping.wait()

    async def drain(self, grace: float) -> tuple[int, int]:
        """Stop taking work; wait up to ``grace`` s for the tasks in flight; then cancel
        those not to be spared (their entries stay pending, or the subclass hands them
        on) and wait for the spared ones to finish, up to ``SPARED_SECONDS`` (a send in
        flight records what the provider did). Returns (finished, cancelled)."""
        self.stop()
        pending = set(self._tasks)
        if not pending:
            return 0, 0
        still = await self._wait_touching(pending, grace)
        cancelled = {task for task in still if not self.spare(task)}
        for task in cancelled:
            task.cancel()
        if still - cancelled:
            await self._wait_touching(still - cancelled, SPARED_SECONDS)
        if cancelled:  # they hand their work on as they go
            await asyncio.wait(cancelled, timeout=grace)
        finished, dropped = len(pending) - len(cancelled), len(cancelled)
        log.info("consumer.drained", consumer=self.name, finished=finished, cancelled=dropped)
        return finished, dropped

    async def _wait_touching(
        self, tasks: set[asyncio.Task[None]], timeout: float
    ) -> set[asyncio.Task[None]]:
        """Wait for ``tasks`` up to ``timeout`` s, keeping their entries fresh meanwhile;
        the ones still running."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        still = tasks
        while still and (left := deadline - loop.time()) > 0:
            _done, still = await asyncio.wait(still, timeout=min(left, self.claim_idle_ms / 3000))
            with contextlib.suppress(StoreDown):
                await self.group.touch(
                    self.consumer, [self._tasks[t] for t in still if t in self._tasks]
                )
        return still

    # --- reading -----------------------------------------------------------------------

    async def _free(self) -> int:
        while self.prefetch - len(self._tasks) <= 0 and not self._stopping.is_set():
            await asyncio.wait(set(self._tasks), return_when=asyncio.FIRST_COMPLETED)
        return max(0, self.prefetch - len(self._tasks))

    async def _read_new(self) -> None:
        free = await self._free()
        if free and not self._stopping.is_set():
            await self._dispatch(await self.group.read(self.consumer, free, self.read_block_ms))

    async def _claim_abandoned(self) -> None:
        free = max(1, self.prefetch - len(self._tasks))
        claimed = await self.group.claim_idle(self.consumer, self.claim_idle_ms, free)
        mine = set(self._tasks.values())
        fresh = [(eid, f) for eid, f in claimed if eid not in mine]
        for entry_id, _ in fresh:
            log.info("consumer.claimed", consumer=self.name, entry_id=entry_id)
        await self._dispatch(fresh)

    async def _dispatch(self, entries: Sequence[Entry]) -> None:
        unwanted: list[str] = []
        for entry_id, fields in entries:
            if self._stopping.is_set():
                return  # delivered but not started: stays pending for another consumer
            if not self.wants(entry_id, fields):
                unwanted.append(entry_id)
            else:
                self._start([(entry_id, fields)])
        await self.group.ack(*unwanted)

    def _spawn(self, entry_id: str, fields: Mapping[bytes, bytes]) -> None:
        task = asyncio.create_task(self._guarded(entry_id, fields), name=f"{self.name}:{entry_id}")
        self._tasks[task] = entry_id
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)
        if self._held and not self._stopping.is_set():
            held, self._held = self._held, []
            self._start(held)

    def _start(self, entries: Sequence[Entry]) -> None:
        for entry_id, fields in entries:
            if self.busy(entry_id, fields):
                self._held.append((entry_id, fields))
            else:
                self._spawn(entry_id, fields)

    async def _guarded(self, entry_id: str, fields: Mapping[bytes, bytes]) -> None:
        structlog.contextvars.bind_contextvars(entry_id=entry_id)
        try:
            async with self._running:
                if self.admission is not None:
                    await self.admission.admit()
                await self.handle(entry_id, fields)
        except StoreDown as exc:
            log.warning("consumer.redis_unavailable", consumer=self.name, error=str(exc))
        except PoolExhausted as exc:  # left pending: claimed again once connections free up
            log.warning("consumer.redis_pool_exhausted", consumer=self.name, error=str(exc))
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug: the entry stays pending and is claimed again later
            log.exception("consumer.handle_failed", consumer=self.name)
