"""``mel-gateway watch``: support's terminal view of the live event feed (SSE)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any, TextIO

import aiohttp

from channels import mask_number
from gateway.settings import Settings

__all__ = ["format_event", "read_sse", "run_watch"]


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


def _who(thread_id: str) -> str:
    channel, _, rest = thread_id.partition(":")
    _business, _, user = rest.partition(":")
    return f"{channel}:{mask_number(user)}" if user else thread_id or "-"


def format_event(env: dict[str, Any]) -> str:
    """One readable line: time, type, who, and what was said or decided."""
    data = env.get("data") or {}
    when = str(env.get("at", ""))[11:19]
    detail = ""
    for key in ("text", "reason", "kind", "decision", "status", "error"):
        if data.get(key) not in (None, ""):
            value = str(data[key]).replace("\n", " ")
            detail = f"{key}={value[:90]!r}" if key != "text" else f"“{value[:90]}”"
            break
    return f"{when}  {env.get('type', ''):<34} {_who(str(env.get('thread_id', ''))):<24} {detail}"


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
