"""A fake Meta Graph API (WhatsApp Cloud API messages endpoint) on loopback.

``MetaSender(graph_base_url=fake.base_url)`` talks to it exactly as to Graph::

    async with FakeGraphAPI.running() as fake:
        sender = MetaSender(fake.access_token, fake.phone_number_id,
                            graph_base_url=fake.base_url)
        await sender.send_text("+5511999990000", "oi")
        [message] = await fake.wait_for_messages(1)

Implements ``POST /{version}/{phone_number_id}/messages`` with bearer auth: text sends
(recorded in ``messages``) and read receipts (recorded in ``read_receipts``), Graph's
error JSON for auth/validation failures and for scripted ones (``fail_next``), a
per-request ``delay``, and ``deliver_status`` to POST a signed status webhook back to the
gateway, like Meta does.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
from aiohttp import web

from tests.fakes._server import RecordingServer
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
        self.read_receipts: list[dict[str, Any]] = []  # accepted "status": "read" bodies
        self._failures: list[_Failure] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/{version}/{phone_number_id}/messages", self._messages)

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

    # ------------------------------------------------------------------ handler

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
        async with self._changed:
            self.requests.append(record)
            if status == 200 and kind == "message":
                self.messages.append({**body, "id": answer["messages"][0]["id"]})
            elif status == 200 and kind == "read":
                self.read_receipts.append(dict(body))
            self._changed.notify_all()
        return web.json_response(answer, status=status)

    def _answer(
        self, request: web.Request, body: Any
    ) -> tuple[int, dict[str, Any], Literal["message", "read"] | None]:
        if request.headers.get("Authorization") != f"Bearer {self.access_token}":
            return 401, graph_error(190, _DEFAULT_MESSAGES[190][0]), None
        if request.match_info["phone_number_id"] != self.phone_number_id:
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
        to = body.get("to")
        if not to:
            return 400, graph_error(100, "The parameter to is required."), "message"
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
        answer = {
            "messaging_product": "whatsapp",
            "contacts": [{"input": to, "wa_id": to}],
            "messages": [{"id": new_wamid(), "message_status": "accepted"}],
        }
        return 200, answer, "message"

    def _counts(self) -> str:
        return (
            f"{len(self.messages)} messages / {len(self.read_receipts)} read receipts / "
            f"{len(self.requests)} requests"
        )
