"""Builders of realistic inbound webhook deliveries, as Twilio and Meta send them.

Twilio: ``twilio_inbound_params`` / ``twilio_status_params`` give the form fields (a
``dict[str, str]``) and ``sign_twilio`` the ``X-Twilio-Signature`` for them.

Meta: build messages with ``meta_text_message``, ``meta_media_message``, … then wrap
them with ``meta_payload(messages=[...], statuses=[...])`` (one entry, one change), or
compose several with ``meta_change`` / ``meta_entry`` / ``meta_delivery``. ``meta_body``
serialises, ``sign_meta`` gives the ``X-Hub-Signature-256`` for the exact bytes.

Numbers are given in E.164 (``"+5511999990000"``) and converted to each wire format.
A Meta user known only by a business-scoped user id: ``from_=None, user_id="BR.…"``.

Recorded wire shapes written from the providers' docs live in ``tests/data/`` (see its
README): ``fixture_bytes("meta/edit.json")``, ``meta_fixture("edit.json")``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from channels.twilio import compute_twilio_signature

__all__ = [
    "BUSINESS_NUMBER",
    "META_PHONE_NUMBER_ID",
    "META_WABA_ID",
    "TWILIO_ACCOUNT_SID",
    "USER_NUMBER",
    "content_type_family",
    "fixture_bytes",
    "meta_body",
    "meta_button_message",
    "meta_change",
    "meta_contacts_message",
    "meta_delivery",
    "meta_edit_message",
    "meta_entry",
    "meta_fixture",
    "meta_flow_message",
    "meta_interactive_message",
    "meta_location_message",
    "meta_media_message",
    "meta_message",
    "meta_payload",
    "meta_reaction_message",
    "meta_revoke_message",
    "meta_status",
    "meta_text_message",
    "meta_text_payload",
    "meta_unsupported_message",
    "meta_welcome_message",
    "new_twilio_sid",
    "new_wamid",
    "sign_meta",
    "sign_twilio",
    "twilio_inbound_params",
    "twilio_status_params",
]

USER_NUMBER = "+5511999990000"
BUSINESS_NUMBER = "+14155238886"
TWILIO_ACCOUNT_SID = "AC" + "0" * 32
META_PHONE_NUMBER_ID = "106540352242922"
META_WABA_ID = "102290129340398"
DATA_DIR = Path(__file__).resolve().parent.parent / "data"


def _digits(number: str) -> str:
    return number.removeprefix("whatsapp:").removeprefix("+")


def fixture_bytes(name: str) -> bytes:
    """The exact bytes of ``tests/data/<name>`` (e.g. ``"twilio/status_read.form"``)."""
    return (DATA_DIR / name).read_bytes()


def meta_fixture(name: str) -> dict[str, Any]:
    """``tests/data/meta/<name>`` decoded, to alter before ``meta_body``."""
    data: dict[str, Any] = json.loads(fixture_bytes(f"meta/{name}"))
    return data


# --------------------------------------------------------------------------- Twilio


def new_twilio_sid(prefix: str = "SM") -> str:
    """A fresh sid: ``prefix`` + 32 hex digits, like ``SM1f0e…``."""
    return prefix + secrets.token_hex(16)


def twilio_inbound_params(
    *,
    sid: str | None = None,
    from_: str = USER_NUMBER,
    to: str = BUSINESS_NUMBER,
    body: str = "oi",
    profile_name: str | None = "Ana",
    account_sid: str = TWILIO_ACCOUNT_SID,
    media: Sequence[tuple[str, str]] = (),
    latitude: float | str | None = None,
    longitude: float | str | None = None,
    address: str | None = None,
    label: str | None = None,
    button_payload: str | None = None,
    button_text: str | None = None,
    replied_to: str | None = None,
    **extra: str,
) -> dict[str, str]:
    """The form fields of an inbound WhatsApp message webhook.

    ``from_`` / ``to`` are E.164 and sent as ``whatsapp:+…`` (pass a full ``"sms:+…"``
    to test rejection); ``media`` is ``[(url, content_type), …]``; ``extra`` fields are
    added (or override) as given, e.g. ``Forwarded="true"``.
    """
    sid = sid or new_twilio_sid()
    params: dict[str, str] = {
        "SmsMessageSid": sid,
        "NumMedia": str(len(media)),
        "SmsSid": sid,
        "SmsStatus": "received",
        "Body": body,
        "To": to if ":" in to else f"whatsapp:{to}",
        "NumSegments": "1",
        "ReferralNumMedia": "0",
        "MessageSid": sid,
        "AccountSid": account_sid,
        "From": from_ if ":" in from_ else f"whatsapp:{from_}",
        "ApiVersion": "2010-04-01",
        "WaId": _digits(from_),
        "MessageType": "text",
    }
    if profile_name is not None:
        params["ProfileName"] = profile_name
    for index, (url, content_type) in enumerate(media):
        params[f"MediaUrl{index}"] = url
        params[f"MediaContentType{index}"] = content_type
    if media:
        params["MessageType"] = content_type_family(media[0][1])
    if latitude is not None or longitude is not None:
        params["MessageType"] = "location"
        if latitude is not None:
            params["Latitude"] = str(latitude)
        if longitude is not None:
            params["Longitude"] = str(longitude)
    if address is not None:
        params["Address"] = address
    if label is not None:
        params["Label"] = label
    if button_payload is not None or button_text is not None:
        params["MessageType"] = "button"
        if button_payload is not None:
            params["ButtonPayload"] = button_payload
        if button_text is not None:
            params["ButtonText"] = button_text
    if replied_to is not None:
        params["OriginalRepliedMessageSid"] = replied_to
        params["OriginalRepliedMessageSender"] = params["To"]
    params.update(extra)
    return params


def content_type_family(content_type: str) -> str:
    """Twilio's ``MessageType`` for a media content type (image, audio, video, document)."""
    major = content_type.partition("/")[0]
    return major if major in ("image", "audio", "video") else "document"


