"""Keeps the process's :class:`~gateway.support_agents.SupportRoster` fresh: whether
console agents exist (they make support configured, like ``SUPPORT_TOKEN``). An agent
added or removed with ``mel-gateway support agent`` counts within ``interval`` seconds."""

from __future__ import annotations

from gateway.store import Store
from gateway.support_agents import SupportRoster
from gateway.workers.periodic import PeriodicJob

__all__ = ["RosterRefresh"]


class RosterRefresh(PeriodicJob):
    name = "support_roster"

    def __init__(self, store: Store, roster: SupportRoster, *, interval: float = 10.0) -> None:
        super().__init__(interval)
        self.store = store
        self.roster = roster

    async def tick(self) -> None:
        await self.roster.refresh(self.store)
