"""Prometheus metrics of one server (its own registry, so two apps in one process do not collide).

Every series carries a `process` label (`tito serve --process-name`, default `HOST:PORT`), so the metrics of several
tito processes behind one router stay apart when they are summed or scraped through the router.

Imports from tito: errors, server.access_log (a turn's facts go to the access log too).
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from itertools import accumulate

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import metrics as prometheus_metrics
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

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


class _TurnSeries:
    """What every committed turn counts (turns, prompt and sampled ids, engine and added latency) as one collector of
    plain numbers under one lock: prometheus_client's counters and histograms check, lock and walk their buckets in
    Python for each value (~10 us a turn). Collected as the very families those give (`_created` samples too,
    unless prometheus_client is told not to)."""

    _COUNTERS = (
        ("tito_turns", "Committed turns"),
        ("tito_prompt_tokens", "Prompt ids sent to the engine"),
        ("tito_completion_tokens", "Ids sampled by the engine"),
    )
    _HISTOGRAMS = (
        ("tito_engine_seconds", "Engine call latency"),
        ("tito_added_seconds", "Latency tito adds to a turn (request to reply, less the engine call)"),
    )
    _BOUNDS = (*map(floatToGoString, _LATENCY_BUCKETS), "+Inf")

    def __init__(self, process: str) -> None:
        self._process = process
        self._created = time.time()
        self._lock = threading.Lock()
        self._counts = [0.0] * len(self._COUNTERS)
        self._buckets = [[0.0] * len(self._BOUNDS) for _ in self._HISTOGRAMS]
        """Per histogram, the observations per bucket (not cumulative): the first bound each is at most."""
        self._sums = [0.0] * len(self._HISTOGRAMS)

    def observe(self, prompt_tokens: int, completion_tokens: int, engine_seconds: float, added_seconds: float) -> None:
        engine_bucket = bisect_left(_LATENCY_BUCKETS, engine_seconds)
        added_bucket = bisect_left(_LATENCY_BUCKETS, added_seconds)
        with self._lock:
            counts, buckets, sums = self._counts, self._buckets, self._sums
            counts[0] += 1.0
            counts[1] += prompt_tokens
            counts[2] += completion_tokens
            buckets[0][engine_bucket] += 1.0
            buckets[1][added_bucket] += 1.0
            sums[0] += engine_seconds
            sums[1] += added_seconds

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            counts, buckets, sums = list(self._counts), [list(counted) for counted in self._buckets], list(self._sums)
        created = self._created if prometheus_metrics._use_created else None
        for (name, documentation), value in zip(self._COUNTERS, counts, strict=True):
            counter = CounterMetricFamily(name, documentation, labels=["process"])
            counter.add_metric([self._process], value, created)
            yield counter
        for (name, documentation), counted, total in zip(self._HISTOGRAMS, buckets, sums, strict=True):
            histogram = HistogramMetricFamily(name, documentation, labels=["process"])
            histogram.add_metric([self._process], list(zip(self._BOUNDS, accumulate(counted), strict=True)), total)
            if created is not None:
                histogram.samples.append(Sample(f"{name}_created", {"process": self._process}, created))
            yield histogram


class ServerMetrics:
    def __init__(self, process: str = "tito") -> None:
        self.process = process
        self.registry = CollectorRegistry()
        self.live_sessions = self.gauge("tito_live_sessions", "Sessions currently held")
        self._turns = _TurnSeries(process)
        self.registry.register(self._turns)
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

    def histogram(self, name: str, documentation: str, buckets: tuple[float, ...]) -> Histogram:
        metric = Histogram(name, documentation, ["process"], buckets=buckets, registry=self.registry)
        return metric.labels(self.process)

    def observe_turn(
        self, prompt_tokens: int, completion_tokens: int, engine_seconds: float, total_seconds: float
    ) -> None:
        """A committed turn (whole-reply or streamed): its ids, engine time and the time tito added; also noted
        for the request's access-log line."""
        note_turn(prompt_tokens, completion_tokens, engine_seconds)
        self._turns.observe(prompt_tokens, completion_tokens, engine_seconds, total_seconds - engine_seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
