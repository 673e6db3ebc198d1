"""describe(): what the agent reads for each kind of message."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from channels import InboundMessage, Location, Media, describe


def message(kind: str, **fields: Any) -> InboundMessage:
    return InboundMessage(
        channel="meta",
        provider_message_id="wamid.x",
        business_number="+14155238886",
        user_number="+5511999990000",
        kind=kind,
        timestamp=datetime(2026, 6, 3, tzinfo=UTC),
        **fields,
    )


def test_text_is_read_as_is() -> None:
    msg = message("text", text="Quanto gastei em maio?")
    assert describe(msg) == "Quanto gastei em maio?"
    assert msg.agent_text() == "Quanto gastei em maio?"


def test_image_with_caption() -> None:
    msg = message("media", text="nota do mercado", media=(Media(kind="image", media_id="1"),))
    assert describe(msg) == '[imagem recebida: legenda "nota do mercado"]'


def test_caption_from_the_media_when_text_is_empty() -> None:
    msg = message("media", media=(Media(kind="video", caption="olha isso"),))
    assert describe(msg) == '[vídeo recebido: legenda "olha isso"]'


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("audio", "[áudio recebido]"),
        ("image", "[imagem recebida]"),
        ("video", "[vídeo recebido]"),
        ("sticker", "[figurinha recebida]"),
        ("document", "[documento recebido]"),
        ("something", "[arquivo recebido]"),
    ],
)
def test_media_without_caption(kind: str, expected: str) -> None:
    assert describe(message("media", media=(Media(kind=kind),))) == expected


def test_document_with_filename_and_caption() -> None:
    msg = message(
        "media", text="fatura de maio", media=(Media(kind="document", filename="fatura.pdf"),)
    )
    assert describe(msg) == '[documento recebido: legenda "fatura de maio"; arquivo "fatura.pdf"]'


def test_several_attachments() -> None:
    msg = message("media", media=(Media(kind="image"), Media(kind="document")))
    assert describe(msg) == "[2 anexos recebidos (imagem, documento)]"


def test_location_with_name_and_address() -> None:
    msg = message(
        "location",
        location=Location(latitude=-23.55, longitude=-46.63, address="Av. Paulista"),
    )
    assert describe(msg) == "[localização: -23.55, -46.63 — Av. Paulista]"


def test_location_coordinates_only() -> None:
    msg = message("location", location=Location(latitude=-23.5505199, longitude=-46.6333094))
    assert describe(msg) == "[localização: -23.55052, -46.633309]"


def test_location_with_name_and_address_both() -> None:
    msg = message(
        "location",
        location=Location(latitude=1, longitude=2, name="MASP", address="Av. Paulista, 1578"),
    )
    assert describe(msg) == "[localização: 1, 2 — MASP, Av. Paulista, 1578]"


def test_one_contact() -> None:
    msg = message(
        "contacts",
        contacts=({"name": {"formatted_name": "Ana"}, "phones": [{"phone": "+5511988887777"}]},),
    )
    assert describe(msg) == "[contato compartilhado: Ana (+5511988887777)]"


def test_several_contacts_and_partial_cards() -> None:
    msg = message(
        "contacts",
        contacts=(
            {"name": {"first_name": "Bruno", "last_name": "Lima"}},
            {"phones": [{"wa_id": "5521977776666"}]},
            {},
        ),
    )
    assert describe(msg) == ("[contatos compartilhados: Bruno Lima, 5521977776666, sem nome]")


def test_template_button() -> None:
    msg = message("button", text="Ver fatura", payload={"id": "VER", "title": "Ver fatura"})
    assert describe(msg) == "[botão: Ver fatura]"


def test_interactive_reply() -> None:
    msg = message("interactive", text="Maio", payload={"id": "m5", "title": "Maio"})
    assert describe(msg) == "[opção escolhida: Maio]"


def test_reactions() -> None:
    assert describe(message("reaction", reaction={"message_id": "x", "emoji": "👍"})) == (
        "[reação: 👍]"
    )
    assert describe(message("reaction", reaction={"message_id": "x", "emoji": None})) == (
        "[reação removida]"
    )


def test_unsupported() -> None:
    assert describe(message("unsupported", raw_type="order")) == (
        "[mensagem de tipo não suportado: order]"
    )
    assert describe(message("unsupported")) == "[mensagem de tipo não suportado]"
