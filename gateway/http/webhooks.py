"""Provider webhooks: one generic handler — verify, parse, store durably, acknowledge —
and the raw-delivery recorder.

Each endpoint has a ``channels.WebhookAdapter`` (built in the composition root); this
module turns an aiohttp request into the adapter's plain ``WebhookRequest`` and back. A
2xx is returned only after the delivery's messages are in Redis. Every delivery is
recorded for replay: accepted ones whole in ``P:raw``; refused ones (bad signature, too
large, malformed, a provider not configured) as metadata and the first
``REFUSED_BODY_BYTES`` of the body, at most ``MEL_RAW_REFUSED_COUNT`` of them, so nobody
can fill Redis without a signature.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import structlog
from aiohttp import web

from channels import (
    ChannelError,
    InboundMessage,
    ParsedDelivery,
    StatusUpdate,
    SubscriptionHandshake,
    WebhookAdapter,
    WebhookRequest,
    WebhookResponse,
    mask_thread_id,
)
from events import MessageStatus
from gateway.clock import utc_now_iso
from gateway.conversation.thread import StoredMessage
from gateway.errors import GatewayError, PayloadTooLarge, ProviderDisabled, RequestTimeout
from gateway.http.errors import status_for
from gateway.http.keys import COMPONENTS, METRICS, SETTINGS, STORE
from gateway.store import Ingest, Intake, StoreDown

__all__ = ["ENDPOINTS", "REFUSED_BODY_BYTES", "read_limited", "routes"]

log = structlog.get_logger("gateway.http.webhooks")

REFUSED_BODY_BYTES = 1024
"""How much of a refused delivery's body is kept (enough to see what it was)."""

ENDPOINTS: Mapping[str, tuple[str, str]] = {
    "/webhooks/twilio": ("twilio", "Twilio webhook disabled: set TWILIO_AUTH_TOKEN to enable it"),
    "/webhooks/twilio/status": (
        "twilio_status",
        "Twilio webhook disabled: set TWILIO_AUTH_TOKEN to enable it",
    ),
    "/webhooks/meta": ("meta", "Meta webhook disabled: set META_APP_SECRET to enable it"),
}
"""Path → (adapter name in ``Components.webhooks``, what to say when it is not configured)."""

_KEPT_HEADERS = (
    "content-type",
    "user-agent",
    "x-twilio-signature",
    "x-hub-signature-256",
    "i-twilio-idempotency-token",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
)


def _text(value: str) -> str:
    """Header text as it can be stored: bytes that were not UTF-8 become U+FFFD."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


async def read_limited(request: web.Request, limit: int, timeout: float | None = None) -> bytes:
    """The body, refusing (413) anything over ``limit`` without reading it all, and (408)
    one that takes longer than ``timeout`` seconds to arrive."""
    try:
        async with asyncio.timeout(timeout):
            return await _read_limited(request, limit)
    except TimeoutError:
        raise RequestTimeout(f"the body did not arrive within {timeout:g}s") from None


async def _read_limited(request: web.Request, limit: int) -> bytes:
    if request.content_length is not None:
        if request.content_length > limit:
            raise PayloadTooLarge(f"body of {request.content_length} bytes exceeds {limit}")
        return await request.read()
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"body exceeds {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def public_url(request: web.Request) -> str:
    """The URL the provider called: PUBLIC_BASE_URL + path and query when behind a proxy."""
    base = request.app[SETTINGS].public_base_url
    if base:
        return base + request.path_qs
    return str(request.url)


class Delivery:
    """What the raw-delivery record keeps; filled in as the request is handled."""

    def __init__(self, provider: str, request: web.Request) -> None:
        self.provider = provider
        self.request = request
        self.received_at = utc_now_iso()
        self.started = time.perf_counter()
        self.body = b""
        self.thread_ids: list[str] = []
        self.message_ids: list[str] = []
        self.rejected: list[dict[str, Any]] = []

    def meta(self, status: int, error: str = "") -> dict[str, Any]:
        req = self.request
        headers = {
            k.lower(): _text(v) for k, v in req.headers.items() if k.lower() in _KEPT_HEADERS
        }
        meta: dict[str, Any] = {
            "received_at": self.received_at,
            "provider": self.provider,
            "method": req.method,
            "path": req.path,
            "query": _text(req.query_string),
            "headers": headers,
            "status": status,
            "error": error,
            "thread_ids": sorted(set(self.thread_ids)),
            "message_ids": self.message_ids,
            "elapsed_ms": round((time.perf_counter() - self.started) * 1000, 2),
        }
        if self.rejected:
            meta["rejected"] = self.rejected
        return meta

    def record(self, status: int, error: str = "") -> tuple[str, bytes]:
        """The raw-delivery stream entry: ``meta`` (JSON) and the untouched ``body`` bytes."""
        return json.dumps(self.meta(status, error), ensure_ascii=False), self.body

    def refused_record(self, status: int, error: str) -> tuple[str, bytes]:
        """A refused delivery's entry: its metadata and the start of its body only."""
        meta = self.meta(status, error)
        meta["body_bytes"] = len(self.body)
        meta["body_truncated"] = len(self.body) > REFUSED_BODY_BYTES
        return json.dumps(meta, ensure_ascii=False), self.body[:REFUSED_BODY_BYTES]

    def webhook_request(self) -> WebhookRequest:
        req = self.request
        return WebhookRequest(
            url=public_url(req),
            headers={k.lower(): v for k, v in req.headers.items()},
            body=self.body,
            query=dict(req.query),
            method=req.method,
        )


