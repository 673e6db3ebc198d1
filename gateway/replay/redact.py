"""``export --redact``: mask phone numbers and names, keeping every body parseable.

Numbers become pseudonyms of the same length that start with ``999`` (no country has
that code, so a replayed reply can never reach a real person); names become
``Contato XXXX``. The same number or name gets the same pseudonym throughout one export
(threads stay threads), and a fresh random key per export makes the pseudonyms
impossible to reverse. Business numbers are kept. In free text (message bodies, captions,
replies) known names and anything that looks like a phone or document number (8 or more
digits) are masked; addresses are removed and coordinates rounded to about a kilometre.

The signatures in a redacted file no longer match the bodies: ``send`` recomputes them
with the target's secrets.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from gateway.replay.records import RawDelivery, twilio_params

__all__ = ["Redactor"]

_PHONE_VALUE = re.compile(r"^(whatsapp:)?(\+?)(\d{8,15})$", re.IGNORECASE)
_PHONE_IN_TEXT = re.compile(r"(?<![\w.,])\+?\d(?:[ ().-]{0,2}\d){7,}(?![\w])")
_NAME_KEYS = frozenset({"formatted_name", "first_name", "last_name", "middle_name", "name"})
_PHONE_KEYS = frozenset({"phone", "wa_id"})
_KEEP_KEYS = frozenset({"type", "country_code"})
_REMOVED = "[redacted]"
_DROPPED_HEADERS = frozenset({"x-forwarded-for"})


class Redactor:
    """Consistent pseudonyms for one export. ``delivery(d)`` returns the redacted copy."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)
        self._numbers: dict[str, str] = {}
        self._names: dict[str, str] = {}
        self._name_pattern: re.Pattern[str] | None = None

    # --- pseudonyms ------------------------------------------------------------------

    def _digest(self, kind: str, value: str) -> bytes:
        return hmac.new(self._key, f"{kind}:{value}".encode(), hashlib.sha256).digest()

    def number_digits(self, digits: str) -> str:
        """A same-length pseudonym starting with 999 for a run of digits."""
        fake = self._numbers.get(digits)
        if fake is None:
            tail = str(int.from_bytes(self._digest("n", digits), "big"))
            fake = ("999" + tail)[: max(len(digits), 8)]
            self._numbers[digits] = fake
        return fake

    def number(self, value: str) -> str:
        """``whatsapp:+5511…`` / ``+5511…`` / ``5511…`` → the same shape, pseudonymous."""
        match = _PHONE_VALUE.match(value.strip())
        if not match:
            return self.text(value)
        prefix, plus, digits = match.groups()
        return f"{prefix or ''}{plus}{self.number_digits(digits)}"

    def name(self, value: str) -> str:
        """A person's name → ``Contato XXXX``; its parts are remembered for free text."""
        clean = " ".join(value.split())
        if not clean:
            return value
        fake = self._names.get(clean.casefold())
        if fake is None:
            fake = "Contato " + self._digest("p", clean.casefold()).hex()[:4].upper()
            self._names[clean.casefold()] = fake
            for part in clean.split():
                if len(part) >= 3:
                    self._names.setdefault(part.casefold(), fake)
            self._name_pattern = None
        return fake

    def text(self, value: str) -> str:
        """Free text: known names and phone-like numbers masked, the rest kept."""
        if self._names:
            if self._name_pattern is None:
                alternatives = sorted(self._names, key=len, reverse=True)
                self._name_pattern = re.compile(
                    r"(?<!\w)(" + "|".join(re.escape(a) for a in alternatives) + r")(?!\w)",
                    re.IGNORECASE,
                )
            value = self._name_pattern.sub(
                lambda m: self._names.get(" ".join(m.group(0).split()).casefold(), m.group(0)),
                value,
            )
        return _PHONE_IN_TEXT.sub(
            lambda m: self.number_digits(re.sub(r"\D", "", m.group(0))), value
        )

    # --- deliveries ------------------------------------------------------------------

    def delivery(self, d: RawDelivery) -> RawDelivery:
        """The redacted copy of a delivery (body, thread ids, replies, error, headers)."""
        if d.provider == "twilio":
            body = self._twilio(d)
        elif d.provider == "meta":
            body = self._meta(d.body)
        else:
            body = self.text(d.body.decode("utf-8", "replace")).encode()
        headers = {k: v for k, v in d.headers.items() if k not in _DROPPED_HEADERS}
        replies = {
            mid: {**reply, "text": self.text(str(reply.get("text", "")))}
            for mid, reply in d.replies.items()
        }
        return d.with_body(
            body,
            headers=headers,
            thread_ids=tuple(self._thread(t) for t in d.thread_ids),
            replies=replies,
            error=self.text(d.error),
            redacted=True,
        )

    def _thread(self, thread_id: str) -> str:
        channel, _, rest = thread_id.partition(":")
        business, _, user = rest.partition(":")
        if not user:
            return self.text(thread_id)
        return f"{channel}:{business}:{self.number(user)}"

    def _twilio(self, d: RawDelivery) -> bytes:
        params = twilio_params(d.body)
        status_callback = d.path.rstrip("/").endswith("/status")
        business_field = "From" if status_callback else "To"
        business = {v for k, v in params if k == business_field}
        for k, v in params:  # names first, so the free text below knows them
            if k == "ProfileName" and v:
                self.name(v)
        out: list[tuple[str, str]] = []
        for k, v in params:
            out.append((k, self._twilio_value(k, v, business)))
        return urlencode(out).encode("ascii")

    def _twilio_value(self, key: str, value: str, business: set[str]) -> str:
        if value in business:
            return value
        if key == "ProfileName":
            return self.name(value) if value else value
        if key in ("Latitude", "Longitude"):
            return _round_coordinate(value)
        if key in ("Address", "Label"):
            return _REMOVED if value else value
        if _PHONE_VALUE.match(value.strip()):
            return self.number(value)
        if key in ("Body", "ButtonText", "ButtonPayload", "ErrorMessage"):
            return self.text(value)
        return value

    def _meta(self, body: bytes) -> bytes:
        try:
            data = json.loads(body)
        except ValueError:
            return self.text(body.decode("utf-8", "replace")).encode()
        for value in _meta_values(data):
            for contact in value.get("contacts") or ():
                profile = contact.get("profile") if isinstance(contact, dict) else None
                if isinstance(profile, dict) and isinstance(profile.get("name"), str):
                    self.name(profile["name"])
        for value in _meta_values(data):
            self._meta_value(value)
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def _meta_value(self, value: dict[str, Any]) -> None:
        for contact in value.get("contacts") or ():
            if not isinstance(contact, dict):
                continue
            _apply(contact, "wa_id", self.number)
            profile = contact.get("profile")
            if isinstance(profile, dict):
                _apply(profile, "name", self.name)
        for message in value.get("messages") or ():
            if isinstance(message, dict):
                self._meta_message(message)
        for status in value.get("statuses") or ():
            if isinstance(status, dict):
                _apply(status, "recipient_id", self.number)

    def _meta_message(self, message: dict[str, Any]) -> None:
        _apply(message, "from", self.number)
        kind = message.get("type")
        content = message.get(kind) if isinstance(kind, str) else None
        if isinstance(content, dict):
            for key in ("body", "caption", "filename", "text", "title", "description"):
                _apply(content, key, self.text)
            if kind == "location":
                for key in ("latitude", "longitude"):
                    if isinstance(content.get(key), int | float):
                        content[key] = round(float(content[key]), 2)
                for key in ("name", "address", "url"):
                    if isinstance(content.get(key), str):
                        content[key] = _REMOVED
            if kind == "interactive":
                for reply_key in ("button_reply", "list_reply"):
                    reply = content.get(reply_key)
                    if isinstance(reply, dict):
                        for key in ("title", "description"):
                            _apply(reply, key, self.text)
        if kind == "contacts" and isinstance(message.get("contacts"), list):
            message["contacts"] = [self._shared(c) for c in message["contacts"]]

    def _shared(self, data: Any, key: str = "") -> Any:
        """A shared contact card: names, phones and everything else personal masked."""
        if isinstance(data, dict):
            return {k: self._shared(v, k) for k, v in data.items()}
        if isinstance(data, list):
            return [self._shared(v, key) for v in data]
        if not isinstance(data, str) or key in _KEEP_KEYS:
            return data
        if key in _NAME_KEYS:
            return self.name(data)
        if key in _PHONE_KEYS:
            return self.number(data)
        return _REMOVED


def _meta_values(data: Any) -> list[dict[str, Any]]:
    """Every ``entry[].changes[].value`` object of a Meta payload."""
    out: list[dict[str, Any]] = []
    if not isinstance(data, dict):
        return out
    for entry in data.get("entry") or ():
        if not isinstance(entry, dict):
            continue
        for change in entry.get("changes") or ():
            if isinstance(change, dict) and isinstance(change.get("value"), dict):
                out.append(change["value"])
    return out


def _apply(obj: dict[str, Any], key: str, fn: Callable[[str], str]) -> None:
    if isinstance(obj.get(key), str):
        obj[key] = fn(obj[key])


def _round_coordinate(value: str) -> str:
    try:
        return f"{round(float(value), 2):g}"
    except ValueError:
        return _REMOVED
