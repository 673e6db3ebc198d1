"""Who is at the console: logins, the session cookie, CSRF, login rate limits, and the
security headers of every console answer.

- **Session**: a random 256-bit token in the cookie ``mel_console`` (``HttpOnly``,
  ``SameSite=Strict``, ``Path=/console/``, ``Max-Age`` = ``CONSOLE_SESSION_SECONDS``,
  ``Secure`` when the request came over https); Redis keeps only its SHA-256, with the
  agent and the session's CSRF token, and forgets it when it expires or on logout.
- **CSRF**: every state-changing request carries ``X-CSRF-Token`` (the token the login
  answered, also in ``GET /console/api/me``); a cross-site page cannot read it. A request
  whose ``Origin`` is another site is refused too. The login itself takes JSON only (a
  cross-site form cannot send it; a cross-site script would need a CORS preflight we
  never grant), from our own origin.
- **Rate limits**: login attempts are counted per name (casefolded) and per client
  address in a fixed window (``CONSOLE_LOGIN_WINDOW_SECONDS``); past
  ``CONSOLE_LOGIN_MAX_PER_NAME`` / ``…_PER_ADDRESS`` the answer is 429 with
  ``Retry-After``, the password unchecked. A successful login resets its name's count.
- **Author**: every action takes its author from the session, never from the body.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from contextvars import ContextVar
from typing import Any, Final, cast
from urllib.parse import urlsplit

import structlog
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from gateway.clock import utc_now_iso
from gateway.errors import Forbidden, TooManyRequests, Unauthorized
from gateway.http.keys import COMPONENTS, SETTINGS, STORE
from gateway.http.support import parse_body
from gateway.settings import Settings
from gateway.store.console import ConsoleLogin, ConsoleStore
from gateway.support_agents import authenticate

__all__ = [
    "COOKIE",
    "CSRF_HEADER",
    "SECURITY_HEADERS",
    "console_guard",
    "current_login",
    "login",
    "logout",
    "me",
    "security_headers",
]

log = structlog.get_logger("gateway.http.console")

COOKIE: Final = "mel_console"
COOKIE_PATH: Final = "/console/"
CSRF_HEADER: Final = "X-CSRF-Token"
API: Final = "/console/api/"
LOGIN_PATH: Final = "/console/api/login"
_LOGIN: ContextVar[ConsoleLogin] = ContextVar("console_login")
"""The request's agent: set by the guard in the request's own task (a context variable
rather than request storage, whose typed keys need aiohttp 3.14)."""
_SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})

SECURITY_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; font-src 'self'; manifest-src 'self'; form-action 'self'; "
        "base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=()",
}


async def security_headers(_request: web.Request, response: web.StreamResponse) -> None:
    """Every console answer (pages, API, errors, the event stream) carries them."""
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    response.headers.setdefault("Cache-Control", "no-store")


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def _bytes(value: str) -> bytes:
    # a header with bytes that are not UTF-8 arrives surrogate-escaped: compare bytes
    return value.encode("utf-8", "surrogateescape")


def came_over_https(request: web.Request, settings: Settings) -> bool:
    """TLS here, or at the proxy in front (``X-Forwarded-Proto``, an https
    ``PUBLIC_BASE_URL``): the cookie is then ``Secure``."""
    forwarded = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower()
    public = (settings.public_base_url or "").startswith("https://")
    return request.secure or forwarded == "https" or public


def client_address(request: web.Request, settings: Settings) -> str:
    """The address login attempts are counted against: the peer, or behind a proxy
    (``CONSOLE_BEHIND_PROXY``) the last ``X-Forwarded-For`` entry (the one the proxy added)."""
    if settings.console_behind_proxy:
        forwarded = request.headers.get("X-Forwarded-For", "")
        last = forwarded.split(",")[-1].strip()
        if last:
            return last[:64]
    return request.remote or "unknown"


def _check_origin(request: web.Request) -> None:
    """A state-changing request from another site's page is refused."""
    origin = request.headers.get("Origin")
    if origin is None:
        return
    host = request.headers.get("X-Forwarded-Host") or request.host
    if origin == "null" or urlsplit(origin).netloc != host:
        raise Forbidden("pedido de outra origem recusado")


