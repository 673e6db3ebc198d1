"""The local channel: replies go to a Redis Stream a terminal chat client reads.

Used when no provider credentials are configured, so the gateway runs with nothing set.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis

from channels.errors import MalformedPayload, SendError
from channels.models import SendResult
from channels.numbers import is_bsuid, to_e164
from channels.split import split_message

__all__ = ["OUTBOX_MAX_LENGTH", "OutboxBatch", "OutboxEntry", "OutboxSender", "read_outbox"]

OUTBOX_MAX_LENGTH = 4096  # as WhatsApp through Meta: the chat client sees the same splits
_PROVIDER = "outbox"


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """One reply part written to the outbox stream."""

    id: str  # stream id
    to: str  # E.164, or a business-scoped user id
    text: str
    at: str  # ISO 8601, UTC
    from_: str | None = None  # the business address the reply was sent from, when given


@dataclass(frozen=True, slots=True)
class OutboxBatch:
    """What ``read_outbox`` found; pass ``cursor`` as ``after`` on the next call."""

    entries: tuple[OutboxEntry, ...]
    cursor: str


class OutboxSender:
    """``XADD {"to", "text", "at"}`` (and ``"from"`` when ``from_`` is given) to
    ``stream_key`` per reply part (approximate MAXLEN)."""

    provider = _PROVIDER
    max_length = OUTBOX_MAX_LENGTH

    def __init__(self, redis: aioredis.Redis, stream_key: str, *, maxlen: int = 10_000) -> None:
        self._redis = redis
        self._stream_key = stream_key
        self._maxlen = maxlen

    @property
    def stream_key(self) -> str:
        return self._stream_key

    async def send_text(self, to: str, text: str, *, from_: str | None = None) -> SendResult:
        """Append each part of ``text``; the stream ids are the provider message ids.

        ``to`` is an E.164 number or a business-scoped user id; ``from_`` (the business
        address to send from, as for the providers) is recorded as is. Raises only
        ``SendError``.
        """
        recipient = _address(to)
        parts = split_message(text, self.max_length)
        if not parts:
            raise SendError(_PROVIDER, None, "nothing to send: the text is blank")
        ids: list[str] = []
        for part in parts:
            at = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            fields: dict[Any, Any] = {"to": recipient, "text": part, "at": at}
            if from_ is not None:
                fields["from"] = from_
            try:
                entry_id = await self._redis.xadd(
                    self._stream_key, fields, maxlen=self._maxlen, approximate=True
                )
            except (aioredis.RedisError, OSError) as exc:
                raise SendError(
                    _PROVIDER, None, f"redis error: {exc}", sent_ids=tuple(ids)
                ) from exc
            ids.append(_text(entry_id))
        return SendResult(provider_message_ids=tuple(ids))

    async def mark_read(
        self, message_id: str, *, typing: bool = True, from_: str | None = None
    ) -> None:
        """Nothing to mark on the local channel."""
        del message_id, typing, from_

    async def close(self) -> None:
        """The Redis client belongs to the caller: nothing to close."""


async def read_outbox(
    redis: aioredis.Redis,
    stream_key: str,
    *,
    after: str = "0-0",
    block_ms: int | None = None,
    to: str | None = None,
    count: int = 100,
) -> OutboxBatch:
    """Entries after stream id ``after`` (``"$"``: only new ones), optionally only for ``to``.

    ``block_ms`` waits up to that long for something new (``None``: do not wait). The
    returned ``cursor`` moves past every entry read, including those filtered out.
    """
    wanted = _address(to) if to else None
    answer: Any = await redis.xread({stream_key: after}, count=count, block=block_ms)
    entries: list[OutboxEntry] = []
    cursor = after
    for _stream, items in answer or []:
        for raw_id, raw_fields in items:
            cursor = _text(raw_id)
            fields = {_text(key): _text(value) for key, value in raw_fields.items()}
            entry = OutboxEntry(
                id=cursor,
                to=fields.get("to", ""),
                text=fields.get("text", ""),
                at=fields.get("at", ""),
                from_=fields.get("from"),
            )
            if wanted is None or entry.to == wanted:
                entries.append(entry)
    return OutboxBatch(entries=tuple(entries), cursor=cursor)


def _address(to: str) -> str:
    if is_bsuid(to):
        return to.strip()
    try:
        return to_e164(to, field="to")
    except MalformedPayload as exc:
        raise SendError(_PROVIDER, None, exc.reason) from None


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
