"""The server's Prometheus metrics count what they are given, through the cached label children too."""

from __future__ import annotations

from tito.server.metrics import ServerMetrics


def test_a_labelled_counter_counts_each_label_value_apart_every_time() -> None:
    metrics = ServerMetrics("p")
    for outcome in ("branched", "failed", "branched"):
        metrics.resends.labels(outcome).inc()
    lines = metrics.render().decode().splitlines()
    assert 'tito_resends_total{outcome="branched",process="p"} 2.0' in lines
    assert 'tito_resends_total{outcome="failed",process="p"} 1.0' in lines
    assert metrics.resends.labels("failed") is metrics.resends.labels("failed")
