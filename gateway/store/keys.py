"""Every Redis key name, in one place (``prefix`` is ``MEL_REDIS_PREFIX``).

Keys of one thread share the hash tag ``{thread_id}`` (``P:t:{T}:…``), so a turn's
reads and writes stay inside one Cluster slot; the streams are global.
"""

from __future__ import annotations

__all__ = ["Keys"]


class Keys:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.ready = f"{prefix}:ready"  # stream, group "workers": threads with work
        self.events = f"{prefix}:events"  # stream: the event log
        self.raw = f"{prefix}:raw"  # stream: webhook deliveries as received
        self.raw_refused = f"{prefix}:raw:refused"  # list: ids of refused ones in raw
        self.sessions_open = f"{prefix}:sessions:open"  # zset thread → last activity ms
        self.handoffs_open = f"{prefix}:handoffs:open"  # zset thread → handoff request ms
        self.handoffs_waiting = f"{prefix}:handoffs:waiting"  # zset thread → asked ms
        self.parked = f"{prefix}:parked"  # zset thread → when its parked message is due
        self.support_window = f"{prefix}:support:window"  # string: open | closed
        self.outbox = f"{prefix}:outbox"  # stream: the local outbox channel's messages
        self.support_webhook_attempts = f"{prefix}:support_webhook:attempts"  # stream
        self.insights = f"{prefix}:insights"  # zset: hypotheses of current analyses
        self.psychologist_attempts = f"{prefix}:psychologist:attempts"  # hash job → runs
        self.psychologist_stats = f"{prefix}:psychologist:stats"  # hash: completed, failed
        self.console_agents = f"{prefix}:console:agents"  # hash agent key → JSON record

    def console_session(self, digest: str) -> str:
        """Hash, TTL: a console login (``digest``: SHA-256 of the cookie's token)."""
        return f"{self.prefix}:console:session:{digest}"

    def console_agent_sessions(self, agent_key: str) -> str:
        """Set, TTL: the session digests of one agent (ended when the agent is removed)."""
        return f"{self.prefix}:console:agent:{agent_key}:sessions"

    def console_login_attempts(self, kind: str, who: str) -> str:
        """String counter, TTL: login attempts in the window, per ``name`` or ``addr``."""
        return f"{self.prefix}:console:login:{kind}:{who}"

    def thread(self, thread_id: str, name: str) -> str:
        """``inbox``, ``state``, ``history``, ``lease``, ``sched``, ``outbox``,
        ``seen:<id>``, ``reply:<id>``, ``hypotheses``, ``sessions``."""
        return f"{self.prefix}:t:{{{thread_id}}}:{name}"

    def sent(self, provider_message_id: str) -> str:
        """A sent reply's provider id → its thread (for status callbacks)."""
        return f"{self.prefix}:sent:{provider_message_id}"

    def session_events(self, session_id: str) -> str:
        """List: the ids of a session's events, in order (the psychologist's evidence)."""
        return f"{self.prefix}:session:{session_id}:events"

    def analysis_current(self, session_id: str) -> str:
        return f"{self.prefix}:session:{session_id}:analysis:current"

    def analyses(self, session_id: str) -> str:
        return f"{self.prefix}:session:{session_id}:analyses"

    def analysis_failures(self, session_id: str) -> str:
        return f"{self.prefix}:session:{session_id}:analysis:failures"

    def analysis(self, analysis_id: str) -> str:
        return f"{self.prefix}:analysis:{analysis_id}"

    def hypothesis(self, hypothesis_id: str) -> str:
        return f"{self.prefix}:hypothesis:{hypothesis_id}"
