"""The turn worker: consumes the ready stream and runs each thread's turns in order.

The ready stream holds at most one live entry per thread (the ``sched`` flag). A worker
that reads one takes the thread's lease and drains its inbox one message at a time:
turn → commit → deliver. Different threads run concurrently (bounded). An entry is
acknowledged only when the thread's inbox and outbox are both empty, in the same atomic
step that clears the flag; a worker that dies leaves its entry pending, and another
worker claims it once it has been idle for ``claim_idle`` seconds, after the dead
worker's lease has run out. Commits are fenced by the lease token, so a worker that lost
its lease can never commit or send.

Draining (shutdown): no new turn starts; a reply being sent is always let finish and
record its real outcome; a thread cut short mid-turn is handed to another worker at once
(its message is still at the head of its inbox), never marked uncertain.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Coroutine, Mapping
from typing import Any

import structlog

from channels import Sender, SendError, mask_thread_id
from events import MessageFailed, MessageSent, Payload
from gateway.clock import now_ms, parse_iso
from gateway.conversation.turn import TurnRunner
from gateway.metrics import Metrics
from gateway.store import LeaseLost, LoadedThread, Store, StoreDown, as_str
from gateway.workers.admission import Admission
from gateway.workers.consumer import StreamConsumer

__all__ = ["SEND_ATTEMPTS", "TurnWorker"]

log = structlog.get_logger("gateway.workers.turns")

SEND_ATTEMPTS = 3


#: How long a failed renewal waits for its owner to say it released the lease itself.
_RELEASE_GRACE_SECONDS = 0.5


class TurnWorker(StreamConsumer):
    name = "worker"

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
        admission: Admission | None = None,
    ) -> None:
        super().__init__(
            store.ready,
            concurrency=concurrency,
            claim_idle=claim_idle,
            consumer=consumer,
            admission=admission,
        )
        self.store = store
        self.threads = store.threads
        self.runner = runner
        self.senders = senders
        self.metrics = metrics
        self.lease_ms = self.claim_idle_ms
        self._active: set[str] = set()
        self._sending: set[asyncio.Task[Any]] = set()
        self._courtesy: set[asyncio.Task[None]] = set()

    # --- the consumer's hooks ----------------------------------------------------------

    def wants(self, entry_id: str, fields: Mapping[bytes, bytes]) -> bool:
        return bool(fields.get(b"t"))

    def busy(self, entry_id: str, fields: Mapping[bytes, bytes]) -> bool:
        return as_str(fields.get(b"t")) in self._active

    def spare(self, task: asyncio.Task[None]) -> bool:
        return task in self._sending

    async def handle(self, entry_id: str, fields: Mapping[bytes, bytes]) -> None:
        thread_id = as_str(fields.get(b"t"))
        self._active.add(thread_id)
        structlog.contextvars.bind_contextvars(thread_id=mask_thread_id(thread_id))
        try:
            await self.process_thread(thread_id, entry_id)
        except LeaseLost:
            log.warning("worker.lease_lost")
        finally:
            self._active.discard(thread_id)

    async def housekeeping(self) -> None:
        """Drop acknowledged entries from the ready stream (it only grows otherwise)."""
        await self.group.trim_acknowledged()

    async def drain(self, grace: float) -> tuple[int, int]:
        counts = await super().drain(grace)
        for task in self._courtesy:
            task.cancel()
        return counts

    # --- one thread --------------------------------------------------------------------

    async def process_thread(self, thread_id: str, entry_id: str) -> None:
        token = uuid.uuid4().hex
        loaded = await self._load_waiting(thread_id, token)
        if loaded is None:
            return  # another live worker owns it; the entry stays pending
        done = asyncio.Event()  # set when this task lets the thread go
        renew = asyncio.create_task(
            self._keep_lease(thread_id, token, asyncio.current_task(), done)
        )
        try:
            while True:
                if loaded is None:
                    loaded = await self.threads.load(thread_id, token, self.lease_ms)
                    if loaded is None:
                        raise LeaseLost(thread_id)
                for message_id in loaded.outbox:
                    await self._deliver(thread_id, message_id, token, entry_id)
                if loaded.head is not None:
                    if self.stopping:  # draining: start no new turn, hand the thread on
                        await self.threads.requeue(thread_id, token, entry_id)
                        return
                    due = loaded.state.parked_until_ms
                    if due > now_ms():  # waiting for the model: not yet
                        await self.threads.park(thread_id, token, entry_id, due)
                        return
                    if await self._turn(thread_id, loaded, token, entry_id):
                        return
                elif await self.threads.release_if_idle(thread_id, token, entry_id):
                    return
                loaded = None
        except asyncio.CancelledError:
            # cut short mid-turn by a drain (never mid-send): its message is still at the
            # head of the inbox, so another worker can take the thread over right now
            with contextlib.suppress(StoreDown):
                await self.threads.requeue(thread_id, token, entry_id)
            raise
        finally:
            done.set()
            renew.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renew

    async def _load_waiting(self, thread_id: str, token: str) -> LoadedThread | None:
        """Take the lease; a just-dead owner's lease may need a few seconds to run out."""
        deadline = time.monotonic() + self.lease_ms / 1000 + 1
        while True:
            loaded = await self.threads.load(thread_id, token, self.lease_ms)
            if loaded is not None or time.monotonic() > deadline or self.stopping:
                return loaded
            await asyncio.sleep(0.5)

    async def _keep_lease(
        self, thread_id: str, token: str, owner: asyncio.Task[Any] | None, done: asyncio.Event
    ) -> None:
        """Renew the lease every third of its length until ``done``. ``done`` is checked
        after each call: redis-py may finish a command despite a cancel (redis-py#2665), so
        the owner's ``cancel()`` alone does not stop this loop."""
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            try:
                ok = await self.threads.renew(thread_id, token, self.lease_ms)
            except StoreDown:
                continue
            if done.is_set():
                return
            if not ok:
                # the owner may just have given the lease up itself (release, park, requeue)
                # while this renewal was on its way: it then says so at once
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), _RELEASE_GRACE_SECONDS)
                if done.is_set():
                    return
                log.warning("worker.lease_expired")
                # a reply on the wire is never cut: the send finishes and records what the
                # provider did; the owner then finds the lease gone (or takes it again)
                if owner is not None and not self.spare(owner):
                    owner.cancel()
                return

    async def _turn(self, thread_id: str, loaded: LoadedThread, token: str, entry_id: str) -> bool:
        """Run one turn; True when the thread was released (nothing left to do)."""
        stored = loaded.head
        assert stored is not None
        msg = stored.message
        structlog.contextvars.bind_contextvars(message_id=msg.provider_message_id)
        sender = self.senders.get(msg.channel)
        if sender is not None and self.runner.served(msg):  # not ours to serve: silence
            # read receipt; the typing indicator only when the bot is going to answer
            typing = msg.answerable and not loaded.state.with_person
            self._courteously(
                sender.mark_read(
                    msg.provider_message_id, typing=typing, from_=msg.reply_from or None
                )
            )
        try:
            output = await self.runner.run(loaded.state, loaded.history, stored)
        except StoreDown:
            raise  # Redis is away: leave the message in the inbox and retry later
        except Exception as exc:  # a bug must not wedge the thread: answer and move on
            log.exception("turn.failed")
            output = self.runner.failed(loaded.state, stored, exc)
        released, _ids = await self.threads.commit(output.commit, token, entry_id)
        if self.metrics is not None:
            self.metrics.turns.labels(output.outcome).inc()
            if stored.received_at:
                elapsed = time.time() - parse_iso(stored.received_at).timestamp()
                self.metrics.turn_seconds.observe(elapsed)
        log.info("turn.committed", outcome=output.outcome)
        for reply in output.commit.replies:
            released = await self._deliver(thread_id, reply.id, token, entry_id)
        if output.commit.park_until_ms is not None:
            await self.threads.park(thread_id, token, entry_id, output.commit.park_until_ms)
            return True
        return released

    # --- delivery ----------------------------------------------------------------------

    async def _deliver(self, thread_id: str, message_id: str, token: str, entry_id: str) -> bool:
        """Deliver a committed reply at most once; True when the thread was released.

        From the claim (``sending``) to the recorded outcome this task is spared by a
        drain: cancelling it there would leave a reply that was maybe sent."""
        task = asyncio.current_task()
        assert task is not None
        self._sending.add(task)
        try:
            status, reply = await self.threads.mark_sending(thread_id, message_id, token)
            session_id = reply.get("session_id", "")
            channel = reply.get("channel", "")
            sender = self.senders.get(channel)
            base = {
                "in_reply_to": message_id,
                "channel": channel,
                "author": reply.get("author", "bot"),
            }
            events: list[Payload]
            if status == "pending":
                outcome, ids, events = await self._send(sender, reply, base)
            elif status == "sending":
                # A worker died while sending: it may or may not have reached the
                # provider. Never send twice: record the uncertainty instead.
                outcome, ids = "uncertain", []
                events = [MessageFailed(**base, reason="delivery_uncertain")]
            else:  # already finished; only the outbox entry is left
                outcome, ids, events = status or "sent", [], []
            if self.metrics is not None and events:
                label = sender.provider if sender is not None else channel or "none"
                self.metrics.replies.labels(label, outcome).inc()
            return await self.threads.finish_reply(
                thread_id=thread_id,
                message_id=message_id,
                session_id=session_id,
                status=outcome,
                provider_ids=ids,
                events=events,
                token=token,
                entry_id=entry_id,
            )
        finally:
            self._sending.discard(task)

    async def _send(
        self, sender: Sender | None, reply: dict[str, str], base: dict[str, str]
    ) -> tuple[str, list[str], list[Payload]]:
        text = reply.get("text", "")
        if sender is None:
            error = f"no sender configured for channel {reply.get('channel')!r}"
            log.error("reply.failed", error=error)
            return "failed", [], [MessageFailed(**base, error=error)]
        for attempt in range(1, SEND_ATTEMPTS + 1):
            try:
                result = await sender.send_text(
                    reply.get("to", ""), text, from_=reply.get("from") or None
                )
            except SendError as exc:
                if exc.retryable and attempt < SEND_ATTEMPTS:
                    await asyncio.sleep(0.5 * 2 ** (attempt - 1))
                    continue
                log.error("reply.failed", error=str(exc), code=exc.code, attempts=attempt)
                failed = MessageFailed(**base, error=str(exc), code=exc.code, attempts=attempt)
                return "failed", [], [failed]
            ids = list(result.provider_message_ids)
            log.info("reply.sent", parts=len(ids))
            sent = MessageSent(**base, text=text, provider_message_ids=ids, parts=len(ids))
            return "sent", ids, [sent]
        raise AssertionError("unreachable")  # pragma: no cover

    def _courteously(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a courtesy (mark as read) in the background: never a failure."""

        async def best_effort() -> None:
            try:
                await coro
            except Exception as exc:
                log.info("mark_read.failed", error=str(exc))

        task = asyncio.create_task(best_effort())
        self._courtesy.add(task)
        task.add_done_callback(self._courtesy.discard)