def current_login(_request: web.Request) -> ConsoleLogin:
    """The agent of this request (set by :func:`console_guard`)."""
    return _LOGIN.get()


async def _login_from_cookie(request: web.Request) -> ConsoleLogin | None:
    token = request.cookies.get(COOKIE)
    if not token or len(token) > 200:
        return None
    return await ConsoleStore(request.config_dict[STORE]).session(_digest(token))


@web.middleware
async def console_guard(request: web.Request, handler: Any) -> web.StreamResponse:
    """The API needs a login (401) and, to change anything, the login's CSRF token (403)
    from our own origin; the page's static files are public."""
    if request.path == "/console":
        raise web.HTTPPermanentRedirect("/console/")
    if not request.path.startswith(API):
        return cast(web.StreamResponse, await handler(request))
    unsafe = request.method not in _SAFE_METHODS
    if unsafe:
        _check_origin(request)
    if request.path == LOGIN_PATH:
        return cast(web.StreamResponse, await handler(request))
    found = await _login_from_cookie(request)
    if found is None:
        raise Unauthorized("sessão expirada ou inexistente: entre de novo")
    if unsafe and not hmac.compare_digest(
        _bytes(request.headers.get(CSRF_HEADER, "")), _bytes(found.csrf)
    ):
        raise Forbidden("token CSRF ausente ou errado: recarregue a página")
    token = _LOGIN.set(found)
    try:
        return cast(web.StreamResponse, await handler(request))
    finally:
        _LOGIN.reset(token)


class LoginBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=80)
    password: str = Field(min_length=1, max_length=1024)


def _minutes(seconds: int) -> str:
    minutes = max(1, round(seconds / 60))
    return f"{minutes} minuto" if minutes == 1 else f"{minutes} minutos"


async def login(request: web.Request) -> web.Response:
    """``{"name", "password"}`` → the session cookie, and ``{"name", "csrf"}``."""
    settings = request.config_dict[SETTINGS]
    if request.content_type != "application/json":
        raise Forbidden("o login aceita só JSON")
    body = parse_body(LoginBody, await request.read())
    store = request.config_dict[STORE]
    console = ConsoleStore(store)
    address = client_address(request, settings)
    name_key = body.name.strip().casefold()
    window = settings.console_login_window_seconds
    counts = await console.count_attempt({"name": name_key, "addr": address}, window)
    limits = {
        "name": settings.console_login_max_per_name,
        "addr": settings.console_login_max_per_address,
    }
    over = [counts[kind][1] for kind in counts if counts[kind][0] > limits[kind]]
    if over:
        wait = max(over)
        log.warning("console.login_limited", address=address)
        raise TooManyRequests(
            f"muitas tentativas de entrada: tente de novo em {_minutes(wait)}", retry_after=wait
        )
    agent = await authenticate(store, body.name, body.password)
    if agent is None:
        log.info("console.login_refused", address=address)
        raise Unauthorized("nome ou senha incorretos")
    await console.reset_attempts("name", name_key)
    token = secrets.token_urlsafe(32)
    session = ConsoleLogin(
        digest=_digest(token),
        key=agent.key,
        name=agent.name,
        csrf=secrets.token_urlsafe(32),
        created_at=utc_now_iso(),
    )
    ttl = settings.console_session_seconds
    await console.open_session(session, addr=address, ttl_seconds=ttl)
    request.config_dict[COMPONENTS].roster.agents = True
    log.info("console.login", agent=agent.name)
    response = web.json_response({"name": session.name, "csrf": session.csrf})
    response.set_cookie(
        COOKIE,
        token,
        max_age=ttl,
        path=COOKIE_PATH,
        httponly=True,
        samesite="Strict",
        secure=came_over_https(request, settings),
    )
    return response


async def me(request: web.Request) -> web.Response:
    found = current_login(request)
    return web.json_response({"name": found.name, "csrf": found.csrf})


async def logout(request: web.Request) -> web.Response:
    found = current_login(request)
    await ConsoleStore(request.config_dict[STORE]).close_session(found)
    log.info("console.logout", agent=found.name)
    response = web.json_response({"status": "logged_out"})
    response.del_cookie(COOKIE, path=COOKIE_PATH)
    return response
