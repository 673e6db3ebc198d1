"""``serve``, ``worker``, ``psychologist``: the long-running processes."""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
from typing import Any

import structlog
from aiohttp import web

from gateway.bootstrap import Components, bootstrap
from gateway.settings import Settings
from gateway.workers.supervisor import JobDied

__all__ = ["register", "run_process"]

log = structlog.get_logger("gateway.cli.serve")


def register(sub: Any) -> None:
    serve = sub.add_parser("serve", help="serve the webhooks (and run the worker in-process)")
    serve.add_argument("--host", help="bind address (default: HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default: PORT or 8080)")
    serve.add_argument("--no-worker", action="store_true", help="serve HTTP only")
    worker = sub.add_parser("worker", help="run the turn worker alone (scale it separately)")
    psychologist = sub.add_parser(
        "psychologist",
        help="run the psychologist consumer alone: analyses closed sessions (SIGTERM drains)",
    )
    for parser in (serve, worker, psychologist):
        parser.set_defaults(run=run_process)


def run_process(settings: Settings, args: argparse.Namespace) -> int:
    _fast_event_loop()
    if args.command == "serve":
        return _serve(settings, args)
    return asyncio.run(_background(settings, args.command))


async def _freeze_startup_objects(_app: web.Application | None = None) -> None:
    """Everything built at start-up lives as long as the process: move it out of the
    garbage collector's sight, so collections during load stay short (tail latency)."""
    gc.collect()
    gc.freeze()


def _fast_event_loop() -> None:
    """uvloop when available (Linux, macOS): a faster event loop for serve and worker."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - e.g. Windows
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    from gateway.http.app import create_app, server_options

    host = args.host or settings.host
    port = args.port if args.port is not None else settings.port
    app = create_app(settings, run_worker=not args.no_worker)
    app.on_startup.append(_freeze_startup_objects)
    log.info("serve.start", host=host, port=port, worker=not args.no_worker)
    web.run_app(
        app,
        host=host,
        port=port,
        access_log=None,
        print=None,
        shutdown_timeout=settings.mel_shutdown_grace_seconds,
        **server_options(settings),
    )
    return 0


async def _background(settings: Settings, role: str) -> int:
    """``worker`` or ``psychologist``: run the role's jobs until SIGTERM/SIGINT (then a
    bounded drain, exit 0) or until one of them dies (exit 1)."""
    async with bootstrap(settings, "worker" if role == "worker" else "psychologist") as c:
        supervisor = c.supervisor
        assert supervisor is not None
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        supervisor.start()
        log.info(f"{role}.start")
        metrics = await _serve_metrics(c, settings.mel_metrics_port)
        await _freeze_startup_objects()
        stopping = asyncio.create_task(stop.wait())
        watching = asyncio.create_task(supervisor.wait())
        await asyncio.wait({stopping, watching}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if metrics is not None:
            await metrics.cleanup()
        await supervisor.stop()
        if watching.done() and isinstance(watching.exception(), JobDied):
            log.error(f"{role}.exit", reason=str(watching.exception()))
            return 1
        watching.cancel()
    return 0


async def _serve_metrics(c: Components, port: int | None) -> web.AppRunner | None:
    """``/metrics`` and ``/healthz`` on ``port`` (all interfaces), when one is set."""
    if port is None:
        return None
    from gateway.http.app import create_metrics_app

    runner = web.AppRunner(create_metrics_app(c), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", port).start()
    log.info("metrics.listening", port=port)
    return runner
