"""What the replay commands print: tables, one delivery whole, summaries, diffs, progress.

Plain text for people (numbers masked) and JSON for scripts (everything). Results go to
``out``; warnings, prompts and the progress bar to ``err``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TextIO

from channels import mask_number
from gateway.replay.diff import DiffReport
from gateway.replay.records import RawDelivery, mask_thread, twilio_params
from gateway.replay.resign import Prepared
from gateway.replay.sender import Outcome, SendReport

__all__ = ["Console", "Progress"]


@dataclass
class Console:
    """Where a command writes, and where it may ask."""

    out: TextIO
    err: TextIO
    stdin: TextIO | None

    def say(self, text: str = "") -> None:
        print(text, file=self.out)

    def warn(self, text: str) -> None:
        print(f"mel-gateway replay: {text}", file=self.err)

    def json(self, data: object) -> None:
        self.say(json.dumps(data, ensure_ascii=False, indent=2))

    def ask(self, question: str) -> bool | None:
        """A yes/no question on the terminal; None when there is no terminal to ask on."""
        if self.stdin is None or not self.stdin.isatty():
            return None
        print(f"{question} [y/N] ", end="", file=self.err)
        self.err.flush()
        return self.stdin.readline().strip().lower() in ("y", "yes", "s", "sim")

    # --- list / show -----------------------------------------------------------------

    def deliveries(self, deliveries: Sequence[RawDelivery], *, capped: bool) -> None:
        rows = [("ID", "RECEIVED", "PROVIDER", "USER", "STATUS", "PREVIEW")]
        rows += [
            (d.id, _local(d), d.provider, _user(d), str(d.status), d.preview()) for d in deliveries
        ]
        self._table(rows)
        n = len(deliveries)
        more = " (the most recent matches: --limit N or --all for more)" if capped else ""
        self.say(f"{n} deliver{'y' if n == 1 else 'ies'}{more}; {_tz_note()}")

    def _table(self, rows: Sequence[Sequence[str]]) -> None:
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
        for row in rows:
            cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
            self.say("  ".join([*cells, row[-1]]).rstrip())

    def delivery(self, d: RawDelivery, replies: Mapping[str, str | None]) -> None:
        elapsed = f" in {d.elapsed_ms:g} ms" if d.elapsed_ms is not None else ""
        self.say(f"delivery   {d.id}")
        self.say(f"received   {d.received_at}  ({_local(d)} local)")
        query = f"?{d.query}" if d.query else ""
        self.say(f"request    {d.method} {d.path}{query}  ({d.provider})")
        self.say(f"answered   {d.status}{elapsed}{'  ' + d.error if d.error else ''}")
        self.say(f"threads    {', '.join(d.threads) or '-'}")
        self.say(f"messages   {', '.join(d.messages) or '-'}")
        self.say("headers")
        for name, value in sorted(d.headers.items()):
            self.say(f"  {name}: {value}")
        self.say("body")
        for line in _body_lines(d):
            self.say("  " + line)
        if d.messages:
            self.say("replies sent")
            for mid in d.messages:
                self.say(f"  {mid}: {_quoted(replies.get(mid))}")

    # --- send ------------------------------------------------------------------------

    def signature_notes(self, prepared: Sequence[Prepared]) -> None:
        """Say which deliveries keep their original signature, and which cannot go."""
        for provider, flag in (("twilio", "--twilio-auth-token"), ("meta", "--meta-app-secret")):
            kept = sum(
                1 for p in prepared if p.signature == "original" and p.original.provider == provider
            )
            if kept:
                self.warn(
                    f"no {provider} secret for the target: {kept} deliver"
                    f"{'y keeps its' if kept == 1 else 'ies keep their'} original signature, "
                    f"which the target accepts only with the same secret (and, for twilio, "
                    f"the same URL); pass {flag} to re-sign"
                )
        for p in prepared:
            if p.problem:
                self.warn(f"{p.original.id}: {p.problem}")

    def plan(self, prepared: Sequence[Prepared], target: str, skipped: int) -> None:
        """``--dry-run``: each delivery that would go, and the count."""
        for p in prepared:
            d = p.original
            how = f"skip: {p.problem}" if p.problem else f"signature {p.signature}"
            self.say(f"{d.id}  {d.provider:<6}  {_user(d):<16}  POST {p.url}  ({how})  "
                     f"{d.preview(40)}")  # fmt: skip
        sendable = sum(1 for p in prepared if p.problem is None)
        self.say(
            f"dry run: {sendable} deliveries would be sent to {target}"
            + (f", {skipped} skipped" if skipped else "")
            + "; nothing was sent"
        )

    def send_report(self, report: SendReport, target: str, *, as_json: bool) -> None:
        if as_json:
            self.json({"send": report.as_json()})
            return
        rows: list[tuple[str, str]] = [("sent", f"{report.sent} of {report.planned} to {target}")]
        rows += [(f"  {klass}", str(n)) for klass, n in report.by_status.items()]
        rows.append(("errors", f"{report.errors} (no answer: refused, timed out, …)"))
        rows.append(("skipped", f"{report.skipped} (not sent)"))
        if report.original_signatures:
            rows.append(("original sig.", str(report.original_signatures)))
        p50, p99 = _ms(report.latency(50)), _ms(report.latency(99))
        rows.append(("latency", f"p50 {p50} · p99 {p99}"))
        rows.append(("elapsed", f"{report.elapsed_s:.1f} s"))
        for name, value in rows:
            self.say(f"{name:<14}{value}")
        failures = report.as_json()["problems"]
        if failures:
            self.say("problems:")
            for line in failures:
                self.say(f"  {line}")

    # --- diff ------------------------------------------------------------------------

    def diff_report(self, report: DiffReport, target: str, prefix: str, *, as_json: bool) -> None:
        counts = report.counts()
        if as_json:
            self.json(
                {
                    "summary": counts,
                    "target": {"url": target, "prefix": prefix},
                    "messages": [c.as_json() for c in report.comparisons],
                    "send": report.send.as_json(),
                    "warnings": report.warnings,
                }
            )
            return
        self.say(
            f"replayed {len(report.comparisons)} messages to {target} (target prefix {prefix})"
        )
        for name, n in counts.items():
            self.say(f"  {name:<10}{n}")
        for c in report.comparisons:
            if c.result == "identical":
                continue
            user = mask_thread(c.thread_id) if c.thread_id else "-"
            said = c.user_text if len(c.user_text) <= 60 else c.user_text[:59] + "…"
            self.say("")
            self.say(
                f"{c.result.upper()}  {user}  delivery {c.delivery_id}  message {c.message_id}"
            )
            self.say(f"  user:     {said}")
            if c.note:
                self.say(f"  note:     {c.note}")
            if c.result == "changed":
                for line in c.diff.splitlines():
                    self.say("  " + line)
            else:
                self.say(f"  original: {_quoted(c.original)}")
                self.say(f"  target:   {_quoted(c.target)}")
        if report.send.failed:
            self.say("")
            self.send_report(report.send, target, as_json=False)


class Progress:
    """A one-line progress bar on a terminal; silent when ``stream`` is not one."""

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


def _user(d: RawDelivery) -> str:
    users = [t.rsplit(":", 1)[-1] for t in d.threads]
    if not users:
        return "-"
    return mask_number(users[0]) + (f" +{len(users) - 1}" if len(users) > 1 else "")


def _local(d: RawDelivery) -> str:
    return d.when.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _tz_note() -> str:
    offset = datetime.now().astimezone().strftime("%z")
    return f"times are local (UTC{offset[:3]}:{offset[3:]})"


def _body_lines(d: RawDelivery) -> list[str]:
    if d.provider == "twilio" and d.body_text is not None:
        return [f"{k} = {v}" for k, v in twilio_params(d.body)] or ["(empty)"]
    if d.body_text is None:
        return [f"({len(d.body)} bytes, not UTF-8: see --json for base64)"]
    try:
        return json.dumps(json.loads(d.body_text), ensure_ascii=False, indent=2).splitlines()
    except ValueError:
        return d.body_text.splitlines() or ["(empty)"]


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:g} ms"


def _quoted(text: str | None) -> str:
    return "(no reply)" if text is None else json.dumps(text, ensure_ascii=False)
