"""to_e164 and mask_number."""

from __future__ import annotations

import pytest

from channels import MalformedPayload, mask_number, to_e164


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("+5511999990000", "+5511999990000"),
        ("5511999990000", "+5511999990000"),
        ("whatsapp:+5511999990000", "+5511999990000"),
        ("WhatsApp:+14155238886", "+14155238886"),
        (" +55 (11) 99999-0000 ", "+5511999990000"),
        ("1.555.078.3881", "+15550783881"),
        ("+12345678", "+12345678"),
        ("+123456789012345", "+123456789012345"),
    ],
)
def test_to_e164(value: str, expected: str) -> None:
    assert to_e164(value) == expected


@pytest.mark.parametrize(
    "value",
    ["", "+", "abc", "+1234567", "+1234567890123456", "sms:+5511999990000", "+55११९९९९", "++55119"],
)
def test_to_e164_rejects(value: str) -> None:
    with pytest.raises(MalformedPayload, match=r"recipient is not a phone number"):
        to_e164(value, field="recipient")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("+5511999990000", "+55119****0000"),
        ("whatsapp:+5511999990000", "+55119****0000"),
        ("+14155238886", "+141****8886"),
        ("+123456789012345", "+12345******2345"),
        ("+12345678", "+****5678"),
        ("nonsense", "***"),
        ("", "***"),
    ],
)
def test_mask_number(value: str, expected: str) -> None:
    assert mask_number(value) == expected


def test_mask_never_shows_the_middle() -> None:
    masked = mask_number("+5511987654321")
    assert "8765" not in masked
    assert masked.endswith("4321")


def test_mask_thread_id_keeps_our_number_and_masks_the_couples() -> None:
    from channels import mask_thread_id

    masked = mask_thread_id("twilio:+14155238886:+5511999990000")
    assert masked == "twilio:+14155238886:+55119****0000"
    assert mask_thread_id("not-a-thread") == "not-a-thread"
