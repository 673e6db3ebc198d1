"""Meta WhatsApp Cloud API: verify and parse webhooks, send replies through the Graph API.

The web layer hands over plain data: the raw body bytes, the ``X-Hub-Signature-256``
header value, and for the subscription handshake the ``hub.*`` query values.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

import aiohttp
import structlog
from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationError
from pydantic_core import PydanticCustomError

from channels.errors import MalformedPayload, OutsideWindowError, SendError, SignatureError
from channels.models import (
    InboundKind,
    InboundMessage,
    Location,
    Media,
    ParsedDelivery,
    SendResult,
    StatusUpdate,
)
from channels.numbers import is_bsuid, mask_number, to_e164
from channels.split import split_message

__all__ = [
    "META_MAX_LENGTH",
    "MetaSender",
    "parse_meta_payload",
    "verify_meta_signature",
    "verify_meta_subscription",
]

META_MAX_LENGTH = 4096
_PROVIDER = "meta"
_SIGNATURE_PREFIX = "sha256="
_OBJECT = "whatsapp_business_account"
_MEDIA_TYPES = ("image", "audio", "video", "document", "sticker")
_OUTSIDE_WINDOW = 131047
# Rejections for throughput: the request was refused, so trying again cannot duplicate.
# 4 app request limit, 80007 WABA rate limit, 130429 cloud API throughput, 131056 pair rate.
_RATE_LIMITED_CODES = frozenset({4, 80007, 130429, 131056})

_log = structlog.get_logger(__name__)


# --------------------------------------------------------------------------- verification


def verify_meta_signature(app_secret: str, body: bytes, header: str | None) -> None:
    """Raise ``SignatureError`` unless ``header`` is ``sha256=<HMAC-SHA256(app_secret, body)>``.

    ``body`` is the raw bytes received, never re-serialised JSON; compared in constant time.
    """
    if not app_secret:
        raise SignatureError("no Meta app secret configured", provider=_PROVIDER)
    if not header:
        raise SignatureError("missing X-Hub-Signature-256", provider=_PROVIDER)
    if not header.startswith(_SIGNATURE_PREFIX):
        raise SignatureError("X-Hub-Signature-256 does not start with sha256=", provider=_PROVIDER)
    given = header[len(_SIGNATURE_PREFIX) :].strip().lower().encode("utf-8", "replace")
    expected = hmac.new(app_secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode("ascii"), given):
        raise SignatureError("X-Hub-Signature-256 does not match", provider=_PROVIDER)


def verify_meta_subscription(
    verify_token: str, mode: str | None, token: str | None, challenge: str | None
) -> str:
    """The subscription handshake: the challenge to echo back, or ``SignatureError`` (403).

    ``mode``, ``token`` and ``challenge`` are the ``hub.mode``, ``hub.verify_token`` and
    ``hub.challenge`` query values.
    """
    if not verify_token:
        raise SignatureError("no Meta verify token configured", provider=_PROVIDER)
    if mode != "subscribe":
        raise SignatureError(f"hub.mode is {mode!r}, expected 'subscribe'", provider=_PROVIDER)
    if token is None or not hmac.compare_digest(
        verify_token.encode("utf-8"), token.encode("utf-8", "replace")
    ):
        raise SignatureError("hub.verify_token does not match", provider=_PROVIDER)
    if not challenge:
        raise MalformedPayload("missing field hub.challenge", provider=_PROVIDER)
    return challenge


# --------------------------------------------------------------------------- payload models


def _unix_time(value: object) -> datetime:
    seconds: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        seconds = value
    elif isinstance(value, str) and value.isascii() and value.isdigit():
        seconds = int(value)
    if seconds is not None:
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            pass
    raise PydanticCustomError(
        "unix_time", "is not a unix time: {value}", {"value": repr(value)[:40]}
    )


_UnixTime = Annotated[datetime, PlainValidator(_unix_time)]
_T = TypeVar("_T")


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


_M = TypeVar("_M", bound=_Model)


class _Metadata(_Model):
    display_phone_number: str
    phone_number_id: str


class _Profile(_Model):
    name: str | None = None


class _Contact(_Model):
    wa_id: str | None = None
    profile: _Profile | None = None


class _Context(_Model):
    id: str | None = None


class _Text(_Model):
    body: str


class _MediaObject(_Model):
    id: str
    mime_type: str | None = None
    caption: str | None = None
    filename: str | None = None


class _LocationObject(_Model):
    latitude: float = Field(ge=-90, le=90)
    longitude: float = Field(ge=-180, le=180)
    name: str | None = None
    address: str | None = None


class _Reply(_Model):
    id: str
    title: str
    description: str | None = None


class _Interactive(_Model):
    type: str
    button_reply: _Reply | None = None
    list_reply: _Reply | None = None


class _Button(_Model):
    payload: str | None = None
    text: str


class _Reaction(_Model):
    message_id: str
    emoji: str | None = None


class _Message(_Model):
    from_: str = Field(alias="from")
    id: str
    timestamp: _UnixTime
    type: str
    context: _Context | None = None
    text: _Text | None = None
    image: _MediaObject | None = None
    audio: _MediaObject | None = None
    video: _MediaObject | None = None
    document: _MediaObject | None = None
    sticker: _MediaObject | None = None
    location: _LocationObject | None = None
    contacts: list[dict[str, Any]] | None = None
    interactive: _Interactive | None = None
    button: _Button | None = None
    reaction: _Reaction | None = None


class _StatusError(_Model):
    code: Any = None
    title: str | None = None
    message: str | None = None


class _Status(_Model):
    id: str
    status: str
    timestamp: _UnixTime
    recipient_id: str | None = None
    errors: list[_StatusError] = Field(default_factory=list)


class _Value(_Model):
    metadata: _Metadata
    contacts: list[_Contact] = Field(default_factory=list)
    messages: list[_Message] = Field(default_factory=list)
    statuses: list[_Status] = Field(default_factory=list)


class _Change(_Model):
    field: str
    value: Any = None  # validated as _Value only when field == "messages"


class _Entry(_Model):
    id: str | None = None
    changes: list[_Change] = Field(default_factory=list)


class _Envelope(_Model):
    object: str
    entry: list[_Entry]


# --------------------------------------------------------------------------- parsing


def parse_meta_payload(body: bytes) -> ParsedDelivery:
    """One webhook delivery → every message and status it holds, in payload order.

    All entries, changes, messages and statuses are handled; changes whose ``field`` is
    not ``"messages"`` are skipped; unknown fields are ignored. Anything malformed raises
    ``MalformedPayload`` naming the path, e.g.
    ``entry[0].changes[1].value.messages[0].timestamp is not a unix time: '17x'``.
    """
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedPayload(f"body is not JSON: {exc}", provider=_PROVIDER) from None
    if not isinstance(data, dict):
        raise MalformedPayload("body is not a JSON object", provider=_PROVIDER)
    if "object" in data and data["object"] != _OBJECT:
        raise MalformedPayload(
            f"object is {data['object']!r:.60}, expected {_OBJECT!r}", provider=_PROVIDER
        )
    envelope = _validate(_Envelope, data, "")
    messages: list[InboundMessage] = []
    statuses: list[StatusUpdate] = []
    for e, entry in enumerate(envelope.entry):
        for c, change in enumerate(entry.changes):
            if change.field != "messages":
                continue
            path = f"entry[{e}].changes[{c}].value"
            if change.value is None:
                raise MalformedPayload(f"missing field {path}", provider=_PROVIDER)
            value = _validate(_Value, change.value, path)
            business = _e164(value.metadata.display_phone_number, f"{path}.metadata")
            profiles = {
                contact.wa_id: contact.profile.name
                for contact in value.contacts
                if contact.wa_id and contact.profile and contact.profile.name
            }
            for m, message in enumerate(value.messages):
                messages.append(
                    _inbound(
                        message,
                        f"{path}.messages[{m}]",
                        business=business,
                        phone_number_id=value.metadata.phone_number_id,
                        profiles=profiles,
                    )
                )
            for s, status in enumerate(value.statuses):
                statuses.append(_status(status, f"{path}.statuses[{s}]"))
    return ParsedDelivery(messages=tuple(messages), statuses=tuple(statuses))


def _validate(model: type[_M], data: object, prefix: str) -> _M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise MalformedPayload(_explain(exc, prefix), provider=_PROVIDER) from None


def _explain(exc: ValidationError, prefix: str) -> str:
    errors = exc.errors(include_url=False)
    first = errors[0]
    path = _join_path(prefix, first["loc"])
    if first["type"] == "missing":
        reason = f"missing field {path}"
    elif first["type"] == "unix_time":
        reason = f"{path} {first['msg']}"
    else:
        msg = first["msg"]
        got = repr(first.get("input"))
        got = got if len(got) <= 40 else got[:37] + "..."
        reason = f"{path}: {msg[:1].lower()}{msg[1:]}, got {got}"
    if len(errors) > 1:
        reason += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return reason


def _join_path(prefix: str, loc: Sequence[int | str]) -> str:
    path = prefix
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path or "body"


def _e164(value: str, path: str) -> str:
    try:
        return to_e164(value, field=path)
    except MalformedPayload as exc:
        raise MalformedPayload(exc.reason, provider=_PROVIDER) from None


def _inbound(
    msg: _Message,
    path: str,
    *,
    business: str,
    phone_number_id: str,
    profiles: Mapping[str, str],
) -> InboundMessage:
    user = _e164(msg.from_, f"{path}.from")
    kind: InboundKind = "unsupported"
    text = ""
    media: tuple[Media, ...] = ()
    location: Location | None = None
    contacts: tuple[dict[str, Any], ...] = ()
    payload: dict[str, Any] | None = None
    reaction: dict[str, Any] | None = None
    raw_type: str | None = None

    match msg.type:
        case "text":
            text = _need(msg.text, path, "text").body
            kind = "text"
        case "image" | "audio" | "video" | "document" | "sticker":
            obj = _need(getattr(msg, msg.type), path, msg.type)
            media = (
                Media(
                    kind=msg.type,
                    media_id=obj.id,
                    mime_type=obj.mime_type,
                    caption=obj.caption,
                    filename=obj.filename,
                ),
            )
            text = obj.caption or ""
            kind = "media"
        case "location":
            loc = _need(msg.location, path, "location")
            location = Location(
                latitude=loc.latitude, longitude=loc.longitude, name=loc.name, address=loc.address
            )
            kind = "location"
        case "contacts":
            contacts = tuple(_need(msg.contacts, path, "contacts"))
            kind = "contacts"
        case "interactive":
            interactive = _need(msg.interactive, path, "interactive")
            reply = {"button_reply": interactive.button_reply, "list_reply": interactive.list_reply}
            if interactive.type in reply:
                chosen = _need(reply[interactive.type], f"{path}.interactive", interactive.type)
                payload = {"id": chosen.id, "title": chosen.title}
                if chosen.description:
                    payload["description"] = chosen.description
                text = chosen.title
                kind = "interactive"
            else:  # e.g. nfm_reply (flows): recorded, not answered
                raw_type = f"interactive.{interactive.type}"
        case "button":
            button = _need(msg.button, path, "button")
            payload = {"id": button.payload or button.text, "title": button.text}
            text = button.text
            kind = "button"
        case "reaction":
            obj_reaction = _need(msg.reaction, path, "reaction")
            reaction = {"message_id": obj_reaction.message_id, "emoji": obj_reaction.emoji or None}
            kind = "reaction"
        case _:  # unsupported, system, order, request_welcome, and types yet to come
            raw_type = msg.type

    return InboundMessage(
        channel="meta",
        provider_message_id=msg.id,
        business_number=business,
        user_number=user,
        kind=kind,
        timestamp=msg.timestamp,
        text=text,
        profile_name=profiles.get(msg.from_),
        media=media,
        location=location,
        contacts=contacts,
        payload=payload,
        reaction=reaction,
        reply_to=msg.context.id if msg.context and msg.context.id else None,
        raw_type=raw_type,
        phone_number_id=phone_number_id,
    )


def _need(value: _T | None, path: str, name: str) -> _T:
    if value is None:
        raise MalformedPayload(f"missing field {path}.{name}", provider=_PROVIDER)
    return value


def _status(status: _Status, path: str) -> StatusUpdate:
    error = status.errors[0] if status.errors else None
    return StatusUpdate(
        channel="meta",
        provider_message_id=status.id,
        status=status.status,
        timestamp=status.timestamp,
        recipient=_e164(status.recipient_id, f"{path}.recipient_id")
        if status.recipient_id
        else None,
        error_code=str(error.code) if error is not None and error.code is not None else None,
        error_message=(error.title or error.message) if error is not None else None,
    )


# --------------------------------------------------------------------------- sending


class MetaSender:
    """Replies through the Graph API ``/{version}/{phone_number_id}/messages`` endpoint.

    ``phone_number_id`` is the default business number; ``send_text`` / ``mark_read``
    take ``from_=`` to use another one of the same app (the number the couple wrote to).
    Owns one ``aiohttp.ClientSession``, created by ``start()`` or on first use inside the
    running loop; call ``close()`` on shutdown. Sends are never retried here.
    """

    provider = _PROVIDER
    max_length = META_MAX_LENGTH

    def __init__(
        self,
        access_token: str,
        phone_number_id: str,
        *,
        graph_base_url: str = "https://graph.facebook.com",
        api_version: str = "v21.0",
        timeout: float = 15.0,
    ) -> None:
        if not access_token or not phone_number_id:
            raise ValueError("MetaSender needs an access token and a phone number id")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self._token = access_token
        self._phone_number_id = phone_number_id
        self._base = f"{graph_base_url.rstrip('/')}/{api_version.strip('/')}"
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    @property
    def phone_number_id(self) -> str:
        """The default business number's id."""
        return self._phone_number_id

    async def start(self) -> None:
        """Create the HTTP session now (optional: the first call does it otherwise)."""
        self._http()

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=self._timeout,
                headers={"Authorization": f"Bearer {self._token}"},
            )
        return self._session

    async def send_text(self, to: str, text: str, *, from_: str | None = None) -> SendResult:
        """Send ``text`` to ``to``, split at 4096 characters; the ``wamid`` of each part.

        ``to`` is an E.164 number, or a business-scoped user id (``"BR.1502…"``, a user
        known only by their username) sent as ``recipient``. ``from_`` is the
        ``phone_number_id`` to send from (``None``: the default). Raises only
        ``SendError`` (``OutsideWindowError`` for 131047; a bad ``to``/``from_`` or a
        blank text is a non-retryable one); its ``sent_ids`` lists the parts accepted
        before the failure.
        """
        url = self._messages_url(from_)
        address = _recipient(to)
        parts = split_message(text, self.max_length)
        if not parts:
            raise SendError(_PROVIDER, None, "nothing to send: the text is blank")
        sent: list[str] = []
        for part in parts:
            body = {
                "messaging_product": "whatsapp",
                **address,
                "type": "text",
                "text": {"body": part},
            }
            try:
                answer = await self._post(url, body, tuple(sent))
            except SendError as error:
                _log.warning(
                    "meta.send_failed",
                    to=mask_number(to),
                    code=error.code,
                    status=error.status,
                    retryable=error.retryable,
                    parts_sent=len(sent),
                    parts=len(parts),
                )
                raise
            ids = [
                str(item["id"])
                for item in answer.get("messages") or []
                if isinstance(item, dict) and item.get("id")
            ]
            if not ids:
                raise SendError(
                    _PROVIDER,
                    None,
                    f"no message id in the answer: {answer!r:.200}",
                    sent_ids=tuple(sent),
                )
            sent.extend(ids)
        return SendResult(provider_message_ids=tuple(sent))

    async def mark_read(
        self, message_id: str, *, typing: bool = True, from_: str | None = None
    ) -> None:
        """Mark an inbound message as read and, with ``typing``, show the typing indicator
        (until the reply is sent, or about 25 s). Use ``typing=False`` for messages that
        will not be answered (reactions, unsupported types). ``from_`` is the
        ``phone_number_id`` that received the message (``None``: the default).

        Raises ``SendError`` on failure; callers treat it as best effort.
        """
        url = self._messages_url(from_)
        if not message_id:
            raise SendError(_PROVIDER, None, "no message id to mark as read")
        body: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": message_id,
        }
        if typing:
            body["typing_indicator"] = {"type": "text"}
        await self._post(url, body, ())

    async def close(self) -> None:
        """Close the HTTP session (idempotent)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _messages_url(self, from_: str | None) -> str:
        phone_number_id = self._phone_number_id if from_ is None else from_.strip()
        if not _PHONE_NUMBER_ID.fullmatch(phone_number_id):
            raise SendError(_PROVIDER, None, f"from_ is not a phone number id: {from_!r}")
        return f"{self._base}/{phone_number_id}/messages"

    async def _post(self, url: str, body: dict[str, Any], sent: tuple[str, ...]) -> dict[str, Any]:
        session = self._http()
        try:
            async with session.post(url, json=body) as response:
                raw = await response.read()
                status = response.status
        except TimeoutError:
            raise SendError(
                _PROVIDER,
                None,
                "timed out: the message may or may not have been sent",
                sent_ids=sent,
            ) from None
        except aiohttp.ClientConnectorError as exc:
            # never connected: nothing was sent, trying again cannot duplicate
            raise SendError(_PROVIDER, None, f"cannot connect: {exc}", True, sent_ids=sent) from exc
        except aiohttp.ClientError as exc:
            raise SendError(_PROVIDER, None, f"transport error: {exc}", sent_ids=sent) from exc
        except Exception as exc:  # a sender raises only SendError
            raise SendError(_PROVIDER, None, f"unexpected error: {exc!r}", sent_ids=sent) from exc
        try:
            answer = json.loads(raw) if raw else {}
        except (UnicodeDecodeError, json.JSONDecodeError):
            answer = None
        if 200 <= status < 300 and isinstance(answer, dict):
            return answer
        raise _graph_error(status, answer, raw, sent)


_PHONE_NUMBER_ID = re.compile(r"[0-9]{1,32}")


def _recipient(to: str) -> dict[str, str]:
    """``{"to": digits}`` for a phone number, ``{"recipient": bsuid}`` for a business-scoped
    user id; ``SendError`` (not retryable) for anything else.

    Meta, "Business-scoped user IDs" (developers.facebook.com/documentation/
    business-messaging/whatsapp/business-scoped-user-ids, 2026): the messages endpoint
    takes a BSUID or parent BSUID in ``recipient``; with both ``to`` and ``recipient``,
    ``to`` wins; error 131062 when a BSUID cannot receive that type of message.
    """
    if is_bsuid(to):
        return {"recipient": to.strip()}
    try:
        return {"to": to_e164(to, field="to")[1:]}
    except MalformedPayload as exc:
        raise SendError(_PROVIDER, None, exc.reason) from None


def _graph_error(status: int, answer: object, raw: bytes, sent: tuple[str, ...]) -> SendError:
    error = answer.get("error") if isinstance(answer, dict) else None
    if not isinstance(error, dict):
        text = raw[:200].decode("utf-8", "replace")
        return SendError(_PROVIDER, None, f"HTTP {status}: {text}", status=status, sent_ids=sent)
    code = error.get("code")
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    message = str(error.get("message") or "")
    details = error.get("error_data")
    if isinstance(details, dict) and details.get("details"):
        message = f"{message} ({details['details']})"
    if error.get("fbtrace_id"):
        message = f"{message} [fbtrace_id {error['fbtrace_id']}]"
    if code == _OUTSIDE_WINDOW:
        return OutsideWindowError(_PROVIDER, code, message, status=status, sent_ids=sent)
    retryable = code in _RATE_LIMITED_CODES
    return SendError(_PROVIDER, code, message, retryable, status=status, sent_ids=sent)
