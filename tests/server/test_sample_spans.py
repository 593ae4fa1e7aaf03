"""Every sample's spans tile it, in every dialect the server speaks: turn by turn, `tokens[:start]` is the prompt
the engine got, `tokens[start:end]` the ids it sampled, the loss mask 1 exactly there; each span carries the
reply's id, the sampling parameters and timestamps. Rewards by response id (a tree's two sub-agent leaves each get
their own), group ids, and the three metadata layers (turn fold < agent < server-owned keys)."""

from __future__ import annotations

import itertools
import time
from typing import Any

import anthropic
import pytest

from tests.server.conftest import Server
from tests.server.test_tree_sessions import user
from tests.server.turns.test_completions import client
from tito.tokenizer_loading import LocalTokenizer

DIALECTS = ["chat", "chat-stream", "anthropic", "responses"]
"""The dialects the server speaks (Anthropic Messages and Responses: whole replies; their streams run the same
core as chat's, tests/server/dialects)."""


@pytest.fixture(scope="module")
def replies(qwen3_tokenizer: LocalTokenizer) -> list[list[int]]:
    end = qwen3_tokenizer.encode("<|im_end|>", add_special_tokens=False)
    return [qwen3_tokenizer.encode(f"Reply {i}: {'word ' * i}done.", add_special_tokens=False) + end
            for i in range(8)]  # fmt: skip


def ask(server: Server, session_id: str, messages: list[dict[str, Any]], dialect: str, **sampling: Any) -> tuple[
    dict[str, Any], str
]:  # fmt: skip
    """One turn in `dialect`: the assistant message to echo back and the reply's id."""
    if dialect == "anthropic":
        claude = anthropic.Anthropic(base_url=f"{server.url}/sessions/{session_id}", api_key="-", max_retries=0)
        system = "".join(m["content"] for m in messages if m["role"] == "system")
        turns: Any = [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"]
        extra = sampling or None  # this SDK's create() names no temperature/top_p; the Messages API takes them
        message = claude.messages.create(model="m", system=system, messages=turns, max_tokens=200, extra_body=extra)
        text = "".join(block.text for block in message.content if block.type == "text")
        return {"role": "assistant", "content": text}, message.id
    if dialect == "responses":
        items: Any = [
            {"type": "message", "role": m["role"], "content": [{"type": "output_text", "text": m["content"]}]}
            if m["role"] == "assistant"
            else {"role": m["role"], "content": m["content"]}
            for m in messages
        ]
        response = client(server, session_id).responses.create(model="m", input=items, **sampling)
        return {"role": "assistant", "content": response.output_text}, response.id
    sdk = client(server, session_id)
    if dialect == "chat":
        reply = sdk.chat.completions.create(model="m", messages=messages, **sampling)  # type: ignore[arg-type]
        return reply.choices[0].message.model_dump(exclude_none=True), reply.id
    chunks = list(sdk.chat.completions.create(model="m", messages=messages, stream=True, **sampling))  # type: ignore[arg-type]
    content = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    return {"role": "assistant", "content": content}, chunks[0].id


def take(server: Server, session_id: str, **body: Any) -> list[dict[str, Any]]:
    response = server.http.post(f"/sessions/{session_id}/samples", json=body or None)
    assert response.status_code == 200, response.text
    return list(response.json()["samples"])


def assert_spans_tile(sample: dict[str, Any], owned: set[int] | None = None) -> None:
    """The spans cover `tokens` in order, and the loss mask is 1 exactly on the sampled ids of the spans whose
    node this sample trains (`owned`; all of them when None)."""
    spans, tokens = sample["spans"], sample["tokens"]
    assert spans[0]["prompt_start"] == 0 and spans[-1]["end"] == len(tokens)
    for earlier, later in itertools.pairwise(spans):
        assert later["prompt_start"] == earlier["end"], "each turn's prompt starts where the previous reply ended"
    for span in spans:
        assert span["prompt_start"] <= span["start"] < span["end"]
    trained = {i for s in spans if owned is None or s["node_id"] in owned for i in range(s["start"], s["end"])}
    assert {i for i, m in enumerate(sample["loss_mask"]) if m} == trained
    assert sample["response_length"] == len(tokens) - spans[0]["start"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_linear_sessions_spans_are_each_turns_prompt_and_sampled_ids(
    server: Server, replies: list[list[int]], dialect: str
) -> None:
    session_id = server.new_session()
    first_request = len(server.engine.requests)
    server.engine.queue(*replies[:3])
    began = time.time()
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}, user("one")]
    reply_ids = []
    for appended, temperature in [
        ([], 0.7),
        ([user("two")], 0.3),
        ([{"role": "assistant", "content": "Injected summary."}, user("three")], 1.0),
    ]:
        messages += appended
        message, reply_id = ask(server, session_id, messages, dialect, temperature=temperature, top_p=0.9)
        messages.append(message)
        reply_ids.append(reply_id)
    (sample,) = take(server, session_id)
    assert_spans_tile(sample)
    requests = server.engine.requests[first_request:]
    for index, span in enumerate(sample["spans"]):
        assert sample["tokens"][: span["start"]] == list(requests[index].prompt_ids)
        assert sample["tokens"][span["start"] : span["end"]] == replies[index]
        assert span["response_id"] == reply_ids[index] and span["node_id"] == index
        assert span["finish_reason"] == "stop" and span["appended_messages"] == [2, 1, 2][index]
        assert span["temperature"] == [0.7, 0.3, 1.0][index] and span["sampling"]["top_p"] == 0.9
        assert began <= span["request_timestamp"] <= span["completion_timestamp"] <= time.time()
        assert span["weight_version"] is None and span["weight_versions"] == []  # the instant engine has none


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_trees_two_sub_agent_leaves_each_get_their_own_reward_and_spans(
    server: Server, replies: list[list[int]], dialect: str
) -> None:
    session_id = server.new_session(trajectory="tree")
    server.engine.queue(*replies[:5])
    opening = [user("Plan the task.")]
    opening.append(ask(server, session_id, opening, dialect)[0])
    leaf_ids = {}
    for agent in ("a", "b"):
        branch = [*opening, user(f"sub-agent {agent}")]
        branch.append(ask(server, session_id, branch, dialect)[0])
        leaf_ids[agent] = ask(server, session_id, [*branch, user("report")], dialect)[1]
    kept = take(server, session_id, reward=0.0, rewards={leaf_ids["a"]: 1.0, leaf_ids["b"]: -1.0})
    assert [sample["reward"] for sample in kept] == [1.0, -1.0]
    assert [sample["spans"][-1]["response_id"] for sample in kept] == [leaf_ids["a"], leaf_ids["b"]]
    assert [[span["node_id"] for span in sample["spans"]] for sample in kept] == [[0, 1, 2], [0, 3, 4]]
    assert_spans_tile(kept[0])
    assert_spans_tile(kept[1], owned={3, 4})  # the shared root is trained once, in the first leaf's sample
    for sample in kept:
        assert sample["spans"][0]["reward"] is None and sample["spans"][-1]["reward"] == sample["reward"]
    only_a = take(server, session_id, reward=0.5, rewards={leaf_ids["a"]: 1.0})
    assert [sample["reward"] for sample in only_a] == [1.0, 0.5], "a leaf without its own reward gets the scalar"


