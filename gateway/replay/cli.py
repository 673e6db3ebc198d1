"""``mel-gateway replay …``: list, show, export, send and diff recorded deliveries.

``add_replay_parser(subparsers)`` adds the ``replay`` command to ``mel-gateway``'s parser;
``run_replay(args, settings)`` runs it and returns the exit status (0: all went well,
1: something failed or differed — the summary says what —, 2: unusable input).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from gateway.replay.diff import history_warnings, original_replies, replay_and_compare
from gateway.replay.filters import Filters, parse_speed, parse_status, parse_when
from gateway.replay.output import Console, Progress
from gateway.replay.records import (
    ExportLineError,
    RawDelivery,
    RawLog,
    RecordError,
    export_line,
    read_export,
    select_from_export,
)
from gateway.replay.redact import Redactor
from gateway.replay.resign import FreshIds, Secrets, prepare
from gateway.replay.sender import SendOptions, run_send
from gateway.settings import Settings
from gateway.store import Keys
from gateway.store.embedded import EmbeddedRedis

__all__ = ["CONFIRM_ABOVE", "LIST_LIMIT", "add_replay_parser", "arun_replay", "run_replay"]

CONFIRM_ABOVE = 50
"""``send`` / ``diff`` ask before sending more deliveries than this (unless ``--yes``)."""
LIST_LIMIT = 50
"""``list`` shows this many of the most recent matches unless told otherwise."""


class UsageProblem(Exception):
    """Input the command cannot work with at all: exit status 2 with this message."""


# --- parser --------------------------------------------------------------------------


def _when(value: str) -> datetime:
    try:
        return parse_when(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _status(value: str) -> Any:
    try:
        return parse_status(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _speed(value: str) -> float:
    try:
        return parse_speed(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:/\s*(s|sec|second|m|min|minute))?\s*$", re.I)


def parse_rate(value: str) -> float:
    """``"10/s"``, ``"10"`` (per second) or ``"600/m"`` → deliveries per second."""
    match = _RATE.match(value)
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"rate {value!r}: use N/s or N/m, e.g. 10/s")
    per = (match.group(2) or "s").lower()
    return float(match.group(1)) / (60.0 if per.startswith("m") else 1.0)


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of at least 1")
    return number


def _positive_float(value: str) -> float:
    try:
        number = float(value.rstrip("s"))
    except ValueError:
        number = 0.0
    if number <= 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds above 0")
    return number


def _source_options() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("where the recorded deliveries are")
    g.add_argument("--redis", metavar="URL", help="source Redis (default: REDIS_URL)")
    g.add_argument("--prefix", help="source key prefix (default: MEL_REDIS_PREFIX)")
    return p


def _selection_options(*, from_file: bool) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("which deliveries")
    if from_file:
        g.add_argument(
            "--file", type=Path, help="read deliveries from an export file instead of Redis"
        )
    g.add_argument("--since", type=_when, help="ISO time or relative (30m, 2h, 3d)")
    g.add_argument("--until", type=_when, help="ISO time or relative (30m, 2h, 3d)")
    g.add_argument("--provider", choices=("twilio", "meta"))
    g.add_argument("--thread", help="a thread id or the user's phone number")
    g.add_argument("--message-id", help="a provider message id (MessageSid, wamid)")
    g.add_argument("--status", type=_status, help="403, 2xx, 4xx, 5xx, ok, failed (= non-2xx); a,b")
    g.add_argument("--text", help="text in the body (case-insensitive)")
    g.add_argument("--limit", type=_positive_int, help="only the N most recent matches")
    g.add_argument(
        "--id", action="append", default=[], dest="ids", metavar="ID", help="a delivery id"
    )
    return p


def _base_url(value: str) -> str:
    """``--to``: refused up front unless it is an http(s) URL with a host."""
    scheme, sep, rest = value.partition("://")
    if not sep or scheme not in ("http", "https") or not rest.split("/", 1)[0]:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a base URL: give the scheme too, e.g. http://{value or 'host:8080'}"
        )
    return value


def _target_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("the target gateway")
    g.add_argument(
        "--to",
        required=True,
        metavar="URL",
        type=_base_url,
        help="its base URL, e.g. http://127.0.0.1:8080",
    )
    g.add_argument(
        "--twilio-auth-token",
        metavar="TOKEN",
        help="its Twilio auth token (default: TWILIO_AUTH_TOKEN)",
    )
    g.add_argument(
        "--meta-app-secret", metavar="SECRET", help="its Meta app secret (default: META_APP_SECRET)"
    )
    g.add_argument("--rate", type=parse_rate, metavar="N/s", help="at most N deliveries a second")
    g.add_argument(
        "--concurrency", type=_positive_int, default=8, help="deliveries in flight (default 8)"
    )
    g.add_argument(
        "--timeout", type=_positive_float, default=10.0, help="seconds per request (default 10)"
    )
    g.add_argument(
        "--yes", "-y", action="store_true", help=f"no confirmation above {CONFIRM_ABOVE}"
    )
    g.add_argument("--json", action="store_true", help="print the summary as JSON")


def add_replay_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``replay`` (and its subcommands) to ``mel-gateway``'s subparsers."""
    replay: argparse.ArgumentParser = subparsers.add_parser(
        "replay",
        help="find, export, re-send and diff recorded webhook deliveries",
        description="Find, export, re-sign and re-send recorded WhatsApp deliveries, and "
        "diff what a gateway answers to them. See docs/replay.md.",
    )
    sub = replay.add_subparsers(dest="replay_command", required=True, metavar="COMMAND")
    source = _source_options()
    selection = _selection_options(from_file=False)
    file_selection = _selection_options(from_file=True)

    ls = sub.add_parser(
        "list", parents=[source, selection], help="recorded deliveries, as a table or JSON"
    )
    ls.add_argument("--json", action="store_true", help="a JSON array instead of a table")
    ls.add_argument(
        "--all", action="store_true", help=f"every match (default: the {LIST_LIMIT} most recent)"
    )

    show = sub.add_parser("show", parents=[source], help="one delivery whole")
    show.add_argument("id", help="the delivery id (first column of list)")
    show.add_argument("--json", action="store_true")

    export = sub.add_parser(
        "export", parents=[source, file_selection], help="write deliveries to a JSON-lines file"
    )
    export.add_argument("-o", "--output", required=True, help="the file to write ('-': stdout)")
    export.add_argument("--redact", action="store_true", help="mask numbers and names")

    send = sub.add_parser(
        "send",
        parents=[source, file_selection],
        help="re-send deliveries to a gateway, re-signed for it",
    )
    _target_options(send)
    send.add_argument(
        "--fresh-ids", action="store_true", help="new MessageSid / wamid, so nothing is a duplicate"
    )
    send.add_argument(
        "--speed", type=_speed, metavar="1x|10x", help="keep the original pacing, or faster"
    )
    send.add_argument("--dry-run", action="store_true", help="print what would be sent")

    diff = sub.add_parser(
        "diff",
        parents=[source, file_selection],
        help="replay to a gateway and compare its replies with the original ones",
    )
    _target_options(diff)
    diff.add_argument(
        "--target-redis", metavar="URL", help="target's Redis (default: the source's)"
    )
    diff.add_argument("--target-prefix", help="target's key prefix (default: MEL_REDIS_PREFIX)")
    diff.add_argument(
        "--wait", type=_positive_float, default=60.0, help="seconds to wait for replies (60)"
    )
    return replay


