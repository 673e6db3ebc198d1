"""Redis state of the gateway: dedupe, per-thread inboxes, leases, turn commits, replies.

Every operation on the hot path is one Lua script, so it is one round trip and atomic.
All keys of one thread share the hash tag ``{thread_id}``; the two global streams (the
ready queue and the event log) are written in the same scripts, which keeps a turn's
state, its events and its pending reply in one atomic step (see DESIGN.md, "Redis").

Per thread (``P:t:{T}:…``):

- ``seen:<provider id>``  dedupe marker (``SET NX EX``), one per inbound message
- ``inbox``               list of inbound messages not yet turned (JSON, arrival order)
- ``sched``               set while the thread has a live entry in the ready stream
- ``lease``               the token of the worker that owns the thread right now (PX)
- ``state``               hash: counter, session, household, mode, timestamps, …
- ``history``             capped list of ChatMessage JSON (user and assistant turns)
- ``reply:<provider id>`` hash: the reply to one inbound message and its delivery status
- ``outbox``              provider ids whose reply is committed but not yet delivered
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = [
    "READY_GROUP",
    "Action",
    "ActionRefused",
    "CommitRequest",
    "Keys",
    "LeaseLost",
    "LoadedThread",
    "NewEvent",
    "Store",
    "StoreDown",
    "as_str",
    "utc_now_iso",
]

READY_GROUP = "workers"
StoreDown: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError, OSError)


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class ActionRefused(Exception):
    """The thread changed (or is busy) since the action was decided."""


@dataclass(frozen=True, slots=True)
class Action:
    """An out-of-turn change to one thread (see ``Store.act``)."""

    session_id: str
    events: Sequence[NewEvent] = ()
    state: Mapping[str, str] = field(default_factory=dict)
    require: Mapping[str, str] = field(default_factory=dict)
    idle: bool = False
    session_open: bool | None = None
    handoff_open: bool | None = None
    reply: Mapping[str, str] | None = None  # {id, text, to, channel, author}


class LeaseLost(Exception):
    """Another worker owns the thread now; this one must drop the turn."""


class Keys:
    """Key names. ``prefix`` is ``MEL_REDIS_PREFIX``."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.ready = f"{prefix}:ready"
        self.events = f"{prefix}:events"
        self.raw = f"{prefix}:raw"
        self.sessions_open = f"{prefix}:sessions:open"  # zset thread → last activity ms
        self.handoffs_open = f"{prefix}:handoffs:open"  # zset thread → handoff request ms

    def thread(self, thread_id: str, name: str) -> str:
        return f"{self.prefix}:t:{{{thread_id}}}:{name}"

    def sent(self, provider_message_id: str) -> str:
        return f"{self.prefix}:sent:{provider_message_id}"

    def session_events(self, session_id: str) -> str:
        return f"{self.prefix}:session:{session_id}:events"


@dataclass(frozen=True, slots=True)
class NewEvent:
    type: str
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Delivery:
    messages: Sequence[tuple[str, str, str]]
    raw: tuple[str, bytes] | None
    events: Sequence[tuple[str, str, NewEvent]]
    future: asyncio.Future[list[bool]]


@dataclass(frozen=True, slots=True)
class LoadedThread:
    """One round trip's worth of a thread: state, history, next message, pending replies."""

    state: dict[str, str]
    history: list[str]
    head: str | None
    outbox: list[str]


@dataclass(frozen=True, slots=True)
class CommitRequest:
    thread_id: str
    message_id: str
    session_id: str
    state: Mapping[str, str]
    history: Sequence[str]
    events: Sequence[NewEvent]
    reply_text: str | None
    reply_to: str  # E.164 number the reply goes to
    channel: str
    session_open: bool | None = None  # True: index as open; False: drop; None: unchanged
    handoff_open: bool | None = None


# --- Lua -----------------------------------------------------------------------------

