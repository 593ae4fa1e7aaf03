"""Routes, limits and security through a real uvicorn server: lifecycle, samples, metrics, API key, body size,
capacity, TTL, and the error body every failure shares."""

from __future__ import annotations

import re
import time

import openai
from starlette.routing import BaseRoute

from tests.server.conftest import Server, ServerFactory
from tests.server.turns.test_completions import converse
from tito.server import create_app
from tito.trajectory.codec import SAFETENSORS_MEDIA_TYPE, decode_safetensors


def test_session_lifecycle_create_describe_delete_then_410(server: Server) -> None:
    session_id = server.new_session()
    assert re.fullmatch(r"[0-9a-f]{32}", session_id)
    messages = converse(server, session_id, [[{"role": "user", "content": "hi"}]])
    described = server.http.get(f"/sessions/{session_id}").json()
    assert described["status"] == "live" and len(described["turns"]) == 1
    assert described["conversation"] == messages  # what a request must resend, as stored
    assert described["tokens"] == described["turns"][0]["prompt_tokens"] + described["sampled_tokens"]
    assert server.http.delete(f"/sessions/{session_id}").status_code == 204
    for method, path in [("GET", ""), ("DELETE", ""), ("POST", "/samples"), ("POST", "/v1/chat/completions")]:
        response = server.http.request(method, f"/sessions/{session_id}{path}", json={"messages": []})
        assert response.status_code == 410, (method, path)
        assert response.json()["error"]["type"] == "SessionGoneError"
    assert server.http.get(f"/sessions/{'f' * 32}").status_code == 404


def test_health_models_and_unknown_routes(server: Server) -> None:
    assert server.http.get("/health").json()["status"] == "ok"
    assert [m.id for m in openai.OpenAI(base_url=f"{server.url}/v1", api_key="x").models.list()] == ["instant"]
    missing = server.http.get("/nowhere")
    assert missing.status_code == 404 and "error" in missing.json()


def test_health_reports_an_engine_that_is_down_as_503_with_retry_after(serve: ServerFactory) -> None:
    down = serve()
    down.engine.fault = "down"
    response = down.http.get("/health")
    assert response.status_code == 503 and "connection refused" in response.json()["error"]["message"]
    assert response.headers["retry-after"] == "1"


def test_metrics_count_turns_tokens_latency_and_errors(serve: ServerFactory) -> None:
    fresh = serve()
    session_id = fresh.new_session()
    converse(fresh, session_id, [[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]])
    fresh.http.get(f"/sessions/{'0' * 32}")
    text = fresh.http.get("/metrics").text
    process = 'process="tito"'
    assert f"tito_turns_total{{{process}}} 2.0" in text
    assert f"tito_live_sessions{{{process}}} 1.0" in text
    assert f"tito_completion_tokens_total{{{process}}} {2.0 * len(fresh.engine.default_reply)}" in text
    assert (
        f"tito_added_seconds_count{{{process}}} 2.0" in text and f"tito_engine_seconds_count{{{process}}} 2.0" in text
    )
    assert f'tito_errors_total{{{process},type="SessionNotFoundError"}} 1.0' in text


def test_api_key_guards_every_route(serve: ServerFactory) -> None:
    """Every route the app has, every method, on a real session: 401 without the key and with a wrong one."""
    guarded = serve(api_key="s3cret")
    key = {"Authorization": "Bearer s3cret"}
    session_id = guarded.http.post("/sessions", headers=key).json()["session_id"]
    sdk = openai.OpenAI(base_url=guarded.chat_url(session_id), api_key="s3cret", max_retries=0)
    reply = sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].finish_reason == "stop" and reply.usage is not None
    assert reply.usage.completion_tokens == len(guarded.engine.default_reply)
    routes = [route for route in create_app(guarded.state).routes if isinstance(route, BaseRoute)]
    tried = 0
    for route in routes:
        path = getattr(route, "path", "").replace("{session_id}", session_id).replace("{node_id}", "0")
        for method in sorted(getattr(route, "methods", None) or ()):
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                response = guarded.http.request(method, path, headers=headers)
                assert response.status_code == 401, f"{method} {path}: {response.status_code}"
                if method != "HEAD":
                    assert response.json()["error"]["type"] == "UnauthorizedError"
            tried += 1
    assert tried >= 20, f"only {tried} routes found"
    assert guarded.http.get(f"/sessions/{session_id}", headers=key).json()["summary"]["turns"] == 1


