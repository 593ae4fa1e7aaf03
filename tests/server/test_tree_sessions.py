"""Tree sessions through a real uvicorn server and the openai SDK: every shape an agent sends keeps its generation.

Retries, deep divergence, a different opening, compaction and parallel siblings each become branches; a
length-cut node cannot be extended; strict mode and the node limit refuse before the engine is called; and
`GET /sessions/{id}` shows the tree.
"""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest

from tests.server.conftest import Server, ServerFactory
from tests.server.turns.test_completions import as_message, client, converse
from tito.trajectory.events import TrajectoryKind


@pytest.fixture(scope="module")
def tree_server(serve: ServerFactory) -> Server:
    return serve(trajectory=TrajectoryKind.TREE)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def described(server: Server, session_id: str) -> dict[str, Any]:
    response = server.http.get(f"/sessions/{session_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def parents(server: Server, session_id: str) -> dict[int, int | None]:
    return {node["node_id"]: node["parent_id"] for node in described(server, session_id)["nodes"]}


def samples(server: Server, session_id: str, **body: Any) -> list[dict[str, Any]]:
    response = server.http.post(f"/sessions/{session_id}/samples", json=body or None)
    assert response.status_code == 200, response.text
    return list(response.json()["samples"])


def test_the_launch_options_are_each_sessions_defaults_and_a_session_may_ask_otherwise(serve: ServerFactory) -> None:
    strict = serve(trajectory=TrajectoryKind.TREE, strict_append_only=True, max_nodes=7)
    tree = described(strict, strict.new_session())
    assert (tree["trajectory"], tree["strict_append_only"], tree["max_nodes"]) == ("tree", True, 7)
    relaxed = described(strict, strict.new_session(strict_append_only=False, max_nodes=3))
    assert (relaxed["strict_append_only"], relaxed["max_nodes"]) == (False, 3)
    assert described(strict, strict.new_session(trajectory="linear"))["trajectory"] == "linear"


def test_a_one_step_retry_is_a_sibling_and_the_tree_shows_nodes_spans_leaves_and_the_active_path(
    tree_server: Server,
) -> None:
    session_id = tree_server.new_session()
    messages = converse(tree_server, session_id, [[user("q1")], [user("q2")]])
    client(tree_server, session_id).chat.completions.create(model="m", messages=[*messages[:2], user("q2 again")])
    tree = described(tree_server, session_id)
    assert [(n["node_id"], n["parent_id"], n["children"]) for n in tree["nodes"]] == [
        (0, None, [1, 2]), (1, 0, []), (2, 0, [])
    ]  # fmt: skip
    assert tree["roots"] == [0] and tree["leaves"] == [1, 2]
    assert tree["active_leaf"] == 2 and tree["active_path"] == [0, 2]
    first, retry = tree["nodes"][1], tree["nodes"][2]
    assert retry["sampled_span"][0] == len(tree_server.engine.requests[-1].prompt_ids)
    assert first["sampled_span"][1] - first["sampled_span"][0] == len(tree_server.engine.default_reply)
    assert tree["messages"][-2] == user("q2 again")
    original, reasked = samples(tree_server, session_id)  # another request ("q2 again"), not a retry: both kept
    assert [turn["node_id"] for turn in original["metadata"]["turns"]] == [0, 1]
    assert [turn["node_id"] for turn in reasked["metadata"]["turns"]] == [0, 2]
    assert len(reasked["tokens"]) == retry["sampled_span"][1]


def test_deep_divergence_branches_and_each_shared_node_is_trained_once(tree_server: Server) -> None:
    session_id = tree_server.new_session()
    messages = converse(tree_server, session_id, [[user(f"q{i}")] for i in range(3)])
    client(tree_server, session_id).chat.completions.create(model="m", messages=[*messages[:2], user("q1 rewritten")])
    assert parents(tree_server, session_id) == {0: None, 1: 0, 2: 1, 3: 0}
    deep, branch = samples(tree_server, session_id)  # both leaves continued past node 0: both kept
    reply = len(tree_server.engine.default_reply)
    assert sum(deep["loss_mask"]) == 3 * reply  # nodes 0, 1, 2: the earliest kept leaf trains node 0
    assert sum(branch["loss_mask"]) == reply  # node 3 only: node 0 is masked here
    node0_end = described(tree_server, session_id)["nodes"][0]["sampled_span"][1]
    assert branch["tokens"][:node0_end] == deep["tokens"][:node0_end]
    assert set(branch["rollout_logprobs"][:node0_end]) == {0.0}


def test_a_different_opening_is_a_second_conversation(tree_server: Server) -> None:
    session_id = tree_server.new_session()
    converse(tree_server, session_id, [[user("first opening")], [user("more")]])
    converse(tree_server, session_id, [[{"role": "system", "content": "Another task."}, user("second opening")]])
    tree = described(tree_server, session_id)
    assert tree["roots"] == [0] and tree["leaves"] == [1]  # the main conversation's own forest
    assert [(c["id"], c["kind"], c["turns"], c["inferred"]) for c in tree["conversations"]] == [
        ("c0", "main", 2, True),
        ("c1", "side", 1, True),
    ]
    kept = samples(tree_server, session_id)
    assert [sample["conversation"]["id"] for sample in kept] == ["c0", "c1"]  # openings are never dropped


def test_a_compaction_summary_attaches_below_the_last_matching_node_as_prompt(tree_server: Server) -> None:
    session_id = tree_server.new_session()
    messages = converse(tree_server, session_id, [[user(f"step {i}")] for i in range(3)])
    summary = {"role": "assistant", "content": "Summary: steps 1 and 2 passed."}
    compacted = [*messages[:2], summary, user("continue from the summary")]
    client(tree_server, session_id).chat.completions.create(model="m", messages=compacted)
    tree = described(tree_server, session_id)
    assert tree["nodes"][3]["parent_id"] == 0 and tree["nodes"][3]["request_messages"] == 2
    prompt = list(tree_server.engine.requests[-1].prompt_ids)
    summary_ids = tree_server.state.tokenizers.get({}, None, None).tokenizer.encode(
        summary["content"], add_special_tokens=False
    )
    start = next(i for i in range(len(prompt)) if prompt[i : i + len(summary_ids)] == summary_ids)
    _, compaction = samples(tree_server, session_id)
    assert set(compaction["loss_mask"][start : start + len(summary_ids)]) == {0}  # the client's assistant is prompt
    assert sum(compaction["loss_mask"]) == len(tree_server.engine.default_reply)


def test_parallel_requests_from_one_node_both_commit_as_siblings(tree_server: Server) -> None:
    session_id = tree_server.new_session()
    opening = converse(tree_server, session_id, [[user("plan")]])
    tree_server.engine.delay = 0.2

    async def fan_out() -> list[Any]:
        sdk = openai.AsyncOpenAI(base_url=tree_server.chat_url(session_id), api_key="unused", max_retries=0)
        try:
            calls = [sdk.chat.completions.create(model="m", messages=[*opening, user(f"sub-agent {i}")])
                     for i in range(2)]  # fmt: skip
            return list(await asyncio.gather(*calls))
        finally:
            await sdk.close()

    replies = asyncio.run(fan_out())
    tree_server.engine.delay = 0.0
    assert parents(tree_server, session_id) == {0: None, 1: 0, 2: 0}
    for i, reply in enumerate(replies):  # each sub-agent continues its own branch
        continued = [*opening, user(f"sub-agent {i}"), as_message(reply), user("next")]
        client(tree_server, session_id).chat.completions.create(model="m", messages=continued)
    tree = parents(tree_server, session_id)
    assert {tree[3], tree[4]} == {1, 2}  # which sub-agent committed first is the scheduler's choice
    kept = samples(tree_server, session_id)
    assert [[t["node_id"] for t in s["metadata"]["turns"]] for s in kept] == [[0, tree[3], 3], [0, tree[4], 4]]


def test_extending_a_length_cut_node_is_409_and_it_may_be_retried(tree_server: Server) -> None:
    session_id = tree_server.new_session()
    sdk = client(tree_server, session_id)
    cut = sdk.chat.completions.create(model="m", messages=[user("long answer please")], max_tokens=2)
    assert cut.choices[0].finish_reason == "length"
    calls = len(tree_server.engine.requests)
    with pytest.raises(openai.ConflictError, match="cut by the length limit"):
        sdk.chat.completions.create(model="m", messages=[user("long answer please"), as_message(cut), user("go")])
    assert len(tree_server.engine.requests) == calls
    sdk.chat.completions.create(model="m", messages=[user("long answer please")])
    assert parents(tree_server, session_id) == {0: None, 1: None}


def test_strict_mode_refuses_a_branch_with_400_showing_where_and_changes_nothing(tree_server: Server) -> None:
    session_id = tree_server.new_session(strict_append_only=True)
    messages = converse(tree_server, session_id, [[user("q0")], [user("q1")]])
    calls = len(tree_server.engine.requests)
    with pytest.raises(openai.BadRequestError, match=r"strict append-only.*") as refused:
        client(tree_server, session_id).chat.completions.create(model="m", messages=[*messages[:2], user("other")])
    assert "message 2" in str(refused.value) and "'content'" in str(refused.value)
    assert len(tree_server.engine.requests) == calls
    assert parents(tree_server, session_id) == {0: None, 1: 0}
    client(tree_server, session_id).chat.completions.create(model="m", messages=[*messages, user("q2")])
    assert parents(tree_server, session_id) == {0: None, 1: 0, 2: 1}  # extending still works


def test_the_node_limit_refuses_before_the_engine_is_called(tree_server: Server) -> None:
    session_id = tree_server.new_session(max_nodes=2)
    converse(tree_server, session_id, [[user("a")], [user("b")]])
    calls = len(tree_server.engine.requests)
    with pytest.raises(openai.ConflictError, match="maximum of 2 nodes"):
        client(tree_server, session_id).chat.completions.create(model="m", messages=[user("a fresh start")])
    assert len(tree_server.engine.requests) == calls


def test_an_sdk_retry_of_a_committed_request_gets_its_node_back_without_a_new_one(tree_server: Server) -> None:
    session_id = tree_server.new_session()
    url, body = f"/sessions/{session_id}/v1/chat/completions", {"messages": [user("once")]}
    first = tree_server.http.post(url, json=body).json()
    calls = len(tree_server.engine.requests)
    assert tree_server.http.post(url, json=body, headers={"x-stainless-retry-count": "1"}).json() == first
    assert len(tree_server.engine.requests) == calls and parents(tree_server, session_id) == {0: None}


def test_appended_roles_pass_the_sessions_role_gate(tree_server: Server) -> None:
    session_id = tree_server.new_session(allowed_append_roles=["user", "tool"])
    messages = converse(tree_server, session_id, [[user("q0")]])
    with pytest.raises(openai.BadRequestError, match="system"):
        client(tree_server, session_id).chat.completions.create(
            model="m", messages=[*messages, {"role": "system", "content": "new rules"}, user("q1")]
        )
    assert parents(tree_server, session_id) == {0: None}
