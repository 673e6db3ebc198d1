"""``mel-gateway``: the parser, the settings and logging, and the one error boundary.

Each command module registers its own subcommand (``register(subparsers)``, setting
``run``); whatever goes wrong that an operator can fix ends as one line on stderr and a
non-zero status, never a traceback: 2 for bad configuration or usage, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent import AgentError
from gateway.cli import chat, household, insights, ledger, serve, support, watch
from gateway.errors import ConfigError, GatewayError
from gateway.logs import configure_logging
from gateway.replay import add_replay_parser, run_replay
from gateway.settings import load_settings
from gateway.store import StoreDown

__all__ = ["main"]

PROCESSES = ("serve", "worker", "psychologist")
"""Long-running commands: they log as configured. The others log nothing unless ``-v``."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mel-gateway", description="mel's WhatsApp gateway")
    p.add_argument(
        "-v", "--verbose", action="store_true", help="show log lines (commands other than serve)"
    )
    sub = p.add_subparsers(dest="command", required=True)
    for module in (serve, chat, watch, insights, ledger, household, support):
        module.register(sub)
    replay = add_replay_parser(sub)
    replay.set_defaults(run=lambda settings, args: run_replay(args, settings))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings()
    except ConfigError as exc:
        return _fail(exc, 2)
    level = settings.mel_log_level
    if args.command not in PROCESSES and not args.verbose:
        level = "critical"  # a command's output is its answer, not the service's logs
    configure_logging(settings.mel_log_format, level)
    try:
        return int(args.run(settings, args))
    except ConfigError as exc:
        return _fail(exc, 2)
    except (StoreDown, RedisConnectionError, RedisTimeoutError) as exc:
        where = settings.redis_url or f"the embedded Redis under {settings.mel_data_dir}"
        return _fail(f"Redis is unreachable ({where}): {exc}", 1)
    except (GatewayError, AgentError) as exc:
        return _fail(exc, 1)
    except OSError as exc:  # a port in use, a file that cannot be read, …
        return _fail(exc, 1)
    except KeyboardInterrupt:
        return 130


def _fail(message: object, status: int) -> int:
    print(f"mel-gateway: {message}", file=sys.stderr)
    return status
