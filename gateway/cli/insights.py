"""``mel-gateway insights``: the psychologist's hypotheses in a terminal, and the actions
on them (reanalyze a session, accept or dismiss a hypothesis). Reads Redis directly, like
``ledger import``; the same operations as the support API."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import textwrap
from typing import Any, TextIO

from agent.psychologist import (
    ANALYSIS_COMPLETED,
    ANALYSIS_FAILED,
    HypothesisStatus,
    InvalidTransition,
)
from gateway.errors import GatewayError
from gateway.http.insights import group_by_agent
from gateway.settings import Settings
from gateway.store.psychologist import PsychologistStore

__all__ = ["format_insights", "register", "run_insights"]

_WIDTH = 96


def register(sub: Any) -> None:
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
    insights.set_defaults(run=lambda settings, args: asyncio.run(run_insights(settings, args)))


def format_insights(groups: list[dict[str, Any]]) -> str:
    """The grouped hypotheses as readable text, one block per agent."""
    if not groups:
        return "No hypotheses yet: sessions are analysed when they close."
    total = sum(g["count"] for g in groups)
    lines = [f"{total} hypotheses on {len(groups)} agents (current analyses)", ""]
    for group in groups:
        lines.append(f"{group['target_agent']} ({group['count']})")
        for h in group["hypotheses"]:
            lines.append(f"  [{h['confidence']:>3}] {h['title']}  · {h['status']}")
            lines += _wrapped(h["description"])
            termination = h.get("termination") or {}
            if h.get("termination_analysis"):
                cause = termination.get("cause", "?")
                lines += _wrapped(f"término ({cause}): {h['termination_analysis']}")
            evidence = ", ".join(h["evidence_event_ids"])
            lines.append(f"        session {h['session_id']} · evidence {evidence}")
            lines.append(f"        id {h['id']} · {h['created_at'][:19]}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


async def _why_empty(db: PsychologistStore) -> str:
    """No hypotheses: say whether the psychologist is off, failing, or just not done."""
    if not await db.group_exists():
        return (
            "No hypotheses: no psychologist has run on this Redis. It runs inside serve and "
            "worker when an LLM is configured (LLM_BASE_URL) unless PSYCHOLOGIST_ENABLED=false, "
            "or alone as `mel-gateway psychologist`."
        )
    stats = await db.stats()
    if stats["failed"] and not stats["completed"]:
        return (
            f"No hypotheses: {stats['failed']} analyses failed and none completed. "
            "See the psychologist.analysis_failed events, or "
            "GET /support/sessions/<id>/analysis for a session's failures."
        )
    return (
        f"No hypotheses yet: sessions are analysed when they close "
        f"({stats['completed']} analyses completed, {stats['failed']} failed)."
    )


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(
        " ".join(text.split()), _WIDTH, initial_indent=" " * 8, subsequent_indent=" " * 8
    )


async def run_insights(
    settings: Settings, args: argparse.Namespace, out: TextIO | None = None
) -> int:
    from gateway.bootstrap import open_store

    out = out or sys.stdout
    async with open_store(settings) as store:
        db = PsychologistStore(store)
        try:
            command = getattr(args, "insights_command", None)
            if command == "reanalyze":
                return await _reanalyze(db, args, out)
            if command in ("accept", "dismiss"):
                return await _decide(db, args, command, out)
            return await _list(db, args, out)
        except (GatewayError, InvalidTransition, ValueError) as exc:
            print(f"mel-gateway: {exc}", file=sys.stderr)
            return 1


async def _list(db: PsychologistStore, args: argparse.Namespace, out: TextIO) -> int:
    statuses = {s for s in (args.status or "").split(",") if s}
    unknown = statuses - {s.value for s in HypothesisStatus}
    if unknown:
        known = ", ".join(s.value for s in HypothesisStatus)
        print(f"mel-gateway: unknown --status {', '.join(sorted(unknown))} (known: {known})",
              file=sys.stderr)  # fmt: skip
        return 2
    found = [
        h
        for h in await db.current_hypotheses()
        if (not statuses or h["status"] in statuses)
        and (not args.agent or h["target_agent"] == args.agent)
    ]
    groups = group_by_agent(found)
    if args.json:
        out.write(json.dumps({"count": len(found), "agents": groups}, ensure_ascii=False) + "\n")
    elif groups:
        out.write(format_insights(groups) + "\n")
    else:
        out.write(await _why_empty(db) + "\n")
    return 0


async def _decide(
    db: PsychologistStore, args: argparse.Namespace, command: str, out: TextIO
) -> int:
    if command == "accept":
        hypothesis, _ids = await db.transition(
            args.hypothesis,
            HypothesisStatus.ACCEPTED,
            by=args.by,
            for_anamnese=args.for_anamnese,
        )
    else:
        hypothesis, _ids = await db.transition(
            args.hypothesis, HypothesisStatus.DISMISSED, by=args.by, note=args.note
        )
    extra = " (for the Anamnese)" if hypothesis["for_anamnese"] else ""
    out.write(f"{hypothesis['id']}: {hypothesis['status']}{extra}\n")
    return 0


async def _reanalyze(db: PsychologistStore, args: argparse.Namespace, out: TextIO) -> int:
    request_id = await db.request_reanalysis(args.session, tier=args.tier, by=args.by)
    out.write(f"reanalysis of {args.session} queued (request {request_id})\n")
    if not args.wait:
        return 0
    outcome = await _wait_outcome(db, request_id, args.wait)
    if outcome is None:
        out.write(f"no outcome within {args.wait:g}s; it is still queued or running\n")
        return 1
    data = outcome["data"]
    if outcome["type"] == ANALYSIS_COMPLETED:
        cost = data.get("cost_micro_usd", 0)
        out.write(
            f"analysis {data['analysis_id']}: {len(data['hypothesis_ids'])} hypotheses "
            f"({data.get('tier')}, {data.get('model')}, {cost} micro-USD)\n"
        )
        return 0
    out.write(f"analysis failed: {data.get('failure')}\n")
    return 1


async def _wait_outcome(
    db: PsychologistStore, request_id: str, timeout: float
) -> dict[str, Any] | None:
    """The completed event, or the final failed one, of a reanalysis request."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    cursor = request_id
    while (left := deadline - loop.time()) > 0:
        batch = await db.store.events.read(cursor, count=500, block_ms=int(min(left, 1.0) * 1000))
        for env in batch:
            cursor = env["id"]
            data = env["data"]
            if data.get("trigger_event_id") != request_id:
                continue
            if env["type"] == ANALYSIS_COMPLETED or (
                env["type"] == ANALYSIS_FAILED and data.get("final")
            ):
                return env
    return None
