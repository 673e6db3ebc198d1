"""The gateway's exceptions: one root, a subclass per kind of failure a client can meet.

HTTP statuses are not here: ``gateway.http.errors`` maps every error root of the project
(these, the channels', the store's) to a status in one table.
"""

from __future__ import annotations

__all__ = [
    "BadRequest",
    "ConfigError",
    "Conflict",
    "Forbidden",
    "GatewayError",
    "NotFound",
    "PayloadTooLarge",
    "ProviderDisabled",
    "RequestTimeout",
    "TooManyRequests",
    "Unauthorized",
    "Unavailable",
]


class GatewayError(Exception):
    """Root of the gateway's errors; ``message`` is what a client or an operator reads."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(GatewayError):
    """A bad configuration value: the service refuses to start and says which."""


class BadRequest(GatewayError):
    """The request is malformed; the message says how."""


class NotFound(GatewayError):
    """The thing asked for does not exist."""


class ProviderDisabled(NotFound):
    """A provider's webhook whose secret is not configured (the message names the variable)."""


class Unauthorized(GatewayError):
    """No (or no longer a) valid login: the client must authenticate."""


class Forbidden(GatewayError):
    """Authenticated, or not, the request is refused as it is (e.g. no CSRF token)."""


class TooManyRequests(GatewayError):
    """Too many attempts; ``retry_after`` seconds until the next one is taken."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = max(1, retry_after)
        self.headers = {"Retry-After": str(self.retry_after)}


class Conflict(GatewayError):
    """The request is valid but the state forbids it now (e.g. already taken)."""


class PayloadTooLarge(GatewayError):
    """A body over the configured limit."""


class RequestTimeout(GatewayError):
    """The client took too long to send its request."""


class Unavailable(GatewayError):
    """A dependency is missing or down: try again later."""
