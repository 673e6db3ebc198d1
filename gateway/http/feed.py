"""The live event feed: ``GET /support/events`` as Server-Sent Events, for many viewers.

One reader per process (:class:`FeedHub`) follows the event stream on its own small
Redis pool and hands each batch to every open stream; a viewer never holds a Redis
connection, so viewers can never starve the webhooks and the turns of theirs. A stream
that resumes (``Last-Event-ID`` / ``?after=``) first catches up from Redis, a page at a
time, then joins the live batches. Streams are capped (``MEL_FEED_MAX_STREAMS``: past it
the new stream gets a 503, nothing else does); a viewer too slow to keep up is told
(``event: lagging``) and closed, and resumes where it was. A disconnect is noticed within
a second; shutdown ends every stream at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
import structlog
from aiohttp import web

from channels import thread_matcher
from gateway.errors import BadRequest, Unavailable
from gateway.store import EventLog, StoreDown
from gateway.workers.support_webhook import type_matches

__all__ = ["FEED", "FeedFull", "FeedHub", "Subscription", "events"]

log = structlog.get_logger("gateway.http.feed")

HEARTBEAT_SECONDS = 15.0
_EVENT_ID = re.compile(r"\d{1,20}-\d{1,20}")
_CATCH_UP_PAGE = 200
_FRAMES_KEPT = 2048


class FeedFull(Unavailable):
    """Too many open streams: this one is refused (503), the rest of the service is not."""


class Subscription:
    """One open stream's queue of batches (bounded: a full one means a lagging viewer)."""

    def __init__(self, depth: int) -> None:
        self.queue: asyncio.Queue[list[dict[str, Any]] | None] = asyncio.Queue(depth)
        self.lagging = False

    def offer(self, batch: list[dict[str, Any]]) -> None:
        if self.lagging:
            return
        try:
            self.queue.put_nowait(batch)
        except asyncio.QueueFull:
            self.lagging = True

    def close(self) -> None:
        with contextlib.suppress(asyncio.QueueFull):
            self.queue.put_nowait(None)


class FeedHub:
    """The process's one reader of the event stream, fanned out to the open streams."""

    def __init__(self, log_: EventLog, *, max_streams: int, depth: int = 256) -> None:
        self.events = log_
        self.max_streams = max_streams
        self.depth = depth
        self.position = "$"
        self._subscribers: set[Subscription] = set()
        self._reader: asyncio.Task[None] | None = None
        self._started = asyncio.Event()
        self._closed = False
        self._frames: OrderedDict[str, bytes] = OrderedDict()

    def frame(self, env: dict[str, Any]) -> bytes:
        """The event as an SSE frame, encoded once for every viewer (the last
        ``_FRAMES_KEPT`` are kept: a live batch and the pages of catching up)."""
        frame = self._frames.get(env["id"])
        if frame is None:
            data = orjson.dumps(env)
            frame = b"id: %s\nevent: %s\ndata: %s\n\n" % (
                env["id"].encode(),
                env["type"].encode(),
                data,
            )
            self._frames[env["id"]] = frame
            if len(self._frames) > _FRAMES_KEPT:
                self._frames.popitem(last=False)
        return frame

    @property
    def open_streams(self) -> int:
        return len(self._subscribers)

    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[Subscription]:
        """A subscription to live batches; ``FeedFull`` past the cap."""
        if self._closed or len(self._subscribers) >= self.max_streams:
            raise FeedFull(f"too many open event streams ({self.max_streams}): try again later")
        sub = Subscription(self.depth)
        self._subscribers.add(sub)
        if self._reader is None or self._reader.done():
            self._started.clear()
            self._reader = asyncio.create_task(self._read(), name="feed-hub")
        try:
            await self._started.wait()
            yield sub
        finally:
            self._subscribers.discard(sub)

    async def close(self) -> None:
        """End every open stream (shutdown) and stop reading (after the current read: a
        blocked read is not cut)."""
        self._closed = True
        for sub in list(self._subscribers):
            sub.close()
        if self._reader is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._reader), 2.0)

    async def _read(self) -> None:
        """Follow the stream while anyone listens (one blocking read for everyone)."""
        while True:
            try:
                if self.position == "$":
                    self.position = await self.events.last_id()
                self._started.set()
                if not self._subscribers or self._closed:
                    return
                batch = await self.events.read(self.position, count=500, block_ms=1000)
            except StoreDown as exc:
                log.warning("feed.redis_unavailable", error=str(exc))
                self._started.set()
                await asyncio.sleep(1.0)
                continue
            if batch:
                self.position = batch[-1]["id"]
                for sub in list(self._subscribers):
                    sub.offer(batch)