def test_a_reward_for_an_unknown_response_id_is_400_naming_it(server: Server) -> None:
    session_id = server.new_session()
    ask(server, session_id, [user("one")], "chat")
    response = server.http.post(f"/sessions/{session_id}/samples", json={"rewards": {"chatcmpl-nobody": 1.0}})
    assert response.status_code == 400
    assert "chatcmpl-nobody" in response.json()["error"]["message"]
    assert response.json()["error"]["type"] == "UnknownResponseIdError"


def test_a_sessions_group_id_is_on_every_sample_and_the_samples_body_may_override_it(server: Server) -> None:
    session_id = server.new_session(trajectory="tree", group_id="prompt-17")
    opening = [user("Plan.")]
    opening.append(ask(server, session_id, opening, "chat")[0])
    for agent in ("a", "b"):
        branch = [*opening, user(f"sub-agent {agent}")]
        branch.append(ask(server, session_id, branch, "chat")[0])
        ask(server, session_id, [*branch, user("report")], "chat")
    assert [sample["group_id"] for sample in take(server, session_id)] == ["prompt-17", "prompt-17"]
    overridden = take(server, session_id, group_id="batch-3/prompt-17")
    assert [sample["group_id"] for sample in overridden] == ["batch-3/prompt-17"] * 2
    ungrouped = server.new_session()
    ask(server, ungrouped, [user("one")], "chat")
    assert take(server, ungrouped)[0]["group_id"] is None
    assert server.http.post("/sessions", json={"group_id": 7}).status_code == 400


def two_turn_session(server: Server) -> str:
    session_id = server.new_session()
    messages = [user("one")]
    messages.append(ask(server, session_id, messages, "chat")[0])
    ask(server, session_id, [*messages, user("two")], "chat")
    return session_id


def test_metadata_layer_one_is_the_fold_over_the_samples_turns(server: Server) -> None:
    (sample,) = take(server, two_turn_session(server))
    turns = sample["metadata"]["turns"]
    assert sample["metadata"]["cached_tokens"] == sum(turn["cached_tokens"] for turn in turns)
    assert sample["metadata"]["weight_versions"] == []  # the instant engine reports none


def test_metadata_layer_two_the_agents_metadata_overrides_the_fold(server: Server) -> None:
    (sample,) = take(server, two_turn_session(server),
                     metadata={"cached_tokens": -1, "weight_versions": ["mine"], "task": "t"})  # fmt: skip
    assert sample["metadata"]["cached_tokens"] == -1 and sample["metadata"]["weight_versions"] == ["mine"]
    assert sample["metadata"]["task"] == "t"


def test_metadata_layer_three_server_owned_keys_override_the_agent(server: Server) -> None:
    session_id = two_turn_session(server)
    forged = {"session_id": "x", "turns": [], "num_turns": 9, "truncated_turns": 9, "engine": "x",
              "logprob_semantics": "x"}  # fmt: skip
    (sample,) = take(server, session_id, metadata=forged)
    metadata = sample["metadata"]
    assert metadata["session_id"] == session_id and metadata["num_turns"] == len(metadata["turns"]) == 2
    assert metadata["truncated_turns"] == 0 and metadata["engine"] == "instant"
    assert metadata["logprob_semantics"] != "x"
