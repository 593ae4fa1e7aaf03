"""OpenAI `logprobs` / `top_logprobs` on chat completions, through the openai SDK: whole and streamed replies
carry the engine's own logprobs per sampled id (the ones the sample records), top-k where the engine gives them,
and a 400 naming the field where it cannot."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import openai
import pytest

from tests.engines.fake_engine import scripted_top_logprobs
from tests.engines.servers import start_fake
from tests.server.conftest import Server
from tito.engines.sglang import SGLangEngine
from tito.server import ServerOptions, ServerState, create_app
from tito.server.commands.running import serve_in_thread
from tito.server.turns.logprobs import token_bytes
from tito.tokenizer_loading import LocalTokenizer

USER = [{"role": "user", "content": "What is 6 * 7? Answer with ünïcödé."}]


def client(server: Server, session_id: str, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.chat_url(session_id), api_key="x", **options)


def sampled(server: Server, session_id: str) -> tuple[list[int], list[float]]:
    """The last turn's sampled ids and logprobs, as the training sample records them."""
    sample = server.http.post(f"/sessions/{session_id}/samples").json()["samples"][0]
    count = server.http.get(f"/sessions/{session_id}").json()["turns"][-1]["completion_tokens"]
    return sample["tokens"][-count:], sample["rollout_logprobs"][-count:]


def test_a_whole_reply_carries_each_sampled_ids_logprob_text_and_bytes(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    session_id = server.new_session()
    reply = client(server, session_id).chat.completions.create(model="m", messages=USER, logprobs=True)
    assert reply.choices[0].logprobs is not None and reply.choices[0].logprobs.content is not None
    content = reply.choices[0].logprobs.content
    ids, logprobs = sampled(server, session_id)
    assert [entry.logprob for entry in content] == pytest.approx(logprobs, abs=0) and len(content) == len(ids)
    assert b"".join(bytes(entry.bytes or []) for entry in content) == qwen3_tokenizer.decode(ids).encode()
    assert all(entry.top_logprobs == [] for entry in content)
    plain = client(server, server.new_session()).chat.completions.create(model="m", messages=USER)
    assert plain.choices[0].logprobs is None


def test_a_streamed_reply_carries_the_same_logprobs_chunk_by_chunk(server: Server) -> None:
    whole_session, streamed_session = server.new_session(), server.new_session()
    whole = client(server, whole_session).chat.completions.create(
        model="m", messages=USER, logprobs=True, top_logprobs=1
    )
    stream = client(server, streamed_session).chat.completions.create(
        model="m", messages=USER, logprobs=True, top_logprobs=1, stream=True
    )
    entries = [entry for chunk in stream if chunk.choices and chunk.choices[0].logprobs
               for entry in chunk.choices[0].logprobs.content or []]  # fmt: skip
    assert whole.choices[0].logprobs is not None
    expected = whole.choices[0].logprobs.content or []
    assert [e.model_dump() for e in entries] == [e.model_dump() for e in expected] and entries
    assert [e.logprob for e in entries] == sampled(server, streamed_session)[1]
    # the instant engine's script is its only candidate: the top list is the sampled token itself
    assert all([(t.token, t.logprob) for t in e.top_logprobs] == [(e.token, e.logprob)] for e in entries)


def test_an_sdk_retry_of_a_committed_turn_gets_the_stored_logprobs(server: Server) -> None:
    session_id = server.new_session()
    body = {"messages": USER, "logprobs": True}
    first = server.http.post(f"/sessions/{session_id}/v1/chat/completions", json=body).json()
    retried = server.http.post(
        f"/sessions/{session_id}/v1/chat/completions", json=body, headers={"x-stainless-retry-count": "1"}
    ).json()
    assert retried["id"] == first["id"] and retried["choices"][0]["logprobs"] == first["choices"][0]["logprobs"]


def test_a_streamed_sdk_retry_of_a_committed_turn_streams_the_stored_logprobs_again(server: Server) -> None:
    session_id = server.new_session()
    url, body = f"/sessions/{session_id}/v1/chat/completions", {"messages": USER, "logprobs": True, "stream": True}

    def streamed(headers: dict[str, str]) -> tuple[set[str], list[dict[str, Any]]]:
        text = server.http.post(url, json=body, headers=headers).text
        chunks = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
        entries = [
            e for c in chunks for choice in c["choices"] for e in (choice.get("logprobs") or {}).get("content", [])
        ]
        return {c["id"] for c in chunks}, entries

    first = streamed({})
    again = streamed({"x-stainless-retry-count": "1"})
    assert again == first and len(first[0]) == 1, "the retry replays the committed turn (same response id)"
    assert [e["logprob"] for e in again[1]] == sampled(server, session_id)[1]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"top_logprobs": 2}, "top_logprobs=2 needs logprobs: true"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ],
)
def test_a_top_logprobs_request_that_cannot_be_met_is_a_400_naming_the_field(
    server: Server, body: dict[str, Any], words: str
) -> None:
    session_id = server.new_session()
    response = server.http.post(f"/sessions/{session_id}/v1/chat/completions", json={"messages": USER, **body})
    assert response.status_code == 400 and words in response.json()["error"]["message"]
    assert server.http.get(f"/sessions/{session_id}").json()["turns"] == []


