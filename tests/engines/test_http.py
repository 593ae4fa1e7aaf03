"""The shared HTTP plumbing: the engine's own words out of every error body shape, named missing fields, and the
mapping of an engine's status to the client's (only a refusal of the request's content stays a 4xx)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tito.engines.http import HttpEngineClient, engine_words, require
from tito.errors import (
    EngineError,
    EngineRequestError,
    EngineResponseError,
    EngineTimeoutError,
    EngineUnavailableError,
)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"error": {"message": "Token id 999999 is out of vocabulary", "code": 400}}', "Token id 999999"),
        (b'{"message": "prompt too long"}', "prompt too long"),
        (b'{"detail": [{"loc": ["body", "input_ids"], "msg": "field required"}]}', "field required"),
        (b'{"error": "overloaded"}', "overloaded"),
        (b"Internal Server Error", "Internal Server Error"),
        (b"", "(empty body)"),
    ],
)
def test_the_engines_words_come_out_of_every_error_body_shape(body: bytes, words: str):
    assert words in engine_words(body)


def test_a_missing_field_names_the_field_where_it_was_expected_and_what_was_there():
    with pytest.raises(EngineResponseError, match=r"no choices\[0\]\.token_ids \(got \['index', 'text'\]\)"):
        require("vllm", {"index": 0, "text": ""}, "token_ids", "choices[0]")
    with pytest.raises(EngineResponseError, match="got list"):
        require("sglang", [1, 2], "meta_info", "")


def test_a_body_that_is_not_json_is_an_engine_response_error_quoting_it():
    client = HttpEngineClient("sglang", "http://127.0.0.1:1", timeout=1)
    with pytest.raises(EngineResponseError, match="/generate: reply is not JSON: b'<html>502 Bad Gateway"):
        client.decode("/generate", b"<html>502 Bad Gateway</html>")
    asyncio.run(client.aclose())


@pytest.mark.parametrize(("status", "error", "client_status", "fault"), [
    (400, EngineRequestError, 400, "refused"),
    (413, EngineRequestError, 400, "refused"),
    (422, EngineRequestError, 400, "refused"),
    (401, EngineResponseError, 502, "status_4xx"),
    (404, EngineResponseError, 502, "not_found"),
    (405, EngineResponseError, 502, "not_found"),
    (408, EngineTimeoutError, 504, "timeout"),
    (429, EngineUnavailableError, 503, "unavailable"),
    (500, EngineResponseError, 502, "status_5xx"),
    (503, EngineUnavailableError, 503, "unavailable"),
    (504, EngineTimeoutError, 504, "timeout"),
])  # fmt: skip
def test_only_a_refusal_of_the_requests_content_is_a_4xx_for_the_client(
    status: int, error: type[EngineError], client_status: int, fault: str
):
    client = HttpEngineClient("sglang", "http://127.0.0.1:1", timeout=1)
    with pytest.raises(error, match=f"engine 'sglang' \\(HTTP {status}\\): /generate: the engine's words") as raised:
        client.raise_for_status("/generate", httpx.Response(status, json={"error": {"message": "the engine's words"}}))
    assert (raised.value.http_status, raised.value.fault, raised.value.engine_status) == (client_status, fault, status)
    assert (raised.value.retry_after is not None) == (client_status == 503)
    asyncio.run(client.aclose())
