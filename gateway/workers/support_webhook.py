"""The optional signed support webhook (``SUPPORT_WEBHOOK_URL``).

A consumer group on the event stream forwards handoff and session events, signed
``Mel-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "t.body">`` with
``SUPPORT_WEBHOOK_SECRET``, retried with exponential backoff; every attempt is recorded
in the ``…:support_webhook:attempts`` stream. An event is acknowledged once delivered or
once its attempts are spent (the failure is recorded), so one bad endpoint can't stall
the feed forever; a crash mid-delivery means redelivery (at least once). One event at a
time per process, in stream order.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
import structlog

from gateway.clock import utc_now_iso
from gateway.store import Store, envelope
from gateway.workers.consumer import StreamConsumer

__all__ = ["FORWARDED_TYPES", "GROUP", "SupportWebhook", "sign", "type_matches"]

log = structlog.get_logger("gateway.workers.support_webhook")

GROUP = "support-webhook"
FORWARDED_TYPES = ["session.*", "support.*"]


def type_matches(event_type: str, patterns: list[str]) -> bool:
    """``session.*`` matches every session event; an empty list matches everything."""
    return not patterns or any(
        event_type == p or (p.endswith("*") and event_type.startswith(p[:-1])) for p in patterns
    )


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    t = int(time.time()) if timestamp is None else timestamp
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


class SupportWebhook(StreamConsumer):
    name = "support_webhook"

    def __init__(
        self,
        store: Store,
        url: str,
        secret: str,
        *,
        attempts: int = 5,
        backoff: float = 1.0,
        timeout: float = 10.0,
        claim_idle: float = 15.0,
        consumer: str | None = None,
    ) -> None:
        # "$": events from the moment the webhook is first configured, not the history
        group = store.group(store.keys.events, GROUP, start="$")
        # one delivery at a time, in stream order; read ahead: most events are not ours
        super().__init__(
            group, concurrency=1, prefetch=100, claim_idle=claim_idle, consumer=consumer
        )
        self.store = store
        self.url = url
        self.secret = secret
        self.attempts = attempts
        self.backoff = backoff
        self.timeout = timeout
        self._http: aiohttp.ClientSession | None = None

    def wants(self, entry_id: str, fields: Mapping[bytes, bytes]) -> bool:
        return bool(fields) and type_matches(envelope(entry_id, fields)["type"], FORWARDED_TYPES)

    async def handle(self, entry_id: str, fields: Mapping[bytes, bytes]) -> None:
        await self.deliver(envelope(entry_id, fields))
        await self.group.ack(entry_id)

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        return self._http

    async def deliver(self, env: dict[str, Any]) -> bool:
        """POST one event, retrying with backoff; True when the endpoint took it."""
        body = json.dumps(env, ensure_ascii=False).encode()
        for attempt in range(1, self.attempts + 1):
            status, error = 0, ""
            try:
                headers = {
                    "Content-Type": "application/json",
                    "Mel-Signature": sign(self.secret, body),
                    "Mel-Event-Id": env["id"],
                }
                async with self._session().post(self.url, data=body, headers=headers) as resp:
                    status = resp.status
            except (aiohttp.ClientError, TimeoutError) as exc:
                error = f"{type(exc).__name__}: {exc}"
            ok = 200 <= status < 300
            await self.store.record_webhook_attempt(
                {
                    "event_id": env["id"],
                    "type": env["type"],
                    "attempt": attempt,
                    "status": status,
                    "error": error,
                    "at": utc_now_iso(),
                }
            )
            if ok:
                return True
            log.warning("support_webhook.failed", attempt=attempt, status=status, error=error)
            if attempt < self.attempts:
                await asyncio.sleep(self.backoff * 2 ** (attempt - 1))
        return False