def test_an_engine_without_top_logprobs_is_a_400_naming_the_engine(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    inner = server.engine.inner
    monkeypatch.setattr(inner, "_info", replace(inner.info, max_top_logprobs=0))
    with pytest.raises(openai.BadRequestError, match="top_logprobs=3: the instant engine returns none per token"):
        client(server, server.new_session(), max_retries=0).chat.completions.create(
            model="m", messages=USER, logprobs=True, top_logprobs=3
        )


@pytest.fixture(scope="module")
def sglang_backed(qwen3_tokenizer: LocalTokenizer) -> Iterator[Server]:
    """tito serve in front of an in-test SGLang speaking its native /generate (top logprobs included)."""
    fake, thread = start_fake("sglang")
    fake.behaviour.reply_ids = qwen3_tokenizer.encode("Forty-two.<|im_end|>", add_special_tokens=False)
    engine = SGLangEngine(fake.url)
    state = ServerState(qwen3_tokenizer, engine, ServerOptions(family="qwen3"))
    try:
        with serve_in_thread(create_app(state)) as url:
            yield Server(url, state, engine)  # type: ignore[arg-type]
    finally:  # the engine's connections closed with the server's event loop
        thread.stop()


def test_top_logprobs_come_from_the_engine_best_first_with_their_tokens(
    sglang_backed: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    session_id = sglang_backed.new_session()
    reply = client(sglang_backed, session_id).chat.completions.create(
        model="m", messages=USER, logprobs=True, top_logprobs=3
    )
    assert reply.choices[0].message.content == "Forty-two."
    content = (reply.choices[0].logprobs.content if reply.choices[0].logprobs else None) or []
    ids = qwen3_tokenizer.encode("Forty-two.<|im_end|>", add_special_tokens=False)
    assert len(content) == len(ids)
    for position, (token, entry) in enumerate(zip(ids, content, strict=True)):
        expected = scripted_top_logprobs(token, position, 3)
        assert [(t.token, t.logprob) for t in entry.top_logprobs] == [
            (token_bytes(qwen3_tokenizer, i).decode("utf-8", "replace"), pytest.approx(lp)) for i, lp in expected
        ]
    assert content[-1].token == "<|im_end|>"


def test_token_bytes_add_up_to_the_text_even_where_a_token_holds_part_of_a_character(
    qwen3_tokenizer: LocalTokenizer,
) -> None:
    text = "ünïcödé 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🦜<|im_end|>"
    ids = qwen3_tokenizer.encode(text, add_special_tokens=False)
    pieces = [token_bytes(qwen3_tokenizer, token) for token in ids]
    assert b"".join(pieces) == text.encode()
    assert any(piece.decode("utf-8", "ignore") != piece.decode("utf-8", "replace") for piece in pieces)  # split
