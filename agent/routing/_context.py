"""What the routing models read from a conversation, and how their JSON answers are read.

Technical only: which messages are sent (roles, counts, lengths) and how a JSON object is
taken out of a completion. Nothing here looks at what the user's text means.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agent.messages import ChatMessage

__all__ = [
    "MAX_CURRENT_CHARS",
    "MAX_HISTORY_CHARS",
    "clip",
    "current_message",
    "parse_json_object",
    "recent_messages",
    "recent_turns",
]

MAX_HISTORY_CHARS = 600
"""A past message longer than this is cut (the spec's "limited history")."""
MAX_CURRENT_CHARS = 2000
"""The current message is cut there too (WhatsApp allows 4096 characters)."""


def clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _split(messages: Sequence[ChatMessage]) -> tuple[list[ChatMessage], str]:
    """The conversational messages before the last user message, and that message's text.

    System and tool messages, and assistant messages that only call tools, are left out.
    """
    last_user = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"), None
    )
    if last_user is None:
        return [], ""
    before = [
        message
        for message in messages[:last_user]
        if message.role in ("user", "assistant") and message.content.strip()
    ]
    return before, messages[last_user].content


def current_message(messages: Sequence[ChatMessage]) -> str:
    """The text of the last user message ("" when there is none), cut to a bound."""
    return clip(_split(messages)[1], MAX_CURRENT_CHARS)


def recent_turns(messages: Sequence[ChatMessage], turns: int) -> list[dict[str, str]]:
    """The last ``turns`` turns before the current message, oldest first.

    A turn is a user message and the assistant reply that followed it:
    ``{"user": ..., "assistant": ...}`` (either key absent when that side is missing).
    """
    if turns <= 0:
        return []
    grouped: list[dict[str, str]] = []
    for message in _split(messages)[0]:
        text = clip(message.content, MAX_HISTORY_CHARS)
        role = message.role
        if role == "user" or not grouped or role in grouped[-1]:
            grouped.append({})
        turn = grouped[-1]
        turn[role] = text
    return grouped[-turns:]


def recent_messages(messages: Sequence[ChatMessage], count: int) -> list[dict[str, str]]:
    """The last ``count`` user/assistant messages before the current one, oldest first."""
    if count <= 0:
        return []
    before = _split(messages)[0][-count:]
    return [
        {"role": message.role, "content": clip(message.content, MAX_HISTORY_CHARS)}
        for message in before
    ]


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object a completion holds (a Markdown code fence around it is tolerated),
    else ``None``."""
    body = text.strip()
    if body.startswith("```"):
        body = body.removeprefix("```")
        body = body.removeprefix("json").removeprefix("JSON")
        body = body.removesuffix("```").strip()
    try:
        value = json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
