"""Twilio (WhatsApp through the Messaging API): verify and parse webhooks (``TwilioWebhook``),
send replies.

The web layer hands over plain data: the public URL Twilio called, the form parameters
(a ``dict`` or aiohttp's ``MultiDict``) and the ``X-Twilio-Signature`` header value.
Twilio's documented WhatsApp parameters signal no edits, deletes, reactions or polls:
those are not modelled here.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import aiohttp
import orjson
import structlog
from twilio.request_validator import RequestValidator
from yarl import URL

from channels.errors import (
    MalformedPayload,
    OutsideWindowError,
    PayloadTooLarge,
    SendError,
    SignatureError,
)
from channels.models import (
    InboundKind,
    InboundMessage,
    Location,
    Media,
    ParsedDelivery,
    SendResult,
    StatusUpdate,
)
from channels.numbers import is_bsuid, mask_number, redact_digits, to_e164
from channels.split import split_message
from channels.webhook import WebhookRequest, WebhookResponse

__all__ = [
    "TWILIO_MAX_BODY",
    "TWILIO_MAX_LENGTH",
    "TwilioSender",
    "TwilioWebhook",
    "compute_twilio_signature",
    "parse_twilio_message",
    "parse_twilio_status",
    "verify_twilio_signature",
]

TWILIO_MAX_LENGTH = 1600
#: Largest webhook body checked: a real one (1,600-character body, ten media URLs) is
#: under 16 KiB even fully percent-encoded.
TWILIO_MAX_BODY = 64 * 1024
TWIML_EMPTY = '<?xml version="1.0" encoding="UTF-8"?><Response/>'
_PROVIDER = "twilio"
_SIGNATURE_LENGTH = 28  # base64 of a 20-byte HMAC-SHA1
_OUTSIDE_WINDOW = 63016
_RATE_LIMITED_CODES = frozenset({63018, 20429})  # channel rate limit, "Too Many Requests"
_MAX_MEDIA = 10  # WhatsApp through Twilio: at most 10 media per message

_log = structlog.get_logger(__name__)


# --------------------------------------------------------------------------- signature


def compute_twilio_signature(auth_token: str, url: str, params: Mapping[str, Any]) -> str:
    """The ``X-Twilio-Signature`` Twilio would send for this URL and these parameters."""
    return str(RequestValidator(auth_token).compute_signature(url, params))


def verify_twilio_signature(
    auth_token: str, url: str, params: Mapping[str, Any], signature: str | None
) -> None:
    """Raise ``SignatureError`` unless ``signature`` signs ``url`` + ``params``.

    ``url`` is the exact public URL Twilio called (behind a proxy, rebuild it from the
    configured public base URL); the default port may be present or not. Every parameter
    received counts, known or not.
    """
    signature = _check_signature_shape(auth_token, signature)
    validator = RequestValidator(auth_token)
    try:
        # Fast path: the URL exactly as given (the usual case). ``validate`` always
        # computes two signatures (with and without the default port), so it is kept for
        # the fallback only.
        valid = hmac.compare_digest(
            str(validator.compute_signature(url, params)), signature
        ) or validator.validate(url, params, signature)
    except (TypeError, ValueError, AttributeError) as exc:  # e.g. a file among the fields
        raise SignatureError(f"cannot check X-Twilio-Signature: {exc}", provider=_PROVIDER) from exc
    if not valid:
        raise SignatureError("X-Twilio-Signature does not match", provider=_PROVIDER)


def _check_signature_shape(auth_token: str, signature: str | None) -> str:
    """The cheap preconditions, checked before any parsing: a token to check with and a
    header that can be a base64 HMAC-SHA1 (28 ASCII characters decoding to 20 bytes).

    A header with non-ASCII or undecodable bytes (surrogate-escaped by aiohttp) fails here
    with ``SignatureError``, never with ``UnicodeEncodeError``.
    """
    if not auth_token:
        raise SignatureError("no Twilio auth token configured", provider=_PROVIDER)
    if not signature:
        raise SignatureError("missing X-Twilio-Signature", provider=_PROVIDER)
    plausible = len(signature) == _SIGNATURE_LENGTH and signature.isascii()
    if plausible:
        try:
            plausible = len(binascii.a2b_base64(signature, strict_mode=True)) == 20
        except binascii.Error:
            plausible = False
    if not plausible:
        raise SignatureError(
            "X-Twilio-Signature is not a base64 HMAC-SHA1 (28 characters)", provider=_PROVIDER
        )
    return signature


# --------------------------------------------------------------------------- parsing


def parse_twilio_message(
    params: Mapping[str, Any], *, received_at: datetime | None = None
) -> InboundMessage:
    """An inbound-message webhook → ``InboundMessage``; ``MalformedPayload`` says what is wrong.

    Twilio sends no timestamp: ``received_at`` (default: now, UTC) stands for it.
    Unknown parameters are ignored.
    """
    sid = _required(params, "MessageSid")
    user = _whatsapp_number(params, "From")
    business = _whatsapp_number(params, "To")
    body = _optional(params, "Body") or ""

    media = _media(params)
    location = _location(params)
    button_payload = _optional(params, "ButtonPayload")
    button_text = _optional(params, "ButtonText")

    kind: InboundKind
    payload: dict[str, Any] | None = None
    text = body
    if button_payload or button_text:
        kind = "button"
        payload = {"id": button_payload or button_text, "title": button_text or body}
        text = button_text or body
    elif location is not None:
        kind = "location"
    elif media and all(item.mime_type in _VCARD_TYPES for item in media):
        kind = "contacts"  # Twilio delivers a shared contact as a vCard attachment
    elif media:
        kind = "media"
    elif body:
        kind = "text"
    else:
        kind = "unsupported"  # nothing we can read: recorded, never answered

    return InboundMessage(
        channel="twilio",
        provider_message_id=sid,
        business_number=business,
        user_number=user,
        kind=kind,
        timestamp=received_at or datetime.now(UTC),
        text=text,
        profile_name=_optional(params, "ProfileName") or None,
        media=media,
        location=location,
        payload=payload,
        reply_to=_optional(params, "OriginalRepliedMessageSid"),
        raw_type=(_optional(params, "MessageType") or None) if kind == "unsupported" else None,
        messaging_service_sid=_optional(params, "MessagingServiceSid") or None,
    )


def parse_twilio_status(
    params: Mapping[str, Any], *, received_at: datetime | None = None
) -> StatusUpdate:
    """A status-callback webhook → ``StatusUpdate`` (``received_at`` stands for the time)."""
    sid = _optional(params, "MessageSid") or _optional(params, "SmsSid")
    if not sid:
        raise MalformedPayload("missing field MessageSid", provider=_PROVIDER)
    status = _optional(params, "MessageStatus") or _optional(params, "SmsStatus")
    if not status:
        raise MalformedPayload("missing field MessageStatus", provider=_PROVIDER)
    to = _optional(params, "To")
    return StatusUpdate(
        channel="twilio",
        provider_message_id=sid,
        status=status.lower(),
        timestamp=received_at or datetime.now(UTC),
        recipient=_number(to, "To") if to else None,
        error_code=_optional(params, "ErrorCode") or None,
        error_message=_optional(params, "ErrorMessage") or None,
    )


_VCARD_TYPES = frozenset({"text/vcard", "text/x-vcard"})


def _optional(params: Mapping[str, Any], name: str) -> str | None:
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise MalformedPayload(f"{name} is not text", provider=_PROVIDER)
    return value


def _required(params: Mapping[str, Any], name: str) -> str:
    value = _optional(params, name)
    if not value:
        raise MalformedPayload(f"missing field {name}", provider=_PROVIDER)
    return value


def _number(value: str, name: str) -> str:
    try:
        return to_e164(value, field=name)
    except MalformedPayload as exc:
        raise MalformedPayload(exc.reason, provider=_PROVIDER) from None


def _whatsapp_number(params: Mapping[str, Any], name: str) -> str:
    value = _required(params, name)
    if not value.lower().startswith("whatsapp:"):
        raise MalformedPayload(
            f"{name} is not a WhatsApp number: {redact_digits(value)!r}", provider=_PROVIDER
        )
    return _number(value, name)


def _media(params: Mapping[str, Any]) -> tuple[Media, ...]:
    raw_count = _optional(params, "NumMedia")
    if raw_count is None or raw_count == "":
        return ()
    if not (raw_count.isascii() and raw_count.isdigit()) or int(raw_count) > _MAX_MEDIA:
        raise MalformedPayload(
            f"NumMedia is not a count from 0 to {_MAX_MEDIA}: {raw_count!r}", provider=_PROVIDER
        )
    items: list[Media] = []
    sticker = (_optional(params, "MessageType") or "").lower() == "sticker"
    for index in range(int(raw_count)):
        url = _required(params, f"MediaUrl{index}")
        mime = _optional(params, f"MediaContentType{index}") or None
        items.append(Media(kind=_media_kind(mime, sticker=sticker), url=url, mime_type=mime))
    return tuple(items)


def _media_kind(mime: str | None, *, sticker: bool = False) -> str:
    # Twilio's docs list no sticker type; should MessageType say "sticker", it is one
    # (recorded, not answered). A WebP image is not guessed to be one: a photo of a
    # receipt taken for a sticker would go unanswered.
    if sticker:
        return "sticker"
    major = (mime or "").partition("/")[0].lower()
    return major if major in ("image", "audio", "video") else "document"


def _location(params: Mapping[str, Any]) -> Location | None:
    lat_raw = _optional(params, "Latitude")
    lon_raw = _optional(params, "Longitude")
    if not lat_raw and not lon_raw:
        return None
    latitude = _coordinate(lat_raw, "Latitude", 90.0)
    longitude = _coordinate(lon_raw, "Longitude", 180.0)
    return Location(
        latitude=latitude,
        longitude=longitude,
        name=_optional(params, "Label") or None,
        address=_optional(params, "Address") or None,
    )


def _coordinate(raw: str | None, name: str, bound: float) -> float:
    if not raw:
        raise MalformedPayload(f"missing field {name}", provider=_PROVIDER)
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not -bound <= value <= bound:  # also rejects nan
        raise MalformedPayload(
            f"{name} is not a coordinate between -{bound:g} and {bound:g}: {raw!r}",
            provider=_PROVIDER,
        )
    return value


# --------------------------------------------------------------------------- webhook adapter


class TwilioWebhook:
    """The ``WebhookAdapter`` for Twilio's inbound-message webhook, or with
    ``status_callback=True`` for its status callbacks (same signature scheme).

    ``verify`` checks the signature's cheap preconditions, then the body's size and field
    count, and only then parses the form (once: ``WebhookRequest.form``) and checks the
    signature over ``request.url``, the public URL Twilio called.
    """

    provider = _PROVIDER

    def __init__(
        self, auth_token: str, *, status_callback: bool = False, max_body: int = TWILIO_MAX_BODY
    ) -> None:
        self._auth_token = auth_token
        self._status_callback = status_callback
        self._max_body = max_body

    def verify(self, request: WebhookRequest) -> None:
        signature = request.header("X-Twilio-Signature")
        _check_signature_shape(self._auth_token, signature)
        if len(request.body) > self._max_body:
            raise PayloadTooLarge(
                f"body of {len(request.body)} bytes exceeds {self._max_body}", provider=_PROVIDER
            )
        verify_twilio_signature(self._auth_token, request.url, self._form(request), signature)

    def parse(self, request: WebhookRequest) -> ParsedDelivery:
        params = self._form(request)
        if self._status_callback:
            return ParsedDelivery(
                statuses=(parse_twilio_status(params, received_at=request.received_at),)
            )
        return ParsedDelivery(
            messages=(parse_twilio_message(params, received_at=request.received_at),)
        )

    def ack(self) -> WebhookResponse:
        """Empty TwiML: accepted, no inline reply (replies go through the REST API)."""
        return WebhookResponse(200, "text/xml", TWIML_EMPTY.encode("utf-8"))

    @staticmethod
    def _form(request: WebhookRequest) -> Mapping[str, Any]:
        try:
            return request.form
        except PayloadTooLarge as exc:
            raise PayloadTooLarge(exc.reason, provider=_PROVIDER) from None


# --------------------------------------------------------------------------- sending


class TwilioSender:
    """Replies through Twilio's REST API: one form POST to the Messages resource per part.

    A plain aiohttp POST, not the twilio SDK: the same request on the wire (the SDK's own
    headers aside) for far less CPU per send. The sender is a WhatsApp number
    (``whatsapp:+E164``) or a Messaging Service SID (``MG…``, sent as
    ``MessagingServiceSid``): ``from_number`` is the default, and
    ``send_text(..., from_=…)`` picks another one per reply (the number the couple wrote
    to). The create POST is never retried (a retry after a 5xx or a timeout can deliver
    the message twice). The aiohttp session is created on first use, inside the running
    event loop; call ``close()`` on shutdown.
    """

    provider = _PROVIDER
    max_length = TWILIO_MAX_LENGTH

    def __init__(
        self,
        account_sid: str,
        auth_token: str,
        from_number: str,
        *,
        api_base_url: str = "https://api.twilio.com",
        timeout: float = 15.0,
        status_callback: str | None = None,
        max_connections: int = 100,
    ) -> None:
        if not account_sid or not auth_token:
            raise ValueError("TwilioSender needs an account SID and an auth token")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        try:
            self._from = _sender_address(from_number, "from_number")
        except MalformedPayload as exc:
            raise ValueError(exc.reason) from None
        try:
            credentials = f"{account_sid}:{auth_token}".encode("latin-1")
        except UnicodeEncodeError:
            raise ValueError("the account SID and auth token must be latin-1 text") from None
        # HTTP Basic auth, as aiohttp.BasicAuth would encode it (latin-1), built once.
        self._headers = {
            "Authorization": "Basic " + base64.b64encode(credentials).decode("ascii"),
            "Accept": "application/json",
            "Accept-Charset": "utf-8",
            "Content-Type": "application/x-www-form-urlencoded",
        }
        self._url = URL(
            f"{api_base_url.rstrip('/')}/2010-04-01/Accounts/{account_sid}/Messages.json"
        )
        self._timeout = timeout
        self._status_callback = status_callback
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    @property
    def from_number(self) -> str:
        """The default sender: ``whatsapp:+E164``, or a Messaging Service SID ``MG…``."""
        return self._from[1]

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._max_connections),
                headers={"User-Agent": _USER_AGENT},
            )
        return self._session

    async def send_text(self, to: str, text: str, *, from_: str | None = None) -> SendResult:
        """Send ``text`` to ``to`` (E.164 or ``whatsapp:+…``), split at 1600 characters.

        ``from_`` is the business address to send from: a ``whatsapp:+E164`` number or a
        Messaging Service SID (``MG…``); ``None``: ``from_number``. Returns the ``SM…``
        sid of every part. Raises only ``SendError`` (``OutsideWindowError`` for 63016;
        a bad ``to``/``from_`` or a blank text is a non-retryable one); its ``sent_ids``
        lists the parts accepted before the failure.
        """
        if is_bsuid(to):
            # Twilio documents no way to address a WhatsApp business-scoped user id.
            raise SendError(
                _PROVIDER,
                None,
                "cannot send to a business-scoped user id through Twilio: "
                "only WhatsApp phone numbers can be addressed",
            )
        try:
            recipient = "whatsapp:" + to_e164(to, field="to")
            field, sender = self._from if from_ is None else _sender_address(from_, "from_")
        except MalformedPayload as exc:
            raise SendError(_PROVIDER, None, exc.reason) from None
        parts = split_message(text, self.max_length)
        if not parts:
            raise SendError(_PROVIDER, None, "nothing to send: the text is blank")
        session = self._http()
        sent: list[str] = []
        for part in parts:
            # The fields in the order the twilio SDK sends them.
            form = {"To": recipient}
            if self._status_callback:
                form["StatusCallback"] = self._status_callback
            form[field] = sender
            form["Body"] = part
            cause: Exception | None = None
            outcome: str | SendError
            try:
                async with asyncio.timeout(self._timeout):
                    status, raw = await self._post(session, form)
            except Exception as exc:
                cause, outcome = exc, _send_error(exc, tuple(sent))
            else:
                outcome = _created(status, raw, tuple(sent))
            if isinstance(outcome, str):
                sent.append(outcome)
                continue
            _log.warning(
                "twilio.send_failed",
                to=mask_number(recipient),
                code=outcome.code,
                status=outcome.status,
                retryable=outcome.retryable,
                parts_sent=len(sent),
                parts=len(parts),
            )
            raise outcome from cause
        return SendResult(provider_message_ids=tuple(sent))

    async def _post(
        self, session: aiohttp.ClientSession, form: dict[str, str]
    ) -> tuple[int, bytes]:
        """POST one create; its HTTP status and body. Redirects are not followed (the SDK
        does not either: a 3xx is an error)."""
        data = urlencode(form).encode("ascii")  # what aiohttp's FormData would send
        async with session.post(
            self._url, data=data, headers=self._headers, allow_redirects=False
        ) as response:
            return response.status, await response.read()

    async def mark_read(
        self, message_id: str, *, typing: bool = True, from_: str | None = None
    ) -> None:
        """Twilio has no read receipts for inbound WhatsApp messages: nothing to do."""
        del message_id, typing, from_

    async def close(self) -> None:
        """Close the aiohttp session (idempotent)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()


