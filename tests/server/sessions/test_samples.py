"""The samples route over HTTP, one code path for linear and tree sessions: the agent's metadata and reward on
every sample, the picker and post-processor hooks with their contracts, and linear/tree parity."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tests.server.conftest import Server, ServerFactory
from tests.server.test_tree_sessions import samples, user
from tests.server.turns.test_completions import as_message, client, converse
from tito.errors import ConfigurationError
from tito.tokenizer_loading import LocalTokenizer
from tito.trajectory.codec import sample_from_json
from tito.trajectory.events import TrajectoryKind
from tito.trajectory.exports import PROJECTIONS
from tito.trajectory.picking import TreeView

HOOKS = __name__


def keep_the_oldest_leaf(tree: TreeView) -> list[int]:
    return [min(tree.leaves)]


def keep_a_node_that_is_no_leaf(tree: TreeView) -> list[int]:
    return [next(node_id for node_id, node in tree.nodes.items() if node.children)]


def keep_no_leaf(tree: TreeView) -> list[int]:
    return []


def reverse_the_samples(samples: list[Any], tree: TreeView) -> list[Any]:
    return samples[::-1]


def duplicate_the_first_sample(samples: list[Any], tree: TreeView) -> list[Any]:
    return [samples[0], samples[0]]


def drop_every_sample(samples: list[Any], tree: TreeView) -> list[Any]:
    return []


def branched_session(server: Server) -> str:
    """A tree session with two kept leaves: nodes 0 -> 1 -> 2 and 0 -> 3."""
    session_id = server.new_session(trajectory="tree")
    messages = converse(server, session_id, [[user(f"q{i}")] for i in range(3)])
    client(server, session_id).chat.completions.create(model="m", messages=[*messages[:2], user("q1 rewritten")])
    return session_id


def leaf_ids(kept: list[dict[str, Any]]) -> list[int]:
    return [sample["metadata"]["turns"][-1]["node_id"] for sample in kept]


def test_the_agents_reward_and_metadata_reach_every_sample_but_never_override_server_keys(server: Server) -> None:
    session_id = branched_session(server)
    owned = {"session_id": "forged", "turns": "forged", "num_turns": -1, "engine": "forged"}
    kept = samples(server, session_id, reward=0.75, metadata={"task": "t7", **owned})
    assert len(kept) == 2
    for sample in kept:
        assert sample["reward"] == 0.75 and sample["metadata"]["task"] == "t7"
        assert sample["metadata"]["session_id"] == session_id and sample["metadata"]["engine"] == "instant"
        assert sample["metadata"]["num_turns"] == len(sample["metadata"]["turns"])
    from_metadata = samples(server, session_id, metadata={"reward": 1})
    assert [sample["reward"] for sample in from_metadata] == [1.0, 1.0]


def test_a_picker_by_import_path_chooses_the_leaves(serve: ServerFactory) -> None:
    picking = serve(sample_picker=f"{HOOKS}:keep_the_oldest_leaf")
    assert leaf_ids(samples(picking, branched_session(picking))) == [2]


def test_a_picker_that_keeps_no_leaf_is_422_saying_so(serve: ServerFactory) -> None:
    picky = serve(sample_picker=f"{HOOKS}:keep_no_leaf")
    response = picky.http.post(f"/sessions/{branched_session(picky)}/samples")
    assert response.status_code == 422 and "no leaf that the sample picker keeps" in response.json()["error"]["message"]


def test_a_post_processor_by_import_path_reorders_the_samples(serve: ServerFactory) -> None:
    reordering = serve(sample_postprocessor=f"{HOOKS}:reverse_the_samples")
    assert leaf_ids(samples(reordering, branched_session(reordering))) == [3, 2]


def test_a_post_processor_that_drops_every_sample_gives_an_empty_list_and_records_the_reward(
    serve: ServerFactory,
) -> None:
    """By contract a post-processor may keep none of the samples (a filter): 200 with no samples, not a 500."""
    dropping = serve(sample_postprocessor=f"{HOOKS}:drop_every_sample")
    session_id = branched_session(dropping)
    response = dropping.http.post(f"/sessions/{session_id}/samples", json={"reward": 0.5})
    assert response.status_code == 200, response.text
    assert response.json() == {"session_id": session_id, "samples": []}
    summary = dropping.http.get(f"/sessions/{session_id}").json()["summary"]
    assert summary["reward"] == 0.5 and summary["samples_taken"] == 1


@pytest.mark.parametrize(
    ("option", "hook", "problem"),
    [
        ("sample_picker", "keep_a_node_that_is_no_leaf", "returned 0 at position 0"),
        ("sample_postprocessor", "duplicate_the_first_sample", "returned the same sample twice"),
    ],
)
def test_a_hook_that_breaks_its_contract_is_422_naming_it(
    serve: ServerFactory, option: str, hook: str, problem: str
) -> None:
    broken = serve(**{option: f"{HOOKS}:{hook}"})
    response = broken.http.post(f"/sessions/{branched_session(broken)}/samples")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["type"] == "SampleHookError" and hook in error["message"] and problem in error["message"]


@pytest.mark.parametrize(
    ("option", "path", "problem"),
    [("sample_picker", "no_such_module_anywhere:pick", "cannot import"), ("sample_postprocessor", HOOKS, "expected")],
)
def test_a_hook_that_cannot_load_fails_at_startup(serve: ServerFactory, option: str, path: str, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=f"--{option.replace('_', '-')}.*{problem}"):
        serve(**{option: path})


def scripted_agent(server: Server, session_id: str, replies: Sequence[Sequence[int]]) -> None:
    """Retries, an intermediate system message, a user follow-up and a client-written assistant, each engine reply
    scripted. No retry of the first turn: a tree keeps every root (a retried opening is a second root)."""
    server.engine.queue(*replies)
    sdk = client(server, session_id)

    def ask(messages: list[dict[str, Any]]) -> dict[str, Any]:
        return as_message(sdk.chat.completions.create(model="m", messages=messages))

    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}, user("List the files.")]
    messages.append(ask(messages))
    messages += [{"role": "system", "content": "Budget: two more steps."}, user("Open the first one.")]
    ask(messages)  # superseded: the agent retries the same request
    messages.append(ask(messages))
    messages.append(user("And the second?"))
    ask(messages)  # superseded again
    messages.append(ask(messages))
    messages += [{"role": "assistant", "content": "Summary so far: both files read."}, user("Conclude.")]
    messages.append(ask(messages))


def test_tree_mode_with_the_default_picker_returns_exactly_the_linear_sample(
    serve: ServerFactory, qwen3_tokenizer: LocalTokenizer
) -> None:
    parity = serve()
    end = qwen3_tokenizer.encode("<|im_end|>", add_special_tokens=False)
    replies = [qwen3_tokenizer.encode(f"Reply number {i}, different.", add_special_tokens=False) + end
               for i in range(6)]  # fmt: skip
    taken, shown = {}, {}
    for kind in TrajectoryKind:
        session_id = parity.new_session(trajectory=kind.value)
        scripted_agent(parity, session_id, replies)
        (taken[kind],) = samples(parity, session_id, reward=1.0)
        shown[kind] = parity.http.get(f"/sessions/{session_id}").json()
    assert len(shown[TrajectoryKind.LINEAR]["turns"]) == 4 and shown[TrajectoryKind.TREE]["node_count"] == 6
    linear, tree = taken[TrajectoryKind.LINEAR], taken[TrajectoryKind.TREE]
    for field in ["tokens", "loss_mask", "rollout_logprobs", "response_length", "status", "reward"]:
        assert tree[field] == linear[field], field
    assert tree["metadata"]["num_turns"] == linear["metadata"]["num_turns"] == 4
    assert sum(linear["loss_mask"]) == sum(len(replies[i]) for i in (0, 2, 4, 5))  # not the superseded 1 and 3


def test_a_trainer_format_comes_from_the_body_the_query_or_the_accept_header_alike(server: Server) -> None:
    session_id = branched_session(server)
    url = f"/sessions/{session_id}/samples"
    as_json = server.http.post(url).json()["samples"]
    replies = [
        server.http.post(url, json={"format": "skyrl"}),
        server.http.post(url, params={"format": "skyrl"}),
        server.http.post(url, headers={"Accept": "application/vnd.tito.skyrl+json"}),
    ]
    assert all(reply.status_code == 200 for reply in replies)
    bodies = [reply.json() for reply in replies]
    assert bodies[0] == bodies[1] == bodies[2] and bodies[0]["format"] == "skyrl"
    restored = PROJECTIONS["skyrl"].restore(bodies[0]["samples"])
    assert restored == [sample_from_json(sample) for sample in as_json]


def test_an_unknown_format_is_400_naming_the_choices(server: Server) -> None:
    session_id = branched_session(server)
    for request in [{"json": {"format": "openrlhf"}}, {"headers": {"Accept": "application/vnd.tito.openrlhf+json"}}]:
        response = server.http.post(f"/sessions/{session_id}/samples", **request)  # type: ignore[arg-type]
        assert response.status_code == 400
        message = response.json()["error"]["message"]
        assert "'openrlhf'" in message and "json, safetensors, verl, skyrl, prime-rl, verifiers, trl, miles" in message
