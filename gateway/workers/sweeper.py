"""The session sweeper: closes idle sessions and returns unclaimed handoffs to the bot."""

from __future__ import annotations

import contextlib

import structlog

from gateway.conversation.sessions import close_action, expire_handoff_action
from gateway.store import ActionRefused, Store
from gateway.workers.periodic import PeriodicJob

__all__ = ["SessionSweeper"]

log = structlog.get_logger("gateway.workers.sweeper")


class SessionSweeper(PeriodicJob):
    name = "sweeper"

    def __init__(
        self,
        store: Store,
        *,
        idle_timeout: float,
        handoff_timeout: float,
        handoff_expired_message: str,
        interval: float | None = None,
    ) -> None:
        super().__init__(interval or min(30.0, max(0.2, min(idle_timeout, handoff_timeout) / 10)))
        self.store = store
        self.threads = store.threads
        self.idle_timeout = idle_timeout
        self.handoff_timeout = handoff_timeout
        self.handoff_expired_message = handoff_expired_message

    async def tick(self) -> None:
        await self.sweep()

    async def sweep(self) -> tuple[int, int]:
        """One pass: (sessions closed, handoffs expired)."""
        closed = expired = 0
        keys = self.store.keys
        for thread_id, _ in await self.threads.due(keys.handoffs_open, self.handoff_timeout):
            state = await self.threads.state(thread_id)
            if state is None or not state.with_person or state.handoff_taken_at:
                continue  # taken by a person (or already released): not ours to expire
            with contextlib.suppress(ActionRefused):
                await self.threads.act(
                    thread_id, expire_handoff_action(state, self.handoff_expired_message)
                )
                expired += 1
                log.info("handoff.expired")
        for thread_id, _ in await self.threads.due(keys.sessions_open, self.idle_timeout):
            state = await self.threads.state(thread_id)
            if state is None or not state.session_id:
                await self.threads.forget_open_session(thread_id)
                continue
            with contextlib.suppress(ActionRefused):
                await self.threads.act(thread_id, close_action(state, "idle_timeout", idle=True))
                closed += 1
        return closed, expired