def _adapter(request: web.Request) -> WebhookAdapter:
    name, hint = ENDPOINTS[request.path]
    adapter = request.app[COMPONENTS].webhooks.get(name)
    if adapter is None:
        raise ProviderDisabled(hint)
    return adapter


def _response(answer: WebhookResponse) -> web.Response:
    return web.Response(body=answer.body, status=answer.status, content_type=answer.content_type)


async def _refuse(delivery: Delivery, status: int, reason: str) -> web.Response:
    """Answer an error; keep the refused delivery (bounded) when Redis is up."""
    app = delivery.request.app
    app[METRICS].webhooks.labels(delivery.provider, str(status)).inc()
    log.info("webhook.refused", provider=delivery.provider, status=status, reason=reason)
    if status != 503:
        with contextlib.suppress(StoreDown):
            await app[STORE].ingest.record_refused(delivery.refused_record(status, reason))
    return web.json_response({"error": reason}, status=status)


async def handle(request: web.Request) -> web.StreamResponse:
    """POST: verify, parse, store, acknowledge (the same for every provider). During a
    burst of deliveries, turns of this process wait to start: acknowledging comes first."""
    gate = request.app[COMPONENTS].admission
    if gate is None:
        return await _handle(request)
    with gate.acknowledging_one():
        return await _handle(request)


async def _handle(request: web.Request) -> web.StreamResponse:
    adapter = _adapter(request)
    delivery = Delivery(adapter.provider, request)
    settings = request.app[SETTINGS]
    limit = settings.max_body_for(adapter.provider)
    try:
        delivery.body = await read_limited(request, limit, settings.mel_http_body_timeout_seconds)
        webhook_request = delivery.webhook_request()
        adapter.verify(webhook_request)
        parsed = adapter.parse(webhook_request)
    except (ChannelError, GatewayError) as exc:
        status = _status_of(exc)
        return await _refuse(delivery, status, _reason(adapter.provider, exc, status))
    return await _accept(delivery, parsed, _response(adapter.ack()))


async def handshake(request: web.Request) -> web.StreamResponse:
    """GET: the provider's subscription handshake (Meta)."""
    adapter = _adapter(request)
    if not isinstance(adapter, SubscriptionHandshake):
        raise web.HTTPMethodNotAllowed("GET", ["POST"])
    delivery = Delivery(adapter.provider, request)
    return _response(adapter.handshake(delivery.webhook_request()))


def _status_of(exc: ChannelError | GatewayError) -> int:
    return status_for(exc) or 400


def _reason(provider: str, exc: ChannelError | GatewayError, status: int) -> str:
    message = str(getattr(exc, "reason", "") or getattr(exc, "message", "") or exc)
    if status == 400:
        label = {"twilio": "Twilio", "meta": "Meta"}.get(provider, provider)
        return f"malformed {label} delivery: {message}"
    return message


async def _accept(
    delivery: Delivery, parsed: ParsedDelivery, ok: web.Response
) -> web.StreamResponse:
    app = delivery.request.app
    store = app[STORE]
    messages = [
        (m.thread_id, m.provider_message_id, _inbox_json(m, delivery)) for m in parsed.messages
    ]
    delivery.thread_ids = [m.thread_id for m in parsed.messages]
    delivery.message_ids = [m.provider_message_id for m in parsed.messages]
    delivery.rejected = [
        {"path": r.path, "reason": r.reason, "message_id": r.provider_message_id}
        for r in parsed.rejected
    ]
    if len(parsed.messages) == 1:
        structlog.contextvars.bind_contextvars(
            thread_id=mask_thread_id(delivery.thread_ids[0]), message_id=delivery.message_ids[0]
        )
    status_events = await _status_events(store.ingest, parsed.statuses)
    new = await store.ingest.store(Intake(messages, delivery.record(ok.status), status_events))
    dupes = [m for m, is_new in zip(delivery.message_ids, new, strict=True) if not is_new]
    app[METRICS].webhooks.labels(delivery.provider, str(ok.status)).inc()
    log.info(
        "webhook.accepted",
        provider=delivery.provider,
        messages=len(messages),
        duplicates=len(dupes),
        statuses=len(parsed.statuses),
        rejected=len(delivery.rejected),
    )
    for item in delivery.rejected:
        log.warning("webhook.item_rejected", provider=delivery.provider, **item)
    return ok


async def _status_events(
    ingest: Ingest, statuses: Sequence[StatusUpdate]
) -> list[tuple[str, str, MessageStatus]]:
    if not statuses:
        return []
    found = await ingest.lookup_sent([s.provider_message_id for s in statuses])
    out = []
    for status, where in zip(statuses, found, strict=True):
        thread_id, in_reply_to, session_id = where if where else ("", "", "")
        event = MessageStatus(
            provider_message_id=status.provider_message_id,
            status=status.status,
            in_reply_to=in_reply_to or None,
            error_code=status.error_code,
            error_message=status.error_message,
            provider_timestamp=status.timestamp.isoformat(),
        )
        out.append((thread_id, session_id, event))
    return out


def _inbox_json(msg: InboundMessage, delivery: Delivery) -> str:
    return StoredMessage(message=msg, received_at=delivery.received_at).model_dump_json()


routes = [web.post(path, handle) for path in ENDPOINTS] + [web.get("/webhooks/meta", handshake)]
