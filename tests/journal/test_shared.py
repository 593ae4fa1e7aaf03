"""A shared journal directory: epochs are unique and increasing, a session is claimed by its first adopter only."""

from __future__ import annotations

import threading
from pathlib import Path

from tito.journal.shared import SharedJournalLayout


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


def test_the_first_claim_wins_and_later_claimers_learn_the_holder(tmp_path: Path) -> None:
    layout = SharedJournalLayout(tmp_path)
    layout.stream_dir(1).mkdir(parents=True)
    assert layout.claim(1, "session-aaaa", adopter_epoch=2) == 2
    assert layout.claim(1, "session-aaaa", adopter_epoch=3) == 2
    assert layout.claim(1, "session-bbbb", adopter_epoch=3) == 3
    assert layout.claims(1) == {"session-aaaa": 2, "session-bbbb": 3}
    assert layout.claims(2) == {}


def test_concurrent_claimers_of_one_session_agree_on_one_winner(tmp_path: Path) -> None:
    layout = SharedJournalLayout(tmp_path)
    layout.stream_dir(1).mkdir(parents=True)
    answers: dict[int, int] = {}

    def claim(epoch: int) -> None:
        answers[epoch] = layout.claim(1, "contested-session", epoch)

    threads = [threading.Thread(target=claim, args=(epoch,)) for epoch in range(2, 18)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = set(answers.values())
    assert len(winners) == 1 and answers[winners.pop()] in answers