FEED: web.AppKey[FeedHub] = web.AppKey("feed")


def _cursor(request: web.Request) -> str | None:
    """Where the viewer resumes (None: live). ``BadRequest`` for an id that is not one."""
    raw = request.headers.get("Last-Event-ID") or request.query.get("after")
    if not raw or raw == "$":
        return None
    if not _EVENT_ID.fullmatch(raw):
        raise BadRequest(
            f"not an event id: {raw[:40]!r} (expected <ms>-<seq>, e.g. 1700000000000-0)"
        )
    return raw


def _matches(
    env: dict[str, Any], patterns: list[str], thread: Callable[[str], bool] | None
) -> bool:
    return type_matches(env["type"], patterns) and (thread is None or thread(env["thread_id"]))


async def events(request: web.Request) -> web.StreamResponse:
    """Server-Sent Events: ``id`` = stream id, ``event`` = type, ``data`` = the envelope.

    Resumes after ``Last-Event-ID`` (or ``?after=``); without either, starts live.
    ``?types=a,b.*`` and ``?thread=`` filter.
    """
    hub = request.config_dict[FEED]
    patterns = [t for t in request.query.get("types", "").split(",") if t]
    thread = thread_filter(request)
    cursor = _cursor(request)
    async with hub.subscribe() as sub:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        stream = _Stream(request, response, patterns, thread, hub.frame)
        with contextlib.suppress(ConnectionError):
            await response.write(b": mel support feed\n\n")
            if cursor is not None:
                cursor = await stream.catch_up(hub, cursor)
            await stream.follow(sub, cursor)
        return response


def thread_filter(request: web.Request) -> Callable[[str], bool] | None:
    """``?thread=``: a thread id or a user's number, as ``replay --thread`` takes them."""
    raw = request.query.get("thread")
    return thread_matcher(raw) if raw else None


class _Stream:
    def __init__(
        self,
        request: web.Request,
        response: web.StreamResponse,
        patterns: list[str],
        thread: Callable[[str], bool] | None,
        frame: Callable[[dict[str, Any]], bytes],
    ) -> None:
        self.request = request
        self.response = response
        self.patterns = patterns
        self.thread = thread
        self.frame = frame

    async def send(self, batch: list[dict[str, Any]], after: str | None) -> str | None:
        """Write the batch's matching events newer than ``after``; the new position."""
        out: list[bytes] = []
        for env in batch:
            if after is not None and not _newer(env["id"], after):
                continue
            after = env["id"]
            if _matches(env, self.patterns, self.thread):
                out.append(self.frame(env))
        if out:
            await self.response.write(b"".join(out))
        return after

    async def catch_up(self, hub: FeedHub, cursor: str) -> str:
        """Everything after ``cursor`` up to the live position, from Redis."""
        while True:
            page = await hub.events.read(cursor, count=_CATCH_UP_PAGE)
            if not page:
                return cursor
            cursor = await self.send(page, cursor) or cursor
            if len(page) < _CATCH_UP_PAGE:
                return cursor

    async def follow(self, sub: Subscription, cursor: str | None) -> None:
        idle = 0.0
        while True:
            if self._gone():
                return
            try:
                batch = await asyncio.wait_for(sub.queue.get(), 1.0)
            except TimeoutError:
                idle += 1.0
                if idle >= HEARTBEAT_SECONDS:
                    await self.response.write(b": keepalive\n\n")
                    idle = 0.0
                continue
            if batch is None:  # shutdown
                return
            idle = 0.0
            cursor = await self.send(batch, cursor)
            if sub.lagging and sub.queue.empty():
                await self.response.write(
                    f"event: lagging\ndata: {json.dumps({'resume_after': cursor})}\n\n".encode()
                )
                return

    def _gone(self) -> bool:
        transport = self.request.transport
        return transport is None or transport.is_closing()


def _newer(event_id: str, than: str) -> bool:
    a_ms, _, a_seq = event_id.partition("-")
    b_ms, _, b_seq = than.partition("-")
    return (int(a_ms), int(a_seq or 0)) > (int(b_ms), int(b_seq or 0))
