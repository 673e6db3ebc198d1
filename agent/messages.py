"""The conversation value objects shared by the guard, the agent and the gateway."""

from __future__ import annotations

import base64
import binascii
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StrictBytes, field_validator, model_validator

__all__ = ["VISION_IMAGE_TYPES", "ChatMessage", "ImagePart", "Role", "ToolCallRequest"]

Role = Literal["user", "assistant", "system", "tool"]

VISION_IMAGE_TYPES = frozenset({"image/gif", "image/jpeg", "image/png", "image/webp"})
"""The image types a vision model reads (OpenAI's list; other servers read these too)."""


class ToolCallRequest(BaseModel):
    """A tool call the model asked for (OpenAI wire shape, arguments kept as JSON text)."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str = "{}"


class ImagePart(BaseModel):
    """An image of the current turn (a receipt, a bill), sent to a vision model inline as
    a base64 data URL. ``content_type`` is one of :data:`VISION_IMAGE_TYPES` (parameters
    such as ``; charset`` are dropped)."""

    model_config = ConfigDict(frozen=True)

    data: StrictBytes = Field(min_length=1, repr=False)
    content_type: str

    @field_validator("content_type")
    @classmethod
    def _supported(cls, value: str) -> str:
        kind = value.split(";", 1)[0].strip().lower()
        if kind not in VISION_IMAGE_TYPES:
            known = ", ".join(sorted(VISION_IMAGE_TYPES))
            raise ValueError(f"unsupported image type {value!r} (supported: {known})")
        return kind

    @classmethod
    def from_data_url(cls, url: str) -> ImagePart:
        """``data:image/jpeg;base64,...`` → an ImagePart; anything else is a ValueError."""
        header, sep, payload = url.partition(",")
        if not sep or not header.startswith("data:") or not header.endswith(";base64"):
            raise ValueError("not a base64 data URL")
        try:
            data = base64.b64decode(payload, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"invalid base64 in the data URL: {exc}") from None
        return cls(data=data, content_type=header.removeprefix("data:").removesuffix(";base64"))

    @property
    def data_url(self) -> str:
        encoded = base64.b64encode(self.data).decode("ascii")
        return f"data:{self.content_type};base64,{encoded}"

    def to_openai(self) -> dict[str, Any]:
        """The chat-completions content part."""
        return {"type": "image_url", "image_url": {"url": self.data_url}}


class ChatMessage(BaseModel):
    """One message of a conversation. Has ``.role`` and ``.content``, as the guard needs.

    ``images`` (user messages only) belong to the current turn: they are left out of the
    JSON form (``model_dump_json``), so stored history never holds image bytes, and sent
    only to a profile that declares ``vision: true``; ``content`` stays the text every
    other model reads (the caption, or a PT-BR description of the image).
    """

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str = ""
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: tuple[ToolCallRequest, ...] | None = None
    images: tuple[ImagePart, ...] = Field(default=(), exclude=True, repr=False)
    metadata: dict[str, Any] = Field(default_factory=dict, exclude=True, repr=False)

    @model_validator(mode="after")
    def _images_from_the_user(self) -> Self:
        if self.images and self.role != "user":
            raise ValueError("only user messages can carry images")
        return self

    def without_images(self) -> ChatMessage:
        """This message with its text only (itself when it has no images)."""
        return self.model_copy(update={"images": ()}) if self.images else self

    def to_openai(self) -> dict[str, Any]:
        """The chat-completions wire form of this message: ``content`` is the text, or,
        when there are images, a list of parts (the text, then each image)."""
        content: str | list[dict[str, Any]] = self.content
        if self.images:
            text = [{"type": "text", "text": self.content}] if self.content else []
            content = [*text, *(image.to_openai() for image in self.images)]
        out: dict[str, Any] = {"role": self.role, "content": content}
        if self.name:
            out["name"] = self.name
        if self.tool_call_id:
            out["tool_call_id"] = self.tool_call_id
        if self.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        return out
