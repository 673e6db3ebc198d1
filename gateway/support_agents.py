"""Support agents: the people who log in to the console. The operations behind
``mel-gateway support agent`` and the console's login, and the roster that tells the turn
pipeline support exists.

Passwords are hashed with scrypt (``hashlib.scrypt``, RFC 7914): a 16-byte random salt
per password, ``N=2**15, r=8, p=3`` (32 MiB, ~0.3 s on one core: OWASP's scrypt
equivalent of its minimum), a 32-byte key. The stored form names its parameters,
``scrypt$<N>$<r>$<p>$<salt b64>$<key b64>``, so they can be raised later without
invalidating stored hashes. A password is never logged nor stored in clear.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Final

import structlog

from agent.routing import SupportStatus
from gateway.clock import utc_now_iso
from gateway.errors import BadRequest, Conflict, NotFound
from gateway.settings import Settings
from gateway.store import Store
from gateway.store.console import AgentRecord, ConsoleStore

__all__ = [
    "SCRYPT",
    "ScryptParams",
    "SupportRoster",
    "add_agent",
    "agent_key",
    "authenticate",
    "check_name",
    "check_password",
    "hash_password",
    "list_agents",
    "remove_agent",
    "verify_password",
]

log = structlog.get_logger("gateway.support_agents")

_NAME: Final = re.compile(r"[^\W_][\w.\-]{0,39}")
PASSWORD_MIN: Final = 8
PASSWORD_MAX: Final = 1024


@dataclass(frozen=True, slots=True)
class ScryptParams:
    n: int = 2**15
    r: int = 8
    p: int = 3
    salt_bytes: int = 16
    key_bytes: int = 32

    @property
    def maxmem(self) -> int:
        """scrypt needs ``128 * r * N`` bytes (and a little more)."""
        return 2 * 128 * self.r * self.n + 16 * 1024 * 1024


SCRYPT: Final = ScryptParams()


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def hash_password(password: str, params: ScryptParams = SCRYPT) -> str:
    """A salted scrypt hash, in the stored form (parameters included)."""
    salt = secrets.token_bytes(params.salt_bytes)
    key = hashlib.scrypt(
        password.encode("utf-8"),
        salt=salt,
        n=params.n,
        r=params.r,
        p=params.p,
        maxmem=params.maxmem,
        dklen=params.key_bytes,
    )
    return f"scrypt${params.n}${params.r}${params.p}${_b64(salt)}${_b64(key)}"


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches ``stored`` (constant time; False for a malformed one)."""
    try:
        scheme, n, r, p, salt, key = stored.split("$")
        if scheme != "scrypt":
            return False
        params = ScryptParams(int(n), int(r), int(p))
        expected = base64.b64decode(key, validate=True)
        got = hashlib.scrypt(
            password.encode("utf-8"),
            salt=base64.b64decode(salt, validate=True),
            n=params.n,
            r=params.r,
            p=params.p,
            maxmem=params.maxmem,
            dklen=len(expected),
        )
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, expected)


@cache
def _decoy() -> str:
    """Checked against when the name is unknown, so an answer takes as long either way."""
    return hash_password(secrets.token_hex(16))


def agent_key(name: str) -> str:
    """How an agent is looked up: the name casefolded (``Ana`` and ``ana`` are one)."""
    return name.strip().casefold()


def check_name(name: str) -> str:
    """The name as given (trimmed); ``BadRequest`` unless it is 1–40 letters, digits,
    ``.``, ``-`` or ``_``, starting with a letter or digit."""
    name = name.strip()
    if not _NAME.fullmatch(name):
        raise BadRequest(
            f"bad agent name {name[:40]!r}: 1 to 40 letters, digits, '.', '-' or '_', "
            "starting with a letter or a digit"
        )
    return name


def check_password(password: str) -> str:
    if not PASSWORD_MIN <= len(password) <= PASSWORD_MAX:
        raise BadRequest(
            f"the password must have {PASSWORD_MIN} to {PASSWORD_MAX} characters "
            f"(got {len(password)})"
        )
    return password


async def add_agent(
    store: Store, name: str, password: str, *, replace: bool = False
) -> AgentRecord:
    """Create an agent (``Conflict`` if the name exists, unless ``replace``: a new
    password, and the agent's logins end)."""
    name = check_name(name)
    hashed = await asyncio.to_thread(hash_password, check_password(password))
    record = AgentRecord(agent_key(name), name, hashed, utc_now_iso())
    if not await ConsoleStore(store).add_agent(record, replace=replace):
        raise Conflict(f"agent {name!r} exists (use --replace to give it a new password)")
    log.info("support_agents.added", agent=name, replaced=replace)
    return record


async def list_agents(store: Store) -> list[AgentRecord]:
    return await ConsoleStore(store).agents()


async def remove_agent(store: Store, name: str) -> None:
    if not await ConsoleStore(store).remove_agent(agent_key(name)):
        raise NotFound(f"no agent named {name.strip()!r}")
    log.info("support_agents.removed", agent=name)


async def authenticate(store: Store, name: str, password: str) -> AgentRecord | None:
    """The agent when the password is right; None otherwise (same work either way)."""
    record = await ConsoleStore(store).agent(agent_key(name)) if name.strip() else None
    stored = record.password if record is not None else await asyncio.to_thread(_decoy)
    ok = await asyncio.to_thread(verify_password, password[:PASSWORD_MAX], stored)
    return record if ok and record is not None else None


class SupportRoster:
    """Whether console agents exist, as last seen in Redis: kept fresh by the periodic
    ``RosterRefresh`` (``gateway.workers.support_roster``) so a turn never pays a Redis
    round trip to know whether support is configured."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.agents = False

    def support_status(self, now: datetime | None = None) -> SupportStatus:
        """``Settings.support_status``, counting console agents as configured support."""
        return self.settings.support_status(now, agents=self.agents)

    async def refresh(self, store: Store) -> bool:
        seen = await ConsoleStore(store).has_agents()
        if seen != self.agents:
            log.info("support_agents.roster", agents=seen)
        self.agents = seen
        return seen
