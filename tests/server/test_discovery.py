"""A new user's wrong turns get directions: the model list on a session's base URL, a 404 naming the way in for
OpenAI paths without a session, a 405 on GET /samples saying to POST."""

from __future__ import annotations

import openai
import pytest

from tests.server.conftest import Server
from tests.server.turns.test_completions import converse
from tito.server.discovery import SESSIONLESS_OPENAI_PATHS


def test_the_openai_sdk_lists_models_on_a_sessions_base_url(server: Server) -> None:
    session_id = server.new_session()
    client = openai.OpenAI(base_url=f"{server.url}/sessions/{session_id}/v1", api_key="x")
    assert [model.id for model in client.models.list()] == ["instant"]
    assert server.http.get("/sessions/nope/v1/models").status_code == 404
    server.http.delete(f"/sessions/{session_id}")
    assert server.http.get(f"/sessions/{session_id}/v1/models").status_code == 410


def test_an_sdk_pointed_at_the_server_root_is_told_to_create_a_session(server: Server) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.NotFoundError) as error:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert "create a session with POST /sessions, then use /sessions/{id}/v1" in str(error.value)
    for path in SESSIONLESS_OPENAI_PATHS:
        response = server.http.post(path, json={})
        assert response.status_code == 404, path
        assert response.json()["error"]["message"].startswith(f"{path} needs a session: create a session")


def test_get_on_samples_is_a_405_saying_to_post(server: Server) -> None:
    session_id = server.new_session()
    converse(server, session_id, [[{"role": "user", "content": "hi"}]])
    response = server.http.get(f"/sessions/{session_id}/samples")
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    message = response.json()["error"]["message"]
    assert f"POST /sessions/{session_id}/samples" in message and "reward" in message and "max_seq_len" in message
    assert len(server.http.post(f"/sessions/{session_id}/samples").json()["samples"]) == 1
