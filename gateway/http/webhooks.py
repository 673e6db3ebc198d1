"""Provider webhooks: verify, parse, store durably, then acknowledge.

Thin adapters: aiohttp request → channels' parse functions → ``Store.ingest``. A 2xx is
returned only after the delivery's messages are in Redis.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from urllib.parse import parse_qsl

import structlog
from aiohttp import web
from multidict import MultiDict

from channels import (
    InboundMessage,
    MalformedPayload,
    ParsedDelivery,
    SignatureError,
    StatusUpdate,
    mask_thread_id,
    parse_meta_payload,
    parse_twilio_message,
    parse_twilio_status,
    verify_meta_signature,
    verify_meta_subscription,
    verify_twilio_signature,
)
from events import MessageStatus
from gateway.clock import utc_now_iso
from gateway.conversation.thread import StoredMessage
from gateway.errors import PayloadTooLarge, ProviderDisabled
from gateway.http.keys import COMPONENTS, METRICS, SETTINGS, STORE
from gateway.store import Ingest, Intake, StoreDown

__all__ = ["routes"]

log = structlog.get_logger("gateway.http.webhooks")
routes = web.RouteTableDef()

TWIML_EMPTY = '<?xml version="1.0" encoding="UTF-8"?><Response/>'
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


async def read_limited(request: web.Request, limit: int) -> bytes:
    """The body, refusing (413) anything over ``limit`` without reading it all."""
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

    def record(self, status: int, error: str = "") -> tuple[str, bytes]:
        """The raw-delivery stream entry: ``meta`` (JSON) and the untouched ``body`` bytes."""
        req = self.request
        headers = {k.lower(): v for k, v in req.headers.items() if k.lower() in _KEPT_HEADERS}
        meta = {
            "received_at": self.received_at,
            "provider": self.provider,
            "method": req.method,
            "path": req.path,
            "query": req.query_string,
            "headers": headers,
            "status": status,
            "error": error,
            "thread_ids": sorted(set(self.thread_ids)),
            "message_ids": self.message_ids,
            "elapsed_ms": round((time.perf_counter() - self.started) * 1000, 2),
        }
        return json.dumps(meta, ensure_ascii=False), self.body


async def _refuse(delivery: Delivery, status: int, reason: str) -> web.Response:
    """Answer an error; keep the raw delivery for replay when Redis is up."""
    app = delivery.request.app
    app[METRICS].webhooks.labels(delivery.provider, str(status)).inc()
    log.info("webhook.refused", provider=delivery.provider, status=status, reason=reason)
    if status != 503:
        with contextlib.suppress(StoreDown):
            await app[STORE].ingest.record_raw(delivery.record(status, reason))
    return web.json_response({"error": reason}, status=status)


async def _accept(delivery: Delivery, parsed: ParsedDelivery, ok: web.Response) -> web.Response:
    app = delivery.request.app
    store = app[STORE]
    messages = [
        (m.thread_id, m.provider_message_id, _inbox_json(m, delivery)) for m in parsed.messages
    ]
    delivery.thread_ids = [m.thread_id for m in parsed.messages]
    delivery.message_ids = [m.provider_message_id for m in parsed.messages]
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
    )
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


def _twilio_token(request: web.Request) -> str:
    token = request.app[COMPONENTS].twilio_token
    if not token:
        raise ProviderDisabled("Twilio webhook disabled: set TWILIO_AUTH_TOKEN to enable it")
    return token


async def _twilio(request: web.Request, *, status_callback: bool) -> web.Response:
    token = _twilio_token(request)
    delivery = Delivery("twilio", request)
    limit = request.app[SETTINGS].max_body_twilio
    try:
        delivery.body = await read_limited(request, limit)
    except PayloadTooLarge as exc:
        return await _refuse(delivery, 413, exc.message)
    params: MultiDict[str] = MultiDict(
        parse_qsl(delivery.body.decode("utf-8", "replace"), keep_blank_values=True)
    )
    try:
        verify_twilio_signature(
            token, public_url(request), params, request.headers.get("X-Twilio-Signature")
        )
    except SignatureError as exc:
        return await _refuse(delivery, 403, str(exc))
    try:
        if status_callback:
            parsed = ParsedDelivery(statuses=(parse_twilio_status(params),))
        else:
            parsed = ParsedDelivery(messages=(parse_twilio_message(params),))
    except MalformedPayload as exc:
        return await _refuse(delivery, 400, f"malformed Twilio delivery: {exc.reason}")
    ok = web.Response(text=TWIML_EMPTY, content_type="text/xml")
    return await _accept(delivery, parsed, ok)


@routes.post("/webhooks/twilio")
async def twilio_inbound(request: web.Request) -> web.Response:
    return await _twilio(request, status_callback=False)


@routes.post("/webhooks/twilio/status")
async def twilio_status(request: web.Request) -> web.Response:
    return await _twilio(request, status_callback=True)


def _meta_secret(request: web.Request) -> str:
    secret = request.app[SETTINGS].meta_app_secret
    if not secret:
        raise ProviderDisabled("Meta webhook disabled: set META_APP_SECRET to enable it")
    return secret


@routes.get("/webhooks/meta")
async def meta_verify(request: web.Request) -> web.Response:
    _meta_secret(request)
    settings = request.app[SETTINGS]
    q = request.query
    try:
        challenge = verify_meta_subscription(
            settings.meta_verify_token or "",
            q.get("hub.mode"),
            q.get("hub.verify_token"),
            q.get("hub.challenge"),
        )
    except SignatureError as exc:
        return web.json_response({"error": str(exc)}, status=403)
    return web.Response(text=challenge, content_type="text/plain")


@routes.post("/webhooks/meta")
async def meta_inbound(request: web.Request) -> web.Response:
    secret = _meta_secret(request)
    delivery = Delivery("meta", request)
    try:
        delivery.body = await read_limited(request, request.app[SETTINGS].max_body_meta)
    except PayloadTooLarge as exc:
        return await _refuse(delivery, 413, exc.message)
    try:
        verify_meta_signature(secret, delivery.body, request.headers.get("X-Hub-Signature-256"))
    except SignatureError as exc:
        return await _refuse(delivery, 403, str(exc))
    try:
        parsed = parse_meta_payload(delivery.body)
    except MalformedPayload as exc:
        return await _refuse(delivery, 400, f"malformed Meta delivery: {exc.reason}")
    return await _accept(delivery, parsed, web.json_response({"status": "ok"}))
