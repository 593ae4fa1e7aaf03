"""A shared journal directory: epochs are unique and increasing, a session is claimed by its first adopter only."""

from __future__ import annotations

import threading
from pathlib import Path

from tito.journal.shared import Claim, SharedJournalLayout


def test_epochs_are_unique_and_increasing_across_concurrent_starts(tmp_path: Path) -> None:
    layout = SharedJournalLayout(tmp_path)
    issued: list[int] = []

    def start() -> None:
        issued.append(SharedJournalLayout(tmp_path).next_epoch())

    threads = [threading.Thread(target=start) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(issued) == list(range(1, 17))
    assert layout.next_epoch() == 17


def test_a_lost_epoch_counter_never_reissues_an_epoch_that_wrote_a_stream(tmp_path: Path) -> None:
    layout = SharedJournalLayout(tmp_path)
    layout.stream_dir(41).mkdir(parents=True)
    assert layout.next_epoch() == 42
    (tmp_path / "epoch").unlink()
    layout.stream_dir(42).mkdir()
    assert layout.next_epoch() == 43


def nobody_died(epoch: int) -> bool:
    return False


def test_the_first_claim_wins_and_later_claimers_learn_the_holder(tmp_path: Path) -> None:
    layout = SharedJournalLayout(tmp_path)
    layout.stream_dir(1).mkdir(parents=True)
    won = layout.claim(1, "session-aaaa", 2, is_dead=nobody_died)
    assert won == Claim(2, 1, complete=False)
    assert layout.claim(1, "session-aaaa", 3, is_dead=nobody_died) == won, "a live claimer's pending claim holds"
    layout.complete_claim(1, "session-aaaa", won)
    assert layout.claim(1, "session-aaaa", 3, is_dead=lambda epoch: True) == Claim(2, 1, complete=True)
    assert layout.read_claim(1, "session-bbbb") is None


def test_a_pending_claim_of_a_dead_claimer_is_superseded_by_the_next_generation(tmp_path: Path) -> None:
    layout = SharedJournalLayout(tmp_path)
    layout.stream_dir(1).mkdir(parents=True)
    layout.claim(1, "session-aaaa", 2, is_dead=nobody_died)  # epoch 2 dies mid-copy
    second = layout.claim(1, "session-aaaa", 3, is_dead=lambda epoch: epoch == 2)
    assert second == Claim(3, 2, complete=False)
    layout.complete_claim(1, "session-aaaa", second)
    assert layout.read_claim(1, "session-aaaa") == Claim(3, 2, complete=True)


def test_a_copy_names_its_source(tmp_path: Path) -> None:
    layout = SharedJournalLayout(tmp_path)
    layout.stream_dir(5).mkdir(parents=True)
    layout.record_copy(5, "session-aaaa", 1)
    layout.record_copy(5, "session-aaaa", 3)
    assert layout.copies(5) == {"session-aaaa": 3}
    assert layout.copies(6) == {}


def test_concurrent_claimers_of_one_session_agree_on_one_winner(tmp_path: Path) -> None:
    layout = SharedJournalLayout(tmp_path)
    layout.stream_dir(1).mkdir(parents=True)
    answers: dict[int, Claim] = {}

    def claim(epoch: int) -> None:
        answers[epoch] = layout.claim(1, "contested-session", epoch, is_dead=nobody_died)

    threads = [threading.Thread(target=claim, args=(epoch,)) for epoch in range(2, 18)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = set(answers.values())
    assert len(winners) == 1 and next(iter(winners)).epoch in answers
