"""Preparing a recorded delivery for another gateway: fresh ids, then new signatures.

Twilio signs the URL it calls plus the form parameters (HMAC-SHA1 with the auth token),
so a delivery sent anywhere else must be signed again for the target URL; Meta signs
the body (HMAC-SHA256 with the app secret), so a body that changed (fresh ids, redaction)
must be signed again. Without the target's secret the original headers are sent as they
are — which only works when nothing changed and the target has the same secret and URL.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from multidict import MultiDict

from channels import compute_twilio_signature
from gateway.replay.records import RawDelivery, twilio_params

__all__ = ["FreshIds", "Prepared", "Secrets", "prepare", "target_url"]

_TWILIO_ID_FIELDS = ("MessageSid", "SmsMessageSid", "SmsSid")
_TWILIO_REFERENCES = ("OriginalRepliedMessageSid",)
_SENT_HEADERS = ("content-type",)
TWILIO_SIGNATURE = "x-twilio-signature"
META_SIGNATURE = "x-hub-signature-256"


@dataclass(frozen=True)
class Secrets:
    """The target gateway's webhook secrets (None: unknown)."""

    twilio_auth_token: str | None = None
    meta_app_secret: str | None = None

    def for_provider(self, provider: str) -> str | None:
        if provider == "twilio":
            return self.twilio_auth_token
        if provider == "meta":
            return self.meta_app_secret
        return None


@dataclass
class FreshIds:
    """New provider message ids for one run: the same original always gets the same one.

    ``mapping`` (original → new) is how ``diff`` finds the target's reply to a message.
    """

    mapping: dict[str, str] = field(default_factory=dict)

    def new(self, original: str) -> str:
        fresh = self.mapping.get(original)
        if fresh is None:
            if original.startswith("wamid."):
                fresh = "wamid.replay" + secrets.token_urlsafe(24)
            else:
                fresh = (original[:2] if original[:2].isalpha() else "SM") + secrets.token_hex(16)
            self.mapping[original] = fresh
        return fresh

    def known(self, original: str) -> str:
        """The new id when ``original`` was renewed in this run, else ``original``."""
        return self.mapping.get(original, original)

    def rewrite(self, d: RawDelivery) -> RawDelivery:
        """The delivery with its inbound message ids renewed (body and ``message_ids``)."""
        if not d.messages:
            return d
        if d.provider == "twilio":
            body = self._twilio(d.body)
        elif d.provider == "meta":
            body = self._meta(d.body)
        else:  # pragma: no cover - the export reader accepts twilio and meta only
            return d
        replies = {self.known(k): v for k, v in d.replies.items()}
        return d.with_body(
            body, message_ids=tuple(self.new(m) for m in d.messages), replies=replies
        )

    def _twilio(self, body: bytes) -> bytes:
        out: list[tuple[str, str]] = []
        for key, value in twilio_params(body):
            if key in _TWILIO_ID_FIELDS and value:
                value = self.new(value)
            elif key in _TWILIO_REFERENCES and value:
                value = self.known(value)
            out.append((key, value))
        return urlencode(out).encode("ascii")

    def _meta(self, body: bytes) -> bytes:
        try:
            data = json.loads(body)
        except ValueError:
            return body
        for entry in _list(data.get("entry") if isinstance(data, dict) else None):
            for change in _list(entry.get("changes")):
                value = change.get("value")
                if not isinstance(value, dict):
                    continue
                for message in _list(value.get("messages")):
                    if isinstance(message.get("id"), str):
                        message["id"] = self.new(message["id"])
                    context = message.get("context")
                    if isinstance(context, dict) and isinstance(context.get("id"), str):
                        context["id"] = self.known(context["id"])
                    reaction = message.get("reaction")
                    if isinstance(reaction, dict) and isinstance(reaction.get("message_id"), str):
                        reaction["message_id"] = self.known(reaction["message_id"])
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _list(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def target_url(base: str, d: RawDelivery) -> str:
    """``--to`` (scheme, host, optional path prefix) + the recorded path and query."""
    url = base.rstrip("/") + (d.path if d.path.startswith("/") else "/" + d.path)
    return f"{url}?{d.query}" if d.query else url


@dataclass(frozen=True)
class Prepared:
    """A delivery ready to POST: where, with which headers and body, and how it is signed."""

    delivery: RawDelivery  # after fresh ids
    original: RawDelivery
    url: str
    headers: dict[str, str]
    body: bytes
    signature: str  # "recomputed" | "original" | "none"
    problem: str | None = None  # set: do not send, and say why

    @property
    def threads(self) -> tuple[str, ...]:
        return self.original.threads


def prepare(
    original: RawDelivery,
    target: str,
    keys: Secrets,
    fresh: FreshIds | None = None,
    *,
    replay_id: str | None = None,
) -> Prepared:
    """Build the request that replays ``original`` to ``target`` (``--to``)."""
    d = fresh.rewrite(original) if fresh is not None else original
    url = target_url(target, d)
    headers = {k: v for k, v in d.headers.items() if k in _SENT_HEADERS}
    headers.setdefault(
        "content-type",
        "application/json" if d.provider == "meta" else "application/x-www-form-urlencoded",
    )
    headers["user-agent"] = "mel-gateway-replay/1"
    headers["x-mel-replay-of"] = replay_id or original.id
    secret = keys.for_provider(d.provider)
    changed = d.body != original.body or original.redacted
    if secret:
        if d.provider == "twilio":
            params: MultiDict[str] = MultiDict(twilio_params(d.body))
            headers[TWILIO_SIGNATURE] = compute_twilio_signature(secret, url, params)
        else:
            digest = hmac.new(secret.encode("utf-8"), d.body, hashlib.sha256).hexdigest()
            headers[META_SIGNATURE] = f"sha256={digest}"
        return Prepared(d, original, url, headers, d.body, "recomputed")
    name = "TWILIO_AUTH_TOKEN (--twilio-auth-token)"
    if d.provider == "meta":
        name = "META_APP_SECRET (--meta-app-secret)"
    if changed:
        why = "redacted" if original.redacted else "rewritten with fresh ids"
        return Prepared(
            d,
            original,
            url,
            headers,
            d.body,
            "none",
            problem=f"no {d.provider} secret for the target ({name}) and the body was {why}: "
            "the original signature cannot match, not sent",
        )
    kept = 0
    for header in (TWILIO_SIGNATURE, META_SIGNATURE):
        if header in original.headers:
            headers[header] = original.headers[header]
            kept += 1
    return Prepared(d, original, url, headers, d.body, "original" if kept else "none")
