"""Matching policies through the server: a session's `matcher` (the server's `--matcher`, default `harness`), what a
resend the harness rewrote attaches to, the prompt it builds (stored ids verbatim), and the resend counters in
`GET /sessions/{id}` and `/metrics`."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.server.conftest import Server, ServerFactory
from tests.server.turns.test_completions import as_message, client
from tito.tokenizer_loading import LocalTokenizer

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
CALL = '<think>\nCall the tool.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "metric": true}}\n</tool_call><|im_end|>'  # noqa: E501
ANSWER = "<think>\nDone.\n</think>\n\nSunny.<|im_end|>"


def described(server: Server, session_id: str) -> dict[str, Any]:
    response = server.http.get(f"/sessions/{session_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def as_a_harness_resends_it(reply: dict[str, Any], call_id: str) -> dict[str, Any]:
    """The reply as frameworks resend it: no reasoning, compact arguments, null for "" content (or the reverse),
    their own call id."""
    call = reply["tool_calls"][0]
    arguments = json.dumps(json.loads(call["function"]["arguments"]), separators=(",", ":"))
    resent_call = {**call, "id": call_id, "function": {**call["function"], "arguments": arguments}}
    content = None if reply.get("content") == "" else ""
    return {"role": "assistant", "content": content, "tool_calls": [resent_call]}


def first_turn(server: Server, tokenizer: LocalTokenizer, **session: Any) -> tuple[str, list[dict[str, Any]]]:
    encode = tokenizer.encode
    server.engine.queue(encode(CALL, add_special_tokens=False), encode(ANSWER, add_special_tokens=False))
    session_id = server.new_session(**session)
    messages = [{"role": "user", "content": "weather in Oslo?"}]
    reply = as_message(client(server, session_id).chat.completions.create(model="m", messages=messages, tools=TOOLS))
    assert reply["reasoning_content"] == "Call the tool."
    return session_id, [*messages, reply]


@pytest.mark.parametrize("trajectory", ["linear", "tree"])
def test_a_harness_resend_attaches_to_the_stored_turn_and_the_prompt_keeps_the_stored_ids(
    server: Server, qwen3_tokenizer: LocalTokenizer, trajectory: str
) -> None:
    session_id, (question, reply) = first_turn(server, qwen3_tokenizer, trajectory=trajectory)
    first_request = server.engine.requests[-1]
    resent = as_a_harness_resends_it(reply, "call_mine")
    result = {"role": "tool", "tool_call_id": "call_mine", "content": "12 C"}
    client(server, session_id).chat.completions.create(model="m", messages=[question, resent, result], tools=TOOLS)

    sampled = qwen3_tokenizer.encode(CALL, add_special_tokens=False)
    prompt = list(server.engine.requests[-1].prompt_ids)
    assert prompt[: len(first_request.prompt_ids) + len(sampled)] == [*first_request.prompt_ids, *sampled]
    session = described(server, session_id)
    conversation = session["conversation"] if trajectory == "linear" else session["messages"]
    assert conversation[1] == reply, "the stored reply (with its reasoning) is what the session holds"
    assert conversation[2] == {**result, "tool_call_id": reply["tool_calls"][0]["id"]}, "mapped to the model's id"
    assert session["matcher"] == "harness"
    assert session["resends"] == {
        "matched_exactly": 0, "matched_by_policy": 1, "branched": 0, "failed": 0,
        "rules": {"arguments_as_json": 1, "call_ids_regenerated": 1, "empty_content": 1, "reasoning_dropped": 1},
    }  # fmt: skip
    (sample,) = server.http.post(f"/sessions/{session_id}/samples").json()["samples"]
    assert sum(sample["loss_mask"]) == len(sampled) + len(qwen3_tokenizer.encode(ANSWER, add_special_tokens=False))


def test_a_strict_session_refuses_the_same_resend_and_counts_it_failed(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    session_id, (question, reply) = first_turn(server, qwen3_tokenizer, matcher="strict")
    resent = {**reply, "reasoning_content": None}
    with pytest.raises(openai.BadRequestError, match=r"'reasoning_content': stored 'Call the tool\.', got None"):
        client(server, session_id).chat.completions.create(
            model="m", messages=[question, resent, {"role": "tool", "tool_call_id": "x", "content": "12 C"}]
        )
    session = described(server, session_id)
    assert session["matcher"] == "strict"
    assert session["resends"]["failed"] == 1 and len(session["turns"]) == 1


def test_exact_resends_and_retries_are_counted_and_the_metrics_add_them_up(serve: ServerFactory) -> None:
    server = serve()
    session_id = server.new_session()
    sdk = client(server, session_id)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "q1"}]
    messages.append(as_message(sdk.chat.completions.create(model="m", messages=messages)))
    messages.append({"role": "user", "content": "q2"})
    sdk.chat.completions.create(model="m", messages=messages)  # resends the reply as received: exact
    sdk.chat.completions.create(model="m", messages=[*messages[:2], {"role": "user", "content": "q2'"}])  # a retry
    assert described(server, session_id)["resends"] == {
        "matched_exactly": 1, "matched_by_policy": 0, "branched": 1, "failed": 0, "rules": {}
    }  # fmt: skip
    metrics = server.http.get("/metrics").text
    assert 'tito_resends_total{outcome="matched_exactly",process="tito"} 1.0' in metrics
    assert 'tito_resends_total{outcome="branched",process="tito"} 1.0' in metrics


def test_the_server_default_is_each_sessions_matcher_and_an_unknown_one_is_400(serve: ServerFactory) -> None:
    strict = serve(matcher="strict")
    assert described(strict, strict.new_session())["matcher"] == "strict"
    assert described(strict, strict.new_session(matcher="harness"))["matcher"] == "harness"
    response = strict.http.post("/sessions", json={"matcher": "loose"})
    assert response.status_code == 400 and "matcher" in response.text
