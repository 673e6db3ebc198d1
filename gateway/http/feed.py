"""The live event feed: ``GET /support/events`` as Server-Sent Events."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from gateway.http.keys import STORE
from gateway.workers.support_webhook import type_matches

__all__ = ["HEARTBEAT_SECONDS", "events"]

HEARTBEAT_SECONDS = 15.0


async def events(request: web.Request) -> web.StreamResponse:
    """Server-Sent Events: ``id`` = stream id, ``event`` = type, ``data`` = the envelope.

    Resumes after ``Last-Event-ID`` (or ``?after=``); without either, starts live.
    ``?types=a,b.*`` and ``?thread=`` filter.
    """
    log = request.config_dict[STORE].events
    patterns = [t for t in request.query.get("types", "").split(",") if t]
    thread = request.query.get("thread")
    cursor = request.headers.get("Last-Event-ID") or request.query.get("after") or "$"
    if cursor == "$":
        cursor = await log.last_id()
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    await response.write(b": mel support feed\n\n")
    idle = 0.0
    while True:
        batch: list[dict[str, Any]] = await log.read(cursor, count=200, block_ms=3000)
        if not batch:
            idle += 3.0
            if idle >= HEARTBEAT_SECONDS:
                await response.write(b": keepalive\n\n")
                idle = 0.0
            continue
        idle = 0.0
        for env in batch:
            cursor = env["id"]
            if not type_matches(env["type"], patterns):
                continue
            if thread and env["thread_id"] != thread:
                continue
            data = json.dumps(env, ensure_ascii=False)
            await response.write(
                f"id: {env['id']}\nevent: {env['type']}\ndata: {data}\n\n".encode()
            )
