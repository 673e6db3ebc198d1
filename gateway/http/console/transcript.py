"""A session's event log as the console shows it: the messages (couple, mel, support) and,
between them, the decisions (guard preempts and their kind, router and continuity
decisions, handoff, claim, release, close). Each item keeps its event id, so a
hypothesis' evidence can point at it. The texts are data: the page renders them as text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

__all__ = ["HIDDEN", "transcript"]

HIDDEN: Final = frozenset({"message.status"})
"""Delivery receipts: noise between the messages."""

Envelope = dict[str, Any]


def _pct(value: Any) -> str:
    return f"{round(float(value) * 100)}%" if isinstance(value, int | float) else "?"


def _routed(d: dict[str, Any]) -> str:
    extra = f", {_pct(d['confidence'])}" if "confidence" in d else ""
    return f"roteador → {d.get('route')} ({d.get('method')}{extra})"


def _continuity(d: dict[str, Any]) -> str:
    verdict = "aceita" if d.get("accepted") else "recusada"
    agent = d.get("active_agent") or "—"
    confidence = _pct(d.get("confidence"))
    return f"continuidade: {d.get('decision')} ({confidence}, {verdict}; agente {agent})"


def _handoff(d: dict[str, Any]) -> str:
    support = {
        "available": "suporte disponível",
        "out_of_hours": "fora do horário: na fila",
        "none": "sem suporte: na fila",
    }.get(str(d.get("support")), str(d.get("support")))
    kind = f", {d['guard_kind']}" if d.get("guard_kind") else ""
    return f"pedido de pessoa ({d.get('source')}{kind}) — {support}"


def _agent(d: dict[str, Any]) -> str:
    if not d.get("agent"):
        return f"resposta sem agente ({d.get('outcome')})"
    tools = d.get("tool_calls") or []
    names = ", ".join(str(t.get("name")) for t in tools) if tools else "nenhuma ferramenta"
    return f"agente {d.get('agent')} respondeu ({d.get('outcome')}; {names})"


def _by(d: dict[str, Any]) -> str:
    return f" por {d['by']}" if d.get("by") else ""


_DECISIONS: Final[dict[str, Callable[[dict[str, Any]], str]]] = {
    "session.started": lambda d: "sessão iniciada",
    "session.closed": lambda d: f"sessão encerrada ({d.get('reason')}){_by(d)}",
    "session.closed_abnormally": lambda d: f"sessão encerrada com erro ({d.get('reason')})",
    "session.end.requested": lambda d: "o casal pediu para encerrar",
    "guard.preempted": lambda d: f"guard: {d.get('kind')}",
    "router.routed": _routed,
    "router.continuity": _continuity,
    "session.human_handoff.requested": _handoff,
    "session.human_handoff.expired": lambda d: "ninguém assumiu a tempo: de volta à mel",
    "support.claimed": lambda d: f"assumido{_by(d)}",
    "support.released": lambda d: f"devolvido à mel ({d.get('reason')}){_by(d)}",
    "agent.replied": _agent,
    "agent.failed": lambda d: f"falha do agente ({d.get('outcome')})",
    "message.failed": lambda d: f"mensagem não entregue ({d.get('reason') or d.get('error')})",
    "message.parked": lambda d: (
        f"modelo fora do ar: mensagem guardada (tentativa {d.get('attempt')})"
    ),
}


def transcript(events: Iterable[Envelope]) -> list[dict[str, Any]]:
    """``[{"id", "at", "kind": "message", "author", "text", "by"?, "delivered"?}`` or
    ``{"id", "at", "kind": "decision", "type", "text"}]``, in event order."""
    items: list[dict[str, Any]] = []
    support_replies: dict[str, dict[str, Any]] = {}
    for env in events:
        kind, data = str(env.get("type", "")), env.get("data") or {}
        base = {"id": env.get("id"), "at": env.get("at"), "type": kind}
        if kind in HIDDEN:
            continue
        if kind == "message.received":
            items.append(
                {**base, "kind": "message", "author": "couple", "text": data.get("text", "")}
            )
        elif kind == "support.replied":
            item = {
                **base,
                "kind": "message",
                "author": "support",
                "by": data.get("by"),
                "text": data.get("text", ""),
                "delivered": False,
            }
            support_replies[str(data.get("reply_id"))] = item
            items.append(item)
        elif kind == "message.sent":
            author = str(data.get("author", "bot"))
            if author.startswith("support"):
                replied = support_replies.get(str(data.get("in_reply_to")))
                if replied is not None:
                    replied["delivered"] = True
                continue
            items.append({**base, "kind": "message", "author": "mel", "text": data.get("text", "")})
        else:
            label = _DECISIONS.get(kind)
            items.append({**base, "kind": "decision", "text": label(data) if label else kind})
    return items
