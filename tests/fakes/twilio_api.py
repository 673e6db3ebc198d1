"""A fake Twilio REST API on loopback that speaks the real wire format.

The real twilio SDK (``Client`` + ``AsyncTwilioHttpClient``) talks to it once
``client.api.base_url`` (``TwilioSender(api_base_url=fake.base_url)``) points here::

    async with FakeTwilioAPI.running() as fake:
        sender = TwilioSender(fake.account_sid, fake.auth_token, "+14155238886",
                              api_base_url=fake.base_url)
        await sender.send_text("+5511999990000", "oi")
        [message] = await fake.wait_for_messages(1)

Implements ``POST /2010-04-01/Accounts/{AccountSid}/Messages.json`` with HTTP Basic
auth, Twilio's validation errors for the fields we use (a ``From`` that is not a WhatsApp
number, a ``MessagingServiceSid`` not registered with ``add_messaging_service``),
scripted failures (``fail_next``), a per-request ``delay``, and ``deliver_status`` to call
a message's ``StatusCallback`` back with a signed status webhook, like Twilio does.

Media, as Twilio serves it: ``add_media(data, content_type)`` returns a ``FakeMedia``
whose ``url`` is a ``MediaUrl`` for a delivery. That URL requires HTTP Basic auth (401
without) and answers ``307`` to a CDN path on this server (no auth there, like
``mms.twiliocdn.com``) that streams the bytes with their content type. Every request is
recorded in ``requests``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
import secrets
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import aiohttp
from aiohttp import web

from tests.fakes._server import RecordingServer
from tests.fakes.media import FakeMedia, stream_media
from tests.fakes.payloads import TWILIO_ACCOUNT_SID, sign_twilio, twilio_status_params

__all__ = ["FAKE_TWILIO_AUTH_TOKEN", "FakeTwilioAPI", "twilio_error"]

FAKE_TWILIO_AUTH_TOKEN = "fake-twilio-auth-token"
_BODY_LIMIT = 1600
_WHATSAPP_FROM = re.compile(r"whatsapp:\+[0-9]{8,15}")


def twilio_error(status: int, code: int, message: str) -> dict[str, Any]:
    """Twilio's REST error body."""
    return {
        "code": code,
        "message": message,
        "more_info": f"https://www.twilio.com/docs/errors/{code}",
        "status": status,
    }


