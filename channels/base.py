"""The port every outbound channel implements."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from channels.models import SendResult

__all__ = ["Sender"]


@runtime_checkable
class Sender(Protocol):
    """Sends replies on one channel: ``TwilioSender``, ``MetaSender`` or ``OutboxSender``."""

    @property
    def provider(self) -> str:
        """``"twilio"``, ``"meta"`` or ``"outbox"`` (for logs and metrics)."""
        ...

    @property
    def max_length(self) -> int:
        """The longest part the provider accepts; longer texts are split by ``send_text``."""
        ...

    async def send_text(self, to: str, text: str, *, from_: str | None = None) -> SendResult:
        """Send ``text`` (split if needed) to ``to`` (E.164; on Meta also a business-scoped
        user id) from the business address ``from_`` (Twilio: ``whatsapp:+E164`` or a
        Messaging Service SID ``MG…``; Meta: a phone number id; ``None``: the sender's
        default). Raises only ``SendError``, on every failure: a bad ``to``/``from_`` or a
        blank text is a non-retryable one."""
        ...

    async def mark_read(
        self, message_id: str, *, typing: bool = True, from_: str | None = None
    ) -> None:
        """Mark an inbound message as read where the provider supports it (else no-op);
        ``typing`` also shows the typing indicator until the reply (or ~25 s); ``from_``
        is the business address that received it (Meta: its phone number id)."""
        ...

    async def close(self) -> None:
        """Release connections; idempotent."""
        ...
