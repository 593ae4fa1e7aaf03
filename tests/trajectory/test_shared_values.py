"""Tools and repeated metadata are stored once: equal values (as JSON too) become one object, others stay apart."""

from __future__ import annotations

import dataclasses
import gc
import math
import sys
from array import array
from typing import Any

import orjson
import pytest

from tito.journal.codec import decode_event, encode_event
from tito.trajectory import shared_values
from tito.trajectory.episode import Episode
from tito.trajectory.events import SessionConfig, TurnCommitted
from tito.trajectory.shared_values import SharedValues, key_sharing_dict

TOOLS = ({"type": "function", "function": {"name": "run", "parameters": {"type": "object", "default": 1}}},)


def turn(node_id: int, tools: Any = TOOLS, **metadata: Any) -> TurnCommitted:
    """A fresh turn whose tools and metadata are new objects each time, as a parsed request gives."""
    return TurnCommitted(
        "s", node_id, None if node_id == 0 else node_id - 1, 0 if node_id == 0 else 3,
        ({"role": "user", "content": f"u{node_id}"},), tuple(orjson.loads(orjson.dumps(tools))),
        array("i", [1, 2]), array("i", [3]), array("f", [-0.5]), {"role": "assistant", "content": "a"}, "stop",
        f"chatcmpl-{node_id}", f"fp{node_id}", orjson.loads(orjson.dumps({"sampling": {"top_p": 1.0}, **metadata})),
        0.0,
    )  # fmt: skip


def test_equal_tools_and_metadata_containers_become_the_object_already_held() -> None:
    shared = SharedValues()
    first, second = shared.share(turn(0)), shared.share(turn(1))
    assert second.tools is first.tools
    assert second.metadata["sampling"] is first.metadata["sampling"]
    assert second == turn(1), "the shared turn is equal to the one given"


def test_what_a_turn_measured_of_itself_is_kept_as_it_is_and_never_enters_the_table() -> None:
    shared = SharedValues(kept=2)
    first = shared.share(turn(0, timings={"engine": 0.5}))
    later = [shared.share(turn(node_id, timings={"engine": 0.5 + node_id})) for node_id in range(1, 5)]
    assert [kept.metadata["timings"] for kept in later] == [{"engine": 1.5 + step} for step in range(4)]
    assert shared.share(turn(5)).metadata["sampling"] is first.metadata["sampling"], "the timings pushed nothing out"
    assert shared.value({"engine": 0.5}) is not first.metadata["timings"], "the table never held a turn's timings"


def test_values_equal_in_python_but_not_as_json_stay_apart() -> None:
    shared = SharedValues()
    held = shared.share(turn(0))
    as_float = [{**TOOLS[0], "function": {**TOOLS[0]["function"], "parameters": {"type": "object", "default": 1.0}}}]
    other = shared.share(turn(1, tools=as_float))
    assert other.tools == held.tools and other.tools is not held.tools  # 1 == 1.0, but the JSON differs
    assert orjson.dumps(other.tools) != orjson.dumps(held.tools)
    zero, negative = shared.value([0.0]), shared.value([-0.0])
    assert negative is not zero and math.copysign(1, negative[0]) == -1
    nan = [float("nan")]
    assert shared.value(nan) is nan and shared.value([float("nan")]) is not nan  # a NaN equals nothing


def test_an_episode_live_and_replayed_holds_one_tools_object_for_all_its_turns() -> None:
    live = Episode(SessionConfig())
    events = [turn(0), turn(1), turn(2)]
    for event in events:
        live.apply(event)
    stored = [node.turn for node in live.store]
    assert all(stored_turn.tools is stored[0].tools for stored_turn in stored)
    assert stored == events
    replayed = Episode(SessionConfig())
    for event in events:
        replayed.apply(decode_event(*encode_event(event)))
    assert [node.turn for node in replayed.store] == stored
    assert [encode_event(node.turn) for node in replayed.store] == [encode_event(event) for event in events]


