"""Normalised WhatsApp traffic: what every provider adapter produces and consumes."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ChannelName",
    "InboundKind",
    "InboundMessage",
    "Location",
    "Media",
    "ParsedDelivery",
    "SendResult",
    "StatusUpdate",
    "make_thread_id",
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
]


def make_thread_id(channel: str, business_number: str, user_number: str) -> str:
    """``"{channel}:{business_number}:{user_number}"`` (numbers in E.164)."""
    return f"{channel}:{business_number}:{user_number}"


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
    user_number: str  # E.164
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

    @property
    def thread_id(self) -> str:
        return make_thread_id(self.channel, self.business_number, self.user_number)

    @property
    def answerable(self) -> bool:
        """Reactions and unsupported types are recorded, never answered."""
        return self.kind not in ("reaction", "unsupported")

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
    recipient: str | None = None  # E.164
    error_code: str | None = None
    error_message: str | None = None


class ParsedDelivery(BaseModel):
    """Everything one webhook delivery carried."""

    model_config = ConfigDict(frozen=True)

    messages: tuple[InboundMessage, ...] = ()
    statuses: tuple[StatusUpdate, ...] = ()


class SendResult(BaseModel):
    """What a provider answered to one reply (possibly split in several parts)."""

    model_config = ConfigDict(frozen=True)

    provider_message_ids: tuple[str, ...] = Field(default_factory=tuple)
