"""What the agent reads for a message: the text itself, or a short PT-BR description."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from channels.models import InboundMessage, Location, Media

__all__ = ["describe"]

# noun, and whether it is feminine (for "recebido" / "recebida")
_MEDIA_NOUNS: Mapping[str, tuple[str, bool]] = {
    "image": ("imagem", True),
    "audio": ("áudio", False),
    "video": ("vídeo", False),
    "document": ("documento", False),
    "sticker": ("figurinha", True),
}

# What Cloud API reports only as ``unsupported.<type>``, without the content.
_UNSUPPORTED_NOUNS: Mapping[str, str] = {
    "unsupported.edit": "mensagem editada (o novo texto não chegou)",
    "unsupported.poll_creation": "enquete",
    "unsupported.poll_update": "voto em enquete",
    "unsupported.pin": "mensagem fixada",
    "unsupported.gif": "GIF",
}
_FLOW_FIELDS_SHOWN = 10
_FLOW_VALUE_CHARS = 80


def describe(msg: InboundMessage) -> str:
    """``msg.text`` for a text message; otherwise a bracketed PT-BR description.

    e.g. ``[imagem recebida: legenda "nota do mercado"]``,
    ``[localização: -23.55, -46.63 — Av. Paulista]``,
    ``[contato compartilhado: Ana (+5511999990000)]``, ``[botão: Ver fatura]``; an edit
    reads as a correction: ``[o usuário corrigiu uma mensagem anterior; texto corrigido:
    "gastei 500"]``.
    """
    match msg.kind:
        case "text":
            return msg.text
        case "media":
            return _describe_media(msg.media, msg.text)
        case "location":
            return _describe_location(msg.location, msg.text)
        case "contacts":
            return _describe_contacts(msg.contacts)
        case "button":
            return f"[botão: {_title(msg)}]"
        case "interactive":
            return f"[opção escolhida: {_title(msg)}]"
        case "reaction":
            emoji = (msg.reaction or {}).get("emoji")
            return f"[reação: {emoji}]" if emoji else "[reação removida]"
        case "edit":
            if not msg.text.strip():
                return "[o usuário editou uma mensagem anterior]"
            return f'[o usuário corrigiu uma mensagem anterior; texto corrigido: "{msg.text}"]'
        case "delete":
            return "[o usuário apagou uma mensagem anterior]"
        case "welcome":
            return "[o usuário abriu a conversa pela primeira vez]"
        case "flow":
            return _describe_flow(msg.payload or {})
        case _:
            noun = _UNSUPPORTED_NOUNS.get(msg.raw_type or "")
            if noun:
                return f"[{noun}]"
            kind = f": {msg.raw_type}" if msg.raw_type else ""
            return f"[mensagem de tipo não suportado{kind}]"


def _describe_media(media: Sequence[Media], text: str) -> str:
    caption = text.strip() or next((m.caption for m in media if m.caption), "") or ""
    details: list[str] = []
    if caption:
        details.append(f'legenda "{caption}"')
    filenames = [m.filename for m in media if m.filename]
    details.extend(f'arquivo "{name}"' for name in filenames)
    if len(media) == 1:
        noun, feminine = _MEDIA_NOUNS.get(media[0].kind, ("arquivo", False))
        head = f"{noun} {'recebida' if feminine else 'recebido'}"
    elif media:
        nouns = ", ".join(_MEDIA_NOUNS.get(m.kind, ("arquivo", False))[0] for m in media)
        head = f"{len(media)} anexos recebidos ({nouns})"
    else:
        head = "anexo recebido"
    return f"[{head}: {'; '.join(details)}]" if details else f"[{head}]"


def _describe_location(location: Location | None, text: str) -> str:
    if location is None:
        return "[localização]"
    coords = f"{_coord(location.latitude)}, {_coord(location.longitude)}"
    place = ", ".join(part for part in (location.name, location.address) if part)
    if text.strip() and text.strip() not in place:
        place = ", ".join(part for part in (place, text.strip()) if part)
    return f"[localização: {coords} — {place}]" if place else f"[localização: {coords}]"


def _coord(value: float) -> str:
    return f"{value:.6f}".rstrip("0").rstrip(".")


def _describe_contacts(contacts: Sequence[Mapping[str, Any]]) -> str:
    if not contacts:
        return "[contato compartilhado]"
    people = [_contact_label(contact) for contact in contacts]
    noun = "contato compartilhado" if len(people) == 1 else "contatos compartilhados"
    return f"[{noun}: {', '.join(people)}]"


def _contact_label(contact: Mapping[str, Any]) -> str:
    name_field = contact.get("name")
    name = ""
    if isinstance(name_field, Mapping):
        name = str(
            name_field.get("formatted_name")
            or " ".join(
                str(name_field[key]) for key in ("first_name", "last_name") if name_field.get(key)
            )
        )
    phones = contact.get("phones")
    phone = ""
    if isinstance(phones, Sequence) and phones and isinstance(phones[0], Mapping):
        phone = str(phones[0].get("phone") or phones[0].get("wa_id") or "")
    if name and phone:
        return f"{name} ({phone})"
    return name or phone or "sem nome"


def _describe_flow(payload: Mapping[str, Any]) -> str:
    response = payload.get("response")
    answers = [
        f"{key}: {str(value)[:_FLOW_VALUE_CHARS]}"
        for key, value in (response.items() if isinstance(response, Mapping) else ())
        if key != "flow_token" and value not in (None, "")
    ]
    if not answers:
        return "[formulário enviado]"
    more = len(answers) - _FLOW_FIELDS_SHOWN
    shown = "; ".join(answers[:_FLOW_FIELDS_SHOWN]) + (f"; e mais {more}" if more > 0 else "")
    return f"[formulário enviado: {shown}]"


def _title(msg: InboundMessage) -> str:
    payload = msg.payload or {}
    return str(payload.get("title") or msg.text or payload.get("id") or "").strip()
