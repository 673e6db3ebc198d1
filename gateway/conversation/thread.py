"""A thread's record: its typed state (the Redis hash ``P:t:{T}:state``) and the messages
stored in its inbox.

The state is the most important record in the system: everything a turn needs between
messages (the session, the mode, the loop counter, the route) and everything support sees.
Stored as a flat hash of strings; :meth:`ThreadState.from_fields` / :meth:`to_fields` are
the only translation, and the transitions (open, close, hand off, take, release) are
methods, so the turn pipeline, the sweeper and the support API change it the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agent import RouteState
from channels import InboundMessage

__all__ = ["Mode", "StoredMessage", "ThreadState"]

Mode = Literal["bot", "human"]

_INTS = frozenset({"counter", "outage_retries", "parked_until_ms"})


@dataclass(frozen=True, slots=True)
class ThreadState:
    """One thread's state. ``""`` means unset (and is not stored)."""

    channel: str = ""
    business_number: str = ""
    user_number: str = ""
    reply_from: str = ""
    """The business address replies leave from (the one the couple wrote to)."""
    session_id: str = ""
    session_started_at: str = ""
    mode: Mode = "bot"
    counter: int = 0
    """``pastTurnsWithoutToolCall`` (spec 023): turns in a row the agent did not resolve."""
    active_agent: str = ""
    previous_intent: str = ""
    previous_domain: str = ""
    route_bypassed: bool = False
    route_method: str = ""
    continuity_signal: str = ""
    """The last ``router.continuity`` data, as JSON (route stickiness spec, "Telemetria")."""
    handoff_requested_at: str = ""
    handoff_taken_at: str = ""
    handoff_taken_by: str = ""
    """Who took it (a console agent's name, or the support API's ``author``)."""
    handoff_waiting_since: str = ""
    """A person was asked for while no one could take it: queued for support."""
    last_preempt: str = ""
    """The guard's kind when the previous turn was a guard preempt (else empty)."""
    outage_since: str = ""
    """The model has been unreachable for this thread's head message since then."""
    outage_retries: int = 0
    parked_until_ms: int = 0
    """The head message waits for the model until then (Unix ms)."""
    last_message_at: str = ""
    last_user_at: str = ""

    # --- storage --------------------------------------------------------------------

    @classmethod
    def from_fields(cls, stored: Mapping[str, str]) -> ThreadState:
        """From the stored hash (unknown fields ignored, bad numbers as 0)."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = stored.get(f.name)
            if raw is None:
                continue
            if f.name in _INTS:
                values[f.name] = int(raw) if raw.isdigit() else 0
            elif f.name == "route_bypassed":
                values[f.name] = raw == "1"
            elif f.name == "mode":
                values[f.name] = "human" if raw == "human" else "bot"
            else:
                values[f.name] = raw
        return cls(**values)

    def to_fields(self) -> dict[str, str]:
        """Every field as stored: strings, ``""`` for unset."""
        out: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool):
                out[f.name] = "1" if value else ""
            elif f.name in _INTS and f.name != "counter":
                out[f.name] = str(value) if value else ""
            else:
                out[f.name] = str(value)
        return out

    def changes_from(self, before: ThreadState) -> dict[str, str]:
        """The fields to write to turn ``before`` into this state (``""`` deletes)."""
        old = before.to_fields()
        return {k: v for k, v in self.to_fields().items() if old[k] != v}

    def shown(self) -> dict[str, str]:
        """The fields that are set (what the support API shows)."""
        return {k: v for k, v in self.to_fields().items() if v}

    # --- reading --------------------------------------------------------------------

    @property
    def with_person(self) -> bool:
        """A person has (or was asked to take) the thread: the bot stays silent."""
        return self.mode == "human"

    @property
    def route(self) -> RouteState:
        """What the router and the classifier know of the previous turn."""
        return RouteState(
            self.active_agent or None, self.previous_intent or None, self.previous_domain or None
        )

    @property
    def continuity(self) -> dict[str, Any] | None:
        return json.loads(self.continuity_signal) if self.continuity_signal else None

    # --- transitions ----------------------------------------------------------------

    def opened(self, session_id: str, now: str) -> ThreadState:
        """A new session starts."""
        return replace(self, session_id=session_id, session_started_at=now)

    def closed(self) -> ThreadState:
        """The session ends: the route, the counter and any handoff go with it (a parked
        message does not: it is still answered)."""
        return replace(
            self,
            session_id="",
            session_started_at="",
            active_agent="",
            previous_intent="",
            previous_domain="",
            route_bypassed=False,
            route_method="",
            continuity_signal="",
            counter=0,
            mode="bot",
            handoff_requested_at="",
            handoff_taken_at="",
            handoff_taken_by="",
            handoff_waiting_since="",
            last_preempt="",
        )

    @property
    def waiting_for_person(self) -> bool:
        """A request for a person is queued (nobody could take it when it was made)."""
        return bool(self.handoff_waiting_since)

    def queued(self, now: str) -> ThreadState:
        """A person was asked for and nobody can take it now: queue it (the bot stays)."""
        return self if self.handoff_waiting_since else replace(self, handoff_waiting_since=now)

    def handed_off(self, now: str) -> ThreadState:
        """A person was asked for and support is there: the bot stays silent until a
        release (or the handoff expires)."""
        return replace(
            self,
            mode="human",
            handoff_requested_at=now,
            handoff_taken_at="",
            handoff_taken_by="",
            handoff_waiting_since="",
        )

    def taken(self, now: str, by: str = "") -> ThreadState:
        """A person (``by``) took the thread (their first action on it); taken stays taken.
        A queued request becomes a handoff that person holds."""
        if self.handoff_taken_at:
            return self
        requested = self.handoff_requested_at or self.handoff_waiting_since or now
        if self.waiting_for_person:
            return replace(
                self,
                mode="human",
                handoff_requested_at=requested,
                handoff_taken_at=now,
                handoff_taken_by=by,
                handoff_waiting_since="",
            )
        return replace(self, handoff_taken_at=now, handoff_taken_by=by)

    # --- outages --------------------------------------------------------------------

    def parked(self, now: str, until_ms: int) -> ThreadState:
        """The model is down: the head message waits until ``until_ms``."""
        return replace(
            self,
            outage_since=self.outage_since or now,
            outage_retries=self.outage_retries + 1,
            parked_until_ms=until_ms,
        )

    def recovered(self) -> ThreadState:
        return replace(self, outage_since="", outage_retries=0, parked_until_ms=0)

    def released(self) -> ThreadState:
        """Back to the bot."""
        return replace(
            self,
            mode="bot",
            handoff_requested_at="",
            handoff_taken_at="",
            handoff_taken_by="",
            handoff_waiting_since="",
        )


class StoredMessage(BaseModel):
    """An inbox entry: the normalised message and when the gateway stored it."""

    model_config = ConfigDict(frozen=True)

    message: InboundMessage
    received_at: str

    @classmethod
    def from_json(cls, raw: str | bytes) -> StoredMessage:
        data = json.loads(raw)
        if "message" not in data:  # written before the envelope: received_at inside
            received_at = data.pop("received_at", "")
            return cls(message=InboundMessage.model_validate(data), received_at=received_at)
        return cls.model_validate(data)
