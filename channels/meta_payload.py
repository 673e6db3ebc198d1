"""Meta WhatsApp Cloud API webhook payloads → ``ParsedDelivery``.

A delivery batches entries, changes, messages and statuses. A body that is not a delivery
(not JSON, nested too deeply, not an object, wrong ``object``, no ``entry`` list) raises
``MalformedPayload``; inside a delivery, each item that cannot be understood becomes a
``RejectedItem`` (its path and reason) and the rest is kept.

Choices where Meta's documentation is silent (safe side):

- Lone surrogates (``"\\ud800"``) are repaired to U+FFFD (see ``channels.json_body``).
- A user is keyed by phone (E.164) when ``from`` / ``contacts[].wa_id`` give one, else by
  the business-scoped user id (``from_user_id`` / ``contacts[].user_id``). A message
  without either is matched to the change's only contact, if there is exactly one.
- A message whose type object is missing is ``unsupported`` (with the error) when Meta
  attached ``errors`` (WhatsApp Web resending an interactive message: 131000); without
  ``errors`` it is rejected as malformed.
- Edits (``edit``) and deletes (``revoke``) are documented for Coexistence numbers only;
  elsewhere Cloud API sends ``unsupported`` with ``unsupported.type`` ``edit`` / ``poll_…``
  and no content: those stay ``unsupported`` (``raw_type`` ``"unsupported.edit"``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationError
from pydantic_core import PydanticCustomError

from channels.errors import MalformedPayload
from channels.json_body import load_json
from channels.models import (
    InboundKind,
    InboundMessage,
    Location,
    Media,
    ParsedDelivery,
    RejectedItem,
    StatusUpdate,
)
from channels.numbers import is_bsuid, redact_digits, to_e164

__all__ = ["parse_meta_payload"]

_PROVIDER = "meta"
_OBJECT = "whatsapp_business_account"
_MAX_UNIX_DIGITS = 12  # year 33658: more digits is not a timestamp (and int() stays cheap)
_MAX_FLOW_FIELDS = 50
# A group id from the Groups API is base64-like ("Y2FwaV9ncm91cDox…"): printable ASCII.
_GROUP_ID = re.compile(r"[!-~]{1,256}")


# --------------------------------------------------------------------------- wire models


def _unix_time(value: object) -> datetime:
    seconds: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        seconds = value
    elif (
        isinstance(value, str)
        and value.isascii()
        and value.isdigit()
        and len(value) <= _MAX_UNIX_DIGITS
    ):
        seconds = int(value)
    if seconds is not None:
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            pass
    raise PydanticCustomError("unix_time", "is not a unix time: {value}", {"value": _short(value)})


_UnixTime = Annotated[datetime, PlainValidator(_unix_time)]
_T = TypeVar("_T")


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


_M = TypeVar("_M", bound=_Model)


class _Metadata(_Model):
    display_phone_number: str
    phone_number_id: str


class _ValueHead(_Model):
    metadata: _Metadata


class _Profile(_Model):
    name: str | None = None
    username: str | None = None


class _Contact(_Model):
    wa_id: str | None = None
    user_id: str | None = None  # business-scoped user id (BSUID)
    profile: _Profile | None = None


class _Context(_Model):
    id: str | None = None


class _Error(_Model):
    code: Any = None
    title: str | None = None
    message: str | None = None


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


class _FlowReply(_Model):
    name: str | None = None
    body: str | None = None
    response_json: str | None = None


class _Interactive(_Model):
    type: str
    button_reply: _Reply | None = None
    list_reply: _Reply | None = None
    nfm_reply: _FlowReply | None = None


class _Button(_Model):
    payload: str | None = None
    text: str


class _Reaction(_Model):
    message_id: str
    emoji: str | None = None


class _Caption(_Model):
    caption: str | None = None


class _EditedMessage(_Model):
    type: str | None = None
    text: _Text | None = None
    image: _Caption | None = None
    video: _Caption | None = None
    document: _Caption | None = None


class _Edit(_Model):
    original_message_id: str
    message: _EditedMessage | None = None


class _Revoke(_Model):
    original_message_id: str


class _Subtype(_Model):  # unsupported.type, system.type
    type: str | None = None


class _Message(_Model):
    from_: str | None = Field(None, alias="from")
    from_user_id: str | None = None
    id: str
    timestamp: _UnixTime
    type: str
    context: _Context | None = None
    errors: list[_Error] = Field(default_factory=list)
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
    edit: _Edit | None = None
    revoke: _Revoke | None = None
    unsupported: _Subtype | None = None
    system: _Subtype | None = None


class _Status(_Model):
    id: str
    status: str
    timestamp: _UnixTime
    recipient_id: str | None = None
    recipient_user_id: str | None = None
    recipient_type: str | None = None
    errors: list[_Error] = Field(default_factory=list)


# --------------------------------------------------------------------------- parsing


def parse_meta_payload(body: bytes) -> ParsedDelivery:
    """One webhook delivery → every message and status it holds, in payload order, and
    each item that could not be understood (``rejected``: path and reason, e.g.
    ``entry[0].changes[1].value.messages[0]``, ``timestamp is not a unix time: '17x'``).

    Changes whose ``field`` is not ``"messages"`` are skipped; unknown fields are ignored.
    ``MalformedPayload`` only for a body that is not a delivery at all.
    """
    data = load_json(body.decode("utf-8", "replace"), provider=_PROVIDER)
    if not isinstance(data, dict):
        raise MalformedPayload("body is not a JSON object", provider=_PROVIDER)
    if "object" not in data:
        raise MalformedPayload("missing field object", provider=_PROVIDER)
    if data["object"] != _OBJECT:
        raise MalformedPayload(
            f"object is {_short(data['object'])}, expected {_OBJECT!r}", provider=_PROVIDER
        )
    if "entry" not in data:
        raise MalformedPayload("missing field entry", provider=_PROVIDER)
    entries = data["entry"]
    if not isinstance(entries, list):
        raise MalformedPayload(f"entry is not a list, got {_short(entries)}", provider=_PROVIDER)
    parsed = _Parsed()
    for e, entry in enumerate(entries):
        changes = _items(entry, "changes", f"entry[{e}]", parsed)
        for c, change in enumerate(changes):
            path = f"entry[{e}].changes[{c}]"
            if not isinstance(change, dict):
                parsed.reject(path, f"is not an object, got {_short(change)}")
            elif not isinstance(change.get("field"), str):
                parsed.reject(path, "missing field field")
            elif change["field"] == "messages":
                if change.get("value") is None:
                    parsed.reject(f"{path}.value", "missing field value")
                else:
                    _parse_value(change["value"], f"{path}.value", parsed)
    return ParsedDelivery(
        messages=tuple(parsed.messages),
        statuses=tuple(parsed.statuses),
        rejected=tuple(parsed.rejected),
    )


class _Parsed:
    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []
        self.statuses: list[StatusUpdate] = []
        self.rejected: list[RejectedItem] = []

    def reject(self, path: str, reason: str, item: object = None) -> None:
        wamid = item.get("id") if isinstance(item, dict) else None
        self.rejected.append(
            RejectedItem(
                path=path,
                reason=reason,
                provider_message_id=wamid if isinstance(wamid, str) and wamid else None,
            )
        )


def _items(container: object, name: str, path: str, parsed: _Parsed) -> list[Any]:
    """``container[name]`` as a list; an absent one is empty, anything else is rejected."""
    if not isinstance(container, dict):
        parsed.reject(path, f"is not an object, got {_short(container)}")
        return []
    items = container.get(name)
    if items is None:
        return []
    if not isinstance(items, list):
        parsed.reject(f"{path}.{name}", f"is not a list, got {_short(items)}")
        return []
    return items


def _parse_value(value: object, path: str, parsed: _Parsed) -> None:
    try:
        head = _validate(_ValueHead, value)
        business = _e164(head.metadata.display_phone_number, "metadata.display_phone_number")
    except MalformedPayload as exc:  # nothing in it can be attributed to our number
        parsed.reject(path, exc.reason)
        return
    contacts: list[_Contact] = []
    for i, raw in enumerate(_items(value, "contacts", path, parsed)):
        try:
            contacts.append(_validate(_Contact, raw))
        except MalformedPayload as exc:
            parsed.reject(f"{path}.contacts[{i}]", exc.reason, raw)
    for i, raw in enumerate(_items(value, "messages", path, parsed)):
        try:
            message = _validate(_Message, raw)
            parsed.messages.append(
                _inbound(message, business, head.metadata.phone_number_id, contacts)
            )
        except MalformedPayload as exc:
            parsed.reject(f"{path}.messages[{i}]", exc.reason, raw)
    for i, raw in enumerate(_items(value, "statuses", path, parsed)):
        try:
            parsed.statuses.append(_status(_validate(_Status, raw)))
        except MalformedPayload as exc:
            parsed.reject(f"{path}.statuses[{i}]", exc.reason, raw)


def _validate(model: type[_M], data: object) -> _M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise MalformedPayload(_explain(exc), provider=_PROVIDER) from None


def _explain(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    first = errors[0]
    path = _join_path(first["loc"])
    if first["type"] == "missing":
        reason = f"missing field {path}"
    elif first["type"] == "unix_time":
        reason = f"{path} {first['msg']}"
    else:
        msg = first["msg"]
        reason = f"{path}: {msg[:1].lower()}{msg[1:]}, got {_short(first.get('input'))}"
    if len(errors) > 1:
        reason += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return reason


def _join_path(loc: Sequence[int | str]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "item"


def _short(value: object) -> str:
    """A repr of at most 40 characters, cheap even for a huge value."""
    if isinstance(value, str | bytes):
        value = value[:40]
    elif isinstance(value, dict | list):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _e164(value: str, field: str) -> str:
    try:
        return to_e164(value, field=field)
    except MalformedPayload as exc:
        raise MalformedPayload(exc.reason, provider=_PROVIDER) from None


def _user(msg: _Message, contacts: Sequence[_Contact]) -> tuple[str, str | None, _Contact | None]:
    """The user's key (E.164, else BSUID), their BSUID if given, and their contact entry."""
    contact = next(
        (
            c
            for c in contacts
            if (msg.from_ and c.wa_id == msg.from_)
            or (msg.from_user_id and c.user_id == msg.from_user_id)
        ),
        None,
    )
    if contact is None and not msg.from_ and not msg.from_user_id and len(contacts) == 1:
        contact = contacts[0]
    phone = msg.from_ or (contact.wa_id if contact else None)
    bsuid = msg.from_user_id or (contact.user_id if contact else None)
    if phone and is_bsuid(phone):  # a BSUID where the phone usually is
        bsuid, phone = bsuid or phone, None
    if bsuid is not None and not is_bsuid(bsuid):
        raise MalformedPayload(
            f"from_user_id is not a business-scoped user id: {redact_digits(bsuid)!r}",
            provider=_PROVIDER,
        )
    if phone:
        return _e164(phone, "from"), bsuid, contact
    if bsuid:
        return bsuid, bsuid, contact
    raise MalformedPayload(
        "missing field from (and no business-scoped user id)", provider=_PROVIDER
    )


