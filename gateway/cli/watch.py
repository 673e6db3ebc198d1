"""``mel-gateway watch``: support's terminal view of the live event feed (SSE)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any, TextIO

import aiohttp

from gateway.settings import Settings

__all__ = ["format_event", "read_sse", "register", "run_watch"]


def register(sub: Any) -> None:
    watch = sub.add_parser("watch", help="support's live view of the event feed")
    watch.add_argument("--url", help="gateway URL (default: http://HOST:PORT)")
    watch.add_argument("--token", help="support bearer token (default: SUPPORT_TOKEN)")
    watch.add_argument("--types", help="comma-separated types; 'session.*' matches a family")
    watch.add_argument("--thread", help="only this thread: its id, or the user's number")
    watch.add_argument("--after", help="start after this event id (default: live)")
    watch.add_argument("--json", action="store_true", help="one JSON envelope per line")
    watch.set_defaults(run=lambda settings, args: asyncio.run(run_watch(settings, args)))


async def read_sse(
    resp: aiohttp.ClientResponse,
) -> AsyncIterator[dict[str, str]]:
    """Parse a text/event-stream response into ``{"id", "event", "data"}`` dicts."""
    event: dict[str, str] = {}
    async for raw in resp.content:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if "data" in event:
                yield event
            event = {}
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            event[name] = event[name] + "\n" + value if name in event else value


def format_event(env: dict[str, Any]) -> str:
    """One readable line: time, type, the thread (whole: copy it into ``--thread``), and
    what was said or decided."""
    data = env.get("data") or {}
    when = str(env.get("at", ""))[11:19]
    detail = ""
    for key in ("text", "reason", "kind", "decision", "status", "error"):
        if data.get(key) not in (None, ""):
            value = str(data[key]).replace("\n", " ")
            detail = f"{key}={value[:90]!r}" if key != "text" else f"“{value[:90]}”"
            break
    thread = str(env.get("thread_id") or "-")
    return f"{when}  {env.get('type', ''):<34} {thread:<40} {detail}"


async def run_watch(settings: Settings, args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    url = (args.url or f"http://{settings.host}:{settings.port}").rstrip("/")
    token = args.token or settings.support_token
    if not token:
        print("mel-gateway watch: set SUPPORT_TOKEN (or --token)", file=sys.stderr)
        return 2
    params = {}
    if args.types:
        params["types"] = args.types
    if args.thread:
        params["thread"] = args.thread
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
    last_id: str | None = args.after
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while True:
            if last_id:
                headers["Last-Event-ID"] = last_id
            try:
                async with session.get(
                    f"{url}/support/events", params=params, headers=headers
                ) as r:
                    if r.status != 200:
                        print(f"mel-gateway watch: {r.status} {await r.text()}", file=sys.stderr)
                        return 1
                    async for event in read_sse(r):
                        last_id = event.get("id", last_id)
                        env = json.loads(event["data"])
                        line = (
                            json.dumps(env, ensure_ascii=False) if args.json else format_event(env)
                        )
                        print(line, file=out, flush=True)
            except (aiohttp.ClientError, TimeoutError) as exc:
                print(f"[feed lost: {exc}; reconnecting]", file=sys.stderr)
                await asyncio.sleep(1)
