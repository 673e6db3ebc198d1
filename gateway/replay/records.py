"""Recorded deliveries: reading the raw stream, and the portable export file.

The gateway keeps every webhook delivery it receives in the Redis Stream
``{MEL_REDIS_PREFIX}:raw`` (``gateway.http.webhooks.Delivery.record``): a ``meta`` JSON field and
the untouched ``body`` bytes. :class:`RawDelivery` is one such entry; :class:`RawLog`
reads and selects them; :func:`export_line` / :func:`read_export` write and read the
JSON-lines export (format ``mel-replay/1``, documented in ``docs/replay.md``).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import parse_qsl

from redis.exceptions import ResponseError

from channels import (
    MalformedPayload,
    ParsedDelivery,
    mask_number,
    parse_meta_payload,
    parse_twilio_message,
    parse_twilio_status,
)
from gateway.store import as_str

if TYPE_CHECKING:
    import redis.asyncio as aioredis

    from gateway.replay.filters import Filters

__all__ = [
    "EXPORT_FORMAT",
    "ExportLineError",
    "RawDelivery",
    "RawLog",
    "RecordError",
    "export_line",
    "mask_thread",
    "read_export",
    "twilio_params",
]

EXPORT_FORMAT = "mel-replay/1"
_PAGE = 500
_UNTIL_GRACE_MS = 5 * 60 * 1000  # a record's stream id is taken after its receive time
_PREVIEW = 60


class RecordError(ValueError):
    """A raw-stream entry or an export line that cannot be read; says which and why."""


@dataclass(frozen=True)
class ExportLineError:
    """A line of an export file that could not be read (the run goes on without it)."""

    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


def mask_thread(thread_id: str) -> str:
    """``twilio:+14155238886:+5511999990000`` → ``twilio:+55119****0000`` (for screens)."""
    channel, _, rest = thread_id.partition(":")
    _business, _, user = rest.partition(":")
    return f"{channel}:{mask_number(user)}" if user else thread_id


def twilio_params(body: bytes) -> list[tuple[str, str]]:
    """A Twilio form body as (name, value) pairs, the way the gateway reads it."""
    return parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)


@dataclass(frozen=True)
class RawDelivery:
    """One webhook delivery as the gateway received it (and how it answered)."""

    id: str
    received_at: str
    provider: str
    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes
    status: int
    error: str = ""
    thread_ids: tuple[str, ...] = ()
    message_ids: tuple[str, ...] = ()
    elapsed_ms: float | None = None
    replies: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Export files only: ``{inbound message id: {"text", "status"}}``, the replies sent."""
    redacted: bool = False

    # --- derived ---------------------------------------------------------------------

    @cached_property
    def when(self) -> datetime:
        """``received_at`` as an aware datetime (the stream id's time when unreadable)."""
        try:
            when = datetime.fromisoformat(self.received_at.replace("Z", "+00:00"))
        except ValueError:
            return datetime.fromtimestamp(self.sort_key[0] / 1000, UTC)
        return when if when.tzinfo else when.replace(tzinfo=UTC)

    @cached_property
    def sort_key(self) -> tuple[int, int]:
        """The stream id as numbers: the order the gateway stored deliveries in."""
        ms, _, seq = self.id.partition("-")
        try:
            return int(ms), int(seq or 0)
        except ValueError:
            return 0, 0

    @cached_property
    def body_text(self) -> str | None:
        """The body as text when it is UTF-8, else None."""
        try:
            return self.body.decode("utf-8")
        except UnicodeDecodeError:
            return None

    @cached_property
    def parsed(self) -> ParsedDelivery | None:
        """The messages and statuses the body holds (parsed without checking the
        signature), or None when it does not parse."""
        try:
            if self.provider == "twilio":
                params = dict(twilio_params(self.body))
                if self.path.rstrip("/").endswith("/status"):
                    return ParsedDelivery(statuses=(parse_twilio_status(params),))
                return ParsedDelivery(
                    messages=(parse_twilio_message(params, received_at=self.when),)
                )
            if self.provider == "meta":
                return parse_meta_payload(self.body)
        except (MalformedPayload, ValueError, TypeError):
            return None
        return None

    @cached_property
    def threads(self) -> tuple[str, ...]:
        """The thread ids: as recorded, else read from the body (refused deliveries)."""
        if self.thread_ids:
            return self.thread_ids
        parsed = self.parsed
        if parsed is None:
            return ()
        return tuple(dict.fromkeys(m.thread_id for m in parsed.messages))

    @cached_property
    def messages(self) -> tuple[str, ...]:
        """The inbound provider message ids: as recorded, else read from the body."""
        if self.message_ids:
            return self.message_ids
        parsed = self.parsed
        return tuple(m.provider_message_id for m in parsed.messages) if parsed else ()

    @cached_property
    def searchable_text(self) -> str:
        """The decoded body: form values or JSON strings, one per line (for ``--text``)."""
        if self.provider == "twilio":
            return "\n".join(v for _k, v in twilio_params(self.body))
        text = self.body.decode("utf-8", "replace")
        try:
            data = json.loads(text)
        except ValueError:
            return text
        return "\n".join(_strings(data))

    @cached_property
    def texts(self) -> tuple[str, ...]:
        """What each inbound message said (as the agent reads it), in order."""
        parsed = self.parsed
        return tuple(m.agent_text() for m in parsed.messages) if parsed else ()

    def preview(self, width: int = _PREVIEW) -> str:
        """One line: the message text, a status callback, or the error."""
        parsed = self.parsed
        if parsed is not None and parsed.messages:
            text = " | ".join(self.texts)
        elif parsed is not None and parsed.statuses:
            text = ", ".join(f"[status {s.status}]" for s in parsed.statuses)
        elif self.error:
            text = f"[{self.error}]"
        else:
            text = (self.body_text or "[binary body]").replace("\n", " ")
        text = " ".join(text.split())
        return text if len(text) <= width else text[: width - 1] + "…"

    def with_body(self, body: bytes, **changes: Any) -> RawDelivery:
        """A copy with another body (and other fields): derived values recomputed."""
        return replace(self, body=body, **changes)

    # --- stream ----------------------------------------------------------------------

    @classmethod
    def from_stream(cls, entry_id: str, fields: Mapping[Any, Any]) -> RawDelivery:
        f = {as_str(k): v for k, v in fields.items()}
        try:
            meta = json.loads(f.get("meta") or b"{}")
        except ValueError as exc:
            raise RecordError(f"entry {entry_id}: meta is not JSON ({exc})") from None
        if not isinstance(meta, dict):
            raise RecordError(f"entry {entry_id}: meta is not a JSON object")
        body = f.get("body") or b""
        if isinstance(body, str):
            body = body.encode()
        return cls._from_meta(entry_id, meta, body)

    @classmethod
    def _from_meta(cls, entry_id: str, meta: Mapping[str, Any], body: bytes) -> RawDelivery:
        elapsed = meta.get("elapsed_ms")
        try:
            return cls(
                id=entry_id,
                received_at=str(meta.get("received_at") or ""),
                provider=str(meta.get("provider") or ""),
                method=str(meta.get("method") or "POST"),
                path=str(meta.get("path") or ""),
                query=str(meta.get("query") or ""),
                headers={str(k).lower(): str(v) for k, v in (meta.get("headers") or {}).items()},
                body=body,
                status=int(meta.get("status") or 0),
                error=str(meta.get("error") or ""),
                thread_ids=tuple(str(t) for t in meta.get("thread_ids") or ()),
                message_ids=tuple(str(m) for m in meta.get("message_ids") or ()),
                elapsed_ms=float(elapsed) if isinstance(elapsed, int | float) else None,
                replies=dict(meta.get("replies") or {}),
                redacted=bool(meta.get("redacted", False)),
            )
        except (TypeError, ValueError, AttributeError) as exc:
            raise RecordError(f"entry {entry_id}: {exc}") from None

    def summary(self) -> dict[str, Any]:
        """What ``list --json`` prints for one delivery."""
        return {
            "id": self.id,
            "received_at": self.received_at,
            "provider": self.provider,
            "path": self.path,
            "status": self.status,
            "error": self.error,
            "thread_ids": list(self.threads),
            "message_ids": list(self.messages),
            "preview": self.preview(200),
        }


