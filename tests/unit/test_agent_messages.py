"""ChatMessage and ImagePart: the wire form with images, and a JSON form without them."""

from __future__ import annotations

import base64

import pytest
from pydantic import ValidationError

from agent.messages import ChatMessage, ImagePart

JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 4
PHOTO = ImagePart(data=JPEG, content_type="image/jpeg")


def test_a_message_with_images_renders_text_then_image_parts() -> None:
    message = ChatMessage(role="user", content="nota do mercado", images=(PHOTO, PHOTO))

    wire = message.to_openai()

    encoded = base64.b64encode(JPEG).decode()
    assert wire == {
        "role": "user",
        "content": [
            {"type": "text", "text": "nota do mercado"},
            {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{encoded}"}},
            {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{encoded}"}},
        ],
    }
    assert ChatMessage(role="user", content="", images=(PHOTO,)).to_openai()["content"] == [
        PHOTO.to_openai()
    ]


def test_a_message_without_images_keeps_plain_text_content() -> None:
    assert ChatMessage(role="user", content="oi").to_openai() == {"role": "user", "content": "oi"}
    message = ChatMessage(role="user", content="oi", images=(PHOTO,))
    assert message.without_images().to_openai() == {"role": "user", "content": "oi"}


def test_stored_history_never_holds_the_image_bytes() -> None:
    message = ChatMessage(role="user", content="nota do mercado", images=(PHOTO,))
    encoded = base64.b64encode(JPEG).decode()

    stored = message.model_dump_json()

    assert "images" not in stored
    assert encoded[:40] not in stored
    assert "images" not in message.model_dump()
    assert encoded[:40] not in repr(message)
    restored = ChatMessage.model_validate_json(stored)
    assert (restored.content, restored.images) == ("nota do mercado", ())


def test_only_user_messages_carry_images() -> None:
    with pytest.raises(ValidationError, match="only user messages can carry images"):
        ChatMessage(role="assistant", content="x", images=(PHOTO,))


def test_an_image_part_normalises_its_type_and_refuses_what_a_model_cannot_read() -> None:
    assert ImagePart(data=JPEG, content_type="Image/JPEG; q=1").content_type == "image/jpeg"
    with pytest.raises(ValidationError, match="unsupported image type 'image/heic'"):
        ImagePart(data=JPEG, content_type="image/heic")
    with pytest.raises(ValidationError, match="at least 1"):
        ImagePart(data=b"", content_type="image/png")
    with pytest.raises(ValidationError, match="bytes"):
        ImagePart(data="not bytes", content_type="image/png")  # type: ignore[arg-type]


def test_an_image_part_round_trips_through_a_data_url() -> None:
    assert ImagePart.from_data_url(PHOTO.data_url) == PHOTO
    with pytest.raises(ValueError, match="not a base64 data URL"):
        ImagePart.from_data_url("https://example.com/nota.jpg")
    with pytest.raises(ValueError, match="invalid base64"):
        ImagePart.from_data_url("data:image/png;base64,@@")
