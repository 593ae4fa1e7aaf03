"""How each session's resent conversations matched the stored one: exactly, under its matching policy (and which
rules), by branching, or not at all; counted per session (`GET /sessions/{id}`) and in the server's metrics.

A resend is a chat request on a session that already holds a turn (an SDK retry answered from the record is not
one). Counted when its prompt is built, whether or not the engine call then succeeds; in memory only (a restarted
server counts from zero).

Imports from tito: server.metrics, trajectory.base.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tito.server.metrics import ServerMetrics
from tito.trajectory.base import TurnPlan


@dataclass
class ResendCounts:
    """One session's counts; every resend is in exactly one of the four outcomes."""

    matched_exactly: int = 0
    """Extended the stored conversation, every resent message as stored (under `strict`'s equivalences)."""
    matched_by_policy: int = 0
    """Extended the stored conversation, needing at least one of the policy's rules (`rules` says which)."""
    branched: int = 0
    """Left the stored conversation: a linear retry of the last turn, or a new tree branch or root."""
    failed: int = 0
    """Refused: the request rewrites the stored conversation in a way the policy does not accept (400)."""
    rules: Counter[str] = field(default_factory=Counter)
    """Per rule, the resends that needed it (a resend may need several, also when it branched)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "matched_exactly": self.matched_exactly,
            "matched_by_policy": self.matched_by_policy,
            "branched": self.branched,
            "failed": self.failed,
            "rules": dict(sorted(self.rules.items())),
        }


def count_resend(counts: ResendCounts, metrics: ServerMetrics, plan: TurnPlan | None) -> None:
    """Count one planned turn (None: a resend refused as not matching); a first turn or SDK retry counts nothing."""
    if plan is None:
        outcome = "failed"
    elif plan.resend is None:
        return
    elif plan.branched:
        outcome = "branched"
    else:
        outcome = "matched_by_policy" if plan.resend.rules else "matched_exactly"
    setattr(counts, outcome, getattr(counts, outcome) + 1)
    metrics.resends.labels(outcome).inc()
    for rule in plan.resend.rules if plan is not None and plan.resend is not None else ():
        counts.rules[rule] += 1
        metrics.resend_rules.labels(rule).inc()
