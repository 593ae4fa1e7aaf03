"""The server's Prometheus metrics count what they are given, through the cached label children too."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from tito.server.metrics import _LATENCY_BUCKETS, ServerMetrics


def test_a_labelled_counter_counts_each_label_value_apart_every_time() -> None:
    metrics = ServerMetrics("p")
    for outcome in ("branched", "failed", "branched"):
        metrics.resends.labels(outcome).inc()
    lines = metrics.render().decode().splitlines()
    assert 'tito_resends_total{outcome="branched",process="p"} 2.0' in lines
    assert 'tito_resends_total{outcome="failed",process="p"} 1.0' in lines
    assert metrics.resends.labels("failed") is metrics.resends.labels("failed")


def test_the_turn_series_render_as_prometheus_client_counters_and_histograms_do() -> None:
    """Turns are counted in plain numbers, and collected as the families prometheus_client's own classes give."""
    registry = CollectorRegistry()
    counters = [
        Counter(name, documentation, ["process"], registry=registry).labels("p")
        for name, documentation in (
            ("tito_turns", "Committed turns"),
            ("tito_prompt_tokens", "Prompt ids sent to the engine"),
            ("tito_completion_tokens", "Ids sampled by the engine"),
        )
    ]
    engine, added = (
        Histogram(name, documentation, ["process"], buckets=_LATENCY_BUCKETS, registry=registry).labels("p")
        for name, documentation in (
            ("tito_engine_seconds", "Engine call latency"),
            ("tito_added_seconds", "Latency tito adds to a turn (request to reply, less the engine call)"),
        )
    )
    metrics = ServerMetrics("p")
    for prompt, sampled, engine_seconds, total in ((35000, 200, 0.3, 0.302), (12, 1, 0.0005, 0.0005), (7, 0, 45, 99)):
        metrics.observe_turn(prompt, sampled, engine_seconds, total)
        for counter, amount in zip(counters, (1, prompt, sampled), strict=True):
            counter.inc(amount)
        engine.observe(engine_seconds)
        added.observe(total - engine_seconds)
    series = re.compile(
        r"(# (HELP|TYPE) )?tito_(turns|prompt_tokens|completion_tokens|engine_seconds|added_seconds)(_[a-z]+)?[{ ]"
    )
    rendered = [line for line in metrics.render().decode().splitlines() if series.match(line)]
    expected = generate_latest(registry).decode().splitlines()
    assert len(rendered) == len(expected) > 60
    for line, reference in zip(rendered, expected, strict=True):
        assert line.split()[:-1] == reference.split()[:-1]
        if "_created" not in line:  # when each was created differs by microseconds
            assert line == reference
