"""What the conversation asks the store to write: a turn's commit, or an action on a
thread outside a turn (support, the sweeper). Plain data; the store applies each one
atomically."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from events import Payload

__all__ = ["Reply", "ThreadAction", "TurnCommit"]


@dataclass(frozen=True, slots=True)
class Reply:
    """A message to the couple, queued for the workers to deliver at most once."""

    id: str
    text: str
    to: str
    channel: str
    author: str = "bot"
    from_: str = ""
    """The business address it leaves from ("" = the channel's default)."""


@dataclass(frozen=True, slots=True)
class TurnCommit:
    """One turn's writes: pop the message, state changes, history, events, the replies.

    With ``park_until_ms`` the message is not popped: it waits at the head of the inbox
    (the model is down) and the thread is woken at that time."""

    thread_id: str
    message_id: str
    session_id: str
    state: Mapping[str, str]
    """Changed state fields (``""`` deletes), see ``ThreadState.changes_from``."""
    history: Sequence[str]
    events: Sequence[Payload]
    replies: Sequence[Reply] = ()
    session_open: bool | None = True
    """True: index the session as open (activity now); False: drop it; None: unchanged."""
    handoff_open: bool | None = None
    waiting_open: bool | None = None
    """The queue of requests for a person nobody could take yet (same convention)."""
    park_until_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ThreadAction:
    """An out-of-turn change to one thread, refused if ``require`` no longer holds."""

    session_id: str
    events: Sequence[Payload] = ()
    state: Mapping[str, str] = field(default_factory=dict)
    require: Mapping[str, str] = field(default_factory=dict)
    """Stored field → the value it must still have (``""``: unset)."""
    idle: bool = False
    """Refused while a worker holds the thread."""
    session_open: bool | None = None
    handoff_open: bool | None = None
    waiting_open: bool | None = None
    reply: Reply | None = None
