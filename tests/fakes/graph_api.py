"""A fake Meta Graph API (WhatsApp Cloud API messages endpoint) on loopback.

``MetaSender(graph_base_url=fake.base_url)`` talks to it exactly as to Graph::

    async with FakeGraphAPI.running() as fake:
        sender = MetaSender(fake.access_token, fake.phone_number_id,
                            graph_base_url=fake.base_url)
        await sender.send_text("+5511999990000", "oi")
        [message] = await fake.wait_for_messages(1)

Implements ``POST /{version}/{phone_number_id}/messages`` with bearer auth: text sends
(recorded in ``messages``) and read receipts (recorded in ``read_receipts``), each with
the ``phone_number_id`` it was posted to (``add_phone_number_id`` registers more numbers
of the app), to a phone number (``to``) or a business-scoped user id (``recipient``);
Graph's error JSON for auth/validation failures and for scripted ones (``fail_next``), a
per-request ``delay``, and ``deliver_status`` to POST a signed status webhook back to the
gateway, like Meta does.

Media, as the Cloud API serves it: ``add_media(data, mime_type)`` returns a ``FakeMedia``
whose ``media_id`` goes in a webhook. ``GET /{version}/{media_id}`` (bearer required)
answers ``{"url", "mime_type", "sha256", "file_size", "id", ...}`` with a ``url`` on this
server (``/whatsapp_business/attachments/?mid=…``, like ``lookaside.fbsbx.com``), whose
download requires the bearer too. Every request is recorded in ``requests``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import secrets
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
from aiohttp import web

from tests.fakes._server import RecordingServer
from tests.fakes.media import FakeMedia, stream_media
from tests.fakes.payloads import (
    BUSINESS_NUMBER,
    META_PHONE_NUMBER_ID,
    meta_body,
    meta_payload,
    meta_status,
    new_wamid,
    sign_meta,
)

__all__ = ["FAKE_META_ACCESS_TOKEN", "FakeGraphAPI", "graph_error"]

FAKE_META_ACCESS_TOKEN = "fake-meta-access-token"
_BODY_LIMIT = 4096
_BSUID = re.compile(r"[A-Z]{2}\.(?:ENT\.)?[0-9A-Za-z]{1,128}")

_DEFAULT_MESSAGES = {
    131047: (
        "Re-engagement message",
        "Message failed to send because more than 24 hours have passed since the customer "
        "last replied to this number.",
    ),
    130429: ("Rate limit hit", "Cloud API message throughput has been reached."),
    131056: ("(Business Account, Consumer Account) pair rate limit hit", None),
    131000: ("Something went wrong", "Message failed to send because of an unknown error."),
    190: ("Invalid OAuth access token - Cannot parse access token", None),
}


def graph_error(
    code: int,
    message: str,
    *,
    error_type: str = "OAuthException",
    error_subcode: int | None = None,
    details: str | None = None,
) -> dict[str, Any]:
    """Graph's error body: ``{"error": {"message", "type", "code", ..., "fbtrace_id"}}``."""
    error: dict[str, Any] = {
        "message": f"(#{code}) {message}" if code != 190 else message,
        "type": error_type,
        "code": code,
    }
    if details is not None:
        error["error_data"] = {"messaging_product": "whatsapp", "details": details}
    if error_subcode is not None:
        error["error_subcode"] = error_subcode
    error["fbtrace_id"] = "A" + secrets.token_urlsafe(16)
    return {"error": error}


@dataclass
class _Failure:
    status: int
    body: dict[str, Any]
    kind: Literal["message", "read"] | None
    times: int
    after: int = 0  # requests to let through first