# --- running -------------------------------------------------------------------------


def run_replay(args: argparse.Namespace, settings: Settings) -> int:
    """Run ``mel-gateway replay …``; the exit status."""
    return asyncio.run(arun_replay(args, settings))


async def arun_replay(
    args: argparse.Namespace,
    settings: Settings,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    stdin: TextIO | None = None,
) -> int:
    """``run_replay`` for a running event loop (tests, embedding)."""
    io = Console(
        stdout or sys.stdout, stderr or sys.stderr, stdin if stdin is not None else sys.stdin
    )
    commands = {"list": _list, "show": _show, "export": _export, "send": _send, "diff": _diff}
    async with _Sources(args, settings) as sources:
        try:
            return await commands[args.replay_command](args, settings, sources, io)
        except UsageProblem as exc:
            io.warn(str(exc))
            return 2
        except (RedisError, OSError) as exc:
            io.warn(f"{type(exc).__name__}: {exc}")
            return 2


class _Sources:
    """Redis connections opened on first use and closed at the end."""

    def __init__(self, args: argparse.Namespace, settings: Settings) -> None:
        self.args = args
        self.settings = settings
        self._clients: dict[str, aioredis.Redis] = {}
        self._embedded: EmbeddedRedis | None = None

    @property
    def prefix(self) -> str:
        return getattr(self.args, "prefix", None) or self.settings.mel_redis_prefix

    async def _url(self, url: str | None) -> str:
        if url:
            return url
        if self._embedded is None:
            self._embedded = EmbeddedRedis(self.settings.mel_data_dir)
            return await asyncio.to_thread(self._embedded.start)
        return self._embedded.url

    async def client(self, url: str | None) -> aioredis.Redis:
        resolved = await self._url(url)
        client = self._clients.get(resolved)
        if client is None:
            client = aioredis.from_url(resolved, socket_timeout=10, socket_connect_timeout=3)
            try:
                await client.ping()
            except (RedisError, OSError) as exc:
                await client.aclose()
                raise UsageProblem(f"cannot reach Redis at {resolved}: {exc}") from None
            self._clients[resolved] = client
        return client

    async def source(self) -> aioredis.Redis:
        return await self.client(getattr(self.args, "redis", None) or self.settings.redis_url)

    async def raw_log(self) -> RawLog:
        return RawLog(await self.source(), Keys(self.prefix).raw)

    async def __aenter__(self) -> _Sources:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for client in self._clients.values():
            await client.aclose()
        if self._embedded is not None:
            await asyncio.to_thread(self._embedded.stop)


