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
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from channels import mask_number
from gateway.redis_server import EmbeddedRedis
from gateway.replay.diff import (
    Comparison,
    ReplyTracker,
    compare,
    last_event_id,
    original_replies,
    wait_for_replies,
)
from gateway.replay.filters import Filters, parse_speed, parse_status, parse_when
from gateway.replay.records import (
    ExportLineError,
    RawDelivery,
    RawLog,
    RecordError,
    export_line,
    read_export,
    select_from_export,
    twilio_params,
)
from gateway.replay.redact import Redactor
from gateway.replay.resign import FreshIds, Prepared, Secrets, prepare
from gateway.replay.sender import Outcome, SendOptions, SendReport, send_all
from gateway.settings import Settings
from gateway.store import Keys

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


def _target_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("the target gateway")
    g.add_argument(
        "--to", required=True, metavar="URL", help="its base URL, e.g. http://127.0.0.1:8080"
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
    send.add_argument("--speed", type=_speed, help="keep the original pacing: 1x, 10x, …")
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


@dataclass
class _IO:
    out: TextIO
    err: TextIO
    stdin: TextIO | None

    def say(self, text: str = "") -> None:
        print(text, file=self.out)

    def warn(self, text: str) -> None:
        print(f"mel-gateway replay: {text}", file=self.err)


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
    io = _IO(stdout or sys.stdout, stderr or sys.stderr, stdin if stdin is not None else sys.stdin)
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


def _user(d: RawDelivery) -> str:
    users = [t.rsplit(":", 1)[-1] for t in d.threads]
    if not users:
        return "-"
    shown = mask_number(users[0])
    return shown + (f" +{len(users) - 1}" if len(users) > 1 else "")


def _local(d: RawDelivery) -> str:
    return d.when.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _table(rows: Sequence[Sequence[str]], out: _IO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        out.say("  ".join([*cells, row[-1]]).rstrip())


def _tz_note() -> str:
    offset = datetime.now().astimezone().strftime("%z")
    return f"times are local (UTC{offset[:3]}:{offset[3:]})"


async def _list(args: argparse.Namespace, _s: Settings, sources: _Sources, io: _IO) -> int:
    if args.limit is None and not args.all:
        args.limit = LIST_LIMIT
    filters = _filters(args)
    deliveries, problems = await _select(args, sources, filters)
    for problem in problems:
        io.warn(problem)
    if args.json:
        io.say(json.dumps([d.summary() for d in deliveries], ensure_ascii=False, indent=2))
        return 0
    if not deliveries:
        io.say(f"no delivery matches ({filters.describe()})")
        return 0
    rows = [("ID", "RECEIVED", "PROVIDER", "USER", "STATUS", "PREVIEW")]
    rows += [
        (d.id, _local(d), d.provider, _user(d), str(d.status), d.preview()) for d in deliveries
    ]
    _table(rows, io)
    more = (
        " (the most recent matches: --limit N or --all for more)"
        if (filters.limit and len(deliveries) >= filters.limit)
        else ""
    )
    io.say(f"{len(deliveries)} deliver{'y' if len(deliveries) == 1 else 'ies'}{more}; {_tz_note()}")
    return 0


async def _show(args: argparse.Namespace, _s: Settings, sources: _Sources, io: _IO) -> int:
    log = await sources.raw_log()
    try:
        d = await log.get(args.id)
    except RecordError as exc:
        io.warn(str(exc))
        return 1
    if d is None:
        io.warn(f"no delivery with id {args.id} (unknown, or trimmed by retention)")
        return 1
    replies = await original_replies(await sources.source(), sources.prefix, [d])
    if args.json:
        data = json.loads(export_line(_with_replies(d, replies)))
        io.say(json.dumps(data, ensure_ascii=False, indent=2))
        return 0
    elapsed = f" in {d.elapsed_ms:g} ms" if d.elapsed_ms is not None else ""
    io.say(f"delivery   {d.id}")
    io.say(f"received   {d.received_at}  ({_local(d)} local)")
    io.say(f"request    {d.method} {d.path}{'?' + d.query if d.query else ''}  ({d.provider})")
    io.say(f"answered   {d.status}{elapsed}{'  ' + d.error if d.error else ''}")
    io.say(f"threads    {', '.join(d.threads) or '-'}")
    io.say(f"messages   {', '.join(d.messages) or '-'}")
    io.say("headers")
    for name, value in sorted(d.headers.items()):
        io.say(f"  {name}: {value}")
    io.say("body")
    for line in _body_lines(d):
        io.say("  " + line)
    if d.messages:
        io.say("replies sent")
        for mid in d.messages:
            text = replies.get(mid)
            io.say(f"  {mid}: " + (json.dumps(text, ensure_ascii=False) if text else "(none)"))
    return 0


def _body_lines(d: RawDelivery) -> list[str]:
    if d.provider == "twilio" and d.body_text is not None:
        return [f"{k} = {v}" for k, v in twilio_params(d.body)] or ["(empty)"]
    if d.body_text is None:
        return [f"({len(d.body)} bytes, not UTF-8: see --json for base64)"]
    try:
        return json.dumps(json.loads(d.body_text), ensure_ascii=False, indent=2).splitlines()
    except ValueError:
        return d.body_text.splitlines() or ["(empty)"]


# --- export --------------------------------------------------------------------------


async def _export(args: argparse.Namespace, _s: Settings, sources: _Sources, io: _IO) -> int:
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
        _write_atomically(Path(args.output), lines)
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


def _write_atomically(path: Path, lines: Sequence[str]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.writelines(lines)
    os.chmod(tmp, 0o600)  # bodies hold personal data
    tmp.replace(path)


# --- send ----------------------------------------------------------------------------


def _secrets(args: argparse.Namespace, settings: Settings) -> Secrets:
    twilio = args.twilio_auth_token or settings.twilio_auth_token
    if not twilio and settings.dev_mode:
        dev = settings.mel_data_dir / "dev_twilio_auth_token"
        if dev.is_file():  # a local gateway with nothing configured signs with this one
            twilio = dev.read_text().strip() or None
    return Secrets(twilio, args.meta_app_secret or settings.meta_app_secret)


def _signature_notes(prepared: Sequence[Prepared], io: _IO) -> None:
    for provider, flag in (("twilio", "--twilio-auth-token"), ("meta", "--meta-app-secret")):
        kept = sum(
            1 for p in prepared if p.signature == "original" and p.original.provider == provider
        )
        if kept:
            io.warn(
                f"no {provider} secret for the target: {kept} deliver"
                f"{'y keeps its' if kept == 1 else 'ies keep their'} original signature, "
                f"which the target accepts only with the same secret (and, for twilio, the "
                f"same URL); pass {flag} to re-sign"
            )
    for p in prepared:
        if p.problem:
            io.warn(f"{p.original.id}: {p.problem}")


def _confirm(count: int, target: str, verb: str, args: argparse.Namespace, io: _IO) -> bool:
    if count <= CONFIRM_ABOVE or args.yes:
        return True
    stdin = io.stdin
    if stdin is None or not stdin.isatty():
        io.warn(
            f"refusing to {verb} {count} deliveries to {target} without confirmation: "
            "no terminal to ask on; pass --yes"
        )
        return False
    print(f"{verb.capitalize()} {count} deliveries to {target}? [y/N] ", end="", file=io.err)
    io.err.flush()
    answer = stdin.readline().strip().lower()
    return answer in ("y", "yes", "s", "sim")


class _Progress:
    """A one-line progress bar on a terminal (stderr); silent otherwise."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total = total
        self.stream = stream
        self.enabled = total > 0 and stream.isatty()
        self.done = 0
        self.bad = 0

    def __call__(self, outcome: Outcome) -> None:
        self.done += 1
        self.bad += 0 if outcome.ok else 1
        if self.enabled:
            width = 30
            filled = int(width * self.done / self.total)
            bar = "#" * filled + "." * (width - filled)
            failed = f"  {self.bad} failed" if self.bad else ""
            self.stream.write(f"\r[{bar}] {self.done}/{self.total}{failed}")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def _plan_line(p: Prepared) -> str:
    d = p.original
    status = f"skip: {p.problem}" if p.problem else f"signature {p.signature}"
    return f"{d.id}  {d.provider:<6}  {_user(d):<16}  POST {p.url}  ({status})  {d.preview(40)}"


async def _send(args: argparse.Namespace, settings: Settings, sources: _Sources, io: _IO) -> int:
    filters = _filters(args)
    deliveries, problems = await _select(args, sources, filters)
    for problem in problems:
        io.warn(problem)
    if not deliveries:
        io.warn(f"no delivery matches ({filters.describe()}): nothing sent")
        return 1
    fresh = FreshIds() if args.fresh_ids else None
    prepared = [prepare(d, args.to, _secrets(args, settings), fresh) for d in deliveries]
    _signature_notes(prepared, io)
    sendable = sum(1 for p in prepared if p.problem is None)
    if args.dry_run:
        for p in prepared:
            io.say(_plan_line(p))
        skipped = len(prepared) - sendable + len(problems)
        io.say(
            f"dry run: {sendable} deliveries would be sent to {args.to}"
            + (f", {skipped} skipped" if skipped else "")
            + "; nothing was sent"
        )
        return 0
    if not _confirm(sendable, args.to, "send", args, io):
        return 2
    report = await _run_send(prepared, problems, args, io)
    _print_report(report, args, io)
    return 0 if report.failed == 0 else 1


async def _run_send(
    prepared: Sequence[Prepared], problems: list[str], args: argparse.Namespace, io: _IO
) -> SendReport:
    options = SendOptions(
        concurrency=args.concurrency,
        rate=args.rate,
        speed=getattr(args, "speed", None),
        timeout=args.timeout,
    )
    progress = _Progress(len(prepared), io.err)
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        outcomes = await send_all(prepared, options, on_done=progress)
    finally:
        progress.close()
    return SendReport(
        planned=len(prepared) + len(problems),
        outcomes=outcomes,
        problems=problems,
        elapsed_s=loop.time() - started,
    )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:g} ms"


def _print_report(report: SendReport, args: argparse.Namespace, io: _IO) -> None:
    if args.json:
        io.say(json.dumps({"send": report.as_json()}, ensure_ascii=False, indent=2))
        return
    _send_summary(report, args.to, io)


def _send_summary(report: SendReport, target: str, io: _IO) -> None:
    rows: list[tuple[str, str]] = [("sent", f"{report.sent} of {report.planned} to {target}")]
    rows += [(f"  {klass}", str(n)) for klass, n in report.by_status.items()]
    rows.append(("errors", f"{report.errors} (no answer: refused, timed out, …)"))
    rows.append(("skipped", f"{report.skipped} (not sent)"))
    if report.original_signatures:
        rows.append(("original sig.", str(report.original_signatures)))
    rows.append(("latency", f"p50 {_ms(report.latency(50))} · p99 {_ms(report.latency(99))}"))
    rows.append(("elapsed", f"{report.elapsed_s:.1f} s"))
    for name, value in rows:
        io.say(f"{name:<14}{value}")
    failures = report.as_json()["problems"]
    if failures:
        io.say("problems:")
        for line in failures:
            io.say(f"  {line}")


# --- diff ----------------------------------------------------------------------------


@dataclass
class _DiffReport:
    send: SendReport
    comparisons: list[Comparison] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(("identical", "changed", "missing", "new"), 0)
        for c in self.comparisons:
            counts[c.result] += 1
        return counts

    @property
    def differs(self) -> bool:
        return any(c.result != "identical" for c in self.comparisons)


async def _diff(args: argparse.Namespace, settings: Settings, sources: _Sources, io: _IO) -> int:
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
    report = _DiffReport(SendReport())
    report.warnings = await _history_warnings(target, target_prefix, deliveries)
    for warning in report.warnings:
        io.warn(warning)
    marker = await last_event_id(target, target_prefix)
    fresh = FreshIds()
    prepared = [prepare(d, args.to, _secrets(args, settings), fresh) for d in deliveries]
    _signature_notes(prepared, io)
    if not _confirm(sum(1 for p in prepared if p.problem is None), args.to, "replay", args, io):
        return 2
    report.send = await _run_send(prepared, problems, args, io)
    by_delivery = {o.prepared.original.id: o for o in report.send.outcomes}
    accepted = [
        fresh.known(m) for o in report.send.outcomes if o.ok for m in o.prepared.original.messages
    ]
    tracker = ReplyTracker(set(accepted))
    await wait_for_replies(
        target, target_prefix, tracker, marker, timeout=args.wait, expected=accepted
    )
    for d in deliveries:
        outcome = by_delivery.get(d.id)
        for index, mid in enumerate(d.messages):
            report.comparisons.append(
                _compare_one(d, index, mid, fresh, outcome, tracker, originals, args.wait)
            )
    _print_diff(report, args, target_prefix, io)
    return 1 if report.differs or report.send.failed else 0


async def _history_warnings(
    target: aioredis.Redis, prefix: str, deliveries: Sequence[RawDelivery]
) -> list[str]:
    keys = Keys(prefix)
    threads = list(dict.fromkeys(t for d in deliveries for t in d.threads))
    warnings = []
    for thread in threads:
        if await target.exists(keys.thread(thread, "history")):
            warnings.append(
                f"thread {_mask_thread(thread)} already has a history in the target "
                f"(prefix {prefix}): its replies may differ for that reason alone; "
                "diff against a fresh prefix or database"
            )
    return warnings


def _mask_thread(thread: str) -> str:
    channel, _, rest = thread.partition(":")
    _business, _, user = rest.partition(":")
    return f"{channel}:{mask_number(user)}" if user else thread


def _compare_one(
    d: RawDelivery,
    index: int,
    mid: str,
    fresh: FreshIds,
    outcome: Outcome | None,
    tracker: ReplyTracker,
    originals: dict[str, str | None],
    wait: float,
) -> Comparison:
    new_id = fresh.known(mid)
    original = originals.get(mid)
    note = ""
    target: str | None = None
    if outcome is None or not outcome.ok:
        why = "not sent" if outcome is None else (outcome.error or f"HTTP {outcome.status}")
        note = f"not replayed: {why}"
    else:
        target = tracker.reply(new_id)
        if not tracker.resolved(new_id):
            note = f"no reply within {wait:g}s"
        elif tracker.outcome(new_id) == "error" and target != original:
            note = (
                "the target's turn failed: with a replay cassette, a model request that "
                "was not recorded (the conversation took another path earlier, or the "
                "prompt or tools changed)"
            )
    result, diff_text = compare(original, target)
    thread = d.threads[min(index, len(d.threads) - 1)] if d.threads else ""
    text = d.texts[index] if index < len(d.texts) else ""
    return Comparison(mid, new_id, d.id, thread, text, result, original, target, diff_text, note)


def _print_diff(report: _DiffReport, args: argparse.Namespace, prefix: str, io: _IO) -> None:
    counts = report.counts()
    if args.json:
        data = {
            "summary": counts,
            "target": {"url": args.to, "prefix": prefix},
            "messages": [c.as_json() for c in report.comparisons],
            "send": report.send.as_json(),
            "warnings": report.warnings,
        }
        io.say(json.dumps(data, ensure_ascii=False, indent=2))
        return
    io.say(f"replayed {len(report.comparisons)} messages to {args.to} (target prefix {prefix})")
    for name, n in counts.items():
        io.say(f"  {name:<10}{n}")
    for c in report.comparisons:
        if c.result == "identical":
            continue
        user = _mask_thread(c.thread_id) if c.thread_id else "-"
        said = c.user_text if len(c.user_text) <= 60 else c.user_text[:59] + "…"
        io.say("")
        io.say(f"{c.result.upper()}  {user}  delivery {c.delivery_id}  message {c.message_id}")
        io.say(f"  user:     {said}")
        if c.note:
            io.say(f"  note:     {c.note}")
        if c.result == "changed":
            for line in c.diff.splitlines():
                io.say("  " + line)
        else:
            io.say(f"  original: {_quoted(c.original)}")
            io.say(f"  target:   {_quoted(c.target)}")
    if report.send.failed:
        io.say("")
        _send_summary(report.send, args.to, io)


def _quoted(text: str | None) -> str:
    return "(no reply)" if text is None else json.dumps(text, ensure_ascii=False)


# --- helpers for tests and python -m -------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """A stand-alone parser whose only command is ``replay`` (``python -m gateway.replay``)."""
    parser = argparse.ArgumentParser(prog="mel-gateway")
    sub = parser.add_subparsers(dest="command", required=True)
    add_replay_parser(sub)
    return parser