def twilio_status_params(
    *,
    sid: str,
    status: str = "delivered",
    to: str = USER_NUMBER,
    from_: str = BUSINESS_NUMBER,
    account_sid: str = TWILIO_ACCOUNT_SID,
    error_code: str | int | None = None,
    error_message: str | None = None,
    **extra: str,
) -> dict[str, str]:
    """The form fields of a status callback for the message ``sid`` we sent to ``to``."""
    params: dict[str, str] = {
        "SmsSid": sid,
        "SmsStatus": status,
        "MessageStatus": status,
        "ChannelToAddress": to,
        "To": to if ":" in to else f"whatsapp:{to}",
        "ChannelPrefix": "whatsapp",
        "MessageSid": sid,
        "AccountSid": account_sid,
        "From": from_ if ":" in from_ else f"whatsapp:{from_}",
        "ApiVersion": "2010-04-01",
        "ChannelInstallSid": "XE" + "0" * 32,
        "StructuredMessage": "false",
    }
    if error_code is not None:
        params["ErrorCode"] = str(error_code)
    if error_message is not None:
        params["ErrorMessage"] = error_message
    params.update(extra)
    return params


def sign_twilio(auth_token: str, url: str, params: Mapping[str, str]) -> str:
    """The ``X-Twilio-Signature`` Twilio would send (twilio's own RequestValidator)."""
    return compute_twilio_signature(auth_token, url, params)


# --------------------------------------------------------------------------- Meta


def new_wamid() -> str:
    """A fresh WhatsApp message id, ``wamid.`` + base64-looking text."""
    return "wamid.HBgN" + secrets.token_urlsafe(36).replace("-", "A").replace("_", "B")


