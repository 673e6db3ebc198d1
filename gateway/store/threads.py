"""A thread's life in Redis on the hot path: take its lease and read it whole, commit a
turn, deliver its reply at most once, release it; and actions on it outside a turn.

Per thread (``P:t:{T}:…``, see ``keys``): ``inbox`` (messages not yet turned, arrival
order), ``sched`` (set while the thread has a live entry in the ready stream), ``lease``
(the token of the worker that owns it, PX), ``state`` (hash, ``ThreadState``),
``history`` (capped ChatMessage JSON), ``reply:<id>`` (a reply and its delivery status),
``outbox`` (ids whose reply is committed but not yet finished). Every operation is one
Lua script: one round trip, atomic, fenced by the lease where a worker writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from events import Payload
from gateway.clock import now_ms, utc_now_iso
from gateway.conversation.changes import Reply, ThreadAction, TurnCommit
from gateway.conversation.thread import StoredMessage, ThreadState
from gateway.store._codec import as_str, dumps, pairs
from gateway.store.errors import ActionRefused, LeaseLost, translates_redis_errors
from gateway.store.events import encode_events
from gateway.store.keys import Keys
from gateway.store.scripts import Scripts

__all__ = ["READY_GROUP", "LoadedThread", "ThreadStore"]

READY_GROUP = "workers"


@dataclass(frozen=True, slots=True)
class LoadedThread:
    """One round trip's worth of a thread: state, history, next message, pending replies."""

    state: ThreadState
    history: list[str]
    head: StoredMessage | None
    outbox: list[str]


def _reply_fields(reply: Reply) -> dict[str, str]:
    return {
        "id": reply.id,
        "text": reply.text,
        "to": reply.to,
        "channel": reply.channel,
        "author": reply.author,
        "from": reply.from_,
    }


