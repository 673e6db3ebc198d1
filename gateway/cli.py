"""``mel-gateway``: serve, worker, chat, ledger import."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import structlog
from aiohttp import web

from gateway.errors import ConfigError
from gateway.logs import configure_logging
from gateway.settings import Settings, load_settings

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

    chat = sub.add_parser(
        "chat", help="talk to mel as a WhatsApp user, through the running gateway's webhook"
    )
    chat.add_argument("--url", help="gateway URL (default: http://HOST:PORT)")
    chat.add_argument("--user", default="+5511999990000", help="your (fake) WhatsApp number")
    chat.add_argument("--name", default="Você", help="your WhatsApp profile name")
    chat.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a reply")

    ledger = sub.add_parser("ledger", help="household ledger tools")
    lsub = ledger.add_subparsers(dest="ledger_command", required=True)
    imp = lsub.add_parser("import", help="load expenses from a CSV file")
    imp.add_argument("file", type=Path)
    imp.add_argument("--household", required=True, help="household id (e.g. a phone number)")
    return p


def _fast_event_loop() -> None:
    """uvloop when available (Linux, macOS): a faster event loop for serve and worker."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - e.g. Windows
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"mel-gateway: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.mel_log_format, settings.mel_log_level)
    if args.command in ("serve", "worker"):
        _fast_event_loop()
    try:
        if args.command == "serve":
            return _serve(settings, args)
        if args.command == "worker":
            return asyncio.run(_worker(settings))
        if args.command == "chat":
            from gateway.chat_client import run_chat

            return asyncio.run(run_chat(settings, args))
        if args.command == "ledger":
            return asyncio.run(_ledger_import(settings, args.file, args.household))
    except ConfigError as exc:
        print(f"mel-gateway: {exc}", file=sys.stderr)
        return 2
    return 1  # pragma: no cover - argparse enforces a command


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    from gateway.app import create_app

    host = args.host or settings.host
    port = args.port if args.port is not None else settings.port
    app = create_app(settings, run_worker=not args.no_worker)
    log.info("serve.start", host=host, port=port, worker=not args.no_worker)
    web.run_app(
        app,
        host=host,
        port=port,
        access_log=None,
        print=None,
        shutdown_timeout=settings.mel_shutdown_grace_seconds,
    )
    return 0


async def _worker(settings: Settings) -> int:
    from gateway.bootstrap import Components
    from gateway.worker import Worker

    async with Components(settings) as c:
        worker = Worker(
            c.store,
            c.runner,
            c.senders,
            metrics=c.metrics,
            concurrency=settings.mel_worker_concurrency,
            claim_idle=settings.mel_claim_idle_seconds,
        )
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, worker.stop)
        log.info("worker.start", consumer=worker.consumer)
        task = asyncio.create_task(worker.run())
        await worker.stopped()
        await worker.drain(settings.mel_shutdown_grace_seconds)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return 0


async def _ledger_import(settings: Settings, path: Path, household: str) -> int:
    from agent import import_csv
    from gateway.bootstrap import Components

    async with Components(settings) as c:
        report = await import_csv(c.ledger, path, household)
    print(report.summary())
    return 0 if not report.errors else 1