def meta_message(
    type_: str,
    content: Any = None,
    *,
    from_: str | None = USER_NUMBER,
    user_id: str | None = None,
    id: str | None = None,
    timestamp: int | str | None = None,
    context_id: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One entry of ``value.messages``: ``{"from", "id", "timestamp", "type", type_: content}``.

    ``content`` is the type's own object (omitted when None); ``timestamp`` defaults to
    now, sent as a string of unix seconds like Meta does. ``user_id`` adds the sender's
    BSUID (``from_user_id``); ``from_=None`` leaves the phone out, as for a user with a
    username.
    """
    message: dict[str, Any] = {
        "id": id or new_wamid(),
        "timestamp": str(int(time.time()) if timestamp is None else timestamp),
        "type": type_,
    }
    if from_ is not None:
        message["from"] = _digits(from_)
    if user_id is not None:
        message["from_user_id"] = user_id
    if content is not None:
        message[type_] = content
    if context_id is not None:
        message["context"] = {"from": _digits(BUSINESS_NUMBER), "id": context_id}
    message.update(extra)
    return message


def meta_text_message(body: str = "oi", **common: Any) -> dict[str, Any]:
    return meta_message("text", {"body": body}, **common)


def meta_media_message(
    kind: str = "image",
    *,
    media_id: str | None = None,
    mime_type: str | None = None,
    caption: str | None = None,
    filename: str | None = None,
    **common: Any,
) -> dict[str, Any]:
    """An image / audio / video / document / sticker message."""
    default_mime = {
        "image": "image/jpeg",
        "audio": "audio/ogg; codecs=opus",
        "video": "video/mp4",
        "document": "application/pdf",
        "sticker": "image/webp",
    }
    content: dict[str, Any] = {
        "id": media_id or str(secrets.randbelow(10**15)),
        "mime_type": mime_type or default_mime.get(kind, "application/octet-stream"),
        "sha256": secrets.token_urlsafe(32),
    }
    if caption is not None:
        content["caption"] = caption
    if filename is not None:
        content["filename"] = filename
    if kind == "audio":
        content["voice"] = True
    if kind == "sticker":
        content["animated"] = False
    return meta_message(kind, content, **common)


def meta_location_message(
    latitude: float = -23.5505,
    longitude: float = -46.6333,
    *,
    name: str | None = None,
    address: str | None = None,
    **common: Any,
) -> dict[str, Any]:
    content: dict[str, Any] = {"latitude": latitude, "longitude": longitude}
    if name is not None:
        content["name"] = name
    if address is not None:
        content["address"] = address
    return meta_message("location", content, **common)


def meta_contacts_message(
    contacts: Iterable[tuple[str, str]] = (("Ana Souza", "+5511988887777"),), **common: Any
) -> dict[str, Any]:
    """A shared-contacts message from ``[(formatted_name, phone), …]``."""
    cards = [
        {
            "name": {"formatted_name": name, "first_name": name.split()[0]},
            "phones": [{"phone": phone, "wa_id": _digits(phone), "type": "CELL"}],
        }
        for name, phone in contacts
    ]
    return meta_message("contacts", cards, **common)


def meta_interactive_message(
    reply_id: str = "ver_fatura",
    title: str = "Ver fatura",
    *,
    reply_type: str = "button_reply",
    description: str | None = None,
    **common: Any,
) -> dict[str, Any]:
    """A reply to an interactive message: ``reply_type`` is button_reply or list_reply."""
    reply: dict[str, Any] = {"id": reply_id, "title": title}
    if description is not None:
        reply["description"] = description
    return meta_message("interactive", {"type": reply_type, reply_type: reply}, **common)


def meta_button_message(
    payload: str = "VER_FATURA", text: str = "Ver fatura", **common: Any
) -> dict[str, Any]:
    """A template quick-reply button press."""
    return meta_message("button", {"payload": payload, "text": text}, **common)


def meta_reaction_message(
    message_id: str, emoji: str | None = "👍", **common: Any
) -> dict[str, Any]:
    """A reaction to ``message_id``; ``emoji=None`` is a removed reaction (no emoji key)."""
    content: dict[str, Any] = {"message_id": message_id}
    if emoji is not None:
        content["emoji"] = emoji
    return meta_message("reaction", content, **common)


def meta_unsupported_message(
    type_: str = "unsupported", *, subtype: str | None = None, **common: Any
) -> dict[str, Any]:
    """An unsupported (or unknown) type, with the error object Meta attaches;
    ``subtype`` is ``unsupported.type`` (``"edit"``, ``"poll_creation"``…)."""
    if subtype is not None:
        common["unsupported"] = {"type": subtype}
    return meta_message(
        type_,
        errors=[
            {
                "code": 131051,
                "title": "Message type unknown",
                "message": "Message type unknown",
                "error_data": {"details": "Message type is currently not supported."},
            }
        ],
        **common,
    )


def meta_edit_message(original_id: str, body: str = "gastei 500", **common: Any) -> dict[str, Any]:
    """The user edited ``original_id``; ``body`` is the new text (Coexistence numbers)."""
    content = {
        "original_message_id": original_id,
        "message": {"type": "text", "text": {"body": body}},
    }
    return meta_message("edit", content, **common)


def meta_revoke_message(original_id: str, **common: Any) -> dict[str, Any]:
    """The user deleted (revoked) ``original_id`` (Coexistence numbers)."""
    return meta_message("revoke", {"original_message_id": original_id}, **common)


def meta_welcome_message(**common: Any) -> dict[str, Any]:
    """``request_welcome``: the user opened the chat for the first time."""
    return meta_message("request_welcome", **common)


def meta_flow_message(
    response: Mapping[str, Any] | str, *, body: str = "Sent", **common: Any
) -> dict[str, Any]:
    """A WhatsApp Flow submitted (``interactive.nfm_reply``); ``response`` becomes its
    ``response_json`` (a mapping is serialised, a string is sent as is)."""
    raw = response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)
    content = {
        "type": "nfm_reply",
        "nfm_reply": {"name": "flow", "body": body, "response_json": raw},
    }
    return meta_message("interactive", content, **common)


def meta_status(
    id: str,
    status: str = "delivered",
    *,
    recipient: str | None = USER_NUMBER,
    recipient_user_id: str | None = None,
    recipient_type: str | None = None,
    timestamp: int | str | None = None,
    error_code: int | None = None,
    error_title: str | None = None,
) -> dict[str, Any]:
    """One entry of ``value.statuses`` for the message ``id`` we sent. ``recipient`` is
    E.164 (or a group id with ``recipient_type="group"``); ``None`` leaves it out."""
    entry: dict[str, Any] = {
        "id": id,
        "status": status,
        "timestamp": str(int(time.time()) if timestamp is None else timestamp),
    }
    if recipient is not None:
        entry["recipient_id"] = recipient if recipient_type == "group" else _digits(recipient)
    if recipient_user_id is not None:
        entry["recipient_user_id"] = recipient_user_id
    if recipient_type is not None:
        entry["recipient_type"] = recipient_type
    if status != "failed":
        entry["conversation"] = {
            "id": secrets.token_hex(16),
            "origin": {"type": "service"},
        }
        entry["pricing"] = {"billable": True, "pricing_model": "CBP", "category": "service"}
    if error_code is not None:
        entry["errors"] = [
            {
                "code": error_code,
                "title": error_title or "Error",
                "message": error_title or "Error",
                "error_data": {"details": error_title or "Error"},
            }
        ]
    return entry


def meta_change(
    messages: Sequence[Mapping[str, Any]] = (),
    statuses: Sequence[Mapping[str, Any]] = (),
    *,
    display_phone_number: str = BUSINESS_NUMBER,
    phone_number_id: str = META_PHONE_NUMBER_ID,
    profiles: Mapping[str, str] | None = None,
    field: str = "messages",
) -> dict[str, Any]:
    """One ``changes[]`` item. ``contacts`` is built from the senders of ``messages``
    (``wa_id`` and ``user_id`` as each message gives them), named by ``profiles``
    (``{E.164, wa_id or BSUID: name}``, default: everyone is "Ana")."""
    value: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "metadata": {
            "display_phone_number": _digits(display_phone_number),
            "phone_number_id": phone_number_id,
        },
    }
    if messages:
        names = {_digits(key): name for key, name in (profiles or {}).items()}
        senders = dict.fromkeys((m.get("from"), m.get("from_user_id")) for m in messages)
        contacts: list[dict[str, Any]] = []
        for wa_id, user_id in senders:
            contact: dict[str, Any] = {"profile": {"name": names.get(wa_id or user_id, "Ana")}}
            if wa_id is not None:
                contact["wa_id"] = wa_id
            if user_id is not None:
                contact["user_id"] = user_id
            contacts.append(contact)
        value["contacts"] = contacts
        value["messages"] = list(messages)
    if statuses:
        value["statuses"] = list(statuses)
    return {"value": value, "field": field}


def meta_entry(*changes: Mapping[str, Any], waba_id: str = META_WABA_ID) -> dict[str, Any]:
    return {"id": waba_id, "changes": list(changes)}


def meta_delivery(*entries: Mapping[str, Any]) -> dict[str, Any]:
    """A whole delivery from ``meta_entry`` items (several entries are legal)."""
    return {"object": "whatsapp_business_account", "entry": list(entries)}


def meta_payload(
    messages: Sequence[Mapping[str, Any]] = (),
    statuses: Sequence[Mapping[str, Any]] = (),
    **change_options: Any,
) -> dict[str, Any]:
    """The usual delivery: one entry, one ``messages`` change (see ``meta_change``)."""
    return meta_delivery(meta_entry(meta_change(messages, statuses, **change_options)))


def meta_text_payload(
    body: str = "oi",
    *,
    from_: str = USER_NUMBER,
    profile_name: str = "Ana",
    id: str | None = None,
    timestamp: int | str | None = None,
    **change_options: Any,
) -> dict[str, Any]:
    """A delivery holding one text message."""
    message = meta_text_message(body, from_=from_, id=id, timestamp=timestamp)
    return meta_payload([message], profiles={from_: profile_name}, **change_options)


def meta_body(payload: Mapping[str, Any]) -> bytes:
    """The bytes to POST (compact JSON, non-ASCII kept as UTF-8 like Meta)."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def sign_meta(app_secret: str, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value for ``body``: ``sha256=<hex>``."""
    digest = hmac.new(app_secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"
