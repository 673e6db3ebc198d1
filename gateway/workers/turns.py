"""The worker: consumes the ready stream and runs each thread's turns in order.

The ready stream holds at most one live entry per thread (the ``sched`` flag). A worker
that reads one takes the thread's lease and drains its inbox one message at a time:
turn → commit → deliver. Different threads run concurrently (bounded). An entry is
acknowledged only when the thread's inbox and outbox are both empty, in the same atomic
step that clears the flag; a worker that dies leaves its entry pending, and another
worker claims it once it has been idle for ``claim_idle`` seconds, after the dead
worker's lease has run out. Commits are fenced by the lease token, so a worker that lost
its lease can never commit or send.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
import uuid
from collections.abc import Mapping
from typing import Any

import structlog
from redis.exceptions import ResponseError

from channels import InboundMessage, Sender, SendError, mask_thread_id
from gateway.conversation.turn import TurnRunner, parse_received_at
from gateway.metrics import Metrics
from gateway.store.threads import READY_GROUP, LeaseLost, NewEvent, Store, StoreDown, as_str

__all__ = ["Worker"]

log = structlog.get_logger("gateway.workers.turns")

SEND_ATTEMPTS = 3


class Worker:
    def __init__(
        self,
        store: Store,
        runner: TurnRunner,
        senders: Mapping[str, Sender],
        *,
        metrics: Metrics | None = None,
        concurrency: int = 64,
        claim_idle: float = 15.0,
        consumer: str | None = None,
    ) -> None:
        self.store = store
        self.runner = runner
        self.senders = senders
        self.metrics = metrics
        self.concurrency = concurrency
        self.claim_idle_ms = int(claim_idle * 1000)
        self.lease_ms = self.claim_idle_ms
        self.consumer = consumer or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._active: set[str] = set()
        self._stopping = asyncio.Event()
        self.running = False

    # --- lifecycle -------------------------------------------------------------------

    async def run(self) -> None:
        """Consume until ``stop()``; survives Redis outages (waits and retries)."""
        self.running = True
        last_claim = 0.0
        group_ready = False
        try:
            while not self._stopping.is_set():
                try:
                    if not group_ready:
                        await self.store.ensure_group()
                        group_ready = True
                    if time.monotonic() - last_claim > self.claim_idle_ms / 3000:
                        last_claim = time.monotonic()
                        await self._claim_abandoned()
                    await self._read_new()
                except ResponseError as exc:
                    if "NOGROUP" not in str(exc):
                        raise
                    group_ready = False  # the stream was deleted (FLUSHALL, a new Redis)
                except StoreDown as exc:
                    group_ready = False
                    log.warning("worker.redis_unavailable", error=str(exc))
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
        """Stop taking work; wait up to ``grace`` s for in-flight threads; cancel the rest.

        Returns (finished, cancelled). A cancelled thread's entry stays pending and another
        worker resumes it.
        """
        self.stop()
        pending = set(self._tasks)
        if not pending:
            return 0, 0
        _done, still = await asyncio.wait(pending, timeout=grace)
        for task in still:
            task.cancel()
        await asyncio.gather(*still, return_exceptions=True)
        finished, cancelled = len(pending) - len(still), len(still)
        log.info("worker.drained", finished=finished, cancelled=cancelled)
        return finished, cancelled

    # --- consuming -------------------------------------------------------------------

    async def _free_slots(self) -> int:
        while self.concurrency - len(self._tasks) <= 0 and not self._stopping.is_set():
            await asyncio.wait(set(self._tasks), return_when=asyncio.FIRST_COMPLETED)
        return max(0, self.concurrency - len(self._tasks))

    async def _read_new(self) -> None:
        free = await self._free_slots()
        if not free:
            return
        res: Any = await self.store.redis.xreadgroup(
            READY_GROUP, self.consumer, {self.store.keys.ready: ">"}, count=free, block=1000
        )
        for _stream, entries in res or []:
            for entry_id, fields in entries:
                self._spawn(as_str(fields.get(b"t", b"")), as_str(entry_id))

    async def _claim_abandoned(self) -> None:
        free = max(1, self.concurrency - len(self._tasks))
        res: Any = await self.store.redis.xautoclaim(
            self.store.keys.ready, READY_GROUP, self.consumer, self.claim_idle_ms, "0-0", count=free
        )
        for entry_id, fields in res[1] if res else []:
            if fields:
                thread_id = as_str(fields.get(b"t", b""))
                if thread_id not in self._active:
                    log.info("worker.claimed", thread_id=thread_id, entry_id=as_str(entry_id))
                    self._spawn(thread_id, as_str(entry_id))
            else:  # trimmed away: nothing to do
                await self.store.redis.xack(self.store.keys.ready, READY_GROUP, entry_id)
        await self._trim_ready()

    async def _trim_ready(self) -> None:
        """Drop acknowledged entries older than the oldest one still pending."""
        summary = await self.store.redis.xpending(self.store.keys.ready, READY_GROUP)
        if summary["pending"]:
            min_id = summary["min"]
        else:
            groups = await self.store.redis.xinfo_groups(self.store.keys.ready)
            min_id = next(
                (g["last-delivered-id"] for g in groups if as_str(g["name"]) == READY_GROUP), None
            )
            if min_id is None:
                return
            ms, seq = as_str(min_id).split("-")
            min_id = f"{ms}-{int(seq) + 1}"
        await self.store.redis.xtrim(self.store.keys.ready, minid=min_id, approximate=True)

    def _spawn(self, thread_id: str, entry_id: str) -> None:
        if not thread_id:
            return
        task = asyncio.create_task(self._guarded(thread_id, entry_id), name=f"thread:{thread_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guarded(self, thread_id: str, entry_id: str) -> None:
        self._active.add(thread_id)
        structlog.contextvars.bind_contextvars(thread_id=mask_thread_id(thread_id))
        try:
            await self.process_thread(thread_id, entry_id)
        except LeaseLost:
            log.warning("worker.lease_lost")
        except StoreDown as exc:
            log.warning("worker.redis_unavailable", error=str(exc))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("worker.thread_failed")
        finally:
            self._active.discard(thread_id)

    # --- one thread ------------------------------------------------------------------

    async def process_thread(self, thread_id: str, entry_id: str) -> None:
        token = uuid.uuid4().hex
        loaded = await self._load_waiting(thread_id, token)
        if loaded is None:
            return  # another live worker owns it; the entry stays pending
        renew = asyncio.create_task(self._keep_lease(thread_id, token, asyncio.current_task()))
        try:
            while True:
                if loaded is None:
                    loaded = await self.store.load(thread_id, token, self.lease_ms)
                    if loaded is None:
                        raise LeaseLost(thread_id)
                for message_id in loaded.outbox:
                    await self._deliver_pending(thread_id, message_id, token, entry_id)
                if loaded.head is not None:
                    if await self._turn(thread_id, loaded, token, entry_id):
                        return
                elif await self.store.release_if_idle(thread_id, token, entry_id):
                    return
                loaded = None
        finally:
            renew.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renew

    async def _load_waiting(self, thread_id: str, token: str) -> Any:
        """Take the lease; a just-dead owner's lease may need a few seconds to run out."""
        deadline = time.monotonic() + self.lease_ms / 1000 + 1
        while True:
            loaded = await self.store.load(thread_id, token, self.lease_ms)
            if loaded is not None or time.monotonic() > deadline or self._stopping.is_set():
                return loaded
            await asyncio.sleep(0.5)

    async def _keep_lease(
        self, thread_id: str, token: str, owner: asyncio.Task[Any] | None
    ) -> None:
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            try:
                ok = await self.store.renew(thread_id, token, self.lease_ms)
            except StoreDown:
                continue
            if not ok:
                log.warning("worker.lease_expired")
                if owner is not None:
                    owner.cancel()
                return

    async def _turn(self, thread_id: str, loaded: Any, token: str, entry_id: str) -> bool:
        """Run one turn; True when the thread was released (nothing left to do)."""
        head = json.loads(loaded.head)
        received_at = head.pop("received_at", "")
        msg = InboundMessage.model_validate(head)
        structlog.contextvars.bind_contextvars(message_id=msg.provider_message_id)
        sender = self.senders.get(msg.channel)
        if sender is not None:
            # read receipt; the typing indicator only when the bot is going to answer
            typing = msg.answerable and loaded.state.get("mode") != "human"
            self._background(sender.mark_read(msg.provider_message_id, typing=typing))
        try:
            output = await self.runner.run(loaded, msg, received_at)
        except StoreDown:
            raise  # Redis is away: leave the message in the inbox and retry later
        except Exception as exc:  # a bug must not wedge the thread: answer and move on
            log.exception("turn.failed")
            output = self.runner.failed(loaded, msg, exc)
        released, _ids = await self.store.commit(output.commit, token, entry_id)
        if self.metrics is not None and received_at:
            self.metrics.turn_seconds.observe(time.time() - parse_received_at(received_at))
        log.info("turn.committed", outcome=output.outcome)
        if output.commit.reply_text is None:
            return released
        return await self._deliver_pending(thread_id, msg.provider_message_id, token, entry_id)

    async def _deliver_pending(
        self, thread_id: str, message_id: str, token: str, entry_id: str
    ) -> bool:
        """Deliver a committed reply at most once. True when the thread was released."""
        status, reply = await self.store.mark_sending(thread_id, message_id, token)
        session_id = reply.get("session_id", "")
        channel = reply.get("channel", "")
        base = {"in_reply_to": message_id, "channel": channel, "author": reply.get("author", "bot")}
        if status == "pending":
            outcome, ids, events = await self._send(reply, base)
        elif status == "sending":
            # A worker died while sending: it may or may not have reached the provider.
            # Never send twice: record the uncertainty instead.
            outcome, ids = "uncertain", []
            events = [NewEvent("message.failed", {**base, "reason": "delivery_uncertain"})]
        else:  # already finished; only the outbox entry is left
            outcome, ids, events = status or "sent", [], []
        if self.metrics is not None and events:
            self.metrics.replies.labels(channel, outcome).inc()
        released, _ = await self.store.finish_reply(
            thread_id=thread_id,
            message_id=message_id,
            session_id=session_id,
            status=outcome,
            provider_ids=ids,
            events=events,
            token=token,
            entry_id=entry_id,
        )
        return released

    async def _send(
        self, reply: dict[str, str], base: dict[str, Any]
    ) -> tuple[str, list[str], list[NewEvent]]:
        sender = self.senders.get(reply.get("channel", ""))
        text = reply.get("text", "")
        if sender is None:
            error = f"no sender configured for channel {reply.get('channel')!r}"
            log.error("reply.failed", error=error)
            return "failed", [], [NewEvent("message.failed", {**base, "error": error})]
        for attempt in range(1, SEND_ATTEMPTS + 1):
            try:
                result = await sender.send_text(reply.get("to", ""), text)
            except SendError as exc:
                if exc.retryable and attempt < SEND_ATTEMPTS:
                    await asyncio.sleep(0.5 * 2 ** (attempt - 1))
                    continue
                log.error("reply.failed", error=str(exc), code=exc.code, attempts=attempt)
                data = {**base, "error": str(exc), "code": exc.code, "attempts": attempt}
                return "failed", [], [NewEvent("message.failed", data)]
            ids = list(result.provider_message_ids)
            log.info("reply.sent", parts=len(ids))
            data = {**base, "text": text, "provider_message_ids": ids, "parts": len(ids)}
            return "sent", ids, [NewEvent("message.sent", data)]
        raise AssertionError("unreachable")  # pragma: no cover

    def _background(self, coro: Any) -> None:
        async def best_effort() -> None:
            try:
                await coro
            except Exception as exc:  # mark-as-read is a courtesy, never a failure
                log.info("mark_read.failed", error=str(exc))

        task = asyncio.create_task(best_effort())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
