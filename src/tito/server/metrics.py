"""Prometheus metrics of one server (its own registry, so two apps in one process do not collide).

Every series carries a `process` label (`tito serve --process-name`, default `HOST:PORT`), so the metrics of several
tito processes behind one router stay apart when they are summed or scraped through the router.

Imports from tito: errors, server.access_log (a turn's facts go to the access log too).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric

from tito.errors import EngineError, TitoError
from tito.server.access_log import note_turn

_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_DRAIN_BUCKETS = (0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class _ByLabel:
    """A counter labelled by process and its other labels, used as `errors.labels(value).inc()`."""

    def __init__(self, counter: Counter, process: str) -> None:
        self._counter = counter
        self._process = process
        self._children: dict[tuple[str, ...], Counter] = {}
        """Label values -> the counter's child: prometheus_client's `labels` checks and locks on every call, and a
        turn counts its resend (children are never removed)."""

    def labels(self, *values: str) -> Counter:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._counter.labels(self._process, *values)
        return child

    def collect(self) -> Iterable[Metric]:
        return self._counter.collect()


class ServerMetrics:
    def __init__(self, process: str = "tito") -> None:
        self.process = process
        self.registry = CollectorRegistry()
        self.live_sessions = self.gauge("tito_live_sessions", "Sessions currently held")
        self.turns = self.counter("tito_turns", "Committed turns")
        self.tokens_in = self.counter("tito_prompt_tokens", "Prompt ids sent to the engine")
        self.tokens_out = self.counter("tito_completion_tokens", "Ids sampled by the engine")
        self.engine_seconds = self.histogram("tito_engine_seconds", "Engine call latency")
        self.added_seconds = self.histogram(
            "tito_added_seconds", "Latency tito adds to a turn (request to reply, less the engine call)"
        )
        self.resends = _ByLabel(
            Counter(
                "tito_resends",
                "Requests resending a session's stored conversation, by outcome: matched_exactly, matched_by_policy, "
                "branched, failed",
                ["process", "outcome"],
                registry=self.registry,
            ),
            process,
        )
        self.resend_rules = _ByLabel(
            Counter(
                "tito_resend_rules",
                "Resends that needed a matching-policy rule (tito.matching.HARNESS_RULES), by rule",
                ["process", "rule"],
                registry=self.registry,
            ),
            process,
        )
        self.turns_held = self.counter("tito_turns_held", "Turns held at the gate while paused (`hold` mode)")
        self.paused_seconds = self.counter("tito_paused_seconds", "Seconds turns were paused for weight updates")
        self.drain_seconds = self.histogram(
            "tito_drain_seconds", "Seconds a drain waited for the turns in flight to end", _DRAIN_BUCKETS
        )
        releases = Counter(
            "tito_router_releases",
            "Ended sessions released at the router in front of the engines, by outcome: released, no_route, failed",
            ["process", "outcome"],
            registry=self.registry,
        )
        self.router_releases = _ByLabel(releases, process)
        errors = Counter("tito_errors", "Error replies by type", ["process", "type"], registry=self.registry)
        self.errors = _ByLabel(errors, process)
        engine_faults = Counter(
            "tito_engine_faults",
            "Engine faults by engine and kind: each error reply an engine caused, and each failed abort",
            ["process", "engine", "kind"],
            registry=self.registry,
        )
        self.engine_faults = _ByLabel(engine_faults, process)

    def count_error(self, error: TitoError) -> None:
        """An error reply (a status or a stream's error event), and the engine's fault when an engine caused it."""
        self.errors.labels(type(error).__name__).inc()
        if isinstance(error, EngineError):
            self.engine_faults.labels(error.engine, error.fault).inc()

    def gauge(self, name: str, documentation: str) -> Gauge:
        """A gauge of this process (its `process` label set), in this server's registry."""
        return Gauge(name, documentation, ["process"], registry=self.registry).labels(self.process)

    def counter(self, name: str, documentation: str) -> Counter:
        return Counter(name, documentation, ["process"], registry=self.registry).labels(self.process)

    def histogram(self, name: str, documentation: str, buckets: tuple[float, ...] = _LATENCY_BUCKETS) -> Histogram:
        metric = Histogram(name, documentation, ["process"], buckets=buckets, registry=self.registry)
        return metric.labels(self.process)

    def observe_turn(
        self, prompt_tokens: int, completion_tokens: int, engine_seconds: float, total_seconds: float
    ) -> None:
        """A committed turn (whole-reply or streamed): its ids, engine time and the time tito added; also noted
        for the request's access-log line."""
        note_turn(prompt_tokens, completion_tokens, engine_seconds)
        self.turns.inc()
        self.tokens_in.inc(prompt_tokens)
        self.tokens_out.inc(completion_tokens)
        self.engine_seconds.observe(engine_seconds)
        self.added_seconds.observe(total_seconds - engine_seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
