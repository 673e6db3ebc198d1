"""The one error map: every error root of the project → its HTTP status, and the
middleware that applies it (with the request id bound to the logs)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Final

import structlog
from aiohttp import web

from agent import AgentError
from agent.psychologist import InvalidTransition
from channels import ChannelError
from gateway.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    GatewayError,
    NotFound,
    PayloadTooLarge,
    RequestTimeout,
    TooManyRequests,
    Unauthorized,
    Unavailable,
)

__all__ = ["STATUS", "context_and_errors", "error_response", "status_for"]

log = structlog.get_logger("gateway.http")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

STATUS: Final[dict[type[Exception], int]] = {
    BadRequest: 400,
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    InvalidTransition: 409,
    RequestTimeout: 408,
    PayloadTooLarge: 413,
    TooManyRequests: 429,
    Unavailable: 503,
}
"""Error type → status; a subclass takes its nearest listed ancestor's status. A channel
error carries its own (``ChannelError.http_status``: 403 signature, 400 malformed, …); an
error with ``headers`` (``TooManyRequests``: ``Retry-After``) adds them to the answer."""

_ROOTS: Final = (GatewayError, ChannelError, AgentError)
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._:-]")


def status_for(exc: BaseException) -> int | None:
    """The status of an error a client can cause or must retry; None for a bug (500)."""
    if isinstance(exc, ChannelError):
        return exc.http_status if exc.http_status < 500 else None
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return None


def error_response(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


@web.middleware
async def context_and_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Bind a request id to the logs; answer the project's errors with their status."""
    structlog.contextvars.clear_contextvars()
    given = _UNSAFE.sub("", request.headers.get("X-Request-Id", ""))[:64]
    request_id = given or uuid.uuid4().hex[:16]
    structlog.contextvars.bind_contextvars(request_id=request_id)
    try:
        response = await handler(request)
    except _ROOTS as exc:
        status = status_for(exc)
        if status is None:
            raise
        message = str(getattr(exc, "message", "") or exc)
        if status >= 500:
            log.warning("http.unavailable", status=status, error=message, path=request.path)
        else:
            log.info("http.error", status=status, error=message, path=request.path)
        response = error_response(status, message)
        response.headers.update(getattr(exc, "headers", None) or {})
    response.headers["X-Request-Id"] = request_id
    return response
