"""User keys: phone numbers (normalised to E.164) and Meta's business-scoped user ids
(BSUIDs); both masked for logs."""

from __future__ import annotations

import re

from channels.errors import MalformedPayload

__all__ = ["is_bsuid", "mask_number", "mask_thread_id", "redact_digits", "to_e164"]

_WHATSAPP_PREFIX = "whatsapp:"
_SEPARATORS = str.maketrans("", "", " -().\u00a0")
# Meta's business-scoped user id: a two-letter ISO country code, a period, up to 128
# alphanumerics, e.g. "BR.1502576394655843"; a parent BSUID has "ENT." after the country
# ("US.ENT.11815799212886844830"). Stricter than needed on purpose: a BSUID becomes part
# of a thread id ("meta:+15550783881:BR.1502…"), so it may never hold a ":".
_BSUID = re.compile(r"[A-Z]{2}\.(?:ENT\.)?[A-Za-z0-9]{1,128}")
# Digits with the separators people type between them: "+55 (11) 99999-0000".
_NUMBER_LIKE = re.compile(r"\d[\d \-().\u00a0]*\d")


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
        raise MalformedPayload(f"{field} is not a phone number: {redact_digits(value)!r}")
    return "+" + digits


def redact_digits(value: str, *, limit: int = 40) -> str:
    """``value`` fit for an error reason that reaches the logs: at most ``limit``
    characters, every number-like run of 6+ digits (separators allowed) kept to its
    first 4 digits (``"sms:+5511999990000"`` → ``"sms:+5511*********"``), so a malformed
    number or id is never quoted whole."""
    return _NUMBER_LIKE.sub(_mask_run, value[:limit])


def _mask_run(match: re.Match[str]) -> str:
    run = match[0]
    if sum(ch.isdigit() for ch in run) < 6:
        return run
    out: list[str] = []
    seen = 0
    for ch in run:
        if ch.isdigit():
            seen += 1
            out.append(ch if seen <= 4 else "*")
        else:
            out.append(ch)
    return "".join(out)


def is_bsuid(value: str) -> bool:
    """Whether ``value`` is a WhatsApp business-scoped user id (or a parent one), the
    address Meta gives a user who hides their phone number behind a username, such as
    ``"BR.1502576394655843"``."""
    return _BSUID.fullmatch(value.strip()) is not None


def mask_number(value: str) -> str:
    """A user key fit for logs: country code and a few digits, the middle masked, the last 4.

    ``"+5511999990000"`` → ``"+55119****0000"``; ``"whatsapp:+14155238886"`` →
    ``"+141****8886"``; a BSUID keeps its country and last 4: ``"BR.1502576394655843"`` →
    ``"BR.****5843"``. Never raises: anything else is masked whole.
    """
    if is_bsuid(value):
        country, _, rest = value.rpartition(".")
        return f"{country}.****{rest[-4:]}" if len(rest) >= 8 else f"{country}.****"
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
    number is ours and stays; the couple's number or BSUID is masked)."""
    channel, _, rest = thread_id.partition(":")
    business, _, user = rest.partition(":")
    return f"{channel}:{business}:{mask_number(user)}" if user else thread_id
