"""The shared HTTP plumbing: the engine's own words out of every error body shape, and named missing fields."""

from __future__ import annotations

import asyncio

import pytest

from tito.engines.http import HttpEngineClient, engine_words, require
from tito.errors import EngineResponseError


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
