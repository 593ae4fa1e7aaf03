"""`GET /load`: live sessions and turns in flight (a turn counts while the engine works on it): what a pool
places sessions by."""

from __future__ import annotations

import threading
import time

import httpx

from tests.server.conftest import Server


def test_load_counts_live_sessions_and_the_turns_in_flight(server: Server) -> None:
    before = server.http.get("/load").json()
    session_id = server.new_session()
    server.engine.delay = 0.5
    turn = threading.Thread(target=lambda: httpx.post(
        f"{server.chat_url(session_id)}/chat/completions", json={"messages": [{"role": "user", "content": "Hi"}]},
        timeout=10,
    ))  # fmt: skip
    turn.start()
    deadline = time.monotonic() + 5
    during = server.http.get("/load").json()
    while during["turns_in_flight"] == 0 and time.monotonic() < deadline:
        during = server.http.get("/load").json()
    turn.join(10)
    after = server.http.get("/load").json()
    assert during == {"sessions": before["sessions"] + 1, "turns_in_flight": 1, "ready": True}
    assert after["turns_in_flight"] == 0
