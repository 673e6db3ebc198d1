"""The LLM client's connection pools: one per endpoint, a fixed size, calls that wait.

An :class:`EndpointPool` is one aiohttp session to one endpoint (a ``base_url`` and its
key) with at most ``max_connections`` calls on the wire at once. A call beyond that waits,
first come first served, for a free connection, for at most ``pool_timeout`` seconds
(then :class:`LLMPoolTimeout`, which is not a model timeout: the endpoint was never
asked). The caller starts the model's timeout once :meth:`EndpointPool.acquire` returns,
so waiting for the pool never eats the call's time.

Saturation is visible without a hook on the hot path: :class:`PoolStats` (per endpoint)
and :class:`ProfileStats` (per profile) are snapshots of plain counters, read when the
metrics are scraped; an optional ``on_pool_wait(profile, seconds)`` callback sees every
call that had to wait (for a histogram).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import structlog
from yarl import URL

from agent.errors import LLMError

__all__ = [
    "DEFAULT_KEEPALIVE_SECONDS",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_POOL_TIMEOUT",
    "EndpointPool",
    "LLMPoolTimeout",
    "LLMStats",
    "PoolStats",
    "PoolWaitHook",
    "ProfileCounters",
    "ProfileStats",
]

DEFAULT_MAX_CONNECTIONS = 100
"""Connections per endpoint when the gateway does not say (it should: its concurrency)."""

DEFAULT_POOL_TIMEOUT = 30.0
"""Seconds a call waits for a free connection before :class:`LLMPoolTimeout`."""

DEFAULT_KEEPALIVE_SECONDS = 30.0
"""An idle connection is closed after this long (every connection is kept until then, so
a burst does not pay a new TCP/TLS handshake per call)."""

PoolWaitHook = Callable[[str, float], None]
"""``on_pool_wait(profile, seconds)``: a call waited ``seconds`` for a connection (called
once it got one, or gave up). Runs on the event loop; must be cheap."""

log = structlog.get_logger(__name__)


class LLMPoolTimeout(LLMError):
    """No connection to the endpoint became free within ``pool_timeout``: more calls than
    ``max_connections`` for too long. The endpoint was not called; this is saturation of
    this process, not an outage of the model (worth retrying, and worth a bigger pool)."""

    @property
    def transient(self) -> bool:
        return True


@dataclass(frozen=True)
class PoolStats:
    """One endpoint's pool, now and since start. ``endpoint`` is the base URL (no key)."""

    endpoint: str
    max_connections: int
    in_use: int
    """Calls holding a connection now."""
    waiting: int
    """Calls waiting for a connection now."""
    waits: int
    """Calls that had to wait, since start (including those that gave up)."""
    wait_seconds: float
    """Total seconds calls spent waiting, since start."""
    pool_timeouts: int
    """Calls that gave up waiting (:class:`LLMPoolTimeout`), since start."""


@dataclass(frozen=True)
class ProfileStats:
    """One profile's calls, now and since start (same fields as :class:`PoolStats`)."""

    in_flight: int
    """Calls holding a connection now."""
    waiting: int
    waits: int
    wait_seconds: float
    pool_timeouts: int


@dataclass(frozen=True)
class LLMStats:
    """A snapshot of every pool and every profile that made a call."""

    pools: tuple[PoolStats, ...]
    profiles: dict[str, ProfileStats]


class ProfileCounters:
    """The mutable counters behind :class:`ProfileStats` (one per profile)."""

    __slots__ = ("in_flight", "pool_timeouts", "wait_seconds", "waiting", "waits")

    def __init__(self) -> None:
        self.in_flight = 0
        self.waiting = 0
        self.waits = 0
        self.wait_seconds = 0.0
        self.pool_timeouts = 0

    def snapshot(self) -> ProfileStats:
        return ProfileStats(
            self.in_flight, self.waiting, self.waits, self.wait_seconds, self.pool_timeouts
        )


