"""The server's probes: `GET /health` (the engine answers; 503 once a shared journal's lease is lost), `GET /ready`
(for a load balancer: 503 while journals are replayed) and `GET /metrics` (Prometheus).

Imports from tito: server.replies, server.scaleout.ownership, server.state.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from tito.server.replies import json_response
from tito.server.scaleout.ownership import SharedJournalOwner
from tito.server.state import ServerState


def probe_routes(state: ServerState, owner: SharedJournalOwner | None) -> APIRouter:
    router = APIRouter()

    @router.get("/health")
    async def health() -> Response:
        if owner is not None and owner.lease_lost:
            return json_response({"status": "lease lost: this process serves no sessions; restart it"}, 503)
        await state.engine.health()
        return json_response({"status": "ok", "sessions": len(state.registry)})

    @router.get("/ready")
    async def ready() -> Response:
        """For a load balancer: 503 while this process replays journals on start or after losing its lease."""
        if owner is not None and not owner.serving:
            return json_response({"ready": False, "lease_lost": owner.lease_lost}, 503)
        return json_response({"ready": True})

    @router.get("/metrics")
    async def prometheus() -> Response:
        state.metrics.live_sessions.set(len(state.registry))
        return Response(state.metrics.render(), media_type="text/plain; version=0.0.4")

    return router
