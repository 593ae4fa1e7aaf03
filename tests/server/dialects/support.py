"""What the dialect tests share: scripted ids, a session's samples and turns, a client that hangs up mid-stream."""

from __future__ import annotations

import time
from typing import Any

from tests.server.conftest import Server
from tito.tokenizer_loading import LocalTokenizer


def ids_of(tokenizer: LocalTokenizer, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


def samples_of(server: Server, session_id: str) -> list[dict[str, Any]]:
    response = server.http.post(f"/sessions/{session_id}/samples")
    assert response.status_code == 200, response.text
    return list(response.json()["samples"])


def turns_of(server: Server, session_id: str) -> list[dict[str, Any]]:
    return list(server.http.get(f"/sessions/{session_id}").json()["turns"])


def hang_up_while_sampling(server: Server, path: str, body: dict[str, Any], marker: str) -> None:
    """Stream a turn, hang up at the first line that ends with `marker` (a delta: the engine is sampling), and
    wait until the server aborted the engine request."""
    with server.http.stream("POST", path, json=body) as response:
        for line in response.iter_lines():
            if line.endswith(marker):
                break
    request_id = server.engine.requests[-1].request_id
    deadline = time.monotonic() + 5
    while request_id not in server.engine.aborted and time.monotonic() < deadline:
        time.sleep(0.01)
    assert request_id in server.engine.aborted
    time.sleep(0.1)  # the stream's end, had it committed, would be recorded by now


FIRST_TURNS = {
    "chat": ("v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "once"}]}),
    "anthropic": ("v1/messages", {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "once"}]}),
    "responses": ("v1/responses", {"model": "m", "input": "once"}),
}
"""A session's first turn in each dialect: the route under the session and the body."""
