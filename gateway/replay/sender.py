"""Sending prepared deliveries to a target gateway: rate, concurrency, pacing, order.

Deliveries are taken in the order the source gateway stored them. Those of one thread
are always sent one after the other, each waiting for the previous one's answer (the
gateway queues a thread's messages in arrival order, so this keeps the conversation's
order); different threads go out concurrently, at most ``concurrency`` at a time, at
most ``rate`` per second, and — with ``speed`` — no earlier than their original offset
from the first delivery divided by the speed.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from yarl import URL

from gateway.replay.resign import Prepared

__all__ = ["Outcome", "SendOptions", "SendReport", "run_send", "send_all"]


@dataclass(frozen=True)
class SendOptions:
    concurrency: int = 8
    rate: float | None = None  # deliveries per second, None: unlimited
    speed: float | None = None  # original pacing divided by this, None: as fast as allowed
    timeout: float = 10.0


@dataclass(frozen=True)
class Outcome:
    """What happened to one delivery."""

    prepared: Prepared
    status: int | None = None  # HTTP status, None when no answer
    error: str | None = None
    latency_ms: float | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def skipped(self) -> bool:
        """Not sent at all (e.g. no secret for a rewritten body)."""
        return self.prepared.problem is not None

    @property
    def status_class(self) -> str:
        return f"{self.status // 100}xx" if self.status is not None else "error"


@dataclass
class SendReport:
    """The run's summary: what was sent, how the target answered, what went wrong."""

    planned: int = 0
    outcomes: list[Outcome] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # not sent: bad line, unknown id, …
    elapsed_s: float = 0.0

    @property
    def sent(self) -> int:
        return sum(1 for o in self.outcomes if o.status is not None)

    @property
    def by_status(self) -> dict[str, int]:
        counts = Counter(o.status_class for o in self.outcomes if o.status is not None)
        return dict(sorted(counts.items()))

    @property
    def errors(self) -> int:
        """Sent, but no answer: connection refused, timeout, …"""
        return sum(1 for o in self.outcomes if o.status is None and not o.skipped)

    @property
    def skipped(self) -> int:
        """Not sent: unreadable export lines, unknown ids, missing secrets."""
        return len(self.problems) + sum(1 for o in self.outcomes if o.skipped)

    @property
    def original_signatures(self) -> int:
        return sum(1 for o in self.outcomes if o.prepared.signature == "original")

    @property
    def failed(self) -> int:
        """Everything that did not end in a 2xx: non-2xx answers, errors, skipped."""
        return sum(1 for o in self.outcomes if not o.ok) + len(self.problems)

    def latency(self, q: float) -> float | None:
        values = sorted(o.latency_ms for o in self.outcomes if o.latency_ms is not None)
        if not values:
            return None
        rank = max(1, math.ceil(q / 100 * len(values)))
        return round(values[rank - 1], 1)

    def as_json(self) -> dict[str, Any]:
        return {
            "planned": self.planned,
            "sent": self.sent,
            "by_status": self.by_status,
            "errors": self.errors,
            "skipped": self.skipped,
            "failed": self.failed,
            "original_signatures": self.original_signatures,
            "latency_ms": {"p50": self.latency(50), "p99": self.latency(99)},
            "elapsed_s": round(self.elapsed_s, 3),
            "problems": list(self.problems)
            + [
                f"{o.prepared.original.id}: {o.error or f'HTTP {o.status}'}"
                for o in self.outcomes
                if not o.ok
            ],
        }


class _Pacer:
    """At most ``rate`` starts per second; not before the original offset / speed."""

    def __init__(self, rate: float | None, speed: float | None, first_ms: int) -> None:
        self.interval = 1.0 / rate if rate else 0.0
        self.speed = speed
        self.first_ms = first_ms
        self.started = time.monotonic()
        self.next_slot = self.started

    async def wait(self, p: Prepared) -> None:
        now = time.monotonic()
        due = self.next_slot
        if self.speed:
            offset = (p.original.when.timestamp() * 1000 - self.first_ms) / 1000
            due = max(due, self.started + max(0.0, offset) / self.speed)
        if due > now:
            await asyncio.sleep(due - now)
        self.next_slot = max(due, time.monotonic()) + self.interval