_INGEST = """
-- Deliveries (one or more, batched): their messages, status events and raw records.
-- KEYS: ready, raw, events, then per message: seen, inbox, sched
-- ARGV[1]: JSON {ttl, raw_maxlen, events_maxlen, at, raws: [meta…],
--               messages: [[json, thread id]…], events: [[type, thread, session, data]…]}
-- ARGV[1 + i]: the body of raws[i]
local p = cjson.decode(ARGV[1])
local new = {}
for i, m in ipairs(p['messages']) do
  local k = 3 + (i - 1) * 3
  if redis.call('SET', KEYS[k + 1], '1', 'NX', 'EX', p['ttl']) then
    redis.call('RPUSH', KEYS[k + 2], m[1])
    if redis.call('SET', KEYS[k + 3], '1', 'NX') then
      redis.call('XADD', KEYS[1], '*', 't', m[2])
    end
    new[i] = 1
  else
    new[i] = 0
  end
end
for _, e in ipairs(p['events']) do
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', p['events_maxlen'], '*', 'type', e[1],
    'at', p['at'], 'thread_id', e[2], 'session_id', e[3], 'data', e[4])
end
for i, meta in ipairs(p['raws']) do
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', p['raw_maxlen'], '*', 'meta', meta,
    'body', ARGV[1 + i])
end
return new
"""

_LOAD = """
-- KEYS: lease, state, history, inbox, outbox   ARGV: token, lease ms
local owner = redis.call('GET', KEYS[1])
if owner and owner ~= ARGV[1] then return false end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {redis.call('HGETALL', KEYS[2]), redis.call('LRANGE', KEYS[3], 0, -1),
        redis.call('LINDEX', KEYS[4], 0) or '', redis.call('LRANGE', KEYS[5], 0, -1)}
"""

# Appends events to the global log and to their session's id list. Shared by scripts.
_EMIT = """
local function emit(events_key, maxlen, at, thread_id, session_id, session_key, events)
  local ids = {}
  for i, ev in ipairs(events) do
    local id = redis.call('XADD', events_key, 'MAXLEN', '~', maxlen, '*',
      'type', ev[1], 'at', at, 'thread_id', thread_id, 'session_id', session_id,
      'data', ev[2])
    if session_key ~= '' then redis.call('RPUSH', session_key, id) end
    ids[#ids + 1] = id
  end
  return ids
end
"""

# State fields set to '' are deleted; the open-session and open-handoff indexes follow.
_APPLY_STATE = """
local function apply_state(state_key, fields)
  local set, del = {}, {}
  for k, v in pairs(fields) do
    if v == '' then del[#del + 1] = k else set[#set + 1] = k; set[#set + 1] = v end
  end
  if #set > 0 then redis.call('HSET', state_key, unpack(set)) end
  if #del > 0 then redis.call('HDEL', state_key, unpack(del)) end
end
local function apply_index(key, flag, thread_id, score)
  if flag == true then redis.call('ZADD', key, score, thread_id)
  elseif flag == false then redis.call('ZREM', key, thread_id) end
end
"""

_RELEASE_IF_IDLE = """
local function release_if_idle(inbox, outbox, sched, lease, ready, group, entry, token)
  if redis.call('LLEN', inbox) == 0 and redis.call('LLEN', outbox) == 0 then
    redis.call('DEL', sched)
    if entry ~= '' then redis.call('XACK', ready, group, entry) end
    if redis.call('GET', lease) == token then redis.call('DEL', lease) end
    return 1
  end
  return 0
end
"""

