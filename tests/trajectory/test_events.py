"""`with_changes`: the per-turn copy of a frozen event or plan (slotted or not) is the value `dataclasses.replace`
gives."""

from __future__ import annotations

import dataclasses
from array import array

import pytest

from tito.trajectory.base import TurnPlan
from tito.trajectory.events import ConversationOpening, TurnCommitted, with_changes

TURN = TurnCommitted(
    "s", 0, None, 0, ({"role": "user", "content": "u"},), None, array("i", [1, 2]), array("i", [3]),
    array("f", [-0.5]), {"role": "assistant", "content": "a"}, "stop", "chatcmpl-0", "fp", {"engine": "x"}, 1.0,
)  # fmt: skip


def test_a_copy_with_changes_equals_what_dataclasses_replace_gives_and_leaves_the_original() -> None:
    opening = ConversationOpening(source="prefix")
    copy = with_changes(TURN, node_id=4, conversation_id="c2", opening=opening)
    assert copy == dataclasses.replace(TURN, node_id=4, conversation_id="c2", opening=opening)
    assert type(copy) is TurnCommitted
    assert (TURN.node_id, TURN.conversation_id, TURN.opening) == (0, "c0", None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.node_id = 5  # type: ignore[misc]


def test_a_plan_copy_keeps_every_other_field_and_an_unknown_field_is_refused() -> None:
    plan = TurnPlan(None, (), array("i"), ({"role": "user", "content": "u"},), (), 3)
    assert with_changes(plan, conversation="c1", branched=True) == dataclasses.replace(
        plan, conversation="c1", branched=True
    )
    with pytest.raises(TypeError, match=r"TurnPlan has no field \['conversaton'\]"):
        with_changes(plan, conversaton="c1")


def test_a_stored_turn_holds_no_attribute_dict_and_its_copy_refuses_an_unknown_field() -> None:
    assert not hasattr(TURN, "__dict__"), "slotted: a session keeps one per turn"
    copy = with_changes(TURN, metadata={"engine": "y"})
    assert copy.metadata == {"engine": "y"} and copy.output_ids is TURN.output_ids
    with pytest.raises(TypeError, match=r"TurnCommitted has no field \['node'\]"):
        with_changes(TURN, node=1)