class FakeGraphAPI(RecordingServer):
    """The WhatsApp ``messages`` edge of the Graph API, recording what it receives."""

    label = "fake Graph"

    def __init__(
        self,
        access_token: str = FAKE_META_ACCESS_TOKEN,
        phone_number_id: str = META_PHONE_NUMBER_ID,
        *,
        delay: float = 0.0,
    ) -> None:
        super().__init__()
        self.access_token = access_token
        self.phone_number_id = phone_number_id
        self.delay = delay  # seconds to wait before answering each request
        self.phone_number_ids: set[str] = {phone_number_id}  # the app's business numbers
        self.read_receipts: list[dict[str, Any]] = []  # accepted "status": "read" bodies
        self.media: dict[str, FakeMedia] = {}  # by media id
        self._failures: list[_Failure] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/{version}/{phone_number_id}/messages", self._messages)
        app.router.add_get("/whatsapp_business/attachments/", self._download)
        app.router.add_get("/{version}/{media_id}", self._media_info)

    def add_phone_number_id(self, phone_number_id: str) -> str:
        """Another business number of the same app that replies may be sent from."""
        self.phone_number_ids.add(phone_number_id)
        return phone_number_id

    def add_media(
        self,
        data: bytes,
        mime_type: str,
        *,
        filename: str | None = None,
        chunked: bool = False,
        download_url: str | None = None,
        declared_size: int | None = None,
        redirect_to: str | None = None,
    ) -> FakeMedia:
        """Serve ``data`` as a received media; put ``FakeMedia.media_id`` in the webhook.
        ``download_url``: the ``url`` Graph answers instead of this server's;
        ``declared_size``: the ``file_size`` it announces instead of the real one;
        ``redirect_to``: the download answers a 302 there instead of the bytes."""
        media_id = str(secrets.randbelow(9 * 10**15) + 10**15)
        media = FakeMedia(
            data,
            mime_type,
            filename=filename,
            chunked=chunked,
            download_url=download_url,
            declared_size=declared_size,
            redirect_to=redirect_to,
            media_id=media_id,
        )
        media.url = download_url or (
            f"{self.base_url}/whatsapp_business/attachments/?mid={media_id}"
            f"&ext={secrets.randbelow(10**10)}&hash={secrets.token_urlsafe(18)}"
        )
        self.media[media_id] = media
        return media

    # ------------------------------------------------------------------ scripting

    def fail_next(
        self,
        status: int = 400,
        code: int = 131047,
        message: str | None = None,
        *,
        error_type: str = "OAuthException",
        error_subcode: int | None = None,
        details: str | None = None,
        kind: Literal["message", "read"] | None = None,
        times: int = 1,
        after: int = 0,
    ) -> None:
        """Answer ``times`` authenticated requests (of ``kind``, default any) with this
        Graph error, after letting ``after`` of them through."""
        default_message, default_details = _DEFAULT_MESSAGES.get(code, (f"Error {code}", None))
        body = graph_error(
            code,
            message or default_message,
            error_type=error_type,
            error_subcode=error_subcode,
            details=details if details is not None else default_details,
        )
        self._failures.append(_Failure(status, body, kind, times, after))

    async def wait_for_read_receipts(
        self,
        n: int,
        timeout: float = 5.0,
    ) -> list[dict[str, Any]]:
        """Wait until at least ``n`` read receipts were accepted."""
        await self._wait(lambda: len(self.read_receipts) >= n, timeout, f"{n} read receipts")
        return list(self.read_receipts)

    async def deliver_status(
        self,
        url: str,
        app_secret: str,
        wamid: str,
        status: str = "delivered",
        *,
        recipient: str | None = None,
        display_phone_number: str = BUSINESS_NUMBER,
        error_code: int | None = None,
        error_title: str | None = None,
    ) -> int:
        """POST a signed status webhook for ``wamid`` to ``url`` (the gateway's
        ``/webhooks/meta``), as Meta does; the HTTP status the receiver answered."""
        sent = next((m for m in self.messages if m["id"] == wamid), None)
        to = recipient or (sent or {}).get("to") or "5511999990000"
        payload = meta_payload(
            statuses=[
                meta_status(
                    wamid, status, recipient=to, error_code=error_code, error_title=error_title
                )
            ],
            display_phone_number=display_phone_number,
            phone_number_id=self.phone_number_id,
        )
        body = meta_body(payload)
        headers = {
            "Content-Type": "application/json",
            "X-Hub-Signature-256": sign_meta(app_secret, body),
        }
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=body, headers=headers) as response,
        ):
            return response.status

    # ------------------------------------------------------------------ handlers

    async def _media_info(self, request: web.Request) -> web.Response:
        """``GET /{version}/{media_id}``: the media's short-lived ``url`` and metadata."""
        media_id = request.match_info["media_id"]
        media = self.media.get(media_id)
        status, answer = self._authorize(request)
        if status == 200 and media is None:
            status, answer = (
                400,
                graph_error(
                    100,
                    f"Unsupported get request. Object with ID '{media_id}' does not exist, cannot "
                    "be loaded due to missing permissions, or does not support this operation.",
                    error_type="GraphMethodException",
                    error_subcode=33,
                ),
            )
        elif status == 200 and media is not None:
            answer = {
                "messaging_product": "whatsapp",
                "url": media.url,
                "mime_type": media.content_type,
                "sha256": hashlib.sha256(media.data).hexdigest(),
                "file_size": media.declared_size
                if media.declared_size is not None
                else len(media.data),
                "id": media_id,
            }
        await self._record(request, status)
        return web.json_response(answer, status=status)

    async def _download(self, request: web.Request) -> web.StreamResponse:
        """The media ``url``: bearer required, then the bytes with their type."""
        media = self.media.get(request.query.get("mid", ""))
        status, answer = self._authorize(request)
        if status == 200 and media is None:
            status, answer = 404, graph_error(100, "Media not found")
        if status == 200 and media is not None and media.redirect_to:
            status = 302
        await self._record(request, status)
        if status == 302 and media is not None and media.redirect_to:
            return web.Response(status=302, headers={"Location": media.redirect_to})
        if status != 200 or media is None:
            return web.json_response(answer, status=status)
        return await stream_media(request, media)

    def _authorize(self, request: web.Request) -> tuple[int, dict[str, Any]]:
        if request.headers.get("Authorization") != f"Bearer {self.access_token}":
            return 401, graph_error(190, _DEFAULT_MESSAGES[190][0])
        return 200, {}

    async def _record(self, request: web.Request, status: int) -> None:
        record = {
            "method": request.method,
            "path": request.path_qs,
            "authorization": request.headers.get("Authorization"),
            "status": status,
        }
        async with self._changed:
            self.requests.append(record)
            self._changed.notify_all()

    async def _messages(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body: Any = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            body = None
        record: dict[str, Any] = {
            "method": request.method,
            "path": request.path,
            "json": body,
            "authorization": request.headers.get("Authorization"),
        }
        if self.delay:
            await asyncio.sleep(self.delay)
        status, answer, kind = self._answer(request, body)
        record["status"] = status
        sender = {"phone_number_id": request.match_info["phone_number_id"]}
        async with self._changed:
            self.requests.append(record)
            if status == 200 and kind == "message":
                self.messages.append({**body, "id": answer["messages"][0]["id"], **sender})
            elif status == 200 and kind == "read":
                self.read_receipts.append({**body, **sender})
            self._changed.notify_all()
        return web.json_response(answer, status=status)

    def _answer(
        self, request: web.Request, body: Any
    ) -> tuple[int, dict[str, Any], Literal["message", "read"] | None]:
        if request.headers.get("Authorization") != f"Bearer {self.access_token}":
            return 401, graph_error(190, _DEFAULT_MESSAGES[190][0]), None
        if request.match_info["phone_number_id"] not in self.phone_number_ids:
            object_id = request.match_info["phone_number_id"]
            return (
                400,
                graph_error(
                    100,
                    f"Unsupported post request. Object with ID '{object_id}' does not exist, "
                    "cannot be loaded due to missing permissions, or does not support this "
                    "operation.",
                    error_type="GraphMethodException",
                    error_subcode=33,
                ),
                None,
            )
        if not isinstance(body, dict):
            return 400, graph_error(100, "Invalid parameter"), None
        kind: Literal["message", "read"] = "read" if body.get("status") == "read" else "message"
        failure = next((f for f in self._failures if f.kind in (None, kind)), None)
        if failure is not None and failure.after > 0:
            failure.after -= 1
        elif failure is not None:
            failure.times -= 1
            if failure.times <= 0:
                self._failures.remove(failure)
            return failure.status, failure.body, kind
        if body.get("messaging_product") != "whatsapp":
            return 400, graph_error(100, "The parameter messaging_product is required."), kind
        if kind == "read":
            if not body.get("message_id"):
                return 400, graph_error(100, "The parameter message_id is required."), kind
            return 200, {"success": True}, kind
        return self._send(body)

    def _send(
        self, body: dict[str, Any]
    ) -> tuple[int, dict[str, Any], Literal["message", "read"] | None]:
        to, recipient = body.get("to"), body.get("recipient")
        if not to and not recipient:
            return 400, graph_error(100, "The parameter to is required."), "message"
        if not to and not (isinstance(recipient, str) and _BSUID.fullmatch(recipient)):
            return (
                400,
                graph_error(100, f"Invalid parameter: recipient {recipient!r} is not a BSUID"),
                "message",
            )
        if body.get("type", "text") != "text":
            return 400, graph_error(100, "Only text messages are faked."), "message"
        text = body.get("text")
        text_body = text.get("body") if isinstance(text, dict) else None
        if not isinstance(text_body, str) or not text_body:
            return 400, graph_error(100, "The parameter text['body'] is required."), "message"
        if len(text_body) > _BODY_LIMIT:
            return (
                400,
                graph_error(100, "Param text['body'] must be at most 4096 characters long."),
                "message",
            )
        # ``to`` wins when both are given; a BSUID send answers ``user_id``, not ``wa_id``
        contact = {"input": to, "wa_id": to} if to else {"input": recipient, "user_id": recipient}
        answer = {
            "messaging_product": "whatsapp",
            "contacts": [contact],
            "messages": [{"id": new_wamid(), "message_status": "accepted"}],
        }
        return 200, answer, "message"

    def _counts(self) -> str:
        return (
            f"{len(self.messages)} messages / {len(self.read_receipts)} read receipts / "
            f"{len(self.requests)} requests"
        )
