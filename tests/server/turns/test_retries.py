"""A retry is known by the SDKs' `x-stainless-retry-count` or by an `Idempotency-Key`: the committed turn comes back
and the engine is not called again, in every dialect and streamed; a new key asks for a new sample."""

from __future__ import annotations

import re
from typing import Any

import anthropic
import httpx2
import pytest

from tests.server.conftest import Server
from tests.server.dialects.support import FIRST_TURNS
from tito.server.turns.retries import request_key


def test_the_idempotency_key_is_part_of_the_fingerprint_and_marks_a_retry() -> None:
    body = b'{"messages": []}'
    plain = request_key(body, {})
    assert not plain.is_retry
    assert request_key(body, {"x-stainless-retry-count": "2"}) == type(plain)(plain.fingerprint, True)
    assert not request_key(body, {"x-stainless-retry-count": "0"}).is_retry
    keyed = request_key(body, {"idempotency-key": "k1"})
    assert keyed.is_retry and keyed.fingerprint != plain.fingerprint
    assert request_key(body, {"idempotency-key": "k1", "x-stainless-retry-count": "1"}) == keyed
    assert request_key(body, {"idempotency-key": "k2"}).fingerprint != keyed.fingerprint


def post(server: Server, session_id: str, dialect: str, stream: bool, key: str) -> Any:
    path, body = FIRST_TURNS[dialect]
    url = f"/sessions/{session_id}/{path}"
    headers = {"Idempotency-Key": key}
    if not stream:
        response = server.http.post(url, json=body, headers=headers)
        assert response.status_code == 200, response.text
        return response.json()
    with server.http.stream("POST", url, json=body | {"stream": True}, headers=headers) as response:
        assert response.status_code == 200
        text = "".join(response.iter_text())
    found = RESPONSE_ID.search(text)  # a replayed stream may cut its deltas differently: the reply's id is the turn's
    assert found is not None, text[:500]
    return found.group(1)


RESPONSE_ID = re.compile(r'"id": ?"((?:chatcmpl|msg|resp)[-_][^"]+)"')


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("dialect", sorted(FIRST_TURNS))
def test_a_request_resent_with_its_idempotency_key_gets_the_committed_turn(
    server: Server, dialect: str, stream: bool
) -> None:
    session_id = server.new_session()
    first = post(server, session_id, dialect, stream, "key-1")
    calls = len(server.engine.requests)
    assert post(server, session_id, dialect, stream, "key-1") == first
    assert len(server.engine.requests) == calls, "a keyed retry was sampled again"
    post(server, session_id, dialect, stream, "key-2")  # the same conversation under a new key: a new sample
    assert len(server.engine.requests) == calls + 1


def test_the_anthropic_sdk_retry_after_a_lost_reply_gets_the_committed_message(server: Server) -> None:
    """The anthropic SDK retries a 5xx with `x-stainless-retry-count: 1`; the first try had committed."""
    session_id = server.new_session()
    calls = len(server.engine.requests)
    sent: list[httpx2.Request] = []

    def lose_first_reply(response: httpx2.Response) -> None:
        if len(sent) == 1:
            response.status_code = 502  # as a proxy answers when tito's reply was lost on the way back

    http = httpx2.Client(event_hooks={"request": [sent.append], "response": [lose_first_reply]})
    sdk = anthropic.Anthropic(base_url=f"{server.url}/sessions/{session_id}", api_key="unused", http_client=http)
    sdk = sdk.with_options(max_retries=1)
    reply = sdk.messages.create(model="m", max_tokens=64, messages=[{"role": "user", "content": "once"}])
    assert [request.headers["x-stainless-retry-count"] for request in sent] == ["0", "1"]
    assert len(server.engine.requests) == calls + 1, "the retry was sampled again"
    assert reply.content