def _filters(args: argparse.Namespace, **extra: Any) -> Filters:
    if args.since and args.until and args.since > args.until:
        raise UsageProblem("--since is after --until")
    return Filters(
        since=args.since,
        until=args.until,
        provider=args.provider,
        thread=args.thread,
        message_id=args.message_id,
        status=args.status,
        text=args.text,
        limit=args.limit,
        ids=tuple(args.ids),
        **extra,
    )


async def _select(
    args: argparse.Namespace, sources: _Sources, filters: Filters
) -> tuple[list[RawDelivery], list[str]]:
    problems: list[str] = []
    path: Path | None = getattr(args, "file", None)
    if path is not None:
        items = await asyncio.to_thread(_read_file, path)
        deliveries = select_from_export(items, filters, problems)
    else:
        deliveries = await (await sources.raw_log()).select(filters, problems)
    return deliveries, problems


def _read_file(path: Path) -> list[RawDelivery | ExportLineError]:
    if not path.is_file():
        raise UsageProblem(f"no such file: {path}")
    return list(read_export(path))


# --- list / show ---------------------------------------------------------------------


async def _list(args: argparse.Namespace, _s: Settings, sources: _Sources, io: Console) -> int:
    if args.limit is None and not args.all:
        args.limit = LIST_LIMIT
    filters = _filters(args)
    deliveries, problems = await _select(args, sources, filters)
    for problem in problems:
        io.warn(problem)
    if args.json:
        io.json([d.summary() for d in deliveries])
    elif not deliveries:
        io.say(f"no delivery matches ({filters.describe()})")
    else:
        capped = filters.limit is not None and len(deliveries) >= filters.limit
        io.deliveries(deliveries, capped=capped)
    return 0


async def _show(args: argparse.Namespace, _s: Settings, sources: _Sources, io: Console) -> int:
    try:
        d = await (await sources.raw_log()).get(args.id)
    except RecordError as exc:
        io.warn(str(exc))
        return 1
    if d is None:
        io.warn(f"no delivery with id {args.id} (unknown, or trimmed by retention)")
        return 1
    replies = await original_replies(await sources.source(), sources.prefix, [d])
    if args.json:
        io.json(json.loads(export_line(_with_replies(d, replies))))
    else:
        io.delivery(d, replies)
    return 0


# --- export --------------------------------------------------------------------------


async def _export(args: argparse.Namespace, _s: Settings, sources: _Sources, io: Console) -> int:
    filters = _filters(args)
    deliveries, problems = await _select(args, sources, filters)
    for problem in problems:
        io.warn(problem)
    if not deliveries:
        io.warn(f"no delivery matches ({filters.describe()}): nothing exported")
        return 1
    if args.file is None:
        replies = await original_replies(await sources.source(), sources.prefix, deliveries)
        deliveries = [_with_replies(d, replies) for d in deliveries]
    if args.redact:
        redactor = Redactor()
        deliveries = [redactor.delivery(d) for d in deliveries]
    lines = [export_line(d) + "\n" for d in deliveries]
    if args.output == "-":
        io.out.writelines(lines)
    else:
        await asyncio.to_thread(_write_privately, Path(args.output), lines)
    where = "stdout" if args.output == "-" else args.output
    redacted = " (redacted)" if args.redact else ""
    skipped = f"; {len(problems)} skipped" if problems else ""
    io.warn(f"exported {len(deliveries)} deliveries to {where}{redacted}{skipped}")
    return 1 if problems else 0


def _with_replies(d: RawDelivery, replies: dict[str, str | None]) -> RawDelivery:
    return replace(
        d,
        replies={
            mid: {"text": replies.get(mid), "status": "sent" if replies.get(mid) else "none"}
            for mid in d.messages
        },
    )


