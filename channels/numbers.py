"""Phone numbers: normalise to E.164, mask for logs; tell a business-scoped user id."""

from __future__ import annotations

import re

from channels.errors import MalformedPayload

__all__ = ["is_bsuid", "mask_number", "mask_thread_id", "to_e164"]

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


# Meta, "Business-scoped user IDs" (WhatsApp Business Platform docs, 2026): a two-letter
# country code, a period, up to 128 alphanumerics ("BR.1502576394655843"); a parent BSUID
# shared across portfolios has "ENT." after the country ("US.ENT.11815799212886844830").
_BSUID = re.compile(r"[A-Z]{2}\.(?:ENT\.)?[0-9A-Za-z]{1,128}")


def is_bsuid(value: str) -> bool:
    """Whether ``value`` is a WhatsApp business-scoped user id (or a parent one), the
    address Meta gives a user who hides their phone number behind a username."""
    return _BSUID.fullmatch(value.strip()) is not None
