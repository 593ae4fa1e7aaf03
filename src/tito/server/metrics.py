"""Prometheus metrics of one server (its own registry, so two apps in one process do not collide).

Imports from tito: errors, server.access_log (a turn's facts go to the access log too).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from tito.errors import EngineError, TitoError
from tito.server.access_log import note_turn

_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class ServerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.live_sessions = Gauge("tito_live_sessions", "Sessions currently held", registry=self.registry)
        self.turns = Counter("tito_turns", "Committed turns", registry=self.registry)
        self.tokens_in = Counter("tito_prompt_tokens", "Prompt ids sent to the engine", registry=self.registry)
        self.tokens_out = Counter("tito_completion_tokens", "Ids sampled by the engine", registry=self.registry)
        self.engine_seconds = Histogram(
            "tito_engine_seconds", "Engine call latency", buckets=_LATENCY_BUCKETS, registry=self.registry
        )
        self.added_seconds = Histogram(
            "tito_added_seconds",
            "Latency tito adds to a turn (request to reply, less the engine call)",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.resends = Counter(
            "tito_resends",
            "Requests resending a session's stored conversation, by outcome: matched_exactly, matched_by_policy, "
            "branched, failed",
            ["outcome"],
            registry=self.registry,
        )
        self.resend_rules = Counter(
            "tito_resend_rules",
            "Resends that needed a matching-policy rule (tito.matching.HARNESS_RULES), by rule",
            ["rule"],
            registry=self.registry,
        )
        self.errors = Counter("tito_errors", "Error replies by type", ["type"], registry=self.registry)
        self.engine_faults = Counter(
            "tito_engine_faults",
            "Engine faults by engine and kind: each error reply an engine caused, and each failed abort",
            ["engine", "kind"],
            registry=self.registry,
        )

    def count_error(self, error: TitoError) -> None:
        """An error reply (a status or a stream's error event), and the engine's fault when an engine caused it."""
        self.errors.labels(type(error).__name__).inc()
        if isinstance(error, EngineError):
            self.engine_faults.labels(error.engine, error.fault).inc()

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