class _Missing(MalformedPayload):
    """The message's type object (or a part of it) is absent."""


def _need(value: _T | None, name: str) -> _T:
    if value is None:
        raise _Missing(f"missing field {name}", provider=_PROVIDER)
    return value


def _inbound(
    msg: _Message, business: str, phone_number_id: str, contacts: Sequence[_Contact]
) -> InboundMessage:
    user, bsuid, contact = _user(msg, contacts)
    error_code, error_message = _first_error(msg.errors)
    fields: dict[str, Any] = {}
    try:
        kind = _content(msg, fields)
    except _Missing:
        if not msg.errors:
            raise
        # e.g. an interactive message resent by WhatsApp Web without its object (131000)
        kind, fields = "unsupported", {"raw_type": msg.type}
    return InboundMessage(
        channel="meta",
        provider_message_id=msg.id,
        business_number=business,
        user_number=user,
        kind=kind,
        timestamp=msg.timestamp,
        profile_name=contact.profile.name if contact and contact.profile else None,
        reply_to=msg.context.id if msg.context and msg.context.id else None,
        phone_number_id=phone_number_id,
        user_bsuid=bsuid,
        error_code=error_code,
        error_message=error_message,
        **fields,
    )


def _content(msg: _Message, fields: dict[str, Any]) -> InboundKind:
    """Fill ``fields`` with the message's content; return its kind."""
    match msg.type:
        case "text":
            fields["text"] = _need(msg.text, "text").body
            return "text"
        case "image" | "audio" | "video" | "document" | "sticker":
            obj: _MediaObject = _need(getattr(msg, msg.type), msg.type)
            fields["media"] = (
                Media(
                    kind=msg.type,
                    media_id=obj.id,
                    mime_type=obj.mime_type,
                    caption=obj.caption,
                    filename=obj.filename,
                ),
            )
            fields["text"] = obj.caption or ""
            return "media"
        case "location":
            loc = _need(msg.location, "location")
            fields["location"] = Location(
                latitude=loc.latitude, longitude=loc.longitude, name=loc.name, address=loc.address
            )
            return "location"
        case "contacts":
            fields["contacts"] = tuple(_need(msg.contacts, "contacts"))
            return "contacts"
        case "interactive":
            return _interactive(_need(msg.interactive, "interactive"), fields)
        case "button":
            button = _need(msg.button, "button")
            fields["payload"] = {"id": button.payload or button.text, "title": button.text}
            fields["text"] = button.text
            return "button"
        case "reaction":
            reaction = _need(msg.reaction, "reaction")
            emoji = reaction.emoji or None  # omitted (or empty) when the reaction is removed
            fields["reaction"] = {"message_id": reaction.message_id, "emoji": emoji}
            return "reaction"
        case "edit":
            edit = _need(msg.edit, "edit")
            fields["edit_of"] = edit.original_message_id
            fields["text"] = _edited_text(edit.message)
            return "edit"
        case "revoke":
            fields["deleted_id"] = _need(msg.revoke, "revoke").original_message_id
            return "delete"
        case "request_welcome":
            return "welcome"
        case "unsupported" | "system":
            sub = msg.unsupported if msg.type == "unsupported" else msg.system
            subtype = sub.type if sub is not None else None
            fields["raw_type"] = f"{msg.type}.{subtype}" if subtype else msg.type
            return "unsupported"
        case _:  # order, and types yet to come: recorded, never answered
            fields["raw_type"] = msg.type
            return "unsupported"


