"""Release an ended session at the router in front of the engines, so the router's sticky table does not grow
without bound.

vllm-router's `sticky_least_loaded` policy pins each new session (its `X-Session-ID`) to the least loaded worker and
keeps the pin until `POST /finish_session?session_id=ID` (or its own expiry); tito sends that when a session ends
here: deleted, expired, found ended when taken over from a dead process, or its samples taken with `"end": true`.
A release runs in the background and never fails anything: an engine without a router in front, or a router
without the route (the SGLang Model Gateway), answers 404 once and is not asked again; any other failure is logged
and counted (`tito_router_releases{outcome}`).

Imports from tito: engines.protocol, server.metrics.
"""

from __future__ import annotations

import asyncio
import logging

from tito.engines.protocol import Engine, SessionReleasing
from tito.server.metrics import ServerMetrics

logger = logging.getLogger(__name__)


class RouterRelease:
    """Called with the id of each session that ended; releases it at the router in the background."""

    def __init__(self, engine: Engine, metrics: ServerMetrics, timeout: float = 5.0) -> None:
        self.engine = engine if isinstance(engine, SessionReleasing) else None
        self.metrics = metrics
        self.timeout = timeout
        self._pending: set[asyncio.Task[None]] = set()

    def __call__(self, session_id: str) -> None:
        if self.engine is None:
            return
        task = asyncio.get_running_loop().create_task(self._release(self.engine, session_id))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _release(self, engine: SessionReleasing, session_id: str) -> None:
        try:
            released = await asyncio.wait_for(engine.release_session(session_id), self.timeout)
        except Exception as exc:
            logger.warning("releasing session %s at the router failed: %s: %s", session_id, type(exc).__name__, exc)
            self.metrics.router_releases.labels("failed").inc()
            return
        self.metrics.router_releases.labels("released" if released else "no_route").inc()
