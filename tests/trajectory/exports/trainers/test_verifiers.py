"""verifiers 0.4.0, installed (the cached `trainers-verifiers` venv of scripts/trainer_venvs.sh, Python 3.12 as
verifiers requires): each record loads as verifiers' `WireTrace` (the form its trainers read), whose one branch is
the sample (ids, sampled mask, logprobs), whose messages are the conversation the agent had, and whose reward,
group (task key), turn count and truncation are the sample's."""

from __future__ import annotations

import pytest
from verifiers.v1.trace import WireTrace
from verifiers.v1.types import AssistantMessage, SystemMessage, ToolMessage, UserMessage

from tito.trajectory.exports import verifiers

from ..rollouts import BUDGETS, rollout

pytestmark = pytest.mark.trainers


def test_each_trace_has_one_branch_that_is_the_sample_with_its_messages() -> None:
    samples = rollout()
    for sample, record in zip(samples, verifiers.export(samples), strict=True):
        trace = WireTrace.model_validate(record)
        (branch,) = trace.branches
        assert branch.trainable
        assert branch.token_ids == sample.tokens.tolist()
        assert branch.sampled_mask == [bool(value) for value in sample.loss_mask]
        assert branch.logprobs == pytest.approx(sample.rollout_logprobs.tolist())
        assert branch.advantages is None, "advantages are left to the orchestrator"
        assert trace.reward == sample.reward and trace.task.key == sample.group_id
        assert trace.num_turns == len(sample.spans) and len(trace.assistant_messages) == len(sample.spans)
        assert [type(message) for message in branch.messages[:2]] == [SystemMessage, UserMessage]
        assert [message.content for message in trace.assistant_messages] == [
            span.assistant["content"] for span in sample.spans if span.assistant
        ]
        tool_results = [message for message in branch.messages if isinstance(message, ToolMessage)]
        assert [message.content for message in tool_results] == [f"result {i}" for i in range(len(sample.spans) - 1)]
        assert all(isinstance(message, AssistantMessage) for message in trace.assistant_messages)
        assert not trace.is_truncated
        assert trace.to_record()["info"]["tito"]["spans"][0]["response_id"] == sample.spans[0].response_id


def test_a_sample_cut_by_the_budgets_is_a_truncated_trace_of_the_kept_turns() -> None:
    cut = rollout(BUDGETS)[-1]
    trace = WireTrace.model_validate(verifiers.export([cut])[0])
    assert cut.status == "truncated" and trace.is_truncated
    assert trace.num_turns == len(cut.spans) == 2 and trace.branches[0].token_ids == cut.tokens.tolist()


def test_a_tool_calling_reply_and_content_parts_take_verifiers_types() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 1}}}
    reply = {"role": "assistant", "content": None, "reasoning_content": "think", "tool_calls": [call]}
    message = AssistantMessage.model_validate(verifiers.verifiers_message(reply))
    assert message.tool_calls and message.tool_calls[0].name == "add" and message.tool_calls[0].arguments == '{"a": 1}'
    assert message.reasoning_content == "think"
    parts = {
        "role": "user",
        "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "u"}}],
    }
    assert UserMessage.model_validate(verifiers.verifiers_message(parts)).content[1].image_url.url == "u"  # type: ignore[union-attr]
