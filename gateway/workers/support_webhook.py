"""The optional signed support webhook (``SUPPORT_WEBHOOK_URL``).

A consumer group on the event stream forwards handoff and session events, signed
``Mel-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "t.body">`` with
``SUPPORT_WEBHOOK_SECRET``, retried with exponential backoff; every attempt is recorded
in the ``…:support_webhook:attempts`` stream. An event is acknowledged once delivered or
once its attempts are spent (the failure is recorded), so one bad endpoint can't stall
the feed forever; a crash mid-delivery means redelivery (at least once).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import time
from typing import Any

import aiohttp
import structlog
from redis.exceptions import ResponseError

from gateway.http.support import type_matches
from gateway.store.threads import Store, StoreDown, envelope, utc_now_iso

__all__ = ["FORWARDED_TYPES", "SupportWebhook", "sign"]

log = structlog.get_logger("gateway.workers.support_webhook")

GROUP = "support-webhook"
FORWARDED_TYPES = ["session.*", "support.*"]


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    t = int(time.time()) if timestamp is None else timestamp
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


class SupportWebhook:
    def __init__(
        self,
        store: Store,
        url: str,
        secret: str,
        *,
        attempts: int = 5,
        backoff: float = 1.0,
        timeout: float = 10.0,
        consumer: str = "forwarder",
    ) -> None:
        self.store = store
        self.url = url
        self.secret = secret
        self.attempts = attempts
        self.backoff = backoff
        self.timeout = timeout
        self.consumer = consumer
        self.attempts_key = f"{store.keys.prefix}:support_webhook:attempts"

    async def run(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout)) as s:
            while True:
                try:
                    await self._ensure_group()
                    await self._pump(s)
                except StoreDown as exc:
                    log.warning("support_webhook.redis_unavailable", error=str(exc))
                    await asyncio.sleep(1)

    async def _ensure_group(self) -> None:
        with contextlib.suppress(ResponseError):  # BUSYGROUP: it exists
            await self.store.redis.xgroup_create(
                self.store.keys.events, GROUP, id="$", mkstream=True
            )

    async def _pump(self, session: aiohttp.ClientSession) -> None:
        keys = self.store.keys
        # our own unfinished deliveries first (after a restart), then new events
        for start in ("0", ">"):
            res: Any = await self.store.redis.xreadgroup(
                GROUP, self.consumer, {keys.events: start}, count=50, block=1000
            )
            for _stream, entries in res or []:
                for entry_id, fields in entries:
                    env = envelope(entry_id.decode(), fields)
                    if type_matches(env["type"], FORWARDED_TYPES):
                        await self.deliver(session, env)
                    await self.store.redis.xack(keys.events, GROUP, entry_id)

    async def deliver(self, session: aiohttp.ClientSession, env: dict[str, Any]) -> bool:
        body = json.dumps(env, ensure_ascii=False).encode()
        for attempt in range(1, self.attempts + 1):
            status, error = 0, ""
            try:
                headers = {
                    "Content-Type": "application/json",
                    "Mel-Signature": sign(self.secret, body),
                    "Mel-Event-Id": env["id"],
                }
                async with session.post(self.url, data=body, headers=headers) as resp:
                    status = resp.status
            except (aiohttp.ClientError, TimeoutError) as exc:
                error = f"{type(exc).__name__}: {exc}"
            ok = 200 <= status < 300
            await self.store.redis.xadd(
                self.attempts_key,
                {
                    "event_id": env["id"],
                    "type": env["type"],
                    "attempt": attempt,
                    "status": status,
                    "error": error,
                    "at": utc_now_iso(),
                },
                maxlen=100_000,
                approximate=True,
            )
            if ok:
                return True
            log.warning("support_webhook.failed", attempt=attempt, status=status, error=error)
            if attempt < self.attempts:
                await asyncio.sleep(self.backoff * 2 ** (attempt - 1))
        return False
