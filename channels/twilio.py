"""Twilio (WhatsApp through the Messaging API): verify and parse webhooks (``TwilioWebhook``),
send replies.

The web layer hands over plain data: the public URL Twilio called, the form parameters
(a ``dict`` or aiohttp's ``MultiDict``) and the ``X-Twilio-Signature`` header value.
Twilio's documented WhatsApp parameters signal no edits, deletes, reactions or polls:
those are not modelled here.
"""

from __future__ import annotations

import asyncio
import binascii
import hmac
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import aiohttp
import structlog
from twilio.base.exceptions import TwilioException
from twilio.http.async_http_client import AsyncTwilioHttpClient
from twilio.request_validator import RequestValidator
from twilio.rest import Client

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
    """Replies through Twilio's REST API with the twilio SDK's asyncio client.

    The sender is a WhatsApp number (``whatsapp:+E164``) or a Messaging Service SID
    (``MG…``, sent as ``MessagingServiceSid``): ``from_number`` is the default, and
    ``send_text(..., from_=…)`` picks another one per reply (the number the couple wrote
    to). The create POST is never retried (a retry after a 5xx or a timeout can deliver
    the message twice). The SDK client and its aiohttp session are created on first use,
    inside the running event loop; call ``close()`` on shutdown.
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
        self._account_sid = account_sid
        self._auth_token = auth_token
        self._api_base_url = api_base_url.rstrip("/")
        self._timeout = timeout
        self._status_callback = status_callback
        self._max_connections = max_connections
        self._http: Any = None
        self._client: Any = None

    @property
    def from_number(self) -> str:
        """The default sender: ``whatsapp:+E164``, or a Messaging Service SID ``MG…``."""
        return self._from[1]

    def _twilio(self) -> Any:
        if self._client is None:
            # AsyncTwilioHttpClient ignores its own ``timeout`` for requests (twilio 9.x);
            # send_text bounds each call with asyncio.timeout instead. No max_retries:
            # retrying a create POST can duplicate the message.
            self._http = AsyncTwilioHttpClient(timeout=self._timeout, pool_connections=False)
            self._http.session = aiohttp.ClientSession(  # the SDK's, with a sized pool
                connector=aiohttp.TCPConnector(limit=self._max_connections)
            )
            client = Client(self._account_sid, self._auth_token, http_client=self._http)
            client.api.base_url = self._api_base_url
            self._client = client
        return self._client

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
        client = self._twilio()
        sent: list[str] = []
        for part in parts:
            options: dict[str, Any] = {field: sender, "to": recipient, "body": part}
            if self._status_callback:
                options["status_callback"] = self._status_callback
            try:
                async with asyncio.timeout(self._timeout):
                    message = await client.messages.create_async(**options)
            except Exception as exc:
                error = _send_error(exc, tuple(sent))
                _log.warning(
                    "twilio.send_failed",
                    to=mask_number(recipient),
                    code=error.code,
                    status=error.status,
                    retryable=error.retryable,
                    parts_sent=len(sent),
                    parts=len(parts),
                )
                raise error from exc
            sent.append(str(message.sid))
        return SendResult(provider_message_ids=tuple(sent))

    async def mark_read(
        self, message_id: str, *, typing: bool = True, from_: str | None = None
    ) -> None:
        """Twilio has no read receipts for inbound WhatsApp messages: nothing to do."""
        del message_id, typing, from_

    async def close(self) -> None:
        """Close the SDK client's aiohttp session (idempotent)."""
        http, self._http, self._client = self._http, None, None
        if http is not None:
            await http.close()


_MESSAGING_SERVICE_SID = re.compile(r"MG[0-9a-fA-F]{32}")


def _sender_address(value: str, field: str) -> tuple[str, str]:
    """``("messaging_service_sid", "MG…")`` for a Messaging Service SID, else
    ``("from_", "whatsapp:+E164")``: the SDK's keyword and its value."""
    raw = value.strip()
    if _MESSAGING_SERVICE_SID.fullmatch(raw):
        return "messaging_service_sid", raw
    if raw[:2].upper() == "MG":
        raise MalformedPayload(f"{field} is not a Messaging Service SID: {value!r}")
    return "from_", "whatsapp:" + to_e164(raw, field=field)


def _send_error(exc: Exception, sent: tuple[str, ...]) -> SendError:
    """Map what ``create_async`` raised to a ``SendError`` (anything unexpected: not
    retryable, the message may or may not have been sent)."""
    if isinstance(exc, TwilioException) and hasattr(exc, "status"):
        status = _int_or_none(getattr(exc, "status", None))
        code = _int_or_none(getattr(exc, "code", None))
        message = str(
            getattr(exc, "detail", None)
            or getattr(exc, "title", None)
            or getattr(exc, "msg", None)
            or exc
        )
        message = message.removeprefix("Unable to create record: ")
        if code == _OUTSIDE_WINDOW:
            return OutsideWindowError(_PROVIDER, code, message, status=status, sent_ids=sent)
        retryable = status == 429 or code in _RATE_LIMITED_CODES
        return SendError(_PROVIDER, code, message, retryable, status=status, sent_ids=sent)
    if isinstance(exc, TimeoutError):
        return SendError(
            _PROVIDER, None, "timed out: the message may or may not have been sent", sent_ids=sent
        )
    if isinstance(exc, TwilioException):  # raised by the SDK before any request
        return SendError(_PROVIDER, None, str(exc), sent_ids=sent)
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
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None
