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

from channels import compute_twilio_signature
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
    async with aiohttp.ClientSession() as session:
        up = await _gateway_up(session, url)
        opener = open_store(settings) if up else _local_gateway(settings)
        async with opener as store:
            print(f"mel gateway at {url} — escreva sua mensagem (Ctrl-D para sair)")
            cursor = await store.events.last_id()
            while True:
                try:
                    line = await asyncio.to_thread(input, "você: ")
                except (EOFError, KeyboardInterrupt):
                    print()
                    return 0
                if not line.strip():
                    continue
                sid = "SM" + uuid.uuid4().hex
                params = {
                    "MessageSid": sid,
                    "AccountSid": settings.twilio_account_sid or "AC" + "0" * 32,
                    "From": f"whatsapp:{args.user}",
                    "To": f"whatsapp:{business}",
                    "Body": line,
                    "NumMedia": "0",
                    "ProfileName": args.name,
                    "WaId": args.user.lstrip("+"),
                }
                hook = f"{url}/webhooks/twilio"
                headers = {"X-Twilio-Signature": compute_twilio_signature(token, hook, params)}
                async with session.post(hook, data=params, headers=headers) as resp:
                    if resp.status != 200:
                        print(f"[gateway answered {resp.status}: {await resp.text()}]")
                        continue
                cursor = await _print_reply(store, cursor, sid, args.timeout)


async def _print_reply(store: Store, cursor: str, sid: str, timeout: float) -> str:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        for event in await store.events.read(cursor, block_ms=1000):
            cursor = event["id"]
            data = event["data"]
            if data.get("in_reply_to") != sid:
                continue
            if event["type"] == "message.sent":
                print(f"mel: {data.get('text', '')}")
                return cursor
            if event["type"] == "message.failed":
                print(f"[resposta não entregue: {data.get('error') or data.get('reason')}]")
                return cursor
            if event["type"] == "agent.replied" and not data.get("text"):
                return cursor
    print("[sem resposta — a conversa pode estar com um atendente humano]", file=sys.stderr)
    return cursor