class EndpointPool:
    """At most ``max_connections`` calls to one endpoint at once; the others wait in order.

    Usage (the caller holds the slot for exactly one request)::

        await pool.acquire(profile, counters, pool_timeout=30, on_wait=None)
        try:
            async with asyncio.timeout(model_timeout):
                status, body = await pool.post(payload)
        finally:
            pool.release(counters)
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        keepalive_seconds: float = DEFAULT_KEEPALIVE_SECONDS,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self.base_url = base_url
        self.url = URL(base_url.rstrip("/") + "/chat/completions")
        self.max_connections = max_connections
        self.keepalive_seconds = keepalive_seconds
        self._headers = {
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            **(headers or {}),
        }
        self._slots = asyncio.Semaphore(max_connections)
        self._session: aiohttp.ClientSession | None = None
        self._proxy: URL | None = None
        self._proxy_auth: aiohttp.BasicAuth | None = None
        self.in_use = 0
        self.waiting = 0
        self.waits = 0
        self.wait_seconds = 0.0
        self.pool_timeouts = 0

    def __repr__(self) -> str:
        return f"EndpointPool({self.base_url!r}, max_connections={self.max_connections})"

    async def acquire(
        self,
        profile: str,
        counters: ProfileCounters,
        *,
        pool_timeout: float | None,
        on_wait: PoolWaitHook | None = None,
    ) -> None:
        """Take a connection slot, waiting up to ``pool_timeout`` seconds (``None``: no
        bound) for one to be released; :class:`LLMPoolTimeout` when none was."""
        if not self._slots.locked():
            await self._slots.acquire()  # a free slot: returns without suspending
        else:
            await self._wait(profile, counters, pool_timeout, on_wait)
        self.in_use += 1
        counters.in_flight += 1

    async def _wait(
        self,
        profile: str,
        counters: ProfileCounters,
        pool_timeout: float | None,
        on_wait: PoolWaitHook | None,
    ) -> None:
        self.waiting += 1
        counters.waiting += 1
        started = time.perf_counter()
        try:
            async with asyncio.timeout(pool_timeout):
                await self._slots.acquire()
        except TimeoutError:
            self.pool_timeouts += 1
            counters.pool_timeouts += 1
            raise LLMPoolTimeout(
                profile,
                f"no free connection to the endpoint within {pool_timeout:g}s "
                f"(max_connections={self.max_connections}, {self.waiting - 1} more waiting)",
            ) from None
        finally:
            waited = time.perf_counter() - started
            self.waiting -= 1
            counters.waiting -= 1
            self.waits += 1
            self.wait_seconds += waited
            counters.waits += 1
            counters.wait_seconds += waited
            if on_wait is not None:
                try:
                    on_wait(profile, waited)
                except Exception:
                    log.exception("llm.pool_wait_hook_failed", profile=profile)

    def release(self, counters: ProfileCounters) -> None:
        """Give the slot back (the request is over: its connection is back in the pool
        or closed)."""
        self.in_use -= 1
        counters.in_flight -= 1
        self._slots.release()

    async def post(self, payload: bytes) -> tuple[int, bytes]:
        """POST ``payload`` (JSON) to the endpoint's ``/chat/completions``; the status and
        the whole body. Call it holding a slot; no timeout of its own (the caller's)."""
        session = self._session
        if session is None or session.closed:
            session = self._open()
        async with session.post(
            self.url,
            data=payload,
            headers=self._headers,
            allow_redirects=False,
            proxy=self._proxy,
            proxy_auth=self._proxy_auth,
        ) as response:
            return response.status, await response.read()

    def stats(self) -> PoolStats:
        return PoolStats(
            self.base_url,
            self.max_connections,
            self.in_use,
            self.waiting,
            self.waits,
            self.wait_seconds,
            self.pool_timeouts,
        )

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _open(self) -> aiohttp.ClientSession:
        """The session, made on first use (inside the running loop). The connector's
        limit equals the slots, so it never queues a request itself; proxies from the
        environment (``HTTPS_PROXY``, ``NO_PROXY``) are looked up once, here."""
        connector = aiohttp.TCPConnector(
            limit=self.max_connections,
            limit_per_host=0,
            keepalive_timeout=self.keepalive_seconds,
            ssl=_ssl_context() if self.url.scheme == "https" else True,
        )
        try:
            self._proxy, self._proxy_auth = aiohttp.helpers.get_env_proxy_for_url(self.url)
        except LookupError:
            self._proxy = self._proxy_auth = None
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None),  # the caller's asyncio.timeout rules
            raise_for_status=False,
            trust_env=False,  # proxies looked up once above, not on every request
        )
        return self._session


_SSL_CONTEXT: ssl.SSLContext | None = None


def _ssl_context() -> ssl.SSLContext:
    """The system's CAs (and ``SSL_CERT_FILE``/``SSL_CERT_DIR``), plus certifi's when the
    system has none (slim containers), as the openai SDK's client did."""
    global _SSL_CONTEXT
    if _SSL_CONTEXT is None:
        context = ssl.create_default_context()
        if not context.cert_store_stats().get("x509_ca"):
            certifi: Any
            try:
                import certifi
            except ImportError:  # pragma: no cover - certifi comes with the openai SDK
                certifi = None
            if certifi is not None:
                context.load_verify_locations(certifi.where())
        _SSL_CONTEXT = context
    return _SSL_CONTEXT