def _interactive(interactive: _Interactive, fields: dict[str, Any]) -> InboundKind:
    if interactive.type in ("button_reply", "list_reply"):
        chosen = _need(getattr(interactive, interactive.type), f"interactive.{interactive.type}")
        payload: dict[str, Any] = {"id": chosen.id, "title": chosen.title}
        if chosen.description:
            payload["description"] = chosen.description
        fields["payload"] = payload
        fields["text"] = chosen.title
        return "interactive"
    if interactive.type == "nfm_reply":
        flow = _need(interactive.nfm_reply, "interactive.nfm_reply")
        fields["payload"] = {
            "name": flow.name,
            "body": flow.body,
            "response": _flow_response(flow.response_json),
        }
        fields["text"] = flow.body or ""
        return "flow"
    fields["raw_type"] = f"interactive.{interactive.type}"
    return "unsupported"


def _flow_response(raw: str | None) -> dict[str, Any]:
    """The submitted form fields (at most 50); ``{}`` when absent or not a JSON object."""
    if not raw:
        return {}
    try:
        data = load_json(raw, provider=_PROVIDER, what="interactive.nfm_reply.response_json")
    except MalformedPayload:
        return {}
    if not isinstance(data, dict):
        return {}
    return dict(list(data.items())[:_MAX_FLOW_FIELDS])


