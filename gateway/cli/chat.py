"""``mel-gateway chat``: play a WhatsApp user against the gateway, through its webhook.

Each line you type becomes a Twilio-format delivery, signed like Twilio signs it (with
``TWILIO_AUTH_TOKEN`` or, with nothing configured, the locally generated dev secret), and
POSTed to ``/webhooks/twilio``. mel's reply is read from the event feed (``message.sent``
for the message you sent), which shows what the outbox channel (or the provider) got.
When no gateway answers at the URL, one is started in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiohttp import web

from channels import compute_twilio_signature, make_thread_id
from gateway.bootstrap import dev_twilio_token, open_store
from gateway.settings import Settings
from gateway.store import Store

__all__ = ["register", "run_chat"]

BUSINESS = "+14155238886"


def register(sub: Any) -> None:
    chat = sub.add_parser(
        "chat", help="talk to mel as a WhatsApp user, through the running gateway's webhook"
    )
    chat.add_argument("--url", help="gateway URL (default: http://HOST:PORT)")
    chat.add_argument("--user", default="+5511999990000", help="your (fake) WhatsApp number")
    chat.add_argument("--name", default="Você", help="your WhatsApp profile name")
    chat.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a reply")
    chat.set_defaults(run=lambda settings, args: asyncio.run(run_chat(settings, args)))


async def _gateway_up(session: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with session.get(f"{url}/healthz", timeout=aiohttp.ClientTimeout(total=2)) as r:
            return r.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False


@contextlib.asynccontextmanager
async def _local_gateway(settings: Settings) -> AsyncIterator[Store]:
    from gateway.http.app import create_app
    from gateway.http.keys import STORE

    app = create_app(settings)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, settings.host, settings.port)
    await site.start()
    try:
        yield app[STORE]
    finally:
        await runner.cleanup()


async def run_chat(settings: Settings, args: argparse.Namespace) -> int:
    url = (args.url or f"http://{settings.host}:{settings.port}").rstrip("/")
    token = settings.twilio_auth_token or dev_twilio_token(settings.mel_data_dir)
    business = (settings.twilio_whatsapp_from or BUSINESS).removeprefix("whatsapp:")
    thread = make_thread_id("twilio", business, args.user)
    async with aiohttp.ClientSession() as session:
        up = await _gateway_up(session, url)
        opener = open_store(settings) if up else _local_gateway(settings)
        async with opener as store:
            print(f"mel gateway at {url}: type a message (Ctrl-D to quit)")
            awaiting = _Awaiting()
            done = asyncio.Event()
            shown = asyncio.create_task(
                _show(store, await store.events.last_id(), thread, awaiting, done)
            )
            try:
                while True:
                    try:
                        line = await asyncio.to_thread(input, "you: ")
                    except (EOFError, KeyboardInterrupt):
                        print()
                        break
                    if line.strip():
                        sid = "SM" + uuid.uuid4().hex
                        awaiting.add(sid)  # before it is sent: the reply may be quick
                        if not await _post(
                            session, settings, args, url, token, business, line, sid
                        ):
                            awaiting.discard(sid)
                await awaiting.settle(args.timeout)
            finally:
                done.set()  # it ends after its current read (a blocked read is not cut)
                await shown
    return 0


async def _post(
    session: aiohttp.ClientSession,
    settings: Settings,
    args: argparse.Namespace,
    url: str,
    token: str,
    business: str,
    text: str,
    sid: str,
) -> bool:
    """POST one line as Twilio would deliver it, signed; False when the gateway refused it."""
    params = {
        "MessageSid": sid,
        "AccountSid": settings.twilio_account_sid or "AC" + "0" * 32,
        "From": f"whatsapp:{args.user}",
        "To": f"whatsapp:{business}",
        "Body": text,
        "NumMedia": "0",
        "ProfileName": args.name,
        "WaId": args.user.lstrip("+"),
    }
    hook = f"{url}/webhooks/twilio"
    headers = {"X-Twilio-Signature": compute_twilio_signature(token, hook, params)}
    async with session.post(hook, data=params, headers=headers) as resp:
        if resp.status != 200:
            print(f"[the gateway answered {resp.status}: {await resp.text()}]")
            return False
    return True


async def _show(
    store: Store, cursor: str, thread: str, awaiting: _Awaiting, done: asyncio.Event
) -> None:
    """Print every message that reaches this couple as it leaves (mel's replies, a
    person's words, the holding and handoff-expired messages), whatever they answer."""
    while not done.is_set():
        for event in await store.events.read(cursor, block_ms=500):
            cursor = event["id"]
            if event["thread_id"] != thread:
                continue
            data = event["data"]
            answered = str(data.get("in_reply_to") or "").split(":", 1)[0]
            if event["type"] == "message.sent":
                author = str(data.get("author") or "bot")
                who = "mel" if author == "bot" else f"{author.removeprefix('support:')} (support)"
                print(f"{who}: {data.get('text', '')}")
                awaiting.discard(answered)
            elif event["type"] == "message.failed":
                print(f"[not delivered: {data.get('error') or data.get('reason')}]")
                awaiting.discard(answered)
            elif event["type"] == "session.human_handoff.requested" and data.get("support") == (
                "available"
            ):
                print("[a person will answer here; mel stays quiet meanwhile]")


class _Awaiting:
    """The messages sent that nothing has answered yet."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self._none = asyncio.Event()
        self._none.set()

    def add(self, sid: str) -> None:
        self.ids.add(sid)
        self._none.clear()

    def discard(self, sid: str) -> None:
        self.ids.discard(sid)
        if not self.ids:
            self._none.set()

    async def settle(self, timeout: float) -> None:
        """Before quitting, give the replies on their way up to ``timeout`` seconds."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._none.wait(), timeout)
        if self.ids:
            print("[no answer yet: with a person on the thread, mel stays quiet]", file=sys.stderr)
