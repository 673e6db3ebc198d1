"""Meta WhatsApp Cloud API: verify webhooks (``MetaWebhook``), send replies through the
Graph API. Payload parsing lives in ``channels.meta_payload``.

The web layer hands over plain data: the raw body bytes, the ``X-Hub-Signature-256``
header value, and for the subscription handshake the ``hub.*`` query values.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from typing import Any

import aiohttp
import structlog

from channels.errors import MalformedPayload, OutsideWindowError, SendError, SignatureError
from channels.meta_payload import parse_meta_payload
from channels.models import ParsedDelivery, SendResult
from channels.numbers import is_bsuid, mask_number, to_e164
from channels.split import split_message
from channels.webhook import WebhookRequest, WebhookResponse

__all__ = [
    "META_MAX_LENGTH",
    "MetaSender",
    "MetaWebhook",
    "parse_meta_payload",
    "verify_meta_signature",
    "verify_meta_subscription",
]

META_MAX_LENGTH = 4096
_PROVIDER = "meta"
_SIGNATURE_PREFIX = "sha256="
_MAX_CHALLENGE = 256
_OUTSIDE_WINDOW = 131047
# Rejections for throughput: the request was refused, so trying again cannot duplicate.
# 4 app request limit, 80007 WABA rate limit, 130429 cloud API throughput, 131056 pair rate.
_RATE_LIMITED_CODES = frozenset({4, 80007, 130429, 131056})

_log = structlog.get_logger(__name__)


# --------------------------------------------------------------------------- verification


def verify_meta_signature(app_secret: str, body: bytes, header: str | None) -> None:
    """Raise ``SignatureError`` unless ``header`` is ``sha256=<HMAC-SHA256(app_secret, body)>``.

    ``body`` is the raw bytes received, never re-serialised JSON; compared in constant time.
    """
    if not app_secret:
        raise SignatureError("no Meta app secret configured", provider=_PROVIDER)
    if not header:
        raise SignatureError("missing X-Hub-Signature-256", provider=_PROVIDER)
    if not header.startswith(_SIGNATURE_PREFIX):
        raise SignatureError("X-Hub-Signature-256 does not start with sha256=", provider=_PROVIDER)
    given = header[len(_SIGNATURE_PREFIX) :].strip().lower().encode("utf-8", "replace")
    expected = hmac.new(app_secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode("ascii"), given):
        raise SignatureError("X-Hub-Signature-256 does not match", provider=_PROVIDER)


def verify_meta_subscription(
    verify_token: str, mode: str | None, token: str | None, challenge: str | None
) -> str:
    """The subscription handshake: the challenge to echo back, or ``SignatureError`` (403).

    ``mode``, ``token`` and ``challenge`` are the ``hub.mode``, ``hub.verify_token`` and
    ``hub.challenge`` query values.
    """
    if not verify_token:
        raise SignatureError("no Meta verify token configured", provider=_PROVIDER)
    if mode != "subscribe":
        raise SignatureError(f"hub.mode is {mode!r}, expected 'subscribe'", provider=_PROVIDER)
    if token is None or not hmac.compare_digest(
        verify_token.encode("utf-8"), token.encode("utf-8", "replace")
    ):
        raise SignatureError("hub.verify_token does not match", provider=_PROVIDER)
    if not challenge:
        raise MalformedPayload("missing field hub.challenge", provider=_PROVIDER)
    # Echoed back as text: a short printable token (Meta sends digits), nothing else.
    if len(challenge) > _MAX_CHALLENGE or not (challenge.isascii() and challenge.isprintable()):
        raise MalformedPayload("hub.challenge is not a short printable token", provider=_PROVIDER)
    return challenge


class MetaWebhook:
    """The ``WebhookAdapter`` for ``/webhooks/meta``, with its GET subscription handshake.

    ``app_secret`` signs the POSTs (``X-Hub-Signature-256``); ``verify_token`` is the
    token configured in the App Dashboard for the handshake.
    """

    provider = _PROVIDER

    def __init__(self, app_secret: str, verify_token: str = "") -> None:
        self._app_secret = app_secret
        self._verify_token = verify_token

    def verify(self, request: WebhookRequest) -> None:
        verify_meta_signature(self._app_secret, request.body, request.header("X-Hub-Signature-256"))

    def parse(self, request: WebhookRequest) -> ParsedDelivery:
        return parse_meta_payload(request.body)

    def ack(self) -> WebhookResponse:
        return WebhookResponse(200, "application/json", b'{"status":"ok"}')

    def handshake(self, request: WebhookRequest) -> WebhookResponse:
        """``GET ?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…``: the challenge
        as plain text, or ``SignatureError`` (403) / ``MalformedPayload`` (400)."""
        query = request.query
        challenge = verify_meta_subscription(
            self._verify_token,
            query.get("hub.mode"),
            query.get("hub.verify_token"),
            query.get("hub.challenge"),
        )
        return WebhookResponse(200, "text/plain", challenge.encode("ascii"))


# --------------------------------------------------------------------------- sending


class MetaSender:
    """Replies through the Graph API ``/{version}/{phone_number_id}/messages`` endpoint.

    ``phone_number_id`` is the default business number; ``send_text`` / ``mark_read``
    take ``from_=`` to use another one of the same app (the number the couple wrote to).
    Owns one ``aiohttp.ClientSession``, created by ``start()`` or on first use inside the
    running loop; call ``close()`` on shutdown. Sends are never retried here.
    """

    provider = _PROVIDER
    max_length = META_MAX_LENGTH

    def __init__(
        self,
        access_token: str,
        phone_number_id: str,
        *,
        graph_base_url: str = "https://graph.facebook.com",
        api_version: str = "v21.0",
        timeout: float = 15.0,
        max_connections: int = 100,
    ) -> None:
        if not access_token or not phone_number_id:
            raise ValueError("MetaSender needs an access token and a phone number id")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self._token = access_token
        self._phone_number_id = phone_number_id
        self._base = f"{graph_base_url.rstrip('/')}/{api_version.strip('/')}"
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    @property
    def phone_number_id(self) -> str:
        """The default business number's id."""
        return self._phone_number_id

    async def start(self) -> None:
        """Create the HTTP session now (optional: the first call does it otherwise)."""
        self._http()

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=self._timeout,
                headers={"Authorization": f"Bearer {self._token}"},
                connector=aiohttp.TCPConnector(limit=self._max_connections),
            )
        return self._session

    async def send_text(self, to: str, text: str, *, from_: str | None = None) -> SendResult:
        """Send ``text`` to ``to``, split at 4096 characters; the ``wamid`` of each part.

        ``to`` is an E.164 number, or a business-scoped user id (``"BR.1502…"``, a user
        known only by their username) sent as ``recipient``. ``from_`` is the
        ``phone_number_id`` to send from (``None``: the default). Raises only
        ``SendError`` (``OutsideWindowError`` for 131047; a bad ``to``/``from_`` or a
        blank text is a non-retryable one); its ``sent_ids`` lists the parts accepted
        before the failure.
        """
        url = self._messages_url(from_)
        address = _recipient(to)
        parts = split_message(text, self.max_length)
        if not parts:
            raise SendError(_PROVIDER, None, "nothing to send: the text is blank")
        sent: list[str] = []
        for part in parts:
            body = {
                "messaging_product": "whatsapp",
                **address,
                "type": "text",
                "text": {"body": part},
            }
            try:
                answer = await self._post(url, body, tuple(sent))
            except SendError as error:
                _log.warning(
                    "meta.send_failed",
                    to=mask_number(to),
                    code=error.code,
                    status=error.status,
                    retryable=error.retryable,
                    parts_sent=len(sent),
                    parts=len(parts),
                )
                raise
            ids = [
                str(item["id"])
                for item in answer.get("messages") or []
                if isinstance(item, dict) and item.get("id")
            ]
            if not ids:
                raise SendError(
                    _PROVIDER,
                    None,
                    f"no message id in the answer: {answer!r:.200}",
                    sent_ids=tuple(sent),
                )
            sent.extend(ids)
        return SendResult(provider_message_ids=tuple(sent))

    async def mark_read(
        self, message_id: str, *, typing: bool = True, from_: str | None = None
    ) -> None:
        """Mark an inbound message as read and, with ``typing``, show the typing indicator
        (until the reply is sent, or about 25 s). Use ``typing=False`` for messages that
        will not be answered (reactions, unsupported types). ``from_`` is the
        ``phone_number_id`` that received the message (``None``: the default).

        Raises ``SendError`` on failure; callers treat it as best effort.
        """
        url = self._messages_url(from_)
        if not message_id:
            raise SendError(_PROVIDER, None, "no message id to mark as read")
        body: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": message_id,
        }
        if typing:
            body["typing_indicator"] = {"type": "text"}
        await self._post(url, body, ())

    async def close(self) -> None:
        """Close the HTTP session (idempotent)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _messages_url(self, from_: str | None) -> str:
        phone_number_id = self._phone_number_id if from_ is None else from_.strip()
        if not _PHONE_NUMBER_ID.fullmatch(phone_number_id):
            raise SendError(_PROVIDER, None, f"from_ is not a phone number id: {from_!r}")
        return f"{self._base}/{phone_number_id}/messages"

    async def _post(self, url: str, body: dict[str, Any], sent: tuple[str, ...]) -> dict[str, Any]:
        session = self._http()
        try:
            async with session.post(url, json=body) as response:
                raw = await response.read()
                status = response.status
        except TimeoutError:
            raise SendError(
                _PROVIDER,
                None,
                "timed out: the message may or may not have been sent",
                sent_ids=sent,
            ) from None
        except aiohttp.ClientConnectorError as exc:
            # never connected: nothing was sent, trying again cannot duplicate
            raise SendError(_PROVIDER, None, f"cannot connect: {exc}", True, sent_ids=sent) from exc
        except aiohttp.ClientError as exc:
            raise SendError(_PROVIDER, None, f"transport error: {exc}", sent_ids=sent) from exc
        except Exception as exc:  # a sender raises only SendError
            raise SendError(_PROVIDER, None, f"unexpected error: {exc!r}", sent_ids=sent) from exc
        try:
            answer = json.loads(raw) if raw else {}
        except (UnicodeDecodeError, json.JSONDecodeError):
            answer = None
        if 200 <= status < 300 and isinstance(answer, dict):
            return answer
        raise _graph_error(status, answer, raw, sent)


_PHONE_NUMBER_ID = re.compile(r"[0-9]{1,32}")


def _recipient(to: str) -> dict[str, str]:
    """``{"to": digits}`` for a phone number, ``{"recipient": bsuid}`` for a business-scoped
    user id; ``SendError`` (not retryable) for anything else.

    Meta, "Business-scoped user IDs" (developers.facebook.com/documentation/
    business-messaging/whatsapp/business-scoped-user-ids, 2026): the messages endpoint
    takes a BSUID or parent BSUID in ``recipient``; with both ``to`` and ``recipient``,
    ``to`` wins; error 131062 when a BSUID cannot receive that type of message.
    """
    if is_bsuid(to):
        return {"recipient": to.strip()}
    try:
        return {"to": to_e164(to, field="to")[1:]}
    except MalformedPayload as exc:
        raise SendError(_PROVIDER, None, exc.reason) from None


def _graph_error(status: int, answer: object, raw: bytes, sent: tuple[str, ...]) -> SendError:
    error = answer.get("error") if isinstance(answer, dict) else None
    if not isinstance(error, dict):
        text = raw[:200].decode("utf-8", "replace")
        return SendError(_PROVIDER, None, f"HTTP {status}: {text}", status=status, sent_ids=sent)
    code = error.get("code")
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    message = str(error.get("message") or "")
    details = error.get("error_data")
    if isinstance(details, dict) and details.get("details"):
        message = f"{message} ({details['details']})"
    if error.get("fbtrace_id"):
        message = f"{message} [fbtrace_id {error['fbtrace_id']}]"
    if code == _OUTSIDE_WINDOW:
        return OutsideWindowError(_PROVIDER, code, message, status=status, sent_ids=sent)
    retryable = code in _RATE_LIMITED_CODES
    return SendError(_PROVIDER, code, message, retryable, status=status, sent_ids=sent)