_COMMIT = (
    _EMIT
    + _APPLY_STATE
    + _RELEASE_IF_IDLE
    + """
-- KEYS: lease, inbox, state, history, outbox, reply, events, session_events, sched, ready,
--       sessions_open, handoffs_open
-- ARGV: token, message id, payload json, history cap, events maxlen, at, thread id,
--       session id, ready entry id, group, reply ttl
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('LEASE_LOST') end
local head = redis.call('LINDEX', KEYS[2], 0)
if not head then return redis.error_reply('EMPTY_INBOX') end
if cjson.decode(head)['provider_message_id'] ~= ARGV[2] then
  return redis.error_reply('HEAD_MISMATCH')
end
redis.call('LPOP', KEYS[2])
local p = cjson.decode(ARGV[3])
apply_state(KEYS[3], p['state'])
apply_index(KEYS[11], p['session_open'], ARGV[7], p['now_ms'])
apply_index(KEYS[12], p['handoff_open'], ARGV[7], p['now_ms'])
if #p['history'] > 0 then
  redis.call('RPUSH', KEYS[4], unpack(p['history']))
  redis.call('LTRIM', KEYS[4], -tonumber(ARGV[4]), -1)
end
if p['reply'] ~= cjson.null then
  redis.call('HSET', KEYS[6], 'status', 'pending', 'text', p['reply'], 'to', p['to'],
    'channel', p['channel'], 'session_id', ARGV[8], 'at', ARGV[6], 'author', 'bot')
  redis.call('EXPIRE', KEYS[6], ARGV[11])
  redis.call('RPUSH', KEYS[5], ARGV[2])
end
local ids = emit(KEYS[7], ARGV[5], ARGV[6], ARGV[7], ARGV[8], KEYS[8], p['events'])
local released = 0
if p['reply'] == cjson.null then
  released = release_if_idle(KEYS[2], KEYS[5], KEYS[9], KEYS[1], KEYS[10], ARGV[10],
    ARGV[9], ARGV[1])
end
return {released, ids}
"""
)

# An action outside a turn (support, sweeps): preconditions on the thread's state, state
# changes, events, and optionally a reply queued for the workers to deliver.
_ACT = (
    _EMIT
    + _APPLY_STATE
    + """
-- KEYS: state, lease, outbox, sched, ready, events, session_events, sessions_open,
--       handoffs_open, reply
-- ARGV: payload json {require, idle, state, session_open, handoff_open, events, reply,
--       now_ms, at, thread_id, session_id, events_maxlen, reply_ttl}
local p = cjson.decode(ARGV[1])
if p['idle'] and redis.call('EXISTS', KEYS[2]) == 1 then return redis.error_reply('BUSY') end
for field, expected in pairs(p['require']) do
  local actual = redis.call('HGET', KEYS[1], field) or ''
  if actual ~= expected then
    return redis.error_reply('PRECONDITION ' .. field .. '=' .. actual)
  end
end
apply_state(KEYS[1], p['state'])
apply_index(KEYS[8], p['session_open'], p['thread_id'], p['now_ms'])
apply_index(KEYS[9], p['handoff_open'], p['thread_id'], p['now_ms'])
if p['reply'] ~= cjson.null then
  local r = p['reply']
  redis.call('HSET', KEYS[10], 'status', 'pending', 'text', r['text'], 'to', r['to'],
    'channel', r['channel'], 'session_id', p['session_id'], 'at', p['at'],
    'author', r['author'])
  redis.call('EXPIRE', KEYS[10], p['reply_ttl'])
  redis.call('RPUSH', KEYS[3], r['id'])
  if redis.call('SET', KEYS[4], '1', 'NX') then
    redis.call('XADD', KEYS[5], '*', 't', p['thread_id'])
  end
end
return emit(KEYS[6], p['events_maxlen'], p['at'], p['thread_id'], p['session_id'], KEYS[7],
  p['events'])
"""
)

_MARK_SENDING = """
-- KEYS: lease, reply   ARGV: token.  Returns the status found and the reply's fields.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('LEASE_LOST') end
local status = redis.call('HGET', KEYS[2], 'status') or ''
if status == 'pending' then redis.call('HSET', KEYS[2], 'status', 'sending') end
return {status, redis.call('HGETALL', KEYS[2])}
"""

_FINISH_REPLY = (
    _EMIT
    + _RELEASE_IF_IDLE
    + """
-- KEYS: lease, reply, outbox, events, session_events, inbox, sched, ready, sent keys…
-- ARGV: token, message id, status, provider ids json, events json, maxlen, at,
--       thread id, session id, ready entry id, group, sent-key ttl
redis.call('HSET', KEYS[2], 'status', ARGV[3], 'provider_ids', ARGV[4], 'done_at', ARGV[7])
redis.call('LREM', KEYS[3], 0, ARGV[2])
for i = 9, #KEYS do
  redis.call('SET', KEYS[i], cjson.encode({ARGV[8], ARGV[2], ARGV[9]}), 'EX', ARGV[12])
end
local ids = emit(KEYS[4], ARGV[6], ARGV[7], ARGV[8], ARGV[9], KEYS[5], cjson.decode(ARGV[5]))
local released = release_if_idle(KEYS[6], KEYS[3], KEYS[7], KEYS[1], KEYS[8], ARGV[11],
  ARGV[10], ARGV[1])
return {released, ids}
"""
)

