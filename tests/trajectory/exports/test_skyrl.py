"""SkyRL: a step-wise GeneratorOutput (skyrl 0.3.0, `skyrl/train/generators/base.py`), cut at the spans.

skyrl needs Python 3.12 (tito runs 3.11 here), so GeneratorOutput's keys are mirrored as a TypedDict and checked
strictly; the step cut follows SkyRL's own step-wise generator: a step's prompt is everything before the turn's
sampled ids, its response the sampled ids plus the observation after them, the step reward on its last sampled id.
"""

from __future__ import annotations

from typing import Any, NotRequired

from pydantic import ConfigDict, TypeAdapter, with_config
from typing_extensions import TypedDict

from tito.trajectory.exports import skyrl

from .samples import all_samples, tree_samples


class TrajectoryID(TypedDict):
    instance_id: str
    repetition_id: int


@with_config(ConfigDict(extra="forbid"))
class GeneratorOutput(TypedDict):
    prompt_token_ids: list[list[int]]
    response_ids: list[list[int]]
    rewards: list[float] | list[list[float]]
    loss_masks: list[list[int]]
    stop_reasons: list[str] | None
    rollout_metrics: dict[str, Any] | None
    rollout_logprobs: list[list[float]] | None
    trajectory_ids: list[TrajectoryID] | None
    trajectory_generation_times: list[float] | None
    trajectory_time_splits: dict[str, list[float]] | None
    rollout_expert_indices: list[Any] | None
    is_last_step: list[bool] | None
    env_metrics: list[dict[str, Any]] | None
    pixel_values: NotRequired[list[Any] | None]
    image_grid_thw: NotRequired[list[Any] | None]


def test_the_export_validates_as_a_generator_output_with_one_row_per_turn() -> None:
    samples = all_samples()
    output = skyrl.export(samples)
    steps = {key: value for key, value in output.items() if key != "tito"}
    TypeAdapter(GeneratorOutput).validate_python(steps, strict=True)
    assert len(output["response_ids"]) == sum(len(sample.spans) for sample in samples)
    assert output["is_last_step"].count(True) == len(samples)


def test_each_step_is_its_turns_prompt_then_its_reply_and_observation_with_the_reward_on_its_last_sampled_id() -> None:
    sample = tree_samples()[0]
    output = skyrl.export([sample])
    tokens = sample.tokens.tolist()
    for index, span in enumerate(sample.spans):
        assert output["prompt_token_ids"][index] == tokens[: span.start]
        assert output["prompt_token_ids"][index] + output["response_ids"][index] == (
            tokens[: sample.spans[index + 1].start] if index + 1 < len(sample.spans) else tokens
        )
        reward_at = span.end - span.start - 1
        expected = sample.reward if index == len(sample.spans) - 1 else 0.0
        assert output["rewards"][index][reward_at] == expected and sum(output["rewards"][index]) == expected
    assert output["is_last_step"] == [False, False, True]
    assert output["stop_reasons"] == ["stop"] * 3


def test_a_groups_samples_are_repetitions_of_one_instance() -> None:
    output = skyrl.export(tree_samples())
    firsts = [tid for tid, last in zip(output["trajectory_ids"], output["is_last_step"], strict=True) if last]
    assert firsts == [{"instance_id": "prompt-3", "repetition_id": 0}, {"instance_id": "prompt-3", "repetition_id": 1}]
