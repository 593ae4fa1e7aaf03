"""The dialect edge's lookup of the stored turn a round-trip value names, and the label a dialect's turn is
recorded with."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from tests.trajectory.turns import assistant, turn, user
from tito.server.dialects.edge import stored_turn, turn_label
from tito.server.sessions.registry import Session
from tito.server.turns.completions import TurnLabel
from tito.trajectory.events import SessionConfig, TrajectoryKind
from tito.trajectory.nodes import NodeStore
from tito.trajectory.tree import TreeTrajectory


def test_the_dialect_edge_finds_a_turn_without_scanning_the_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A request resending n signed blocks looked each up by a scan of every node: O(turns^2) per request."""
    trajectory = TreeTrajectory(SessionConfig(trajectory=TrajectoryKind.TREE))
    messages = [user("q0")]
    for i in range(20):
        turn(trajectory, messages, f"a{i}")
        messages += [assistant(f"a{i}"), user(f"q{i + 1}")]

    def no_scan(self: NodeStore) -> None:
        raise AssertionError("a response id lookup iterated every node")

    monkeypatch.setattr(NodeStore, "__iter__", no_scan)
    session = cast(Session, SimpleNamespace(trajectory=trajectory))
    assert [stored_turn(session, f"chatcmpl-{i}") for i in range(20)] == [
        trajectory.store.get(i).turn for i in range(20)
    ]
    assert stored_turn(session, "chatcmpl-never") is None


def test_a_label_names_the_response_id_and_puts_what_the_edge_recorded_then_the_dialect_in_the_metadata() -> None:
    label = turn_label("resp_1", "responses", {"hosted_tools": ["web_search"]})
    assert label == TurnLabel("resp_1", {"hosted_tools": ["web_search"], "dialect": "responses"})
    assert list(label.metadata) == ["hosted_tools", "dialect"]
    assert turn_label("msg_1", "anthropic") == TurnLabel("msg_1", {"dialect": "anthropic"})