async def send_all(
    items: Sequence[Prepared],
    options: SendOptions,
    *,
    on_done: Callable[[Outcome], None] | None = None,
    session: aiohttp.ClientSession | None = None,
) -> list[Outcome]:
    """Send every prepared delivery (those with a ``problem`` are not sent); outcomes in
    the order given."""
    outcomes: list[Outcome | None] = [None] * len(items)
    to_send = [(i, p) for i, p in enumerate(items) if p.problem is None]
    for i, p in enumerate(items):
        if p.problem is not None:
            skipped = outcomes[i] = Outcome(p, error=p.problem)
            if on_done is not None:
                on_done(skipped)
    own = session is None
    http = session or aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=options.timeout),
        connector=aiohttp.TCPConnector(limit=max(1, options.concurrency)),
    )
    try:
        first_ms = min((int(p.original.when.timestamp() * 1000) for _, p in to_send), default=0)
        pacer = _Pacer(options.rate, options.speed, first_ms)
        slots = asyncio.Semaphore(max(1, options.concurrency))
        last_of_thread: dict[str, asyncio.Future[None]] = {}
        tasks: set[asyncio.Task[None]] = set()
        loop = asyncio.get_running_loop()

        async def run(index: int, p: Prepared, before: list[asyncio.Future[None]],
                      done: asyncio.Future[None]) -> None:  # fmt: skip
            try:
                for fut in before:
                    await fut
                outcome = await _post(http, p, options.timeout)
                outcomes[index] = outcome
                if on_done is not None:
                    on_done(outcome)
            finally:
                if not done.done():
                    done.set_result(None)
                slots.release()

        for index, p in to_send:
            await pacer.wait(p)
            await slots.acquire()
            before = [last_of_thread[t] for t in p.threads if t in last_of_thread]
            done: asyncio.Future[None] = loop.create_future()
            for thread in p.threads:
                last_of_thread[thread] = done
            task = asyncio.create_task(run(index, p, before, done))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        while tasks:
            await asyncio.gather(*list(tasks))
    finally:
        if own:
            await http.close()
    return [o for o in outcomes if o is not None]


async def run_send(
    items: Sequence[Prepared],
    problems: Sequence[str],
    options: SendOptions,
    *,
    on_done: Callable[[Outcome], None] | None = None,
) -> SendReport:
    """``send_all`` plus the run's summary; ``problems`` are what was never prepared
    (unreadable lines, unknown ids), counted as skipped."""
    started = time.monotonic()
    outcomes = await send_all(items, options, on_done=on_done)
    return SendReport(
        planned=len(items) + len(problems),
        outcomes=outcomes,
        problems=list(problems),
        elapsed_s=time.monotonic() - started,
    )


async def _post(http: aiohttp.ClientSession, p: Prepared, timeout: float) -> Outcome:
    started = time.perf_counter()
    try:
        async with http.post(
            URL(p.url, encoded=True),
            data=p.body,
            headers=p.headers,
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as resp:
            await resp.read()
            status = resp.status
    except TimeoutError:
        return Outcome(p, error=f"no answer from {_origin(p.url)} within {timeout:g}s")
    except aiohttp.ClientConnectorError as exc:
        reason = exc.os_error.strerror if exc.os_error and exc.os_error.strerror else str(exc)
        return Outcome(p, error=f"cannot connect to {_origin(p.url)}: {reason}")
    except aiohttp.ClientError as exc:
        return Outcome(p, error=f"{_origin(p.url)}: {type(exc).__name__}: {exc}")
    except OSError as exc:
        return Outcome(p, error=f"{_origin(p.url)}: {exc}")
    latency = (time.perf_counter() - started) * 1000
    return Outcome(p, status=status, latency_ms=latency)


def _origin(url: str) -> str:
    u = URL(url, encoded=True)
    return f"{u.scheme}://{u.host}:{u.port}" if u.host else url
