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


def test_an_edit_reads_as_a_correction() -> None:
    msg = message("edit", text="gastei 500", edit_of="wamid.original")
    assert describe(msg) == (
        '[o usuário corrigiu uma mensagem anterior; texto corrigido: "gastei 500"]'
    )
    assert describe(message("edit", edit_of="wamid.original")) == (
        "[o usuário editou uma mensagem anterior]"
    )


def test_delete_welcome_and_flow() -> None:
    assert describe(message("delete", deleted_id="wamid.x")) == (
        "[o usuário apagou uma mensagem anterior]"
    )
    assert describe(message("welcome")) == "[o usuário abriu a conversa pela primeira vez]"
    flow = message("flow", payload={"response": {"flow_token": "t", "valor": "120", "obs": ""}})
    assert describe(flow) == "[formulário enviado: valor: 120]"


def test_a_long_flow_is_shortened() -> None:
    response = {f"campo{i}": "x" * 200 for i in range(15)}
    text = describe(message("flow", payload={"response": response}))
    assert text.endswith("; e mais 5]")
    assert "x" * 81 not in text


@pytest.mark.parametrize(
    ("raw_type", "expected"),
    [
        ("unsupported.edit", "[mensagem editada (o novo texto não chegou)]"),
        ("unsupported.poll_creation", "[enquete]"),
        ("unsupported.poll_update", "[voto em enquete]"),
        (
            "unsupported.something_new",
            "[mensagem de tipo não suportado: unsupported.something_new]",
        ),
    ],
)
def test_what_cloud_api_reports_only_by_type(raw_type: str, expected: str) -> None:
    assert describe(message("unsupported", raw_type=raw_type)) == expected


@pytest.mark.parametrize(
    ("kind", "fields", "answerable"),
    [
        ("text", {"text": "oi"}, True),
        ("edit", {"text": "gastei 500", "edit_of": "wamid.x"}, True),
        ("welcome", {}, True),
        ("flow", {"payload": {"response": {}}}, True),
        ("delete", {"deleted_id": "wamid.x"}, False),
        ("reaction", {"reaction": {"message_id": "x", "emoji": "👍"}}, False),
        ("unsupported", {}, False),
        ("media", {"media": (Media(kind="sticker", media_id="1"),)}, False),
        ("media", {"media": (Media(kind="image", media_id="1"),)}, True),
    ],
)
def test_what_is_answered(kind: str, fields: dict[str, Any], answerable: bool) -> None:
    assert message(kind, **fields).answerable is answerable
