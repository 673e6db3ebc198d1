"""``mel-gateway``: serve, worker, psychologist, chat, watch, insights, ledger import."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

import structlog

from gateway.errors import ConfigError
from gateway.logs import configure_logging
from gateway.replay import add_replay_parser
from gateway.settings import load_settings

__all__ = ["main"]

log = structlog.get_logger("gateway.cli")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mel-gateway", description="mel's WhatsApp gateway")
    sub = p.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve the webhooks (and run the worker in-process)")
    serve.add_argument("--host", help="bind address (default: HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default: PORT or 8080)")
    serve.add_argument("--no-worker", action="store_true", help="serve HTTP only")

    sub.add_parser("worker", help="run the turn worker alone (scale it separately)")
    sub.add_parser(
        "psychologist",
        help="run the psychologist consumer alone: analyses closed sessions (SIGTERM drains)",
    )

    chat = sub.add_parser(
        "chat", help="talk to mel as a WhatsApp user, through the running gateway's webhook"
    )
    chat.add_argument("--url", help="gateway URL (default: http://HOST:PORT)")
    chat.add_argument("--user", default="+5511999990000", help="your (fake) WhatsApp number")
    chat.add_argument("--name", default="Você", help="your WhatsApp profile name")
    chat.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a reply")

    watch = sub.add_parser("watch", help="support's live view of the event feed")
    watch.add_argument("--url", help="gateway URL (default: http://HOST:PORT)")
    watch.add_argument("--token", help="support bearer token (default: SUPPORT_TOKEN)")
    watch.add_argument("--types", help="comma-separated types; 'session.*' matches a family")
    watch.add_argument("--thread", help="only this thread id")
    watch.add_argument("--after", help="start after this event id (default: live)")
    watch.add_argument("--json", action="store_true", help="one JSON envelope per line")

    insights = sub.add_parser(
        "insights", help="the psychologist's hypotheses, grouped by agent (and actions on them)"
    )
    insights.add_argument("--json", action="store_true", help="one JSON document")
    insights.add_argument("--status", help="only these: proposed,accepted,dismissed")
    insights.add_argument("--agent", help="only hypotheses about this agent")
    isub = insights.add_subparsers(dest="insights_command")
    again = isub.add_parser("reanalyze", help="analyse a closed session again (supersedes)")
    again.add_argument("session", help="the session id")
    again.add_argument("--tier", choices=["light", "heavy"], help="force a tier")
    again.add_argument("--by", default="cli", help="who asked (recorded)")
    again.add_argument("--wait", type=float, default=0.0, metavar="SECONDS", help="wait for it")
    accept = isub.add_parser("accept", help="accept a proposed hypothesis")
    accept.add_argument("hypothesis", help="the hypothesis id")
    accept.add_argument("--for-anamnese", action="store_true", help="hand it to the Anamnese")
    accept.add_argument("--by", default="cli", help="who decided (recorded)")
    dismiss = isub.add_parser("dismiss", help="dismiss a proposed hypothesis")
    dismiss.add_argument("hypothesis", help="the hypothesis id")
    dismiss.add_argument("--by", default="cli", help="who decided (recorded)")
    dismiss.add_argument("--note", help="why (recorded)")

    add_replay_parser(sub)

    ledger = sub.add_parser("ledger", help="household ledger tools")
    lsub = ledger.add_subparsers(dest="ledger_command", required=True)
    imp = lsub.add_parser("import", help="load expenses from a CSV file")
    imp.add_argument("file", type=Path)
    imp.add_argument("--household", required=True, help="household id (e.g. a phone number)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"mel-gateway: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.mel_log_format, settings.mel_log_level)
    try:
        if args.command in ("serve", "worker", "psychologist"):
            from gateway.cli.serve import run_process

            return run_process(settings, args)
        if args.command == "insights":
            from gateway.cli.insights import run_insights

            return asyncio.run(run_insights(settings, args))
        if args.command == "chat":
            from gateway.cli.chat import run_chat

            return asyncio.run(run_chat(settings, args))
        if args.command == "replay":
            from gateway.replay import run_replay

            return run_replay(args, settings)
        if args.command == "watch":
            from gateway.cli.watch import run_watch

            return asyncio.run(run_watch(settings, args))
        if args.command == "ledger":
            from gateway.cli.ledger import run_ledger_import

            return asyncio.run(run_ledger_import(settings, args.file, args.household))
    except ConfigError as exc:
        print(f"mel-gateway: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 1  # pragma: no cover - argparse enforces a command
