"""verl: what tito decides itself, without verl installed (verl's own code checks the rest: trainers/test_verl.py):
turns counted as verl's tool loop counts them, the group where verl's GRPO groups (`uid`), none when there is no
group, and the budgets that keep a record inside verl's padded batch."""

from __future__ import annotations

import pytest

from tito.trajectory.exports import verl
from tito.trajectory.samples import Budgets, SampleAssemblyError

from .rollouts import BUDGETS, rollout, session
from .samples import linear_samples


def test_turns_are_one_for_the_prompt_one_per_reply_and_one_per_round_of_tool_results() -> None:
    assert [record["num_turns"] for record in verl.export(rollout())] == [6, 4, 8]


def test_the_group_is_verls_uid_and_a_sample_without_a_group_leaves_verls_own() -> None:
    assert [record["extra_fields"]["uid"] for record in verl.export(rollout())] == ["g1", "g1", "g2"]
    (ungrouped,) = verl.export(linear_samples())
    assert "uid" not in ungrouped["extra_fields"] and "tito" in ungrouped["extra_fields"]


def test_the_budgets_keep_whole_turns_within_the_response_and_refuse_a_prompt_over_its_own() -> None:
    for record in verl.export(rollout(BUDGETS)):
        assert len(record["prompt_ids"]) <= 8 and len(record["response_ids"]) <= 23
    cut = rollout(BUDGETS)[2]
    assert cut.status == "truncated" and len(cut.spans) == 2 and cut.metadata["truncated_turns"] == 2
    with pytest.raises(SampleAssemblyError, match="prompt is 3 tokens, over prompt_length=2"):
        from tito.trajectory.samples import session_samples

        session_samples("s", session(2), budgets=Budgets(prompt_length=2))