_RELEASE = (
    _RELEASE_IF_IDLE
    + """
-- KEYS: inbox, outbox, sched, lease, ready   ARGV: group, entry id, token
return release_if_idle(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[2],
  ARGV[3])
"""
)

_PUBLISH = (
    _EMIT
    + """
-- KEYS: events, session_events   ARGV: maxlen, at, thread id, session id, events json
return emit(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], KEYS[2], cjson.decode(ARGV[5]))
"""
)

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""


class Store:
    """The gateway's Redis operations. Holds no state of its own besides the client."""

    def __init__(
        self,
        redis: aioredis.Redis,
        prefix: str = "mel",
        *,
        events_maxlen: int = 1_000_000,
        raw_maxlen: int = 100_000,
        dedupe_ttl: int = 8 * 24 * 3600,
        reply_ttl: int = 8 * 24 * 3600,
        history_cap: int = 40,
    ) -> None:
        self.redis = redis
        self.history_cap = history_cap
        self.keys = Keys(prefix)
        self.events_maxlen = events_maxlen
        self.raw_maxlen = raw_maxlen
        self.dedupe_ttl = dedupe_ttl
        self.reply_ttl = reply_ttl
        self._ingest = redis.register_script(_INGEST)
        self._load = redis.register_script(_LOAD)
        self._commit = redis.register_script(_COMMIT)
        self._mark_sending = redis.register_script(_MARK_SENDING)
        self._finish_reply = redis.register_script(_FINISH_REPLY)
        self._release = redis.register_script(_RELEASE)
        self._renew = redis.register_script(_RENEW)
        self._publish = redis.register_script(_PUBLISH)
        self._act = redis.register_script(_ACT)
        self._ingest_queue: list[_Delivery] = []
        self._ingest_flusher: asyncio.Task[None] | None = None

    # --- ingest ----------------------------------------------------------------------

    async def ingest(
        self,
        messages: Sequence[tuple[str, str, str]],
        raw: tuple[str, bytes] | None,
        events: Sequence[tuple[str, str, NewEvent]] = (),
    ) -> list[bool]:
        """Store a delivery durably; returns, per message, whether it was new (False: a
        duplicate delivery, dropped).

        ``messages`` are ``(thread_id, provider_message_id, message_json)``, ``raw`` the
        raw delivery record ``(meta JSON, body)``, ``events`` ``(thread_id, session_id,
        event)`` to publish (status callbacks). Concurrent deliveries are written together
        (group commit): while one script call is in flight, the next ones queue and go in
        the following call, so under load a delivery costs well under one round trip. Each
        caller still returns only once its own delivery is stored.
        """
        future: asyncio.Future[list[bool]] = asyncio.get_running_loop().create_future()
        self._ingest_queue.append(_Delivery(messages, raw, events, future))
        if self._ingest_flusher is None or self._ingest_flusher.done():
            self._ingest_flusher = asyncio.create_task(self._flush_ingest())
        return await future

    async def _flush_ingest(self) -> None:
        while self._ingest_queue:
            batch, self._ingest_queue = self._ingest_queue, []
            try:
                new = await self._ingest_batch(batch)
            except BaseException as exc:
                for d in batch:
                    if not d.future.done():
                        d.future.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
                continue
            at = 0
            for d in batch:
                if not d.future.done():
                    d.future.set_result(new[at : at + len(d.messages)])
                at += len(d.messages)

    async def _ingest_batch(self, batch: Sequence[_Delivery]) -> list[bool]:
        k = self.keys
        keys: list[str] = [k.ready, k.raw, k.events]
        messages: list[list[str]] = []
        events: list[list[str]] = []
        raws: list[str] = []
        bodies: list[bytes] = []
        for d in batch:
            for thread_id, message_id, body in d.messages:
                keys += [
                    k.thread(thread_id, f"seen:{message_id}"),
                    k.thread(thread_id, "inbox"),
                    k.thread(thread_id, "sched"),
                ]
                messages.append([body, thread_id])
            events += [[e.type, t, sid, _json(e.data)] for t, sid, e in d.events]
            if d.raw is not None:
                raws.append(d.raw[0])
                bodies.append(d.raw[1])
        payload = {
            "ttl": self.dedupe_ttl,
            "raw_maxlen": self.raw_maxlen,
            "events_maxlen": self.events_maxlen,
            "at": utc_now_iso(),
            "raws": raws,
            "messages": messages,
            "events": events,
        }
        new = await self._ingest(keys=keys, args=[_json(payload), *bodies])
        # cjson turns an empty array into an empty object: both mean "no messages"
        return [bool(x) for x in new] if isinstance(new, list) else []

    async def record_raw(self, raw: tuple[str, bytes]) -> None:
        """Keep a refused delivery for replay (no messages stored)."""
        await self.redis.xadd(
            self.keys.raw,
            {"meta": raw[0], "body": raw[1]},
            maxlen=self.raw_maxlen,
            approximate=True,
        )

    async def lookup_sent(self, provider_message_ids: Sequence[str]) -> list[tuple[str, ...]]:
        """For status callbacks: ``(thread_id, inbound message id, session id)`` per id."""
        if not provider_message_ids:
            return []
        raw = await self.redis.mget([self.keys.sent(p) for p in provider_message_ids])
        return [tuple(json.loads(r)) if r else () for r in raw]

    # --- worker ----------------------------------------------------------------------

    async def ensure_group(self) -> None:
        try:
            await self.redis.xgroup_create(self.keys.ready, READY_GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def load(self, thread_id: str, token: str, lease_ms: int) -> LoadedThread | None:
        """Take (or keep) the thread's lease and read it whole. None: another worker owns it."""
        k = self.keys
        res = await self._load(
            keys=[
                k.thread(thread_id, "lease"),
                k.thread(thread_id, "state"),
                k.thread(thread_id, "history"),
                k.thread(thread_id, "inbox"),
                k.thread(thread_id, "outbox"),
            ],
            args=[token, lease_ms],
        )
        if res is None:
            return None
        flat, history, head, outbox = res
        state = _pairs(flat)
        return LoadedThread(
            state=state,
            history=[as_str(h) for h in history],
            head=as_str(head) or None,
            outbox=[as_str(o) for o in outbox],
        )

    async def renew(self, thread_id: str, token: str, lease_ms: int) -> bool:
        res = await self._renew(keys=[self.keys.thread(thread_id, "lease")], args=[token, lease_ms])
        return bool(res)

    async def commit(self, req: CommitRequest, token: str, entry_id: str) -> tuple[bool, list[str]]:
        """Commit a turn: pop the message, write state/history/events, queue the reply.

        Returns (thread released, event ids). Raises LeaseLost when fenced off.
        """
        k = self.keys
        t = req.thread_id
        payload = {
            "state": dict(req.state),
            "history": list(req.history),
            "events": [[e.type, _json(e.data)] for e in req.events],
            "reply": req.reply_text,
            "to": req.reply_to,
            "channel": req.channel,
            "session_open": req.session_open,
            "handoff_open": req.handoff_open,
            "now_ms": _now_ms(),
        }
        try:
            released, ids = await self._commit(
                keys=[
                    k.thread(t, "lease"),
                    k.thread(t, "inbox"),
                    k.thread(t, "state"),
                    k.thread(t, "history"),
                    k.thread(t, "outbox"),
                    k.thread(t, f"reply:{req.message_id}"),
                    k.events,
                    k.session_events(req.session_id) if req.session_id else "",
                    k.thread(t, "sched"),
                    k.ready,
                    k.sessions_open,
                    k.handoffs_open,
                ],
                args=[
                    token,
                    req.message_id,
                    json.dumps(payload, ensure_ascii=False),
                    self.history_cap,
                    self.events_maxlen,
                    utc_now_iso(),
                    t,
                    req.session_id,
                    entry_id,
                    READY_GROUP,
                    self.reply_ttl,
                ],
            )
        except ResponseError as exc:
            if "LEASE_LOST" in str(exc):
                raise LeaseLost(t) from None
            raise
        return bool(released), [as_str(i) for i in ids]

    async def mark_sending(
        self, thread_id: str, message_id: str, token: str
    ) -> tuple[str, dict[str, str]]:
        """Claim the right to send a reply: (status found, reply fields).

        Only a ``pending`` reply may be sent; it is ``sending`` from now on, so a worker
        that dies mid-send leaves a trace and the reply is never sent twice.
        """
        try:
            status, flat = await self._mark_sending(
                keys=[
                    self.keys.thread(thread_id, "lease"),
                    self.keys.thread(thread_id, f"reply:{message_id}"),
                ],
                args=[token],
            )
        except ResponseError as exc:
            if "LEASE_LOST" in str(exc):
                raise LeaseLost(thread_id) from None
            raise
        return as_str(status), _pairs(flat)

    async def finish_reply(
        self,
        *,
        thread_id: str,
        message_id: str,
        session_id: str,
        status: str,
        provider_ids: Sequence[str],
        events: Sequence[NewEvent],
        token: str,
        entry_id: str,
    ) -> tuple[bool, list[str]]:
        """Record a delivery outcome (sent / failed / uncertain) and release if idle."""
        k = self.keys
        t = thread_id
        released, ids = await self._finish_reply(
            keys=[
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
            args=[
                token,
                message_id,
                status,
                json.dumps(list(provider_ids)),
                json.dumps([[e.type, _json(e.data)] for e in events]),
                self.events_maxlen,
                utc_now_iso(),
                t,
                session_id,
                entry_id,
                READY_GROUP,
                self.dedupe_ttl,
            ],
        )
        return bool(released), [as_str(i) for i in ids]

    async def release_if_idle(self, thread_id: str, token: str, entry_id: str) -> bool:
        k = self.keys
        t = thread_id
        res = await self._release(
            keys=[
                k.thread(t, "inbox"),
                k.thread(t, "outbox"),
                k.thread(t, "sched"),
                k.thread(t, "lease"),
                k.ready,
            ],
            args=[READY_GROUP, entry_id, token],
        )
        return bool(res)

    # --- actions outside a turn -------------------------------------------------------

    async def act(self, thread_id: str, action: Action) -> list[str]:
        """Apply an out-of-turn action atomically. Raises ``ActionRefused`` when the
        thread's state no longer matches ``action.require`` (or, with ``idle``, when a
        worker holds the thread)."""
        k = self.keys
        t = thread_id
        reply_id = action.reply["id"] if action.reply else "none"
        payload = {
            "require": dict(action.require),
            "idle": action.idle,
            "state": dict(action.state),
            "session_open": action.session_open,
            "handoff_open": action.handoff_open,
            "events": [[e.type, _json(e.data)] for e in action.events],
            "reply": dict(action.reply) if action.reply else None,
            "now_ms": _now_ms(),
            "at": utc_now_iso(),
            "thread_id": t,
            "session_id": action.session_id,
            "events_maxlen": self.events_maxlen,
            "reply_ttl": self.reply_ttl,
        }
        try:
            res: Any = await self._act(
                keys=[
                    k.thread(t, "state"),
                    k.thread(t, "lease"),
                    k.thread(t, "outbox"),
                    k.thread(t, "sched"),
                    k.ready,
                    k.events,
                    k.session_events(action.session_id) if action.session_id else "",
                    k.sessions_open,
                    k.handoffs_open,
                    k.thread(t, f"reply:{reply_id}"),
                ],
                args=[_json(payload)],
            )
        except ResponseError as exc:
            text = str(exc)
            if text.startswith(("BUSY", "PRECONDITION")):
                raise ActionRefused(text) from None
            raise
        return [as_str(i) for i in res] if isinstance(res, list) else []

    async def thread_state(self, thread_id: str) -> dict[str, str]:
        raw = await self.redis.hgetall(self.keys.thread(thread_id, "state"))
        return {as_str(a): as_str(b) for a, b in raw.items()}

    async def history(self, thread_id: str) -> list[str]:
        return [
            as_str(h)
            for h in await self.redis.lrange(self.keys.thread(thread_id, "history"), 0, -1)
        ]

    async def due(self, key: str, older_than_s: float, limit: int = 100) -> list[tuple[str, float]]:
        """Members of an index whose score (ms) is older than ``older_than_s`` seconds."""
        cutoff = _now_ms() - int(older_than_s * 1000)
        res: Any = await self.redis.zrangebyscore(
            key, "-inf", cutoff, start=0, num=limit, withscores=True
        )
        return [(as_str(m), float(sc)) for m, sc in res]

    async def session_event_ids(self, session_id: str) -> list[str]:
        return [
            as_str(i) for i in await self.redis.lrange(self.keys.session_events(session_id), 0, -1)
        ]

    async def events_by_id(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """Envelopes for the given stream ids (those trimmed away are skipped)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for event_id in ids:
                pipe.xrange(self.keys.events, event_id, event_id)
            found: list[Any] = await pipe.execute()
        return [envelope(as_str(e[0][0]), e[0][1]) for e in found if e]

    # --- events ----------------------------------------------------------------------

    async def publish(self, thread_id: str, session_id: str, *events: NewEvent) -> list[str]:
        """Append events outside a turn (support actions, sweeps): one atomic step."""
        res: Any = await self._publish(
            keys=[self.keys.events, self.keys.session_events(session_id) if session_id else ""],
            args=[
                self.events_maxlen,
                utc_now_iso(),
                thread_id,
                session_id,
                json.dumps([[e.type, _json(e.data)] for e in events]),
            ],
        )
        return [as_str(i) for i in res]

    async def read_events(
        self, after: str = "0-0", *, count: int = 100, block_ms: int | None = None
    ) -> list[dict[str, Any]]:
        """Event envelopes after a stream id (exclusive), oldest first."""
        res: Any = await self.redis.xread({self.keys.events: after}, count=count, block=block_ms)
        out: list[dict[str, Any]] = []
        for _stream, entries in res or []:
            out.extend(envelope(as_str(eid), fields) for eid, fields in entries)
        return out

    async def queue_stats(self) -> tuple[int, int, float]:
        """(ready entries, entries delivered but unfinished, age in s of the oldest one)."""
        try:
            summary = await self.redis.xpending(self.keys.ready, READY_GROUP)
        except ResponseError:
            return 0, 0, 0.0
        length = await self.redis.xlen(self.keys.ready)
        lag = 0.0
        if summary["pending"]:
            oldest_ms = int(as_str(summary["min"]).split("-")[0])
            lag = max(0.0, datetime.now(UTC).timestamp() - oldest_ms / 1000)
        return int(length), int(summary["pending"]), lag


def envelope(event_id: str, fields: Mapping[Any, Any]) -> dict[str, Any]:
    """The JSON envelope of one event (DESIGN.md, "Events")."""
    f = {as_str(a): as_str(b) for a, b in fields.items()}
    return {
        "id": event_id,
        "type": f.get("type", ""),
        "at": f.get("at", ""),
        "thread_id": f.get("thread_id", ""),
        "session_id": f.get("session_id") or None,
        "data": json.loads(f["data"]) if f.get("data") else {},
    }


def _now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)


def _json(data: Mapping[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False)


def _event_fields(event: NewEvent, at: str, thread_id: str, session_id: str) -> dict[str, str]:
    return {
        "type": event.type,
        "at": at,
        "thread_id": thread_id,
        "session_id": session_id,
        "data": _json(event.data),
    }


def _pairs(flat: Sequence[Any]) -> dict[str, str]:
    """A flat ``HGETALL`` reply from a script (k1, v1, k2, v2, …) as a dict."""
    return {as_str(flat[i]): as_str(flat[i + 1]) for i in range(0, len(flat), 2)}


def as_str(value: Any) -> str:
    """A Redis reply value as text (bytes decoded, None as "")."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode()
    return str(value)
