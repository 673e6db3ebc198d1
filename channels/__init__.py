"""WhatsApp channels: verify + parse provider webhooks into normalised models, send replies.

Providers: Twilio (``channels.twilio``), Meta Cloud API (``channels.meta``,
``channels.meta_payload``) and the local outbox (``channels.outbox``); inbound media is
downloaded by ``channels.media``. Never imports ``agent`` or ``gateway``; never imports
aiohttp's server side: the web layer passes plain data in through one ``WebhookAdapter``
per endpoint (``channels.webhook``) and maps ``ChannelError`` subclasses to HTTP statuses
(``err.http_status``).
"""

from channels.base import Sender
from channels.describe import describe
from channels.errors import (
    OUTSIDE_WINDOW_CODES,
    ChannelError,
    MalformedPayload,
    MediaError,
    MediaErrorReason,
    OutsideWindowError,
    PayloadTooLarge,
    SendError,
    SignatureError,
)
from channels.media import (
    META_MEDIA_HOSTS,
    TWILIO_MEDIA_HOSTS,
    WHATSAPP_MEDIA_TYPES,
    FetchedMedia,
    MediaFetcher,
    MetaMediaFetcher,
    TwilioMediaFetcher,
)
from channels.meta import (
    META_MAX_LENGTH,
    MetaSender,
    MetaWebhook,
    parse_meta_payload,
    verify_meta_signature,
    verify_meta_subscription,
)
from channels.models import (
    ChannelName,
    InboundKind,
    InboundMessage,
    Location,
    Media,
    ParsedDelivery,
    RejectedItem,
    SendResult,
    StatusUpdate,
    make_thread_id,
    thread_matcher,
)
from channels.numbers import is_bsuid, mask_number, mask_thread_id, redact_digits, to_e164
from channels.outbox import (
    OUTBOX_MAX_LENGTH,
    OutboxBatch,
    OutboxEntry,
    OutboxSender,
    read_outbox,
)
from channels.split import split_message, text_length
from channels.twilio import (
    TWILIO_MAX_BODY,
    TWILIO_MAX_LENGTH,
    TwilioSender,
    TwilioWebhook,
    compute_twilio_signature,
    parse_twilio_message,
    parse_twilio_status,
    verify_twilio_signature,
)
from channels.webhook import (
    MAX_FORM_FIELDS,
    SubscriptionHandshake,
    WebhookAdapter,
    WebhookRequest,
    WebhookResponse,
)

__all__ = [
    "MAX_FORM_FIELDS",
    "META_MAX_LENGTH",
    "META_MEDIA_HOSTS",
    "OUTBOX_MAX_LENGTH",
    "OUTSIDE_WINDOW_CODES",
    "TWILIO_MAX_BODY",
    "TWILIO_MAX_LENGTH",
    "TWILIO_MEDIA_HOSTS",
    "WHATSAPP_MEDIA_TYPES",
    "ChannelError",
    "ChannelName",
    "FetchedMedia",
    "InboundKind",
    "InboundMessage",
    "Location",
    "MalformedPayload",
    "Media",
    "MediaError",
    "MediaErrorReason",
    "MediaFetcher",
    "MetaMediaFetcher",
    "MetaSender",
    "MetaWebhook",
    "OutboxBatch",
    "OutboxEntry",
    "OutboxSender",
    "OutsideWindowError",
    "ParsedDelivery",
    "PayloadTooLarge",
    "RejectedItem",
    "SendError",
    "SendResult",
    "Sender",
    "SignatureError",
    "StatusUpdate",
    "SubscriptionHandshake",
    "TwilioMediaFetcher",
    "TwilioSender",
    "TwilioWebhook",
    "WebhookAdapter",
    "WebhookRequest",
    "WebhookResponse",
    "compute_twilio_signature",
    "describe",
    "is_bsuid",
    "make_thread_id",
    "mask_number",
    "mask_thread_id",
    "parse_meta_payload",
    "parse_twilio_message",
    "parse_twilio_status",
    "read_outbox",
    "redact_digits",
    "split_message",
    "text_length",
    "thread_matcher",
    "to_e164",
    "verify_meta_signature",
    "verify_meta_subscription",
    "verify_twilio_signature",
]
