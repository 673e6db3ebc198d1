"""``diff``: what a target gateway answers to recorded traffic, against what was answered.

:func:`replay_and_compare` sends prepared deliveries (with fresh ids) to the target, waits
for its replies and compares each inbound message's reply with the original one.

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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from gateway.replay.records import RawDelivery, mask_thread
from gateway.replay.resign import FreshIds, Prepared
from gateway.replay.sender import Outcome, SendOptions, SendReport, run_send
from gateway.store import Keys, envelope

if TYPE_CHECKING:
    import redis.asyncio as aioredis

__all__ = [
    "Comparison",
    "DiffReport",
    "ReplyTracker",
    "compare",
    "compare_message",
    "history_warnings",
    "last_event_id",
    "original_replies",
    "read_replies",
    "replay_and_compare",
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


@dataclass
class DiffReport:
    """A diff run: how the deliveries were sent, and one comparison per inbound message."""

    send: SendReport
    comparisons: list[Comparison] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(("identical", "changed", "missing", "new"), 0)
        for c in self.comparisons:
            counts[c.result] += 1
        return counts

    @property
    def differs(self) -> bool:
        return any(c.result != "identical" for c in self.comparisons)


async def history_warnings(
    target: aioredis.Redis, prefix: str, deliveries: Sequence[RawDelivery]
) -> list[str]:
    """A warning for each thread that already has a history in the target."""
    keys = Keys(prefix)
    warnings = []
    for thread in dict.fromkeys(t for d in deliveries for t in d.threads):
        if await target.exists(keys.thread(thread, "history")):
            warnings.append(
                f"thread {mask_thread(thread)} already has a history in the target "
                f"(prefix {prefix}): its replies may differ for that reason alone; "
                "diff against a fresh prefix or database"
            )
    return warnings


def compare_message(
    d: RawDelivery,
    index: int,
    fresh: FreshIds,
    outcome: Outcome | None,
    tracker: ReplyTracker,
    originals: Mapping[str, str | None],
    wait: float,
) -> Comparison:
    """The comparison for the ``index``-th inbound message of ``d``."""
    mid = d.messages[index]
    new_id = fresh.known(mid)
    original = originals.get(mid)
    note = ""
    target: str | None = None
    if outcome is None or not outcome.ok:
        why = "not sent" if outcome is None else (outcome.error or f"HTTP {outcome.status}")
        note = f"not replayed: {why}"
    else:
        target = tracker.reply(new_id)
        if not tracker.resolved(new_id):
            note = f"no reply within {wait:g}s"
        elif tracker.outcome(new_id) == "error" and target != original:
            note = (
                "the target's turn failed: with a replay cassette, a model request that "
                "was not recorded (the conversation took another path earlier, or the "
                "prompt or tools changed)"
            )
    result, diff_text = compare(original, target)
    thread = d.threads[min(index, len(d.threads) - 1)] if d.threads else ""
    text = d.texts[index] if index < len(d.texts) else ""
    return Comparison(mid, new_id, d.id, thread, text, result, original, target, diff_text, note)


async def replay_and_compare(
    prepared: Sequence[Prepared],
    fresh: FreshIds,
    originals: Mapping[str, str | None],
    *,
    target: aioredis.Redis,
    target_prefix: str,
    options: SendOptions,
    wait: float,
    problems: Sequence[str] = (),
    on_done: Callable[[Outcome], None] | None = None,
) -> DiffReport:
    """Send ``prepared`` (made with ``fresh``), wait up to ``wait`` s for the target's
    replies in its event log, and compare them with ``originals``."""
    marker = await last_event_id(target, target_prefix)
    report = DiffReport(await run_send(prepared, problems, options, on_done=on_done))
    by_delivery = {o.prepared.original.id: o for o in report.send.outcomes}
    accepted = [
        fresh.known(m) for o in report.send.outcomes if o.ok for m in o.prepared.original.messages
    ]
    tracker = ReplyTracker(set(accepted))
    await wait_for_replies(target, target_prefix, tracker, marker, timeout=wait, expected=accepted)
    for p in prepared:
        outcome = by_delivery.get(p.original.id)
        for index in range(len(p.original.messages)):
            report.comparisons.append(
                compare_message(p.original, index, fresh, outcome, tracker, originals, wait)
            )
    return report
