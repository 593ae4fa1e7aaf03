"""An ended session is released at the engine URL's `/finish_session` (vllm-router's route); an engine or router
without it answers 404 once and is not asked again, and nothing fails. The engine requests carry the session as
`X-Session-ID`. The real routers: tests/server/test_routers.py (marker `routers`)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.engines.fake_engine import FakeServer
from tests.engines.servers import start_fake
from tito.engines.sglang import SGLangEngine
from tito.engines.vllm import VLLMEngine
from tito.server import ServerOptions, ServerState, create_app
from tito.server.commands.launch import instant_reply_ids
from tito.server.commands.running import serve_in_thread
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import LocalTokenizer


@pytest.fixture(scope="module", params=["sglang", "vllm"])
def engine_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, FakeServer]]:
    fake, thread = start_fake(request.param)
    try:
        yield request.param, fake
    finally:
        thread.stop()


def test_a_server_without_the_release_route_is_asked_once_and_the_turns_carry_the_session(
    engine_server: tuple[str, FakeServer], qwen3_tokenizer: LocalTokenizer
) -> None:
    kind, fake = engine_server
    fake.reset()
    fake.behaviour.reply_ids = instant_reply_ids(get_tito_tokenizer(qwen3_tokenizer, "qwen3"))
    engine = SGLangEngine(fake.url, model="tiny") if kind == "sglang" else VLLMEngine(fake.url, model="tiny")
    state = ServerState(qwen3_tokenizer, engine, ServerOptions(family="qwen3"))
    with serve_in_thread(create_app(state)) as url:
        sessions = [httpx.post(f"{url}/sessions").json()["session_id"] for _ in range(3)]
        for session_id in sessions:
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            assert httpx.post(f"{url}/sessions/{session_id}/v1/chat/completions", json=body).status_code == 200
        assert [sent.headers.get("x-session-id") for sent in fake.requests] == sessions
        for session_id in sessions:
            assert httpx.delete(f"{url}/sessions/{session_id}").status_code == 204
        deadline = time.monotonic() + 5
        while 'tito_router_releases_total{outcome="no_route"' not in (metrics := httpx.get(f"{url}/metrics").text):
            assert time.monotonic() < deadline, metrics
            time.sleep(0.02)
        time.sleep(0.1)  # later releases, had they been sent, would have arrived by now
    asked = [sent.body for sent in fake.requests if sent.path == "/finish_session"]
    assert asked == [{"session_id": sessions[0]}], "asked again after a 404"
    released = [line for line in metrics.splitlines() if line.startswith("tito_router_releases_total{")]
    assert released == ['tito_router_releases_total{outcome="no_route",process="tito"} 3.0']
