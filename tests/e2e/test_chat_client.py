"""``mel-gateway chat`` against a gateway with nothing configured (dev secret, outbox)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from guard import GUARD_RESPONSE_FRUSTRATED
from tests.e2e.conftest import Gateway


async def test_chat_plays_a_whatsapp_user_through_the_signed_webhook(
    start_gateway: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gateway.cli.chat import run_chat

    gw: Gateway = await start_gateway(
        meta_app_secret=None, twilio_auth_token=None, twilio_account_sid=None, llm_base_url=None
    )
    lines = iter(["esse bot é uma porra, não funciona nada", "qual o total do mês?"])

    def fake_input(prompt: str = "") -> str:
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    monkeypatch.setattr("builtins.input", fake_input)
    args = argparse.Namespace(
        url=gw.url("").rstrip("/"), user="+5511955554444", name="Ana", timeout=15
    )
    assert await run_chat(gw.settings, args) == 0
    out = capsys.readouterr().out
    assert f"mel: {GUARD_RESPONSE_FRUSTRATED}" in out
    assert "mel: " in out.split(GUARD_RESPONSE_FRUSTRATED, 1)[1]  # the second reply arrived too
    outbox = await gw.store.redis.xrange(f"{gw.settings.mel_redis_prefix}:outbox")
    assert len(outbox) == 2  # both replies left through the local outbox channel
