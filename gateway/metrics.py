"""Prometheus metrics of one process (its own registry, so several apps can coexist)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from agent import ChatMessage, LLMClient, LLMResponse

__all__ = ["MeteredLLM", "Metrics"]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.webhooks = Counter(
            "mel_webhooks", "Webhook deliveries by provider and HTTP status",
            ["provider", "status"], registry=r,
        )  # fmt: skip
        self.turns = Counter(
            "mel_turns", "Turns by outcome (preempt kind, agent, error, …)", ["outcome"], registry=r
        )
        self.turn_seconds = Histogram(
            "mel_turn_seconds",
            "Time from a message being stored to its turn committed",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=r,
        )
        self.llm_calls = Counter("mel_llm_calls", "LLM calls by profile", ["profile"], registry=r)
        self.llm_tokens = Counter(
            "mel_llm_tokens", "LLM tokens by profile and kind", ["profile", "kind"], registry=r
        )
        self.llm_cost = Counter(
            "mel_llm_cost_micro_usd", "Metered LLM cost (micro-USD) by profile", ["profile"],
            registry=r,
        )  # fmt: skip
        self.psychologist_analyses = Counter(
            "mel_psychologist_analyses",
            "Psychologist analyses by outcome (completed; failed: gave up; retried: a failed "
            "attempt that is tried again; skipped, discarded, exhausted) and tier (light, "
            "heavy; none when no model ran)",
            ["outcome", "tier"], registry=r,
        )  # fmt: skip
        self.psychologist_cost = Counter(
            "mel_psychologist_cost_micro_usd",
            "Metered cost of psychologist runs (micro-USD) by tier and model",
            ["tier", "model"], registry=r,
        )  # fmt: skip
        self.psychologist_tokens = Counter(
            "mel_psychologist_tokens", "Psychologist tokens by tier, model and kind",
            ["tier", "model", "kind"], registry=r,
        )  # fmt: skip
        self.replies = Counter(
            "mel_replies", "Replies by channel and outcome (sent, failed, uncertain)",
            ["channel", "status"], registry=r,
        )  # fmt: skip
        self.queue_depth = Gauge(
            "mel_queue_threads", "Threads with messages waiting or in progress", registry=r
        )
        self.queue_pending = Gauge(
            "mel_queue_pending", "Ready entries delivered to a worker, not yet finished", registry=r
        )
        self.feed_streams = Gauge(
            "mel_feed_streams", "Open /support/events streams in this process", registry=r
        )
        self.queue_lag = Gauge(
            "mel_queue_lag_seconds", "Age of the oldest unfinished ready entry", registry=r
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MeteredLLM:
    """LLMClient decorator: counts calls, tokens and cost per profile into the metrics."""

    def __init__(self, inner: LLMClient, metrics: Metrics) -> None:
        self.inner = inner
        self.metrics = metrics

    async def complete(
        self, profile: str, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> LLMResponse:
        self.metrics.llm_calls.labels(profile).inc()
        response = await self.inner.complete(profile, messages, **kwargs)
        usage = response.usage
        self.metrics.llm_tokens.labels(profile, "prompt").inc(usage.prompt_tokens)
        self.metrics.llm_tokens.labels(profile, "completion").inc(usage.completion_tokens)
        self.metrics.llm_cost.labels(profile).inc(usage.cost_micro_usd)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()
