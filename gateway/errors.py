"""The gateway's exceptions. One root; the HTTP middleware maps them to statuses."""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "GatewayError",
    "NotFound",
    "PayloadTooLarge",
    "ProviderDisabled",
    "StoreUnavailable",
]


class GatewayError(Exception):
    """Root of the gateway's errors. ``status`` is the HTTP status it maps to."""

    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(GatewayError):
    """A bad configuration value: the service refuses to start and says which."""


class ProviderDisabled(GatewayError):
    status = 404


class PayloadTooLarge(GatewayError):
    status = 413


class StoreUnavailable(GatewayError):
    """Redis is unreachable: answer 503 so the provider retries."""

    status = 503


class NotFound(GatewayError):
    status = 404
