"""The port every provider webhook implements: plain data in, plain data out.

The web layer turns its request into a ``WebhookRequest`` and calls, per delivery::

    adapter.verify(request)          # SignatureError (403) / PayloadTooLarge (413)
    parsed = adapter.parse(request)  # MalformedPayload (400): not a delivery at all
    ...store parsed (messages, statuses, rejected items)...
    answer = adapter.ack()           # status, content type and body to send back

and maps any ``ChannelError`` to ``err.http_status``. An adapter that is also a
``SubscriptionHandshake`` (Meta) answers the provider's GET handshake on the same path.
A new provider is one new module with its adapter; the web layer does not change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Protocol, runtime_checkable
from urllib.parse import parse_qsl

from multidict import MultiDict, MultiDictProxy

from channels.errors import PayloadTooLarge
from channels.models import ParsedDelivery

__all__ = [
    "MAX_FORM_FIELDS",
    "SubscriptionHandshake",
    "WebhookAdapter",
    "WebhookRequest",
    "WebhookResponse",
]

#: Most fields a form body may have. A Twilio webhook has about 20 (40 with ten media);
#: counting is one pass over the bytes, parsing 150,000 fields costs most of a second.
MAX_FORM_FIELDS = 1000


@dataclass(frozen=True)
class WebhookRequest:
    """One HTTP request from a provider, as plain data.

    ``url`` is the public URL the provider called (behind a proxy, rebuilt from the
    configured public base URL: Twilio signs it); ``headers`` have lower-cased names (as
    aiohttp hands them: undecodable bytes surrogate-escaped, which adapters tolerate);
    ``query`` holds the query string's values; ``body`` the raw bytes, already bounded
    by the web layer. ``received_at`` stands for the provider's time where it sends none
    (Twilio); ``None`` means now.
    """

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    query: Mapping[str, str] = field(default_factory=dict)
    method: str = "POST"
    received_at: datetime | None = None

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @cached_property
    def form(self) -> MultiDictProxy[str]:
        """The body as an ``application/x-www-form-urlencoded`` form, parsed once (the
        signature check and the parser both read it); repeated names keep every value.

        ``PayloadTooLarge`` over ``MAX_FORM_FIELDS`` fields, counted before parsing.
        Undecodable bytes become U+FFFD.
        """
        fields = self.body.count(b"&") + 1 if self.body else 0
        if fields > MAX_FORM_FIELDS:
            raise PayloadTooLarge(f"form has {fields} fields, more than {MAX_FORM_FIELDS}")
        pairs = parse_qsl(self.body.decode("utf-8", "replace"), keep_blank_values=True)
        return MultiDictProxy(MultiDict(pairs))


@dataclass(frozen=True)
class WebhookResponse:
    """What to answer: ``status``, ``content_type`` and the ``body`` bytes."""

    status: int
    content_type: str
    body: bytes


@runtime_checkable
class WebhookAdapter(Protocol):
    """One provider endpoint: ``TwilioWebhook`` (inbound or status callbacks), ``MetaWebhook``."""

    @property
    def provider(self) -> str:
        """``"twilio"`` or ``"meta"`` (for logs, metrics and the raw-delivery record)."""
        ...

    def verify(self, request: WebhookRequest) -> None:
        """Raise ``SignatureError`` unless the request provably comes from the provider
        (``PayloadTooLarge`` when it is too large to check). Cheap checks come first."""
        ...

    def parse(self, request: WebhookRequest) -> ParsedDelivery:
        """The verified request's messages and statuses, and the items that could not be
        understood (``ParsedDelivery.rejected``); ``MalformedPayload`` for a body that is
        not a delivery at all."""
        ...

    def ack(self) -> WebhookResponse:
        """The success answer, sent once the delivery is stored."""
        ...


@runtime_checkable
class SubscriptionHandshake(Protocol):
    """An adapter whose provider checks the endpoint with a GET first (Meta)."""

    def handshake(self, request: WebhookRequest) -> WebhookResponse:
        """The answer to the GET; ``SignatureError`` (403) or ``MalformedPayload`` (400)."""
        ...
