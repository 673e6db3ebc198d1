"""Phone numbers: normalise to E.164, mask for logs."""

from __future__ import annotations

from channels.errors import MalformedPayload

__all__ = ["mask_number", "mask_thread_id", "to_e164"]

_WHATSAPP_PREFIX = "whatsapp:"
_SEPARATORS = str.maketrans("", "", " -().\u00a0")


def to_e164(value: str, *, field: str = "number") -> str:
    """``"whatsapp:+55 11 99999-0000"`` → ``"+5511999990000"``.

    Strips a ``whatsapp:`` prefix and the usual separators (spaces, dashes, dots,
    parentheses), adds the leading ``+``; the rest must be 8 to 15 digits, else
    ``MalformedPayload`` naming ``field``.
    """
    raw = value.strip()
    if raw[: len(_WHATSAPP_PREFIX)].lower() == _WHATSAPP_PREFIX:
        raw = raw[len(_WHATSAPP_PREFIX) :]
    digits = raw.translate(_SEPARATORS)
    digits = digits.removeprefix("+")
    if not (digits.isascii() and digits.isdigit()) or not 8 <= len(digits) <= 15:
        raise MalformedPayload(f"{field} is not a phone number: {value!r}")
    return "+" + digits


def mask_number(value: str) -> str:
    """A number fit for logs: country code and a few digits, the middle masked, the last 4.

    ``"+5511999990000"`` → ``"+55119****0000"``; ``"whatsapp:+14155238886"`` →
    ``"+141****8886"``. Never raises: anything that is not a number is masked whole.
    """
    raw = value.strip()
    if raw[: len(_WHATSAPP_PREFIX)].lower() == _WHATSAPP_PREFIX:
        raw = raw[len(_WHATSAPP_PREFIX) :]
    digits = raw.translate(_SEPARATORS).removeprefix("+")
    if not (digits.isascii() and digits.isdigit()) or len(digits) < 6:
        return "***"
    tail = 4
    masked = max(4, len(digits) - 9)
    head = max(0, len(digits) - tail - masked)
    masked = len(digits) - tail - head
    return "+" + digits[:head] + "*" * masked + digits[-tail:]


def mask_thread_id(thread_id: str) -> str:
    """A thread id fit for logs: ``"twilio:+14155238886:+55119****0000"`` (the business
    number is ours and stays; the couple's is masked)."""
    channel, _, rest = thread_id.partition(":")
    business, _, user = rest.partition(":")
    return f"{channel}:{business}:{mask_number(user)}" if user else thread_id
