"""`TitoClient` against a real tito server: sessions, base URLs the official SDKs use, samples with rewards by
response id, and typed errors that carry the server's message; every call ends by its deadline."""

from __future__ import annotations

import time

import anthropic
import openai
import pytest

from tests.server.conftest import Server, running_server
from tito.client import (
    AtCapacityError,
    BadRequestError,
    DeadlineExceededError,
    SessionGoneError,
    TitoClient,
)
from tito.tokenizer_loading import LocalTokenizer

USER = [{"role": "user", "content": "Hello"}]


def test_a_session_serves_each_dialect_and_its_samples_carry_rewards_and_group(server: Server) -> None:
    with TitoClient(server.url) as client:
        client.wait_ready(5)
        handle = client.create_session(group_id="prompt-7", chat_template_kwargs={"enable_thinking": False})
        chat = openai.OpenAI(base_url=handle.openai_base_url, api_key="x").chat.completions.create(
            model="m",
            messages=USER,  # type: ignore[arg-type]
        )
        messages = [*USER, {"role": "assistant", "content": chat.choices[0].message.content or ""}]
        reply = anthropic.Anthropic(base_url=handle.anthropic_base_url, api_key="x").messages.create(
            model="m",
            max_tokens=64,
            messages=[*messages, {"role": "user", "content": "Again"}],  # type: ignore[list-item]
        )
        samples = client.samples(handle.session_id, rewards={chat.id: 0.25, reply.id: 1.0})
    assert handle.server_url == server.url
    [sample] = samples.samples
    assert sample["reward"] == 1.0  # the last turn's reward
    assert [span["response_id"] for span in sample["spans"]] == [chat.id, reply.id]
    assert sample["group_id"] == "prompt-7"
    assert sum(sample["loss_mask"]) > 0


def test_a_trainer_format_and_safetensors_come_back_as_asked(server: Server) -> None:
    with TitoClient(server.url) as client:
        handle = client.create_session()
        openai.OpenAI(base_url=handle.openai_base_url, api_key="x").chat.completions.create(
            model="m",
            messages=USER,  # type: ignore[arg-type]
        )
        verl = client.samples(handle.session_id, format="verl", max_seq_len=4096)
        packed = client.samples(handle.session_id, format="safetensors")
    assert verl.upstream is not None and "verl" in verl.upstream
    assert len(verl.samples) == 1
    assert packed.samples == [] and b"tokens" in packed.body[:4096]


def test_errors_are_typed_and_carry_the_servers_message(server: Server) -> None:
    with TitoClient(server.url) as client:
        handle = client.create_session()
        openai.OpenAI(base_url=handle.openai_base_url, api_key="x").chat.completions.create(
            model="m",
            messages=USER,  # type: ignore[arg-type]
        )
        with pytest.raises(BadRequestError) as unknown_id:
            client.samples(handle.session_id, rewards={"chatcmpl-nope": 1.0})
        with pytest.raises(BadRequestError) as bad_option:
            client.create_session(matcher="fuzzy")
        client.delete_session(handle.session_id)
        with pytest.raises(SessionGoneError) as deleted:
            client.samples(handle.session_id)
        with pytest.raises(SessionGoneError) as never:
            client.samples("0" * 32)
    assert unknown_id.value.status == 400 and unknown_id.value.error_type == "UnknownResponseIdError"
    assert "chatcmpl-nope" in str(unknown_id.value)
    assert bad_option.value.status == 400 and "matcher" in str(bad_option.value)
    assert deleted.value.status == 410 and "deleted" in str(deleted.value)
    assert never.value.status == 404


def test_a_full_server_says_at_capacity_and_a_wrong_key_is_a_bad_request(qwen3_tokenizer: LocalTokenizer) -> None:
    with running_server(qwen3_tokenizer, max_sessions=1, api_key="secret") as full:
        with TitoClient(full.url, api_key="secret") as client:
            client.create_session()
            with pytest.raises(AtCapacityError) as capacity:
                client.create_session()
        with TitoClient(full.url, api_key="wrong") as stranger, pytest.raises(BadRequestError) as refused:
            stranger.create_session()
    assert capacity.value.status == 503 and capacity.value.error_type == "AtCapacityError"
    assert refused.value.status == 401 and "API key" in str(refused.value)


@pytest.mark.parametrize("fixture", ["silent_url", "refused_url"])
def test_a_call_ends_by_its_deadline_when_the_server_never_answers(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(fixture)
    with TitoClient(url, deadline_s=0.5) as client:
        started = time.monotonic()
        with pytest.raises(DeadlineExceededError) as error:
            client.create_session()
        took = time.monotonic() - started
    assert 0.4 <= took < 1.5, took
    assert error.value.url == url and "deadline of 0.5s" in str(error.value)
