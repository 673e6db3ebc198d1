"""to_e164 and mask_number."""

from __future__ import annotations

import pytest

from channels import MalformedPayload, is_bsuid, mask_number, redact_digits, to_e164


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


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("BR.1502576394655843", "BR.****5843"),
        ("US.ENT.11815799212886844830", "US.ENT.****4830"),
        ("BR.1234567", "BR.****"),
    ],
)
def test_mask_a_business_scoped_user_id(value: str, expected: str) -> None:
    assert mask_number(value) == expected


def test_mask_thread_id_of_a_bsuid_thread() -> None:
    from channels import mask_thread_id

    masked = mask_thread_id("meta:+15550783881:BR.1502576394655843")
    assert masked == "meta:+15550783881:BR.****5843"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("BR.1502576394655843", True),
        ("US.ENT.11815799212886844830", True),
        ("+5511999990000", False),
        ("br.123", False),
        ("BR.12:34", False),
        ("BR." + "1" * 129, False),
        ("", False),
    ],
)
def test_is_bsuid(value: str, expected: bool) -> None:
    assert is_bsuid(value) is expected


def test_errors_never_quote_a_number_whole() -> None:
    with pytest.raises(MalformedPayload) as info:
        to_e164("+55 11 99999-00001234", field="From")
    assert "99999" not in info.value.reason
    assert info.value.reason == "From is not a phone number: '+55 11 *****-********'"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("sms:+5511999990000", "sms:+5511*********"),
        ("abc", "abc"),
        ("12345", "12345"),
        ("BR:1502576394655843", "BR:1502************"),
        ("x" * 100, "x" * 40),
    ],
)
def test_redact_digits(value: str, expected: str) -> None:
    assert redact_digits(value) == expected
