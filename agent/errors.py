"""The agent's exception tree: one root, specific subclasses with structured fields."""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "AgentError",
    "LLMBadResponse",
    "LLMError",
    "LLMTimeout",
    "LLMUnavailable",
    "LedgerError",
    "ProfileError",
    "ToolError",
    "TranscriptionError",
    "TranscriptionTimeout",
    "TranscriptionUnavailable",
]


class AgentError(Exception):
    """Root of every error raised by ``agent/``."""


class ProfileError(AgentError):
    """The LLM profiles file is unreadable or invalid; names the file and the key path.

    ``str(err)`` reads ``"llm_profiles.yaml: profiles.router.temperature: must be ..."``.
    """

    def __init__(self, path: Path | str, key: str, reason: str) -> None:
        self.path = str(path)
        self.key = key
        self.reason = reason
        where = f"{self.path}: {key}" if key else self.path
        super().__init__(f"{where}: {reason}")


class LLMError(AgentError):
    """A chat-completion call failed (HTTP error, connection error, ...)."""

    def __init__(self, profile: str, reason: str, *, status: int | None = None) -> None:
        self.profile = profile
        self.reason = reason
        self.status = status
        super().__init__(f"LLM profile {profile!r}: {reason}")

    @property
    def transient(self) -> bool:
        """An outage that may pass (no connection, a timeout, 5xx, 429, 408), not a
        problem with the request or the answer: worth retrying later."""
        return self.status is None or self.status >= 500 or self.status in (408, 429)


class LLMTimeout(LLMError):
    """The call did not finish within the profile's ``timeout_seconds``."""

    @property
    def transient(self) -> bool:
        return True


class LLMUnavailable(LLMError):
    """No endpoint is configured for the profile (no ``base_url`` and no ``LLM_BASE_URL``)."""

    @property
    def transient(self) -> bool:
        return False


class LLMBadResponse(LLMError):
    """The endpoint answered, but not with a usable chat completion (e.g. no choices)."""

    @property
    def transient(self) -> bool:
        return False


class TranscriptionError(AgentError):
    """A voice note could not be transcribed (HTTP error, connection error, bad answer).

    ``reason`` is short English for logs and events; ``status`` is the HTTP status, if any.
    """

    def __init__(self, reason: str, *, status: int | None = None) -> None:
        self.reason = reason
        self.status = status
        super().__init__(f"transcription: {reason}")


class TranscriptionUnavailable(TranscriptionError):
    """Transcription is not configured: no ``transcription`` profile, or no endpoint for it.

    Raised before any call, so it never means "the endpoint failed"."""


class TranscriptionTimeout(TranscriptionError):
    """The endpoint did not answer within the profile's ``timeout_seconds``."""


class ToolError(AgentError):
    """A tool could not do what was asked; the message is shown to the model (PT-BR)."""


class LedgerError(AgentError):
    """A ledger operation was given something it cannot store (bad household id, ...)."""
