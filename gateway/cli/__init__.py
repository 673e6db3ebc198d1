"""``mel-gateway``: the console script and its commands."""

from gateway.cli.main import main

__all__ = ["main"]