@translates_redis_errors
class ThreadStore:
    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        scripts: Scripts,
        *,
        events_maxlen: int,
        reply_ttl: int,
        sent_ttl: int,
        history_cap: int,
        thread_ttl: int = 0,
        session_ttl: int = 0,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.scripts = scripts
        self.events_maxlen = events_maxlen
        self.reply_ttl = reply_ttl
        self.sent_ttl = sent_ttl
        self.history_cap = history_cap
        self.thread_ttl = thread_ttl
        self.session_ttl = session_ttl

    # --- a worker's turn ---------------------------------------------------------------

    async def load(self, thread_id: str, token: str, lease_ms: int) -> LoadedThread | None:
        """Take (or keep) the thread's lease and read it whole. None: another worker owns it."""
        k = self.keys
        res = await self.scripts.run(
            "load",
            [
                k.thread(thread_id, "lease"),
                k.thread(thread_id, "state"),
                k.thread(thread_id, "history"),
                k.thread(thread_id, "inbox"),
                k.thread(thread_id, "outbox"),
            ],
            [token, lease_ms],
        )
        if res is None:
            return None
        flat, history, head, outbox = res
        head_text = as_str(head)
        return LoadedThread(
            state=ThreadState.from_fields(pairs(flat)),
            history=[as_str(h) for h in history],
            head=StoredMessage.from_json(head_text) if head_text else None,
            outbox=[as_str(o) for o in outbox],
        )

    async def renew(self, thread_id: str, token: str, lease_ms: int) -> bool:
        res = await self.scripts.run(
            "renew", [self.keys.thread(thread_id, "lease")], [token, lease_ms]
        )
        return bool(res)

    async def commit(self, turn: TurnCommit, token: str, entry_id: str) -> tuple[bool, list[str]]:
        """Commit a turn: pop the message (unless parked), write state/history/events,
        queue the replies. Returns (thread released, event ids). ``LeaseLost`` when
        fenced off."""
        k = self.keys
        t = turn.thread_id
        payload = {
            "state": dict(turn.state),
            "history": list(turn.history),
            "events": encode_events(turn.events),
            "replies": [_reply_fields(r) for r in turn.replies],
            "session_open": turn.session_open,
            "handoff_open": turn.handoff_open,
            "waiting_open": turn.waiting_open,
            "park_until_ms": turn.park_until_ms,
            "now_ms": now_ms(),
        }
        released, ids = await self._fenced(
            "commit",
            [
                k.thread(t, "lease"),
                k.thread(t, "inbox"),
                k.thread(t, "state"),
                k.thread(t, "history"),
                k.thread(t, "outbox"),
                k.events,
                k.session_events(turn.session_id) if turn.session_id else "",
                k.thread(t, "sched"),
                k.ready,
                k.sessions_open,
                k.handoffs_open,
                k.handoffs_waiting,
                k.parked,
                *[k.thread(t, f"reply:{r.id}") for r in turn.replies],
            ],
            [
                token,
                turn.message_id,
                dumps(payload),
                self.history_cap,
                self.events_maxlen,
                utc_now_iso(),
                t,
                turn.session_id,
                entry_id,
                READY_GROUP,
                self.reply_ttl,
                self.thread_ttl,
                self.session_ttl,
            ],
        )
        return bool(released), [as_str(i) for i in ids]

    async def park(self, thread_id: str, token: str, entry_id: str, due_ms: int) -> bool:
        """Let go of a thread whose head message waits for the model until ``due_ms``."""
        res = await self.scripts.run(
            "park",
            [self.keys.thread(thread_id, "lease"), self.keys.ready, self.keys.parked],
            [token, READY_GROUP, entry_id, thread_id, due_ms],
        )
        return bool(res)

    async def unpark_due(self, limit: int = 100) -> list[str]:
        """Wake the parked threads that are due; their ids."""
        res: Any = await self.scripts.run(
            "unpark", [self.keys.parked, self.keys.ready], [now_ms(), limit]
        )
        return [as_str(t) for t in res] if isinstance(res, list) else []

    async def mark_sending(
        self, thread_id: str, message_id: str, token: str
    ) -> tuple[str, dict[str, str]]:
        """Claim the right to send a reply: (status found, reply fields).

        Only a ``pending`` reply may be sent; it is ``sending`` from now on, so a worker
        that dies mid-send leaves a trace and the reply is never sent twice.
        """
        status, flat = await self._fenced(
            "mark_sending",
            [
                self.keys.thread(thread_id, "lease"),
                self.keys.thread(thread_id, f"reply:{message_id}"),
            ],
            [token],
        )
        return as_str(status), pairs(flat)

    async def finish_reply(
        self,
        *,
        thread_id: str,
        message_id: str,
        session_id: str,
        status: str,
        provider_ids: Sequence[str],
        events: Sequence[Payload],
        token: str,
        entry_id: str,
    ) -> bool:
        """Record a delivery outcome (sent / failed / uncertain); True when released."""
        k = self.keys
        t = thread_id
        released, _ids = await self.scripts.run(
            "finish_reply",
            [
                k.thread(t, "lease"),
                k.thread(t, f"reply:{message_id}"),
                k.thread(t, "outbox"),
                k.events,
                k.session_events(session_id) if session_id else "",
                k.thread(t, "inbox"),
                k.thread(t, "sched"),
                k.ready,
                *[k.sent(p) for p in provider_ids],
            ],
            [
                token,
                message_id,
                status,
                dumps(list(provider_ids)),
                dumps(encode_events(events)),
                self.events_maxlen,
                utc_now_iso(),
                t,
                session_id,
                entry_id,
                READY_GROUP,
                self.sent_ttl,
                self.session_ttl,
            ],
        )
        return bool(released)

    async def release_if_idle(self, thread_id: str, token: str, entry_id: str) -> bool:
        k = self.keys
        t = thread_id
        res = await self.scripts.run(
            "release",
            [
                k.thread(t, "inbox"),
                k.thread(t, "outbox"),
                k.thread(t, "sched"),
                k.thread(t, "lease"),
                k.ready,
            ],
            [READY_GROUP, entry_id, token],
        )
        return bool(res)

    async def requeue(self, thread_id: str, token: str, entry_id: str) -> bool:
        """Hand the thread to another worker now (we are draining); False when the lease
        was no longer ours."""
        res = await self.scripts.run(
            "requeue",
            [self.keys.thread(thread_id, "lease"), self.keys.ready],
            [token, READY_GROUP, entry_id, thread_id],
        )
        return bool(res)

    async def _fenced(self, script: str, keys: list[str], args: list[Any]) -> Any:
        try:
            return await self.scripts.run(script, keys, args)
        except ResponseError as exc:
            if "LEASE_LOST" in str(exc):
                raise LeaseLost(f"thread lease lost: {script}") from None
            raise

    # --- outside a turn ----------------------------------------------------------------

    async def act(self, thread_id: str, action: ThreadAction) -> list[str]:
        """Apply an out-of-turn action atomically; the event ids. Raises
        ``ActionRefused`` when the state no longer matches ``action.require`` (or, with
        ``idle``, when a worker holds the thread)."""
        k = self.keys
        t = thread_id
        reply = action.reply
        payload = {
            "require": dict(action.require),
            "idle": action.idle,
            "state": dict(action.state),
            "session_open": action.session_open,
            "handoff_open": action.handoff_open,
            "waiting_open": action.waiting_open,
            "events": encode_events(action.events),
            "reply": _reply_fields(reply) if reply is not None else None,
            "now_ms": now_ms(),
            "at": utc_now_iso(),
            "thread_id": t,
            "session_id": action.session_id,
            "events_maxlen": self.events_maxlen,
            "reply_ttl": self.reply_ttl,
            "session_ttl": self.session_ttl,
        }
        try:
            res: Any = await self.scripts.run(
                "act",
                [
                    k.thread(t, "state"),
                    k.thread(t, "lease"),
                    k.thread(t, "outbox"),
                    k.thread(t, "sched"),
                    k.ready,
                    k.events,
                    k.session_events(action.session_id) if action.session_id else "",
                    k.sessions_open,
                    k.handoffs_open,
                    k.thread(t, f"reply:{reply.id if reply is not None else 'none'}"),
                    k.handoffs_waiting,
                    k.parked,
                ],
                [dumps(payload)],
            )
        except ResponseError as exc:
            text = str(exc)
            if text.startswith(("BUSY", "PRECONDITION")):
                raise ActionRefused(f"the thread changed, try again ({text})") from None
            raise
        return [as_str(i) for i in res] if isinstance(res, list) else []

    async def state(self, thread_id: str) -> ThreadState | None:
        """The thread's state; None for a thread never seen."""
        raw = await self.redis.hgetall(self.keys.thread(thread_id, "state"))
        if not raw:
            return None
        return ThreadState.from_fields({as_str(a): as_str(b) for a, b in raw.items()})

    async def history(self, thread_id: str) -> list[str]:
        raw = await self.redis.lrange(self.keys.thread(thread_id, "history"), 0, -1)
        return [as_str(h) for h in raw]

    async def due(self, key: str, older_than_s: float, limit: int = 100) -> list[tuple[str, float]]:
        """Members of an index (``sessions_open``, ``handoffs_open``) whose score (ms) is
        older than ``older_than_s`` seconds."""
        cutoff = now_ms() - int(older_than_s * 1000)
        res: Any = await self.redis.zrangebyscore(
            key, "-inf", cutoff, start=0, num=limit, withscores=True
        )
        return [(as_str(m), float(sc)) for m, sc in res]

    async def forget_open_session(self, thread_id: str) -> None:
        await self.redis.zrem(self.keys.sessions_open, thread_id)

    async def open_handoffs(self) -> list[tuple[str, float]]:
        """Threads with an open handoff, oldest request first: (thread id, ms)."""
        res: Any = await self.redis.zrange(self.keys.handoffs_open, 0, -1, withscores=True)
        return [(as_str(m), float(sc)) for m, sc in res]

    async def support_window_flipped(self, open_now: bool) -> bool:
        """Record whether support is open now; True exactly once per opening (the caller
        that saw it closed, or never recorded, and sets it open), across processes."""
        previous = await self.redis.set(
            self.keys.support_window, "open" if open_now else "closed", get=True
        )
        return open_now and as_str(previous) != "open"

    async def waiting_requests(self) -> list[tuple[str, float]]:
        """Threads whose request for a person is queued, oldest first: (thread id, ms)."""
        res: Any = await self.redis.zrange(self.keys.handoffs_waiting, 0, -1, withscores=True)
        return [(as_str(m), float(sc)) for m, sc in res]
