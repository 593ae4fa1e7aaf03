"""SkyRL: what tito decides itself, without SkyRL installed (SkyRL's own code checks the rest:
trainers/test_skyrl.py): a step per turn with the reward on its last sampled id, each sample's facts on its last
step's env_metrics, and trajectory ids that group by group id yet never collide across `/samples` calls."""

from __future__ import annotations

from tito.trajectory.exports import skyrl

from .rollouts import rollout
from .samples import tree_samples


def test_each_step_is_its_turns_prompt_then_its_reply_and_observation_with_the_reward_on_its_last_sampled_id() -> None:
    sample = tree_samples()[0]
    output = skyrl.export([sample])
    tokens = sample.tokens.tolist()
    for index, span in enumerate(sample.spans):
        assert output["prompt_token_ids"][index] == tokens[: span.start]
        end = sample.spans[index + 1].start if index + 1 < len(sample.spans) else len(tokens)
        assert output["response_ids"][index] == tokens[span.start : end]
        expected = sample.reward if index == len(sample.spans) - 1 else 0.0
        assert output["rewards"][index][span.end - span.start - 1] == expected == sum(output["rewards"][index])
    assert output["is_last_step"] == [False, False, True]
    assert output["env_metrics"][:2] == [{}, {}] and set(output["env_metrics"][2]) == {"tito"}
    assert "tito" not in output, "SkyRL slices every list key per step: tito adds none"


def test_sessions_of_one_group_sampled_in_separate_calls_get_distinct_repetitions() -> None:
    ids = [
        tid
        for sample in rollout()
        for tid, last in zip(*(skyrl.export([sample])[key] for key in ("trajectory_ids", "is_last_step")), strict=True)
        if last
    ]
    assert [tid["instance_id"] for tid in ids] == ["g1", "g1", "g2"]
    assert len({tid["repetition_id"] for tid in ids}) == 3
    assert skyrl.repetition_id("s-a", 0) == skyrl.repetition_id("s-a", 0) != skyrl.repetition_id("s-a", 1)
