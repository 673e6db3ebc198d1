"""Normalised WhatsApp traffic: what every provider adapter produces and consumes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from channels.errors import MalformedPayload
from channels.numbers import is_bsuid, to_e164

__all__ = [
    "ChannelName",
    "InboundKind",
    "InboundMessage",
    "Location",
    "Media",
    "ParsedDelivery",
    "RejectedItem",
    "SendResult",
    "StatusUpdate",
    "make_thread_id",
    "thread_matcher",
]

ChannelName = Literal["twilio", "meta"]
InboundKind = Literal[
    "text",
    "media",
    "location",
    "contacts",
    "interactive",
    "button",
    "reaction",
    "unsupported",
    "edit",  # the user edited an earlier message: ``edit_of`` + the new ``text``
    "delete",  # the user deleted (revoked) an earlier message: ``deleted_id``
    "welcome",  # Meta ``request_welcome``: the user opened the chat for the first time
    "flow",  # Meta ``interactive.nfm_reply``: a WhatsApp Flow (form) was submitted
]

#: Kinds recorded but never answered (a sticker is ``media`` and is not answered either).
_SILENT_KINDS: frozenset[str] = frozenset({"reaction", "unsupported", "delete"})


def make_thread_id(channel: str, business_number: str, user_number: str) -> str:
    """``"{channel}:{business_number}:{user_number}"``: the business number in E.164, the
    user's key as ``InboundMessage.user_number`` (E.164, or Meta's BSUID)."""
    return f"{channel}:{business_number}:{user_number}"


def thread_matcher(value: str) -> Callable[[str], bool]:
    """What a person means by a thread, as a test on thread ids.

    A whole thread id matches that thread — also when a query string turned its ``+``
    into a space, or the numbers came without ``+``; a phone number (any usual spelling)
    or a business-scoped user id matches every thread of that user; anything else
    matches the thread ids that contain it.
    """

    def key(part: str) -> str:
        part = part.strip()
        if is_bsuid(part):
            return part
        try:
            return to_e164(part)
        except MalformedPayload:
            return part

    text = value.strip()
    if text.count(":") >= 2:
        channel, business, user = text.split(":", 2)
        wanted = make_thread_id(channel.strip(), key(business), key(user))
        return lambda thread_id: thread_id == wanted
    user = key(text)
    if user != text or user.startswith("+") or is_bsuid(user):
        return lambda thread_id: thread_id.rsplit(":", 1)[-1] == user
    return lambda thread_id: text in thread_id


class Media(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: str  # image | audio | video | document | sticker | media
    url: str | None = None  # Twilio: MediaUrlN
    media_id: str | None = None  # Meta: media id
    mime_type: str | None = None
    caption: str | None = None
    filename: str | None = None


class Location(BaseModel):
    model_config = ConfigDict(frozen=True)

    latitude: float
    longitude: float
    name: str | None = None
    address: str | None = None


class InboundMessage(BaseModel):
    """One message a user sent, provider-independent."""

    model_config = ConfigDict(frozen=True)

    channel: ChannelName
    provider_message_id: str
    business_number: str  # E.164, "+5511..."
    # The thread's user key: E.164 when the phone is known, otherwise Meta's
    # business-scoped user id ("BR.1502576394655843"); see ``user_bsuid``.
    user_number: str
    kind: InboundKind
    timestamp: datetime  # provider timestamp, timezone-aware UTC
    text: str = ""  # what the user typed (body / caption / button text)
    profile_name: str | None = None
    media: tuple[Media, ...] = ()
    location: Location | None = None
    contacts: tuple[dict[str, Any], ...] = ()
    payload: dict[str, Any] | None = None  # button / interactive reply: {"id":…, "title":…}
    reaction: dict[str, Any] | None = None  # {"message_id":…, "emoji": … | None}
    reply_to: str | None = None  # provider id of the message this one answers
    raw_type: str | None = None  # provider's own type name, for unsupported ones
    phone_number_id: str | None = None  # Meta: metadata.phone_number_id of the receiving number
    messaging_service_sid: str | None = None  # Twilio: the Messaging Service written to, if any
    user_bsuid: str | None = None  # Meta: the user's business-scoped user id, when given
    edit_of: str | None = None  # kind "edit": provider id of the message the user edited
    deleted_id: str | None = None  # kind "delete": provider id of the message deleted
    error_code: str | None = None  # the provider's error on the message (e.g. Meta 131051)
    error_message: str | None = None

    @property
    def reply_from(self) -> str:
        """The business address a reply leaves from: the one the couple wrote to (a
        Twilio number or Messaging Service, a Meta phone number id); "" if unknown."""
        if self.channel == "meta":
            return self.phone_number_id or ""
        return self.messaging_service_sid or self.business_number

    @property
    def written_to(self) -> tuple[str, ...]:
        """Every business address of ours this message was written to: the Meta phone
        number id; the Twilio number and, when it belongs to one, its Messaging Service."""
        if self.channel == "meta":
            return (self.reply_from,)
        return (self.business_number, *filter(None, [self.messaging_service_sid]))

    @property
    def thread_id(self) -> str:
        return make_thread_id(self.channel, self.business_number, self.user_number)

    @property
    def answerable(self) -> bool:
        """Reactions, stickers, deletes and unsupported types are recorded, never answered.

        An edit is answered (the agent reads it as a correction); so are ``welcome`` (the
        greeting) and ``flow`` (a submitted form, like a button press).
        """
        if self.kind in _SILENT_KINDS:
            return False
        return not (self.media and all(item.kind == "sticker" for item in self.media))

    def agent_text(self) -> str:
        """What the agent reads: the text, or a short PT-BR description of non-text content."""
        from channels.describe import describe  # local import: avoids an import cycle

        return describe(self)


class StatusUpdate(BaseModel):
    """A provider's delivery status for a message we sent."""

    model_config = ConfigDict(frozen=True)

    channel: ChannelName
    provider_message_id: str
    status: str  # sent | delivered | read | failed | undelivered
    timestamp: datetime
    # E.164 for a person whose phone is known; otherwise their BSUID (Meta), or the
    # group id when ``recipient_type`` is "group" (Meta Groups API).
    recipient: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    recipient_type: str | None = None  # Meta: "individual" | "group" (None: not said)
    recipient_bsuid: str | None = None  # Meta: recipient_user_id, when given


class RejectedItem(BaseModel):
    """One item of a delivery that could not be understood, kept out of the rest.

    ``path`` locates it in the payload (``entry[0].changes[1].value.messages[2]``),
    ``reason`` says what is wrong, ``provider_message_id`` is its id when one was readable.
    """

    model_config = ConfigDict(frozen=True)

    path: str
    reason: str
    provider_message_id: str | None = None


class ParsedDelivery(BaseModel):
    """Everything one webhook delivery carried.

    ``rejected`` lists the items that could not be understood: the good items are kept and
    the delivery is still acknowledged (a refused delivery is retried for days and would be
    refused again). A body that is not a delivery at all raises ``MalformedPayload``.
    """

    model_config = ConfigDict(frozen=True)

    messages: tuple[InboundMessage, ...] = ()
    statuses: tuple[StatusUpdate, ...] = ()
    rejected: tuple[RejectedItem, ...] = ()


class SendResult(BaseModel):
    """What a provider answered to one reply (possibly split in several parts)."""

    model_config = ConfigDict(frozen=True)

    provider_message_ids: tuple[str, ...] = Field(default_factory=tuple)
