"""The channel errors: one root, specific subclasses with structured fields.

``http_status`` is the one source of the HTTP status a webhook answers for each: 403 for
a bad signature, 400 for a body that is not a delivery, 413 for one too large to check;
the gateway's error map reads it from any ``ChannelError`` instead of keeping its own
table. ``SendError.retryable`` says whether a failed send may be tried again, and
``MediaError.reason`` what to tell the couple.
"""

from __future__ import annotations

from typing import ClassVar, Literal

__all__ = [
    "OUTSIDE_WINDOW_CODES",
    "ChannelError",
    "MalformedPayload",
    "MediaError",
    "MediaErrorReason",
    "OutsideWindowError",
    "PayloadTooLarge",
    "SendError",
    "SignatureError",
]

#: Provider error codes meaning "outside the 24-hour customer-service window: only an
#: approved template may be sent" (Twilio 63016, Meta 131047). They come back either
#: from the send call (``OutsideWindowError``) or later in a failed ``StatusUpdate``.
OUTSIDE_WINDOW_CODES: frozenset[str] = frozenset({"63016", "131047"})


class ChannelError(Exception):
    """Root of every error raised by ``channels``."""

    http_status: ClassVar[int] = 500

    def __init__(self, message: str, *, provider: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider


class SignatureError(ChannelError):
    """The delivery is not proven to come from the provider (missing or wrong signature)."""

    http_status: ClassVar[int] = 403

    def __init__(self, reason: str, *, provider: str | None = None) -> None:
        super().__init__(reason, provider=provider)
        self.reason = reason


class MalformedPayload(ChannelError):
    """A signed delivery that cannot be understood; ``reason`` says exactly what is wrong."""

    http_status: ClassVar[int] = 400

    def __init__(self, reason: str, *, provider: str | None = None) -> None:
        super().__init__(reason, provider=provider)
        self.reason = reason


class PayloadTooLarge(ChannelError):
    """A delivery too large (bytes, or form fields) to be checked within bounds."""

    http_status: ClassVar[int] = 413

    def __init__(self, reason: str, *, provider: str | None = None) -> None:
        super().__init__(reason, provider=provider)
        self.reason = reason


class SendError(ChannelError):
    """A send the provider refused or that could not be completed.

    ``retryable`` is True only when trying again cannot deliver the message twice (the
    provider rejected the request before accepting it, e.g. a rate limit, or the
    connection was never established). ``sent_ids`` holds the provider ids of the parts
    of a split reply that were accepted before the failure.
    """

    http_status: ClassVar[int] = 502

    def __init__(
        self,
        provider: str,
        code: int | None,
        message: str,
        retryable: bool = False,
        *,
        status: int | None = None,
        sent_ids: tuple[str, ...] = (),
    ) -> None:
        super().__init__(
            f"{provider} send failed ({code if code is not None else 'no code'}): {message}",
            provider=provider,
        )
        self.code = code
        self.reason = message
        self.retryable = retryable
        self.status = status
        self.sent_ids = sent_ids


class OutsideWindowError(SendError):
    """Outside the 24-hour window: only an approved template may be sent (never retryable)."""

    def __init__(
        self,
        provider: str,
        code: int | None,
        message: str,
        *,
        status: int | None = None,
        sent_ids: tuple[str, ...] = (),
    ) -> None:
        super().__init__(provider, code, message, retryable=False, status=status, sent_ids=sent_ids)


MediaErrorReason = Literal[
    "forbidden_host", "too_large", "unsupported_type", "download_failed", "timeout"
]


class MediaError(ChannelError):
    """A media file that could not be fetched; never retried by the fetcher.

    ``reason`` is for machines: ``forbidden_host`` (a URL or redirect outside the
    provider's origins: nothing was requested there), ``too_large`` (over ``max_bytes``,
    by Content-Length, the provider's declared size or while streaming),
    ``unsupported_type``, ``download_failed`` (the provider refused, or the transport
    failed; ``status`` holds the HTTP status when there was one) and ``timeout``.
    """

    http_status: ClassVar[int] = 502

    def __init__(
        self,
        reason: MediaErrorReason,
        message: str,
        *,
        provider: str | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message, provider=provider)
        self.reason: MediaErrorReason = reason
        self.status = status
