"""The psychologist's errors, under the agent's one exception root."""

from __future__ import annotations

from pathlib import Path

from agent.errors import AgentError

__all__ = ["InvalidTransition", "PsychologistError", "RulesError"]


class PsychologistError(AgentError):
    """Root of the psychologist's errors."""


class InvalidTransition(PsychologistError):
    """A hypothesis status change that is not allowed (only ``proposed`` may change).

    Carries ``current`` and ``target`` (and the hypothesis id when the caller knows it);
    the gateway answers it with HTTP 409.
    """

    def __init__(self, current: str, target: str, *, hypothesis_id: str | None = None) -> None:
        self.current = current
        self.target = target
        self.hypothesis_id = hypothesis_id
        which = f"hypothesis {hypothesis_id}" if hypothesis_id else "a hypothesis"
        super().__init__(
            f"cannot move {which} from {current!r} to {target!r}: "
            "only a proposed hypothesis can be accepted or dismissed"
        )


class RulesError(PsychologistError):
    """The business-rules file cannot be used; names the file.

    ``str(err)`` reads ``"/etc/mel/rules.md: cannot read the file: No such file or directory"``.
    """

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")