def _strings(data: Any) -> Iterator[str]:
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for value in data.values():
            yield from _strings(value)
    elif isinstance(data, list):
        for value in data:
            yield from _strings(value)


# --- the raw stream ------------------------------------------------------------------


class RawLog:
    """The raw-delivery stream of one gateway (``Keys(prefix).raw``)."""

    def __init__(self, redis: aioredis.Redis, key: str) -> None:
        self.redis = redis
        self.key = key

    async def get(self, delivery_id: str) -> RawDelivery | None:
        """One delivery by stream id; None when unknown (or trimmed by retention)."""
        try:
            entries: Any = await self.redis.xrange(self.key, delivery_id, delivery_id, count=1)
        except ResponseError as exc:  # a malformed id: "Invalid stream ID"
            if "Invalid stream ID" in str(exc):
                return None
            raise
        if not entries:
            return None
        entry_id, fields = entries[0]
        return RawDelivery.from_stream(as_str(entry_id), fields)

    async def select(
        self, filters: Filters, problems: list[str] | None = None
    ) -> list[RawDelivery]:
        """The deliveries matching ``filters``, oldest first.

        With ``filters.limit``: the most recent ``limit`` matches. Unreadable entries
        are skipped and described in ``problems``.
        """
        if filters.ids:
            return await self._by_ids(filters, problems)
        low = str(int(filters.since.timestamp() * 1000)) if filters.since else "-"
        high = (
            str(int(filters.until.timestamp() * 1000) + _UNTIL_GRACE_MS) if filters.until else "+"
        )
        found: list[RawDelivery] = []
        newest_first = filters.limit is not None
        async for d in self._scan(low, high, reverse=newest_first, problems=problems):
            if filters.matches(d):
                found.append(d)
                if filters.limit is not None and len(found) >= filters.limit:
                    break
        if newest_first:
            found.reverse()
        return found

    async def _by_ids(self, filters: Filters, problems: list[str] | None) -> list[RawDelivery]:
        found: list[RawDelivery] = []
        for delivery_id in dict.fromkeys(filters.ids):
            try:
                d = await self.get(delivery_id)
            except RecordError as exc:
                _note(problems, str(exc))
                continue
            if d is None:
                _note(problems, f"no delivery with id {delivery_id} (unknown, or trimmed)")
            elif filters.matches(d):
                found.append(d)
        found.sort(key=lambda d: d.sort_key)
        return found[-filters.limit :] if filters.limit else found

    async def _scan(self, low: str, high: str, *, reverse: bool, problems: list[str] | None) -> Any:
        """Entries between two ids, a page at a time, oldest or newest first."""
        while True:
            page: Any
            if reverse:
                page = await self.redis.xrevrange(self.key, high, low, count=_PAGE)
            else:
                page = await self.redis.xrange(self.key, low, high, count=_PAGE)
            for entry_id, fields in page:
                try:
                    yield RawDelivery.from_stream(as_str(entry_id), fields)
                except RecordError as exc:
                    _note(problems, str(exc))
            if len(page) < _PAGE:
                return
            last = as_str(page[-1][0])
            if reverse:
                high = "(" + last
            else:
                low = "(" + last