def _basic_auth(header: str) -> tuple[str, str] | None:
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        login, sep, password = base64.b64decode(encoded, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (login, password) if sep else None


@dataclass
class _Failure:
    status: int
    code: int
    message: str
    times: int
    after: int = 0  # requests to let through first


class FakeTwilioAPI(RecordingServer):
    """The Messages resource of Twilio's REST API, recording what it receives."""

    label = "fake Twilio"

    def __init__(
        self,
        account_sid: str = TWILIO_ACCOUNT_SID,
        auth_token: str = FAKE_TWILIO_AUTH_TOKEN,
        *,
        delay: float = 0.0,
    ) -> None:
        super().__init__()
        self.account_sid = account_sid
        self.auth_token = auth_token
        self.delay = delay  # seconds to wait before answering each request
        self.arrivals: list[float] = []  # time.perf_counter() of each accepted message
        self.messaging_services: set[str] = set()  # MessagingServiceSid values accepted
        self.media: dict[str, FakeMedia] = {}  # by media sid
        self._failures: deque[_Failure] = deque()

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/2010-04-01/Accounts/{account_sid}/Messages.json", self._create)
        app.router.add_get(
            "/2010-04-01/Accounts/{account_sid}/Messages/{message_sid}/Media/{media_sid}",
            self._media_url,
        )
        app.router.add_get("/twiliocdn/{account_sid}/{media_sid}", self._cdn)

    # ------------------------------------------------------------------ scripting

    def fail_next(
        self,
        status: int = 400,
        code: int = 63016,
        message: str | None = None,
        *,
        times: int = 1,
        after: int = 0,
    ) -> None:
        """Answer ``times`` authenticated creates with this Twilio error, after letting
        ``after`` of them through (e.g. ``after=1``: the second part of a split reply fails)."""
        text = message or {
            63016: "Failed to send freeform message because you are outside the allowed "
            "window. If you are using WhatsApp, please use a Message Template.",
            63018: "Rate limit exceeded for Channel",
            20429: "Too Many Requests",
            20500: "An internal server error has occurred",
        }.get(code, f"Error {code}")
        self._failures.append(_Failure(status, code, text, times, after))

    def add_messaging_service(self, sid: str | None = None) -> str:
        """Register a Messaging Service (``MG…``) replies may be sent from; its SID."""
        sid = sid or "MG" + secrets.token_hex(16)
        self.messaging_services.add(sid)
        return sid

    def add_media(
        self,
        data: bytes,
        content_type: str,
        *,
        filename: str | None = None,
        chunked: bool = False,
        redirect_to: str | None = None,
    ) -> FakeMedia:
        """Serve ``data``; the returned ``FakeMedia.url`` is its ``MediaUrl`` (on a
        random message of this account). ``redirect_to``: the ``Location`` answered
        instead of this server's CDN path."""
        media_sid = "ME" + secrets.token_hex(16)
        message_sid = "MM" + secrets.token_hex(16)
        media = FakeMedia(
            data, content_type, filename=filename, chunked=chunked, redirect_to=redirect_to
        )
        media.url = (
            f"{self.base_url}/2010-04-01/Accounts/{self.account_sid}/Messages/{message_sid}"
            f"/Media/{media_sid}"
        )
        self.media[media_sid] = media
        return media

    async def deliver_status(
        self,
        sid: str,
        status: str = "delivered",
        *,
        url: str | None = None,
        error_code: int | None = None,
        error_message: str | None = None,
    ) -> int:
        """POST a signed status callback for message ``sid`` to its ``StatusCallback``
        (or ``url``), as Twilio does; the HTTP status the receiver answered."""
        message = next((m for m in self.messages if m["sid"] == sid), None)
        target = url or (message or {}).get("StatusCallback")
        if not target:
            raise ValueError(f"no StatusCallback for {sid} and no url given")
        params = twilio_status_params(
            sid=sid,
            status=status,
            to=(message or {}).get("To", "whatsapp:+5511999990000"),
            from_=(message or {}).get("From", "whatsapp:+14155238886"),
            account_sid=self.account_sid,
            error_code=error_code,
            error_message=error_message,
        )
        headers = {"X-Twilio-Signature": sign_twilio(self.auth_token, target, params)}
        async with (
            aiohttp.ClientSession() as session,
            session.post(target, data=params, headers=headers) as response,
        ):
            return response.status

    # ------------------------------------------------------------------ handlers

    async def _media_url(self, request: web.Request) -> web.Response:
        """The MediaUrl: Basic auth, then a 307 to the CDN (as Twilio does)."""
        media = self.media.get(request.match_info["media_sid"])
        if _basic_auth(request.headers.get("Authorization", "")) != (
            self.account_sid,
            self.auth_token,
        ):
            status, answer = 401, twilio_error(401, 20003, "Authenticate")
        elif request.match_info["account_sid"] != self.account_sid or media is None:
            status, answer = (
                404,
                twilio_error(404, 20404, f"The requested resource {request.path} was not found"),
            )
        else:
            status, answer = 307, {}
        await self._record(request, status)
        if status != 307 or media is None:
            return web.json_response(answer, status=status)
        location = media.redirect_to or (
            f"{self.base_url}/twiliocdn/{self.account_sid}/{request.match_info['media_sid']}"
            f"?Expires={int(time.time()) + 4 * 3600}&Signature={secrets.token_urlsafe(24)}"
        )
        return web.Response(status=307, headers={"Location": location})

    async def _cdn(self, request: web.Request) -> web.StreamResponse:
        """The CDN: no auth, the bytes with their content type."""
        media = self.media.get(request.match_info["media_sid"])
        await self._record(request, 200 if media is not None else 404)
        if media is None:
            return web.Response(status=404, text="Not Found")
        return await stream_media(request, media)

    async def _record(self, request: web.Request, status: int) -> None:
        record = {
            "method": request.method,
            "path": request.path,
            "authorization": request.headers.get("Authorization"),
            "status": status,
        }
        async with self._changed:
            self.requests.append(record)
            self._changed.notify_all()

    async def _create(self, request: web.Request) -> web.Response:
        form = {key: str(value) for key, value in (await request.post()).items()}
        record: dict[str, Any] = {
            "method": request.method,
            "path": request.path,
            "form": form,
            "authorization": request.headers.get("Authorization"),
        }
        if self.delay:
            await asyncio.sleep(self.delay)
        status, body = self._answer(request, form)
        record["status"] = status
        async with self._changed:
            self.requests.append(record)
            if status == 201:
                self.messages.append({**form, "sid": body["sid"]})
                self.arrivals.append(time.perf_counter())
            self._changed.notify_all()
        return web.json_response(body, status=status)

    def _answer(self, request: web.Request, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if _basic_auth(request.headers.get("Authorization", "")) != (
            self.account_sid,
            self.auth_token,
        ):
            return 401, twilio_error(401, 20003, "Authenticate")
        if request.match_info["account_sid"] != self.account_sid:
            return 404, twilio_error(
                404, 20404, f"The requested resource {request.path} was not found"
            )
        if self._failures and self._failures[0].after > 0:
            self._failures[0].after -= 1
        elif self._failures:
            failure = self._failures[0]
            failure.times -= 1
            if failure.times <= 0:
                self._failures.popleft()
            return failure.status, twilio_error(failure.status, failure.code, failure.message)
        if not form.get("To"):
            return 400, twilio_error(400, 21604, "A 'To' phone number is required.")
        if not form.get("From") and not form.get("MessagingServiceSid"):
            return 400, twilio_error(400, 21603, "A 'From' phone number is required.")
        service = form.get("MessagingServiceSid")
        if service and service not in self.messaging_services:
            return 400, twilio_error(400, 21701, f"The Messaging Service Sid {service} is invalid.")
        if form.get("From") and not _WHATSAPP_FROM.fullmatch(form["From"]):
            return 400, twilio_error(400, 21212, f"Invalid From Number: {form['From']}")
        body = form.get("Body", "")
        if not body and not form.get("MediaUrl") and not form.get("ContentSid"):
            return 400, twilio_error(400, 21602, "Message body is required.")
        if len(body) > _BODY_LIMIT:
            return 400, twilio_error(
                400, 21617, "The concatenated message body exceeds the 1600 character limit."
            )
        return 201, self._resource(form)

    def _resource(self, form: dict[str, str]) -> dict[str, Any]:
        sid = "SM" + secrets.token_hex(16)
        now = format_datetime(datetime.now(UTC))
        uri = f"/2010-04-01/Accounts/{self.account_sid}/Messages/{sid}"
        return {
            "account_sid": self.account_sid,
            "api_version": "2010-04-01",
            "body": form.get("Body", ""),
            "date_created": now,
            "date_sent": None,
            "date_updated": now,
            "direction": "outbound-api",
            "error_code": None,
            "error_message": None,
            "from": form.get("From"),
            "messaging_service_sid": form.get("MessagingServiceSid"),
            "num_media": "0",
            "num_segments": "1",
            "price": None,
            "price_unit": "USD",
            "sid": sid,
            "status": "queued",
            "subresource_uris": {"media": f"{uri}/Media.json"},
            "to": form.get("To"),
            "uri": f"{uri}.json",
        }
