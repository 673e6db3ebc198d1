"""Prometheus metrics of one process (its own registry, so several apps can coexist)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agent import ChatMessage, LLMClient, LLMResponse

if TYPE_CHECKING:
    from agent.llm_pool import LLMStats
    from gateway.store.pool import MeteredPool
    from gateway.workers.admission import Admission

__all__ = ["MeteredLLM", "Metrics", "Sampler"]

Sampler = Callable[[], Iterable[Metric]]
"""Reads a component's own counters when the metrics are scraped (nothing on the hot path)."""


class _Sampled(Collector):
    def __init__(self) -> None:
        self.samplers: list[Sampler] = []

    def collect(self) -> Iterable[Metric]:
        for sample in self.samplers:
            yield from sample()


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
        self._sampled = _Sampled()
        r.register(self._sampled)

    def sample(self, sampler: Sampler) -> None:
        """Add ``sampler``'s metrics to every scrape."""
        self._sampled.samplers.append(sampler)

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


def gauge(name: str, doc: str, value: float) -> Metric:
    family = GaugeMetricFamily(name, doc)
    family.add_metric([], value)
    return family


def counter(name: str, doc: str, value: float) -> Metric:
    family = CounterMetricFamily(name, doc)
    family.add_metric([], value)
    return family


def redis_pool_metrics(pool: MeteredPool) -> list[Metric]:
    connections = GaugeMetricFamily(
        "mel_redis_pool_connections", "Redis connections of this process by state", labels=["state"]
    )
    connections.add_metric(["in_use"], pool.in_use)
    connections.add_metric(["idle"], pool.idle)
    connections.add_metric(["max"], pool.max_connections)
    return [
        connections,
        counter("mel_redis_pool_waits", "Redis calls that waited for a free connection",
                pool.waits),
        counter("mel_redis_pool_wait_seconds", "Time Redis calls spent waiting for a connection",
                pool.wait_seconds),
        counter("mel_redis_pool_exhausted", "Redis calls that found no free connection in time",
                pool.exhausted),
    ]  # fmt: skip


def admission_metrics(lag: Admission) -> list[Metric]:
    return [
        gauge("mel_event_loop_lag_seconds", "How late the event loop runs a timer", lag.lag),
        counter("mel_admission_paused", "Turns that waited to start (a lagging loop, a "
                "burst of webhook deliveries)",
                lag.pauses),
        counter("mel_admission_paused_seconds", "Time turns waited to start",
                lag.paused_seconds),
    ]  # fmt: skip


def llm_pool_metrics(stats: LLMStats) -> list[Metric]:
    """Per profile: calls on the wire and waiting; per endpoint: the pool's size and use;
    the waits since start (a call waits only when every connection is taken)."""
    families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
        "in_flight": GaugeMetricFamily(
            "mel_llm_in_flight", "LLM calls holding a connection", labels=["profile"]
        ),
        "waiting": GaugeMetricFamily(
            "mel_llm_pool_waiting", "LLM calls waiting for a connection", labels=["profile"]
        ),
        "waits": CounterMetricFamily(
            "mel_llm_pool_waits", "LLM calls that waited for a connection", labels=["profile"]
        ),
        "wait_seconds": CounterMetricFamily(
            "mel_llm_pool_wait_seconds", "Time LLM calls waited for a connection",
            labels=["profile"],
        ),
        "pool_timeouts": CounterMetricFamily(
            "mel_llm_pool_timeouts", "LLM calls that found no connection in time",
            labels=["profile"],
        ),
    }  # fmt: skip
    for profile, p in stats.profiles.items():
        for name, family in families.items():
            family.add_metric([profile], getattr(p, name))
    size = GaugeMetricFamily(
        "mel_llm_pool_connections", "LLM connections by endpoint and state",
        labels=["endpoint", "state"],
    )  # fmt: skip
    for pool in stats.pools:
        size.add_metric([pool.endpoint, "in_use"], pool.in_use)
        size.add_metric([pool.endpoint, "max"], pool.max_connections)
    return [*families.values(), size]