def _write_privately(path: Path, lines: Sequence[str]) -> None:
    """Write through a temporary file (mode 0600: bodies hold personal data), then rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.writelines(lines)
    tmp.replace(path)


# --- send ----------------------------------------------------------------------------


def _secrets(args: argparse.Namespace, settings: Settings) -> Secrets:
    twilio = args.twilio_auth_token or settings.twilio_auth_token
    if not twilio and settings.dev_mode:
        dev = settings.mel_data_dir / "dev_twilio_auth_token"
        if dev.is_file():  # a local gateway with nothing configured signs with this one
            twilio = dev.read_text().strip() or None
    return Secrets(twilio, args.meta_app_secret or settings.meta_app_secret)


def _confirmed(count: int, target: str, verb: str, args: argparse.Namespace, io: Console) -> bool:
    if count <= CONFIRM_ABOVE or args.yes:
        return True
    answer = io.ask(f"{verb.capitalize()} {count} deliveries to {target}?")
    if answer is None:
        io.warn(
            f"refusing to {verb} {count} deliveries to {target} without confirmation: "
            "no terminal to ask on; pass --yes"
        )
    return bool(answer)


def _options(args: argparse.Namespace) -> SendOptions:
    return SendOptions(
        concurrency=args.concurrency,
        rate=args.rate,
        speed=getattr(args, "speed", None),
        timeout=args.timeout,
    )


async def _send(
    args: argparse.Namespace, settings: Settings, sources: _Sources, io: Console
) -> int:
    filters = _filters(args)
    deliveries, problems = await _select(args, sources, filters)
    for problem in problems:
        io.warn(problem)
    if not deliveries:
        io.warn(f"no delivery matches ({filters.describe()}): nothing sent")
        return 1
    fresh = FreshIds() if args.fresh_ids else None
    keys = _secrets(args, settings)
    prepared = [prepare(d, args.to, keys, fresh) for d in deliveries]
    io.signature_notes(prepared)
    sendable = sum(1 for p in prepared if p.problem is None)
    if args.dry_run:
        io.plan(prepared, args.to, len(prepared) - sendable + len(problems))
        return 0
    if not _confirmed(sendable, args.to, "send", args, io):
        return 2
    progress = Progress(len(prepared), io.err)
    try:
        report = await run_send(prepared, problems, _options(args), on_done=progress)
    finally:
        progress.close()
    io.send_report(report, args.to, as_json=args.json)
    return 0 if report.failed == 0 else 1


# --- diff ----------------------------------------------------------------------------


async def _diff(
    args: argparse.Namespace, settings: Settings, sources: _Sources, io: Console
) -> int:
    filters = _filters(args, only_messages=True)
    deliveries, problems = await _select(args, sources, filters)
    for problem in problems:
        io.warn(problem)
    if not deliveries:
        io.warn(f"no accepted inbound delivery matches ({filters.describe()}): nothing to diff")
        return 1
    needs_source = any(mid not in d.replies for d in deliveries for mid in d.messages)
    source = await sources.source() if needs_source else None
    originals = await original_replies(source, sources.prefix, deliveries)
    target_prefix = args.target_prefix or settings.mel_redis_prefix
    target = await sources.client(args.target_redis or args.redis or settings.redis_url)
    warnings = await history_warnings(target, target_prefix, deliveries)
    for warning in warnings:
        io.warn(warning)
    fresh = FreshIds()
    keys = _secrets(args, settings)
    prepared = [prepare(d, args.to, keys, fresh) for d in deliveries]
    io.signature_notes(prepared)
    if not _confirmed(sum(1 for p in prepared if p.problem is None), args.to, "replay", args, io):
        return 2
    progress = Progress(len(prepared), io.err)
    try:
        report = await replay_and_compare(
            prepared,
            fresh,
            originals,
            target=target,
            target_prefix=target_prefix,
            options=_options(args),
            wait=args.wait,
            problems=problems,
            on_done=progress,
        )
    finally:
        progress.close()
    report.warnings = warnings
    io.diff_report(report, args.to, target_prefix, as_json=args.json)
    return 1 if report.differs or report.send.failed else 0


# --- helpers for tests and python -m -------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """A stand-alone parser whose only command is ``replay`` (``python -m gateway.replay``)."""
    parser = argparse.ArgumentParser(prog="mel-gateway")
    sub = parser.add_subparsers(dest="command", required=True)
    add_replay_parser(sub)
    return parser
