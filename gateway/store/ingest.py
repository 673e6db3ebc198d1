"""Storing webhook deliveries before they are acknowledged: dedupe, the thread's inbox,
the ready queue, the raw record, status events — one script, batched under load."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
import structlog

from events import Payload
from gateway.clock import utc_now_iso
from gateway.errors import BadRequest
from gateway.store._codec import as_str, dumps
from gateway.store.errors import REDIS_DOWN, StoreDown, translates_redis_errors
from gateway.store.keys import Keys
from gateway.store.scripts import Scripts

__all__ = ["Ingest", "Intake"]

log = structlog.get_logger("gateway.store.ingest")


@dataclass(frozen=True, slots=True)
class Intake:
    """One delivery's writes. ``messages``: ``(thread_id, provider_message_id, inbox
    json)``; ``raw``: the raw-delivery record ``(meta json, body)``; ``events``:
    ``(thread_id, session_id, event)`` to publish (status callbacks)."""

    messages: Sequence[tuple[str, str, str]] = ()
    raw: tuple[str, bytes] | None = None
    events: Sequence[tuple[str, str, Payload]] = ()


@dataclass(slots=True)
class _Queued:
    intake: Intake
    future: asyncio.Future[list[bool]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


@translates_redis_errors
class Ingest:
    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        scripts: Scripts,
        *,
        dedupe_ttl: int,
        raw_maxlen: int,
        events_maxlen: int,
        refused_max: int = 10_000,
        thread_ttl: int = 0,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.scripts = scripts
        self.dedupe_ttl = dedupe_ttl
        self.raw_maxlen = raw_maxlen
        self.events_maxlen = events_maxlen
        self.refused_max = refused_max
        self.thread_ttl = thread_ttl
        self._queue: list[_Queued] = []
        self._flusher: asyncio.Task[None] | None = None

    async def store(self, intake: Intake) -> list[bool]:
        """Store a delivery durably; per message, whether it was new (False: a duplicate,
        dropped).

        Concurrent deliveries are written together (group commit): while one script call
        is in flight the next ones queue and go in the following call, so under load a
        delivery costs well under one round trip. Each caller returns only once its own
        delivery is stored. A delivery that cannot be encoded is refused alone
        (``BadRequest``) before it joins a batch; if a batch fails for another reason than
        Redis being down, its members are retried one by one, so one bad delivery never
        fails the others.
        """
        _check_encodable(intake)
        queued = _Queued(intake)
        self._queue.append(queued)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return await queued.future

    async def _flush(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                results = await self._write([q.intake for q in batch])
            except REDIS_DOWN as exc:
                _fail(batch, StoreDown(f"Redis unavailable: {exc}"))
                continue
            except Exception as exc:
                if len(batch) == 1:
                    _fail(batch, exc)
                    continue
                log.warning("ingest.batch_failed", size=len(batch), error=str(exc)[:200])
                for queued in batch:
                    try:
                        result = (await self._write([queued.intake]))[0]
                    except Exception as single:
                        _fail([queued], single)
                    else:
                        queued.future.set_result(result)
                continue
            for queued, result in zip(batch, results, strict=True):
                if not queued.future.done():
                    queued.future.set_result(result)

    async def _write(self, intakes: Sequence[Intake]) -> list[list[bool]]:
        k = self.keys
        keys: list[str] = [k.ready, k.raw, k.events]
        messages: list[list[str]] = []
        events: list[list[str]] = []
        raws: list[str] = []
        bodies: list[bytes] = []
        for intake in intakes:
            for thread_id, message_id, body in intake.messages:
                keys += [
                    k.thread(thread_id, f"seen:{message_id}"),
                    k.thread(thread_id, "inbox"),
                    k.thread(thread_id, "sched"),
                ]
                messages.append([body, thread_id])
            events += [[e.TYPE, t, sid, dumps(e.data())] for t, sid, e in intake.events]
            if intake.raw is not None:
                raws.append(intake.raw[0])
                bodies.append(intake.raw[1])
        payload = {
            "ttl": self.dedupe_ttl,
            "thread_ttl": self.thread_ttl,
            "raw_maxlen": self.raw_maxlen,
            "events_maxlen": self.events_maxlen,
            "at": utc_now_iso(),
            "raws": raws,
            "messages": messages,
            "events": events,
        }
        res: Any = await self.scripts.run("ingest", keys, [dumps(payload), *bodies])
        # cjson turns an empty array into an empty object: both mean "no messages"
        new = [bool(x) for x in res] if isinstance(res, list) else []
        out: list[list[bool]] = []
        at = 0
        for intake in intakes:
            out.append(new[at : at + len(intake.messages)])
            at += len(intake.messages)
        return out

    async def record_refused(self, raw: tuple[str, bytes]) -> None:
        """Keep a refused delivery (no messages stored) in the raw stream; at most
        ``refused_max`` of them stay, the oldest go first, whatever the accepted ones do."""
        await self.scripts.run(
            "record_refused",
            [self.keys.raw, self.keys.raw_refused],
            [raw[0], raw[1], self.raw_maxlen, self.refused_max],
        )

    async def lookup_sent(self, provider_message_ids: Sequence[str]) -> list[tuple[str, ...]]:
        """For status callbacks: ``(thread_id, inbound message id, session id)`` per id
        (``()`` for one we did not send)."""
        if not provider_message_ids:
            return []
        raw = await self.redis.mget([self.keys.sent(p) for p in provider_message_ids])
        return [tuple(json.loads(as_str(r))) if r else () for r in raw]


def _check_encodable(intake: Intake) -> None:
    try:
        for _thread, _id, body in intake.messages:
            body.encode("utf-8")
        for _t, _s, event in intake.events:
            dumps(event.data()).encode("utf-8")
        if intake.raw is not None:
            intake.raw[0].encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadRequest(f"the delivery holds text that is not valid Unicode: {exc}") from None


def _fail(batch: Sequence[_Queued], exc: BaseException) -> None:
    for queued in batch:
        if not queued.future.done():
            queued.future.set_exception(exc)
