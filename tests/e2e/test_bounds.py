"""Nothing grows without a bound: after a busy stretch of traffic, every Redis key either
expires or is one of the structures whose bound docs/operations.md documents."""

from __future__ import annotations

import json
import re
from typing import Any

import redis.asyncio as aioredis

from gateway.workers.sweeper import SessionSweeper
from tests.e2e.conftest import Gateway
from tests.fakes.llm import FakeLLM, error
from tests.fakes.twilio_api import FakeTwilioAPI

SUPPORT = "support-token"

# key pattern → what bounds it (the same list as docs/operations.md, "What grows")
BOUNDED: dict[str, str] = {
    r"mel:raw": "stream: MEL_RAW_RETENTION_COUNT entries, MEL_RAW_RETENTION_DAYS days",
    r"mel:raw:refused": "list: MEL_RAW_REFUSED_COUNT ids",
    r"mel:events": "stream: MEL_EVENTS_MAXLEN entries",
    r"mel:ready": "stream: trimmed past the oldest pending entry",
    r"mel:outbox": "stream: 10,000 entries (the local outbox channel)",
    r"mel:support_webhook:attempts": "stream: 100,000 entries",
    r"mel:(sessions:open|handoffs:open|handoffs:waiting|parked)": "zset: one member per "
    "thread with an open session / handoff / queued request / parked message, removed "
    "when it closes",
    r"mel:t:\{[^}]+\}:sched": "string: set while the thread has work, deleted with it",
    r"mel:support:window": "string: open | closed",
    r"mel:psychologist:stats": "hash: two counters",
    r"mel:console:agents": "hash: one entry per support agent, added by hand (CLI)",
    r"mel:ledger:\{[^}]+\}:.*": "the couple's ledger: their data, kept",
    r"mel:household-of:.*": "the couple's ledger: their data, kept",
}


def bounded(key: str) -> bool:
    return any(re.fullmatch(pattern, key) for pattern in BOUNDED)


async def test_every_key_expires_or_has_a_documented_bound(
    start_gateway: Any,
    fake_llm: FakeLLM,
    fake_twilio: FakeTwilioAPI,
    redis: aioredis.Redis,
) -> None:
    gw: Gateway = await start_gateway(
        support_token=SUPPORT, session_idle_timeout=60, llm_outage_retry_seconds=60
    )
    headers = {"Authorization": f"Bearer {SUPPORT}"}
    users = [f"+551190000{n:04d}" for n in range(4)]
    for n, user in enumerate(users):  # turns, replies, status callbacks
        await gw.twilio(f"quanto gastei em junho? {n}", user=user)
    await gw.twilio("quero falar com um atendente", user=users[0])  # a handoff
    await gw.idle()
    thread = f"twilio:+14155238886:{users[0]}"
    async with gw.session.post(
        gw.url(f"/support/threads/{thread}/messages"), json={"text": "Oi!"}, headers=headers
    ) as resp:
        assert resp.status == 202
    await gw.twilio("forjado", user=users[1], signature="bad")  # refused, kept bounded
    fake_llm.script(error(503))  # an outage: the next message is parked
    await gw.twilio("e o mercado?", user=users[2])
    await gw.wait_events("message.parked", 1)
    sweeper = SessionSweeper(gw.store, idle_timeout=0.001, handoff_timeout=3600,
                             handoff_expired_message="x")  # fmt: skip
    await sweeper.sweep()  # idle sessions close: closed-session state is left behind
    await gw.idle(timeout=20)

    unbounded: dict[str, str] = {}
    async for raw in redis.scan_iter("*"):
        key = raw.decode()
        ttl = await redis.ttl(key)
        if ttl == -1 and not bounded(key):
            unbounded[key] = (await redis.type(key)).decode()
    assert unbounded == {}, json.dumps(unbounded, indent=1)
    # and the bounds are what they say: the stream caps are set
    assert gw.store.events.maxlen == gw.settings.mel_events_maxlen