def _note(problems: list[str] | None, text: str) -> None:
    if problems is not None:
        problems.append(text)


# --- the export file -----------------------------------------------------------------


def export_line(d: RawDelivery) -> str:
    """One delivery as one JSON line of the export file (no trailing newline)."""
    data: dict[str, Any] = {
        "format": EXPORT_FORMAT,
        "id": d.id,
        "received_at": d.received_at,
        "provider": d.provider,
        "method": d.method,
        "path": d.path,
        "query": d.query,
        "headers": dict(d.headers),
        "body": base64.b64encode(d.body).decode("ascii"),
    }
    if d.body_text is not None:
        data["body_text"] = d.body_text
    data.update(
        {
            "status": d.status,
            "error": d.error,
            "thread_ids": list(d.thread_ids),
            "message_ids": list(d.message_ids),
            "elapsed_ms": d.elapsed_ms,
            "replies": {k: dict(v) for k, v in d.replies.items()},
            "redacted": d.redacted,
        }
    )
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def parse_export_line(text: str, line: int) -> RawDelivery:
    """One export line → a delivery; ``RecordError`` says what is wrong with it."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RecordError(f"not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise RecordError("not a JSON object")
    fmt = data.get("format", EXPORT_FORMAT)
    if fmt != EXPORT_FORMAT:
        raise RecordError(f"format {fmt!r} is not {EXPORT_FORMAT!r}")
    for name in ("id", "provider", "path"):
        if not isinstance(data.get(name), str) or not data[name]:
            raise RecordError(f"missing field {name!r}")
    if data["provider"] not in ("twilio", "meta"):
        raise RecordError(f"provider {data['provider']!r} is neither 'twilio' nor 'meta'")
    body_text = data.get("body_text")
    if isinstance(body_text, str):
        body = body_text.encode("utf-8")  # the readable form wins: hand edits go there
    elif isinstance(data.get("body"), str):
        try:
            body = base64.b64decode(data["body"], validate=True)
        except (binascii.Error, ValueError):
            raise RecordError("body is not base64") from None
    else:
        raise RecordError("missing field 'body' (base64) or 'body_text'")
    return RawDelivery._from_meta(data["id"], data, body)


def read_export(source: Path | TextIO) -> Iterator[RawDelivery | ExportLineError]:
    """Each line of an export file: a delivery, or what is wrong with that line.

    Blank lines are skipped. A corrupt line never stops the reading.
    """
    if isinstance(source, Path):
        with source.open(encoding="utf-8", errors="replace") as fh:
            yield from read_export(fh)
        return
    for number, text in enumerate(source, start=1):
        if not text.strip():
            continue
        try:
            yield parse_export_line(text, number)
        except RecordError as exc:
            yield ExportLineError(number, str(exc).removeprefix(f"entry {number}: "))


def select_from_export(
    items: Sequence[RawDelivery | ExportLineError], filters: Filters, problems: list[str]
) -> list[RawDelivery]:
    """The file's deliveries matching ``filters`` (oldest first); bad lines → problems."""
    found: list[RawDelivery] = []
    seen: set[str] = set()
    for item in items:
        if isinstance(item, ExportLineError):
            problems.append(str(item))
        elif filters.matches(item):
            found.append(item)
            seen.add(item.id)
    for wanted in filters.ids:
        if wanted not in seen:
            problems.append(f"no delivery with id {wanted} in the file")
    found.sort(key=lambda d: d.sort_key)
    return found[-filters.limit :] if filters.limit else found
