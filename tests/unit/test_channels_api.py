"""The package's public surface: exports, the Sender port, error mapping."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import channels
from channels import (
    ChannelError,
    MalformedPayload,
    MetaSender,
    OutboxSender,
    OutsideWindowError,
    Sender,
    SendError,
    SignatureError,
    TwilioSender,
)


def test_all_is_unique_and_importable() -> None:
    # the order (isort style) is enforced by ruff's RUF022
    assert len(set(channels.__all__)) == len(channels.__all__)
    for name in channels.__all__:
        assert hasattr(channels, name), name


def test_channels_never_import_agent_gateway_or_the_web_server() -> None:
    forbidden = ("agent", "gateway", "aiohttp.web")
    for path in Path(channels.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            for name in names:
                assert not name.startswith(forbidden), f"{path.name} imports {name}"


async def test_every_sender_satisfies_the_port(redis: object) -> None:
    senders: list[object] = [
        TwilioSender("AC" + "0" * 32, "token", "+14155238886"),
        MetaSender("token", "123"),
        OutboxSender(redis, "outbox"),  # type: ignore[arg-type]
    ]
    for sender in senders:
        assert isinstance(sender, Sender)
    assert [s.max_length for s in senders] == [1600, 4096, 4096]  # type: ignore[attr-defined]
    assert [s.provider for s in senders] == ["twilio", "meta", "outbox"]  # type: ignore[attr-defined]
    for sender in senders[::2]:  # no-ops on Twilio and the outbox
        await sender.mark_read("wamid.x")  # type: ignore[attr-defined]
    for sender in senders:
        await sender.close()  # type: ignore[attr-defined]
        await sender.close()  # type: ignore[attr-defined]  # idempotent


def test_errors_share_one_root_and_map_to_statuses() -> None:
    assert SignatureError("x").http_status == 403
    assert MalformedPayload("x").http_status == 400
    outside = OutsideWindowError("twilio", 63016, "outside the window", status=400)
    assert isinstance(outside, SendError)
    assert not outside.retryable
    assert (outside.provider, outside.code, outside.status) == ("twilio", 63016, 400)
    for error in (SignatureError("x"), MalformedPayload("x"), outside):
        assert isinstance(error, ChannelError)


def test_send_error_fields() -> None:
    error = SendError("meta", 130429, "Rate limit hit", True, sent_ids=("wamid.1",))
    assert error.retryable
    assert error.sent_ids == ("wamid.1",)
    assert "130429" in str(error)
    assert "Rate limit hit" in str(error)


@pytest.mark.parametrize(
    "make",
    [
        lambda: TwilioSender("", "t", "+14155238886"),
        lambda: TwilioSender("AC1", "t", "not a number"),
        lambda: TwilioSender("AC1", "t", "+14155238886", timeout=0),
        lambda: MetaSender("", "123"),
    ],
)
def test_bad_sender_configuration(make: object) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each case has its own message
        make()  # type: ignore[operator]
