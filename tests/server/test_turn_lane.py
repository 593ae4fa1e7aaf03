"""The turn lane: the three turn routes are answered from the middlewares, past FastAPI's router, with every error
(a TitoError, an unexpected one) in the route's own dialect and counted, and every other request left to FastAPI."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute

from tests.server.conftest import ScriptedEngine
from tito.server import ServerOptions, ServerState, create_app
from tito.server.commands.launch import instant_reply_ids
from tito.server.commands.running import serve_in_thread
from tito.server.turn_lane import SHAPES, turn_endpoints
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import LocalTokenizer

BODIES: dict[str, dict[str, Any]] = {
    "chat/completions": {"messages": [{"role": "user", "content": "hi"}]},
    "messages": {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]},
    "responses": {"model": "m", "input": "hi"},
}


@pytest.fixture(scope="module")
def lane_only(qwen3_tokenizer: LocalTokenizer) -> Iterator[tuple[httpx.Client, ServerState]]:
    """A server whose app lost its turn routes from FastAPI's router after the lane took their endpoints: only the
    lane can answer a turn."""
    engine = ScriptedEngine(instant_reply_ids(get_tito_tokenizer(qwen3_tokenizer, "qwen3")))
    state = ServerState(qwen3_tokenizer, engine, ServerOptions(family="qwen3"))
    app = create_app(state)
    turn_paths = {f"/sessions/{{session_id}}/v1/{route}" for route in SHAPES}
    app.router.routes[:] = [
        route for route in app.router.routes if not (isinstance(route, APIRoute) and route.path in turn_paths)
    ]
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=10) as http:
        yield http, state


@pytest.mark.parametrize("route", list(BODIES))
def test_every_turn_route_is_answered_by_the_lane_without_fastapis_router(
    lane_only: tuple[httpx.Client, ServerState], route: str
) -> None:
    http, _ = lane_only
    session_id = http.post("/sessions").json()["session_id"]
    reply = http.post(f"/sessions/{session_id}/v1/{route}", json=BODIES[route])
    assert reply.status_code == 200, reply.text
    assert len(http.get(f"/sessions/{session_id}").json()["turns"]) == 1  # the router still serves the other routes


@pytest.mark.parametrize("route", list(BODIES))
def test_an_unexpected_failure_in_a_turn_is_a_500_in_the_routes_dialect_and_counted(
    lane_only: tuple[httpx.Client, ServerState], route: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    http, state = lane_only
    session_id = http.post("/sessions").json()["session_id"]

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("scripted failure")

    monkeypatch.setattr(state.registry, "get", broken)
    before = state.metrics.errors.labels("InternalError")._value.get()
    reply = http.post(f"/sessions/{session_id}/v1/{route}", json=BODIES[route])
    assert reply.status_code == 500
    body = reply.json()
    assert "RuntimeError: scripted failure" in str(body)
    if route == "messages":
        assert body["type"] == "error" and body["error"]["type"] == "api_error"
    else:
        assert body["error"]["type"] == "InternalError"
    assert state.metrics.errors.labels("InternalError")._value.get() == before + 1


def test_an_app_without_a_turn_route_is_refused_when_built() -> None:
    with pytest.raises(RuntimeError, match="no POST route for"):
        turn_endpoints([])
