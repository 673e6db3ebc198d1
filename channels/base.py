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

    async def send_text(self, to: str, text: str) -> SendResult:
        """Send ``text`` (split if needed) to ``to`` (E.164); raise ``SendError`` on failure."""
        ...

    async def mark_read(self, message_id: str, *, typing: bool = True) -> None:
        """Mark an inbound message as read where the provider supports it (else no-op);
        ``typing`` also shows the typing indicator until the reply (or ~25 s)."""
        ...

    async def close(self) -> None:
        """Release connections; idempotent."""
        ...
