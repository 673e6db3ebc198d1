"""The conversation value objects shared by the guard, the agent and the gateway."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ChatMessage", "Role", "ToolCallRequest"]

Role = Literal["user", "assistant", "system", "tool"]


class ToolCallRequest(BaseModel):
    """A tool call the model asked for (OpenAI wire shape, arguments kept as JSON text)."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str = "{}"


class ChatMessage(BaseModel):
    """One message of a conversation. Has ``.role`` and ``.content``, as the guard needs."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str = ""
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: tuple[ToolCallRequest, ...] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict, exclude=True, repr=False)

    def to_openai(self) -> dict[str, Any]:
        """The chat-completions wire form of this message."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
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
