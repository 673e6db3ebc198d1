"""``diff``: what a target gateway answers to recorded traffic, against what was answered.

Replies are read from the event log (``{prefix}:events``): ``message.sent`` carries the
text sent and ``in_reply_to``, the inbound provider message id it answers.
``agent.replied`` / ``agent.failed`` say a reply was decided (its text is used when the
delivery itself failed); a ``message.received`` with neither means the turn ended with no
reply (muted thread, reaction, …). A turn's events are written in one atomic step, so
once the log has been read to its end, a message is either answered, or known to need
no answer, or still waiting.
"""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from gateway.replay.records import RawDelivery
from gateway.store import Keys, envelope

if TYPE_CHECKING:
    import redis.asyncio as aioredis

__all__ = [
    "Comparison",
    "ReplyTracker",
    "compare",
    "last_event_id",
    "original_replies",
    "read_replies",
    "wait_for_replies",
]

Result = Literal["identical", "changed", "missing", "new"]
_PAGE = 1000


@dataclass
class _State:
    received: bool = False
    decided: bool = False
    decided_text: str | None = None
    sent_text: str | None = None
    status: str | None = None  # "sent" | "failed" once delivered (or not)
    outcome: str | None = None  # the agent event's outcome: agent, preempt, error, …

    @property
    def final(self) -> bool:
        return self.status is not None

    @property
    def text(self) -> str | None:
        return self.sent_text if self.sent_text is not None else self.decided_text


@dataclass
class ReplyTracker:
    """Follows the event log for a set of inbound message ids."""

    wanted: set[str]
    states: dict[str, _State] = field(default_factory=dict)

    def feed(self, event: Mapping[str, Any]) -> None:
        data = event.get("data") or {}
        kind = event.get("type")
        mid = data.get("message_id" if kind == "message.received" else "in_reply_to")
        if not isinstance(mid, str) or mid not in self.wanted:
            return
        state = self.states.setdefault(mid, _State())
        if kind == "message.received":
            state.received = True
        elif kind in ("agent.replied", "agent.failed"):
            state.decided = True
            state.outcome = str(data.get("outcome") or "")
            if isinstance(data.get("text"), str):
                state.decided_text = data["text"]
        elif kind == "message.sent":
            state.sent_text = str(data.get("text", ""))
            state.status = "sent"
        elif kind == "message.failed":
            state.status = "failed"

    def resolved(self, mid: str) -> bool:
        """Answered, or turned without a reply. Only meaningful at the log's end."""
        state = self.states.get(mid)
        if state is None:
            return False
        return state.final or (state.received and not state.decided)

    def reply(self, mid: str) -> str | None:
        state = self.states.get(mid)
        return state.text if state is not None else None

    def outcome(self, mid: str) -> str | None:
        """How the turn ended (``agent``, ``preempt``, ``error``, …), when known."""
        state = self.states.get(mid)
        return state.outcome if state is not None else None


async def last_event_id(redis: aioredis.Redis, prefix: str) -> str:
    """The newest event's id (``0-0`` for an empty log): replies come after it."""
    newest: Any = await redis.xrevrange(Keys(prefix).events, count=1)
    if not newest:
        return "0-0"
    entry_id = newest[0][0]
    return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)


async def read_replies(
    redis: aioredis.Redis, prefix: str, tracker: ReplyTracker, after: str
) -> str:
    """Feed the tracker every event after ``after`` up to the log's end; the last id read."""
    key = Keys(prefix).events
    while True:
        res: Any = await redis.xread({key: after}, count=_PAGE)
        entries = res[0][1] if res else []
        for entry_id, fields in entries:
            after = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
            tracker.feed(envelope(after, fields))
        if len(entries) < _PAGE:
            return after


async def original_replies(
    redis: aioredis.Redis | None, prefix: str, deliveries: Sequence[RawDelivery]
) -> dict[str, str | None]:
    """The reply originally sent to each inbound message of ``deliveries`` (None: none).

    From the export file when it carries them; else the source's event log from the
    first delivery's time on; else the thread's reply record (``…:reply:<id>``).
    ``redis`` None: the file's replies only.
    """
    out: dict[str, str | None] = {}
    wanted: set[str] = set()
    for d in deliveries:
        for mid in d.messages:
            if mid in d.replies:
                text = d.replies[mid].get("text")
                out[mid] = text if isinstance(text, str) else None
            else:
                wanted.add(mid)
    if not wanted or redis is None:
        return {**out, **dict.fromkeys(wanted)}
    tracker = ReplyTracker(wanted)
    first_ms = min(d.sort_key[0] for d in deliveries if set(d.messages) & wanted)
    await read_replies(redis, prefix, tracker, f"{max(0, first_ms - 1)}-0")
    keys = Keys(prefix)
    for d in deliveries:
        for mid in d.messages:
            if mid not in wanted:
                continue
            text = tracker.reply(mid)
            if text is None and not tracker.resolved(mid):
                text = await _reply_record(redis, keys, d.threads, mid)
            out[mid] = text
    return out


async def _reply_record(
    redis: aioredis.Redis, keys: Keys, threads: Iterable[str], mid: str
) -> str | None:
    for thread in threads:
        text = await redis.hget(keys.thread(thread, f"reply:{mid}"), "text")
        if text is not None:
            return text.decode() if isinstance(text, bytes) else str(text)
    return None


@dataclass(frozen=True)
class Comparison:
    """One inbound message: the reply originally sent against the target's."""

    message_id: str
    target_message_id: str
    delivery_id: str
    thread_id: str
    user_text: str
    result: Result
    original: str | None
    target: str | None
    diff: str = ""
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "message_id": self.message_id,
            "target_message_id": self.target_message_id,
            "delivery_id": self.delivery_id,
            "thread_id": self.thread_id,
            "user_text": self.user_text,
            "result": self.result,
            "original": self.original,
            "target": self.target,
            "diff": self.diff,
            "note": self.note,
        }


def compare(original: str | None, target: str | None) -> tuple[Result, str]:
    """identical / changed (with a unified diff) / missing / new."""
    if original is None and target is None:
        return "identical", ""
    if target is None:
        return "missing", ""
    if original is None:
        return "new", ""
    if original == target:
        return "identical", ""
    lines = difflib.unified_diff(
        original.splitlines(), target.splitlines(), "original", "target", lineterm=""
    )
    return "changed", "\n".join(lines)


async def wait_for_replies(
    redis: aioredis.Redis,
    prefix: str,
    tracker: ReplyTracker,
    after: str,
    *,
    timeout: float,
    expected: Iterable[str],
) -> None:
    """Poll the target's log until every expected message is resolved or time is up."""
    expected = set(expected)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        after = await read_replies(redis, prefix, tracker, after)
        if all(tracker.resolved(mid) for mid in expected) or loop.time() >= deadline:
            return
        await asyncio.sleep(0.1)
