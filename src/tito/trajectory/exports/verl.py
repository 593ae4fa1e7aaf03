"""verl: one `AgentLoopOutput` per sample, as verl 0.9.1 declares it (`verl.experimental.agent_loop.agent_loop`).

`prompt_ids` are the ids before the first sampled id, `response_ids` the rest (sampled ids and the observations
between turns), `response_mask` the loss mask over the response (1: LLM-generated, 0: tool or user ids),
`response_logprobs` the rollout logprobs there. `reward_score` is the sample's reward: verl's agent loop writes it
on the last response token (`rm_scores[-1] = reward_score`). `num_turns` counts as verl's tool agent loop does:
one for the prompt, one per assistant turn, one per round of messages appended between turns (a round of tool
results is one turn, whatever its count); `metrics` is an `AgentLoopMetrics` (`generate_sequences`: seconds from
request to commit, summed over the turns that recorded both). verl turns every `extra_fields` key into a column of
the batch's non-tensor data, sliced per sample and otherwise untouched: `extra_fields["uid"]` is the sample's group
id (verl's GRPO groups by `non_tensor_batch["uid"]`; left out when the sample has none, so verl's own uid stands),
`extra_fields["tito"]` the sample's other facts (spans, status, metadata). Inside verl's agent loop, post the
loop's `uid` as the samples' `group_id`, so both agree. verl's `rollout.prompt_length` and `response_length` are
the `/samples` budgets of the same names (a longer record would not fit verl's padded batch).

Imports nothing from tito but trajectory.codec, trajectory.exports.common and trajectory.samples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tito.trajectory.codec import sample_facts
from tito.trajectory.exports.common import TITO_KEY, JsonRecord, facts_in, prompt_length, rebuilt
from tito.trajectory.samples import Sample

NAME = "verl"
UID_KEY = "uid"
"""The non-tensor column verl's GRPO groups by."""
UPSTREAM = "verl 0.9.1: verl.experimental.agent_loop.agent_loop.AgentLoopOutput (and AgentLoopMetrics)"
FIELDS = ("prompt_ids", "response_ids", "response_mask", "response_logprobs", "reward_score", "num_turns",
          "metrics", "extra_fields")  # fmt: skip
"""The AgentLoopOutput fields written; the rest (routed_experts, multi-modal ones) keep verl's defaults."""


def export(samples: Sequence[Sample]) -> list[JsonRecord]:
    return [_output(sample) for sample in samples]


def _output(sample: Sample) -> JsonRecord:
    split = prompt_length(sample)
    seconds = sum(
        span.completion_timestamp - span.request_timestamp
        for span in sample.spans
        if span.request_timestamp is not None
    )
    return {
        "prompt_ids": sample.tokens[:split].tolist(),
        "response_ids": sample.tokens[split:].tolist(),
        "response_mask": sample.loss_mask[split:].tolist(),
        "response_logprobs": sample.rollout_logprobs[split:].tolist(),
        "reward_score": sample.reward,
        "num_turns": verl_turns(sample),
        "metrics": {"generate_sequences": seconds, "tool_calls": 0.0, "compute_score": 0.0, "num_preempted": -1},
        "extra_fields": {TITO_KEY: sample_facts(sample), **({UID_KEY: sample.group_id} if sample.group_id else {})},
    }


def verl_turns(sample: Sample) -> int:
    """Turns as verl's tool agent loop counts them (`user_turns + assistant_turns + 1`)."""
    appended_rounds = sum(1 for span in sample.spans[1:] if span.appended_messages)
    return 1 + len(sample.spans) + appended_rounds


def restore(outputs: Sequence[Mapping[str, Any]]) -> list[Sample]:
    samples = []
    for index, output in enumerate(outputs):
        facts = facts_in(output["extra_fields"], f"verl output {index}: extra_fields")
        prompt = list(output["prompt_ids"])
        samples.append(
            rebuilt(
                {**facts, "reward": output["reward_score"]},
                prompt + list(output["response_ids"]),
                [0] * len(prompt) + list(output["response_mask"]),
                [0.0] * len(prompt) + list(output["response_logprobs"]),
            )
        )
    return samples