def test_body_over_the_limit_is_413(serve: ServerFactory) -> None:
    small = serve(max_body_bytes=2_000)
    session_id = small.new_session()
    response = small.http.post(
        f"/sessions/{session_id}/v1/chat/completions", json={"messages": [{"role": "user", "content": "x" * 5_000}]}
    )
    assert response.status_code == 413 and response.json()["error"]["type"] == "BodyTooLargeError"
    assert small.http.get(f"/sessions/{session_id}").json()["turns"] == []


def test_max_sessions_is_503_with_the_remedy(serve: ServerFactory) -> None:
    capped = serve(max_sessions=2)
    first = capped.new_session()
    capped.new_session()
    refused = capped.http.post("/sessions")
    assert refused.status_code == 503 and "--max-sessions" in refused.json()["error"]["message"]
    capped.http.delete(f"/sessions/{first}")
    assert capped.http.post("/sessions").status_code == 200


def test_idle_sessions_expire_after_their_ttl(serve: ServerFactory) -> None:
    expiring = serve(session_ttl=0.3)
    kept, idle = expiring.new_session(), expiring.new_session()
    for _ in range(4):
        time.sleep(0.1)
        assert expiring.http.get(f"/sessions/{kept}").status_code == 200  # activity resets the clock
    time.sleep(0.3)
    response = expiring.http.get(f"/sessions/{idle}")
    assert response.status_code == 410 and "expired" in response.json()["error"]["message"]


def test_session_options_are_checked_at_creation(server: Server) -> None:
    bad_role = server.http.post("/sessions", json={"allowed_append_roles": ["wizard"]})
    assert bad_role.status_code == 400 and "wizard" in bad_role.json()["error"]["message"]
    bad_field = server.http.post("/sessions", json={"trajectory_shape": "spiral"})
    assert bad_field.status_code == 400 and "trajectory_shape" in bad_field.json()["error"]["message"]
    tree = server.http.post("/sessions", json={"trajectory": "tree"})
    assert tree.status_code == 200


def test_samples_json_and_safetensors_carry_the_same_sample(server: Server) -> None:
    session_id = server.new_session()
    converse(server, session_id, [[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]])
    url = f"/sessions/{session_id}/samples"
    body = {"metadata": {"reward": 0.5, "task": "t1", "turns": "client cannot override"}}
    as_json = server.http.post(url, json=body).json()["samples"][0]
    assert as_json["reward"] == 0.5 and as_json["status"] == "completed"
    assert as_json["metadata"]["task"] == "t1" and len(as_json["metadata"]["turns"]) == 2
    assert as_json["metadata"]["logprob_semantics"] == "after_temperature"
    turn = as_json["metadata"]["turns"][0]
    facts = {"finish_reason", "timings", "cached_tokens", "weight_versions", "sampling", "invalid_tool_calls"}
    assert facts <= set(turn)
    for request in [
        {"headers": {"Accept": SAFETENSORS_MEDIA_TYPE}},
        {"params": {"format": "safetensors"}},
    ]:
        response = server.http.post(url, json=body, **request)  # type: ignore[arg-type]
        assert response.headers["content-type"] == SAFETENSORS_MEDIA_TYPE
        (decoded,) = decode_safetensors(response.content)
        assert decoded.tokens.tolist() == as_json["tokens"]
        assert decoded.loss_mask.tolist() == as_json["loss_mask"]
        assert decoded.rollout_logprobs.tolist() == as_json["rollout_logprobs"]
        assert decoded.metadata == as_json["metadata"]


def test_samples_truncate_at_turn_boundaries_and_refuse_what_cannot_fit(server: Server) -> None:
    session_id = server.new_session()
    url = f"/sessions/{session_id}/samples"
    empty = server.http.post(url)
    assert empty.status_code == 422 and "no committed turns" in empty.json()["error"]["message"]
    converse(server, session_id, [[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]])
    whole = server.http.post(url).json()["samples"][0]
    first_turn_end = len(server.engine.requests[-2].prompt_ids) + len(server.engine.default_reply)
    cut = server.http.post(url, json={"max_seq_len": len(whole["tokens"]) - 1}).json()["samples"][0]
    assert cut["tokens"] == whole["tokens"][:first_turn_end]
    assert cut["status"] == "truncated" and cut["metadata"]["truncated_turns"] == 1
    nothing = server.http.post(url, json={"max_seq_len": 3})
    assert nothing.status_code == 422 and "max_seq_len=3" in nothing.json()["error"]["message"]