def _edited_text(message: _EditedMessage | None) -> str:
    if message is None:
        return ""
    if message.text is not None:
        return message.text.body
    for part in (message.image, message.video, message.document):
        if part is not None and part.caption:
            return part.caption
    return ""


def _first_error(errors: Sequence[_Error]) -> tuple[str | None, str | None]:
    if not errors:
        return None, None
    error = errors[0]
    code = str(error.code)[:40] if error.code is not None else None
    return code, error.title or error.message


def _status(status: _Status) -> StatusUpdate:
    recipient: str | None = None
    bsuid = status.recipient_user_id
    if status.recipient_type == "group":
        if status.recipient_id is not None and not _GROUP_ID.fullmatch(status.recipient_id):
            raise MalformedPayload(
                f"recipient_id is not a group id: {_short(status.recipient_id)}",
                provider=_PROVIDER,
            )
        recipient = status.recipient_id
    else:
        phone = status.recipient_id
        if phone and is_bsuid(phone):
            bsuid, phone = bsuid or phone, None
        if bsuid is not None and not is_bsuid(bsuid):
            raise MalformedPayload(
                f"recipient_user_id is not a business-scoped user id: {redact_digits(bsuid)!r}",
                provider=_PROVIDER,
            )
        recipient = _e164(phone, "recipient_id") if phone else bsuid
    error_code, error_message = _first_error(status.errors)
    return StatusUpdate(
        channel="meta",
        provider_message_id=status.id,
        status=status.status,
        timestamp=status.timestamp,
        recipient=recipient,
        error_code=error_code,
        error_message=error_message,
        recipient_type=status.recipient_type,
        recipient_bsuid=bsuid,
    )
