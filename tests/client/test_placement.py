"""The pool's bookkeeping without servers: least-loaded choice with ties taken in turn, a failing server dead only
after `dead_after_s`, its sessions lost or (shared journal) moved, and a lost session never reported alive."""

from __future__ import annotations

import pytest

from tito.client import BadRequestError, ServerLoad, SessionLostError
from tito.client.placement import Placement

A, B, C = "http://a", "http://b", "http://c"


def placement(shared_journal: bool = False) -> Placement:
    return Placement([A, B, C], dead_after_s=5.0, poll_every_s=0.5, shared_journal=shared_journal)


def test_new_sessions_go_to_the_least_loaded_server_and_ties_take_turns() -> None:
    pool = placement()
    pool.note_load(A, ServerLoad(sessions=4, turns_in_flight=2, ready=True), now=0.0)
    pool.note_load(B, ServerLoad(sessions=1, turns_in_flight=0, ready=True), now=0.0)
    pool.note_load(C, ServerLoad(sessions=0, turns_in_flight=1, ready=True), now=0.0)
    chosen = []
    for number in range(6):
        url = pool.pick(tried=set())
        assert url is not None
        pool.place(f"s{number}", url)
        chosen.append(url)
    assert chosen == [B, C, B, C, B, C]  # A (score 6) waits until the others reach it
    assert pool.server_of("s0") == B


def test_a_server_not_ready_is_tried_last() -> None:
    pool = placement()
    pool.note_load(A, ServerLoad(sessions=0, turns_in_flight=0, ready=False), now=0.0)
    pool.note_load(B, ServerLoad(sessions=9, turns_in_flight=0, ready=True), now=0.0)
    pool.note_load(C, ServerLoad(sessions=9, turns_in_flight=0, ready=True), now=0.0)
    assert pool.candidates()[-1] == A


def test_a_failing_server_is_dead_only_after_dead_after_s_and_its_sessions_are_lost() -> None:
    pool = placement()
    pool.place("s1", A)
    pool.place("s2", B)
    assert pool.note_failure(A, "refused", now=10.0) == []
    assert pool.note_failure(A, "refused", now=14.9) == []
    assert pool.server_of("s1") == A
    lost = pool.note_failure(A, "refused", now=15.0)
    assert [record.session_id for record in lost] == ["s1"]
    assert A not in pool.candidates() and pool.stale(now=100.0) == [B, C]
    with pytest.raises(SessionLostError) as error:
        pool.server_of("s1")
    assert error.value.server_url == A and "refused" in error.value.reason
    assert pool.server_of("s2") == B
    assert pool.mark_dead(A, "again") == []  # reported once


def test_a_failed_create_gives_its_pick_back_and_tried_servers_are_skipped() -> None:
    pool = placement()
    assert pool.pick(tried=set()) == A
    pool.unpick(A)
    assert pool.pick(tried={A}) == B
    assert pool.pick(tried={A, B, C}) is None


def test_an_answer_clears_a_failing_server() -> None:
    pool = placement()
    pool.note_failure(A, "refused", now=0.0)
    pool.note_success(A)
    assert pool.note_failure(A, "refused", now=6.0) == []


def test_with_a_shared_journal_a_dead_servers_sessions_move_to_live_ones() -> None:
    pool = placement(shared_journal=True)
    for number in range(4):
        pool.place(f"s{number}", A)
    assert pool.mark_dead(A, "node lost") == []
    assert {pool.server_of(f"s{number}") for number in range(4)} == {B, C}
    assert pool.lost == {}


def test_an_unknown_session_is_a_bad_request() -> None:
    with pytest.raises(BadRequestError, match="not created through this pool"):
        placement().server_of("nope")


def test_a_create_waits_only_for_servers_never_heard_from_and_no_server_is_polled_twice_at_once() -> None:
    pool = placement()
    pool.note_load(A, ServerLoad(sessions=1, turns_in_flight=0, ready=True), now=0.0)
    assert pool.due(now=1.0) == ([B, C], [A])
    assert pool.due(now=1.0) == ([], [])  # all three in flight
    pool.polled(A)
    assert pool.due(now=1.0) == ([], [A])


def test_a_load_polled_before_later_creates_does_not_erase_them() -> None:
    """A background poll answers after the creates that followed its sending: its load counts none of them, so the
    server keeps them in its score (resetting it made a server that had just taken sessions look empty)."""
    pool = Placement([A, B], dead_after_s=5.0, poll_every_s=0.0, shared_journal=False)
    empty = ServerLoad(sessions=0, turns_in_flight=0, ready=True)
    pool.note_load(A, empty, now=0.0)
    pool.note_load(B, empty, now=0.0)
    sent_to_b = pool.poll_sent(B)
    for number in range(4):
        url = pool.pick(tried=set())
        assert url is not None
        pool.place(f"s{number}", url)
    pool.note_load(B, empty, now=1.0, created_before=sent_to_b)  # answered late, counted before the creates
    assert [pool.pick(tried=set()) for _ in range(2)] == [A, B], "the two servers hold two sessions each"
    pool.place("s4", A)
    pool.place("s5", B)
    pool.note_load(B, ServerLoad(sessions=3, turns_in_flight=0, ready=True), now=2.0, created_before=pool.poll_sent(B))
    assert pool.servers[B].score == 3, "a load polled after the creates counts them: none is counted twice"
