"""verl: each sample is an AgentLoopOutput as verl 0.9.1 declares it; the reward lands on the last response token.

verl (ray, hydra, a pinned transformers) does not install beside tito's CPU stack, so its type is mirrored here
field for field from the 0.9.1 wheel (`verl/experimental/agent_loop/agent_loop.py`: AgentLoopMetrics,
AgentLoopOutput; `extra="forbid"` is ours, so a misspelt field fails), and the reward placement repeats its
`_InternalAgentLoopOutput` rule (`rm_scores[-1] = reward_score`) on the export.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from tito.trajectory.exports import verl

from .samples import all_samples, tree_samples


class AgentLoopMetrics(BaseModel):
    model_config = ConfigDict(extra="forbid")

    generate_sequences: float = 0.0
    tool_calls: float = 0.0
    compute_score: float = 0.0
    num_preempted: int = -1


class AgentLoopOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float] | None = None
    routed_experts: Any | None = None
    multi_modal_data: dict[str, Any] | None = None
    reward_score: float | None = None
    num_turns: int = 0
    metrics: AgentLoopMetrics
    extra_fields: dict[str, Any] = {}
    mm_processor_kwargs: dict[str, Any] | None = None
    mm_processor_output: list[dict[str, Any]] | None = None


def test_every_sample_validates_as_verls_agent_loop_output_and_keeps_its_ids() -> None:
    samples = all_samples()
    for sample, exported in zip(samples, verl.export(samples), strict=True):
        output = AgentLoopOutput.model_validate(exported)
        assert output.prompt_ids + output.response_ids == sample.tokens.tolist()
        assert len(output.response_ids) == len(output.response_mask) == len(output.response_logprobs or ())
        assert output.response_mask == sample.loss_mask.tolist()[len(output.prompt_ids) :]
        assert sum(output.response_mask) == sum(sample.loss_mask), "the prompt holds no trained id"
        assert output.reward_score == sample.reward
        assert output.num_turns == sum(span.appended_messages + 1 for span in sample.spans)
        assert output.metrics.generate_sequences == 0.25 * len(sample.spans)


def test_verl_writes_the_reward_on_the_last_response_token() -> None:
    sample = tree_samples()[0]
    output = verl.export([sample])[0]
    rm_scores = [0.0] * len(output["response_mask"])
    rm_scores[-1] = output["reward_score"]  # verl 0.9.1 _InternalAgentLoopOutput
    assert rm_scores[-1] == sample.reward == 1.0 and sum(rm_scores) == 1.0
