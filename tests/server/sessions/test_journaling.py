"""`tito serve --journal`: a server stopped and started again on the same journal resumes every session token-exact,
keeps deleted and expired sessions gone (TTL clocks from the events' wall times), and restores everything before a
damaged record, reporting it; tree sessions are rebuilt too. (Kill -9 crash tests: tests/server/test_crash.py.)"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.journal.events import created, turn
from tests.server.conftest import Server, running_server
from tests.server.journal_agent import Agent, comparable, samples_of, stored_response_ids
from tito.journal import JournalWriter, replay
from tito.journal.segments import list_segments
from tito.server.errors import SessionGoneError
from tito.server.sessions.journaling import ServerJournal, open_server_journal
from tito.server.sessions.registry import SessionRegistry
from tito.tokenizer_loading import LocalTokenizer
from tito.trajectory import create_episode
from tito.trajectory.events import SessionDeleted

AGENTS, TURNS = 3, 4


def journal_of(server: Server) -> ServerJournal:
    sink = server.state.registry.sink
    assert isinstance(sink, ServerJournal)
    return sink


def run_turns(server: Server, agents: list[Agent], turns: int) -> list[list[int]]:
    """`turns` turns of every agent, round robin; the prompt ids the engine received for each."""
    prompts = []
    for _ in range(turns):
        for agent in agents:
            agent.turn(server.http)
            prompts.append(list(server.engine.requests[-1].prompt_ids))
    return prompts


@pytest.fixture(scope="module")
def uninterrupted(qwen3_tokenizer: LocalTokenizer) -> tuple[list[list[int]], list[list[object]]]:
    """Prompt ids of every turn and every session's samples, from a run without restarts."""
    with running_server(qwen3_tokenizer) as server:
        agents = [Agent(index) for index in range(AGENTS)]
        for agent in agents:
            agent.open(server.http)
        prompts = run_turns(server, agents, TURNS)
        return prompts, [comparable(samples_of(server.http, agent.session_id)) for agent in agents]


def test_a_restart_resumes_every_session_token_exact(
    qwen3_tokenizer: LocalTokenizer, tmp_path: Path, uninterrupted: tuple[list[list[int]], list[list[object]]]
) -> None:
    prompts, samples = uninterrupted
    agents = [Agent(index) for index in range(AGENTS)]
    with running_server(qwen3_tokenizer, journal=tmp_path) as server:
        for agent in agents:
            agent.open(server.http)
        before = run_turns(server, agents, TURNS // 2)
    with running_server(qwen3_tokenizer, journal=tmp_path) as server:
        restored = journal_of(server).restored
        assert (restored.live_sessions, restored.turns, restored.report.damage) == (AGENTS, AGENTS * TURNS // 2, None)
        for agent in agents:
            assert stored_response_ids(server.http, agent.session_id) == agent.received
        after = run_turns(server, agents, TURNS - TURNS // 2)
        assert before + after == prompts
        assert [comparable(samples_of(server.http, agent.session_id)) for agent in agents] == samples


def test_deleted_and_expired_sessions_stay_gone_and_ttl_clocks_survive_the_restart(
    qwen3_tokenizer: LocalTokenizer, tmp_path: Path
) -> None:
    with running_server(qwen3_tokenizer, journal=tmp_path) as server:
        deleted = server.new_session()
        assert server.http.delete(f"/sessions/{deleted}").status_code == 204
        expired, clocked, kept = (server.new_session(ttl_seconds=ttl) for ttl in (0.3, 2.0, 60.0))
    time.sleep(1.2)  # `expired` idles past its TTL while the server is down: journaled as expired on start
    with running_server(qwen3_tokenizer, journal=tmp_path) as server:
        assert journal_of(server).restored.expired_on_start == 1
        assert server.http.get(f"/sessions/{deleted}").status_code == 410
        gone = server.http.get(f"/sessions/{expired}")
        assert gone.status_code == 410 and "expired" in gone.json()["error"]["message"]
        assert server.http.get(f"/sessions/{kept}").status_code == 200
        time.sleep(1.0)  # 2.2 s since its last event, 1 s since the restart: its TTL clock counts the downtime
        assert server.http.get(f"/sessions/{clocked}").status_code == 410
    logs = replay(tmp_path).sessions
    assert logs[expired].deleted is not None and logs[expired].deleted.reason == "expired"
    assert logs[kept].deleted is None


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_a_damaged_journal_restores_everything_before_the_damage_and_reports_it(
    qwen3_tokenizer: LocalTokenizer,
    tmp_path: Path,
    uninterrupted: tuple[list[list[int]], list[list[object]]],
    damage: str,
) -> None:
    prompts, _ = uninterrupted
    agents = [Agent(index) for index in range(AGENTS)]
    with running_server(qwen3_tokenizer, journal=tmp_path) as server:
        for agent in agents:
            agent.open(server.http)
        run_turns(server, agents, 2)
    segment = list_segments(tmp_path)[-1]
    data = bytearray(segment.read_bytes())
    if damage == "truncated":
        del data[-7:]
    else:
        data[-20] ^= 0xFF
    segment.write_bytes(bytes(data))
    last = agents[-1]  # the damaged record is its second turn: the agent never got that reply, as after a crash
    last.messages.pop()
    last.received.pop()
    last.awaiting = True
    with running_server(qwen3_tokenizer, journal=tmp_path) as server:
        report = journal_of(server).restored.report
        assert report.damage is not None and report.damage.segment == segment
        for agent in agents:
            assert stored_response_ids(server.http, agent.session_id) == agent.received
        resumed = run_turns(server, [last], 1)
        assert resumed == [prompts[2 * AGENTS - 1]]


def test_restore_rebuilds_tree_sessions_and_sets_aside_what_it_cannot_rebuild(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tree = replace(created("tree"), config=replace(created("tree").config, sample_postprocessor=None))
    tree_turns = [turn("tree", node) for node in range(3)]
    hookless = created("hookless")  # its sample postprocessor, package.module:postprocess, does not import here
    events = [tree, *tree_turns, hookless, turn("hookless", 0), turn("gone", 4), SessionDeleted("gone", 2000.0)]
    with JournalWriter(tmp_path, "never") as writer:
        for event in events:  # "gone": its creation compacted away, its deletion still in the journal
            writer.append_blocking(event)
    registry = SessionRegistry()
    journal = open_server_journal(registry, tmp_path, "never")
    try:
        restored = registry.get("tree").trajectory
        reference = create_episode(tree.config)
        for event in tree_turns:
            reference.apply(event)
        assert restored.describe() == reference.describe()
        assert [span.node_id for s in restored.sample_sequences() for span in s.spans] == [0, 1, 2]
        for session_id in ("gone", "hookless"):
            with pytest.raises(SessionGoneError):
                registry.get(session_id)
        facts = journal.restored
        assert (facts.live_sessions, facts.turns, facts.unrestorable) == (1, 3, ("hookless",))
        assert "hookless" in str(facts) and "package.module" in caplog.text  # the reason is logged
    finally:
        journal.close()
    assert replay(tmp_path).sessions["hookless"].deleted is None  # left as it was for a build that can rebuild it