def test_the_table_is_bounded_and_a_value_that_left_stays_with_its_turns() -> None:
    shared = SharedValues(kept=2)
    first = shared.value(["a"])
    shared.value(["b"]), shared.value(["c"])
    assert shared.value(["a"]) is not first, "the least recently used value left the table"
    assert first == ["a"]


def test_a_turns_metadata_is_kept_equal_in_its_order_with_a_keys_table_it_shares() -> None:
    shared = SharedValues()
    metadata = {f"fact_{index}": index for index in range(12)} | {"timings": {"engine": 0.5}, "requested_at": 1.5}
    kept = [shared.share(dataclasses.replace(turn(0), metadata=dict(metadata))).metadata for _ in range(3)]
    assert kept[0] == metadata and list(kept[0]) == list(metadata)
    assert orjson.dumps(kept[-1]) == orjson.dumps(metadata)
    assert sys.getsizeof(kept[-1]) < sys.getsizeof(dict(metadata)), "its keys live in a table the others share"


def test_metadata_keys_that_could_name_an_attribute_give_a_plain_copy() -> None:
    odd = {"a": 1, "__class__": 2, 3: 4}
    kept = key_sharing_dict(odd)
    assert kept == odd and kept is not odd and list(kept) == list(odd)
    assert key_sharing_dict({1: "a"}) == {1: "a"}


def test_a_held_value_is_found_by_identity_until_it_leaves_the_table() -> None:
    shared = SharedValues(kept=1)
    held = shared.value(["a"])
    assert shared.value(held) is held
    shared.value(["b"])
    assert shared.value(["a"]) is not held, "a value that left is not found by its identity any more"


def test_held_tuple_gives_the_held_tools_for_the_same_list_and_follows_its_changes() -> None:
    shared = SharedValues()
    tools = [dict(tool) for tool in TOOLS]
    held = shared.held_tuple(tools)
    assert held == TOOLS and shared.held_tuple(tools) is held
    assert shared.held_tuple([dict(tool) for tool in TOOLS]) is held, "an equal list (another request's) too"
    tools.append({"type": "function", "function": {"name": "edit"}})
    changed = shared.held_tuple(tools)
    assert changed == tuple(tools) and changed is not held, "a list changed in place gives its new tools"
    tools[1] = {"type": "function", "function": {"name": "view"}}
    assert shared.held_tuple(tools)[1]["function"]["name"] == "view"
    as_float = orjson.loads(orjson.dumps(TOOLS).replace(b'"default":1', b'"default":1.0'))
    assert as_float == list(TOOLS) and shared.held_tuple(as_float) is not held, "equal in Python, not as JSON: apart"


def test_held_tuple_keeps_no_reference_to_a_list_of_other_objects_and_finds_a_list_of_held_ones_unencoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A request's own tools, equal to the held ones, are not kept alive by the table (a second copy per session);
    a list of the held objects themselves (what a body reader keeps) is found again without encoding it."""
    shared = SharedValues()
    held = shared.held_tuple([dict(tool) for tool in TOOLS])
    own = [dict(tool) for tool in TOOLS]
    assert shared.held_tuple(own) is held
    assert gc.get_referrers(own[0]) == [own], "the table holds no reference to the request's own tools"
    reused = list(held)
    assert shared.held_tuple(reused) is held

    def no_encoding(value: Any) -> bytes:
        raise AssertionError("encoded again")

    monkeypatch.setattr(shared_values.orjson, "dumps", no_encoding)
    assert shared.held_tuple(reused) is held


def test_held_json_is_the_held_tools_json_written_once() -> None:
    shared = SharedValues()
    first = shared.held_json([dict(tool) for tool in TOOLS])
    assert first == orjson.dumps(TOOLS)
    assert shared.held_json([dict(tool) for tool in TOOLS]) is first, "equal tools: the same bytes, not a copy"
    as_float = orjson.loads(orjson.dumps(TOOLS).replace(b'"default":1', b'"default":1.0'))
    assert shared.held_json(as_float) == orjson.dumps(as_float)