_MESSAGING_SERVICE_SID = re.compile(r"MG[0-9a-fA-F]{32}")
_USER_AGENT = "mel-gateway (twilio sender) aiohttp/" + aiohttp.__version__
_EXCERPT = 200  # characters of an unexpected answer kept in the error


def _sender_address(value: str, field: str) -> tuple[str, str]:
    """``("MessagingServiceSid", "MG…")`` for a Messaging Service SID, else
    ``("From", "whatsapp:+E164")``: the form field and its value."""
    raw = value.strip()
    if _MESSAGING_SERVICE_SID.fullmatch(raw):
        return "MessagingServiceSid", raw
    if raw[:2].upper() == "MG":
        raise MalformedPayload(f"{field} is not a Messaging Service SID: {value!r}")
    return "From", "whatsapp:" + to_e164(raw, field=field)


def _created(status: int, raw: bytes, sent: tuple[str, ...]) -> str | SendError:
    """The answer to a create POST → the new message's sid, or the ``SendError`` to raise.

    A 2xx carries the Message resource (its ``sid``); anything else, Twilio's REST error
    ``{"code", "message", "more_info", "status"}`` (or, from newer APIs, RFC 9457's
    ``{"type", "title", "status", "code", "detail"}``). An answer that is neither (a
    proxy's HTML 502, a 2xx without a sid) is a ``SendError`` quoting it: not retryable
    (the message may exist), unless the status is 429.
    """
    try:
        answer = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:  # also invalid UTF-8, lone surrogates, deep nesting
        answer = None
    fields: dict[str, Any] = answer if isinstance(answer, dict) else {}
    if 200 <= status < 300:
        sid = fields.get("sid")
        if isinstance(sid, str) and sid:
            return sid
        return SendError(
            _PROVIDER,
            None,
            f"HTTP {status} without a message sid (the message may or may not have been "
            f"sent): {_excerpt(raw)}",
            status=status,
            sent_ids=sent,
        )
    code = _int_or_none(fields.get("code"))
    message = fields.get("message") or fields.get("detail") or fields.get("title")
    if code is None and not message:
        return SendError(
            _PROVIDER,
            None,
            f"HTTP {status}: {_excerpt(raw)}",
            status == 429,
            status=status,
            sent_ids=sent,
        )
    text = str(message) if message else f"HTTP {status}"
    if code == _OUTSIDE_WINDOW:
        return OutsideWindowError(_PROVIDER, code, text, status=status, sent_ids=sent)
    retryable = status == 429 or code in _RATE_LIMITED_CODES
    return SendError(_PROVIDER, code, text, retryable, status=status, sent_ids=sent)


def _excerpt(raw: bytes) -> str:
    if not raw:
        return "(empty body)"
    text = raw[:_EXCERPT].decode("utf-8", "replace")
    return repr(text) + ("…" if len(raw) > _EXCERPT else "")


def _send_error(exc: Exception, sent: tuple[str, ...]) -> SendError:
    """Map what a create POST raised to a ``SendError`` (anything unexpected: not
    retryable, the message may or may not have been sent)."""
    if isinstance(exc, TimeoutError):
        return SendError(
            _PROVIDER, None, "timed out: the message may or may not have been sent", sent_ids=sent
        )
    if isinstance(exc, aiohttp.ClientConnectorError):
        # never connected: nothing was sent, trying again cannot duplicate
        return SendError(_PROVIDER, None, f"cannot connect: {exc}", True, sent_ids=sent)
    if isinstance(exc, aiohttp.ClientError):
        return SendError(_PROVIDER, None, f"transport error: {exc}", sent_ids=sent)
    return SendError(_PROVIDER, None, f"unexpected error: {exc!r}", sent_ids=sent)


def _int_or_none(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)  # ASCII only: "²".isdigit() is true, int("²") raises
    return None
