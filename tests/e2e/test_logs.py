"""Logs carry context and never a full phone number or a message body at info level."""

from __future__ import annotations

from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs

from tests.e2e.conftest import Gateway
from tests.fakes.twilio_api import FakeTwilioAPI


async def test_turn_logs_are_bound_to_a_masked_thread_and_hold_no_body(
    gateway: Gateway, fake_twilio: FakeTwilioAPI
) -> None:
    with capture_logs(processors=[merge_contextvars]) as logs:
        await gateway.twilio("minha senha do banco é 1234", user="+5511987654321")
        await fake_twilio.wait_for_messages(1)
        await gateway.idle()
    accepted = next(e for e in logs if e["event"] == "webhook.accepted")
    assert accepted["thread_id"] == "twilio:+14155238886:+55119****4321"
    assert accepted["request_id"]
    committed = next(e for e in logs if e["event"] == "turn.committed")
    assert committed["thread_id"].endswith("****4321")
    assert committed["message_id"].startswith("SM")
    text = repr(logs)
    assert "5511987654321" not in text
    assert "senha do banco" not in text
