"""The writer: each fsync policy keeps its promise, `always` shares fsyncs between concurrent appends and never
runs them on the event loop's thread, segments rotate at their bound, one writer per directory."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.journal.events import created, same_event, scripted_event, turn
from tito.errors import ConfigurationError, JournalError
from tito.journal.replay import replay
from tito.journal.segments import list_segments
from tito.journal.writer import FsyncPolicy, JournalWriter


@dataclass
class FsyncLog:
    """Every fsync of a regular file: the thread it ran on and the file size it covered."""

    calls: list[tuple[int, int]] = field(default_factory=list)
    delay_s: float = 0.0

    def sizes(self) -> list[int]:
        return [size for _, size in self.calls]


@pytest.fixture
def fsync_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[FsyncLog]:
    log = FsyncLog()
    real_fsync: Callable[[int], None] = os.fsync

    def recording_fsync(fd: int) -> None:
        stat = os.fstat(fd)
        if not os.path.stat.S_ISDIR(stat.st_mode):
            log.calls.append((threading.get_ident(), stat.st_size))
            time.sleep(log.delay_s)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    yield log


def test_always_returns_only_after_an_fsync_covered_the_record(tmp_path: Path, fsync_log: FsyncLog) -> None:
    async def main() -> None:
        with JournalWriter(tmp_path, FsyncPolicy.ALWAYS) as writer:
            segment = list_segments(tmp_path)[-1]
            for i in range(5):
                await writer.append(scripted_event(i))
                assert fsync_log.sizes()[-1] == segment.stat().st_size

    asyncio.run(main())


def test_always_shares_one_fsync_between_concurrent_appends_off_the_loop_thread(
    tmp_path: Path, fsync_log: FsyncLog
) -> None:
    fsync_log.delay_s = 0.02
    events = [scripted_event(i) for i in range(60)]

    async def main() -> int:
        with JournalWriter(tmp_path, FsyncPolicy.ALWAYS) as writer:
            await asyncio.gather(*(writer.append(e) for e in events))
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert 1 <= len(fsync_log.calls) < 20, "group commit: a pending fsync covers every append waiting for it"
    assert all(thread != loop_thread for thread, _ in fsync_log.calls)
    assert all(map(same_event, replay(tmp_path).events, events))


def test_always_blocking_appends_from_threads_each_wait_for_their_fsync(tmp_path: Path, fsync_log: FsyncLog) -> None:
    with JournalWriter(tmp_path, FsyncPolicy.ALWAYS) as writer:
        threads = [threading.Thread(target=writer.append_blocking, args=(turn(f"t{i}", 0),)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10)
        assert fsync_log.sizes()[-1] == list_segments(tmp_path)[-1].stat().st_size
    assert sorted(e.session_id for e in replay(tmp_path).events) == [f"t{i}" for i in range(8)]


def test_interval_fsyncs_in_the_background_after_writes(tmp_path: Path, fsync_log: FsyncLog) -> None:
    async def main() -> None:
        with JournalWriter(tmp_path, FsyncPolicy.INTERVAL, interval_s=0.01) as writer:
            await writer.append(created("s"))
            assert fsync_log.calls == [], "interval: the append does not wait for a flush"
            deadline = time.monotonic() + 5
            while not fsync_log.calls and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
            assert fsync_log.sizes()[-1] == list_segments(tmp_path)[-1].stat().st_size

    asyncio.run(main())
    assert len(replay(tmp_path).events) == 1


def test_never_does_not_fsync_records_yet_they_are_readable(tmp_path: Path, fsync_log: FsyncLog) -> None:
    async def main() -> None:
        with JournalWriter(tmp_path, FsyncPolicy.NEVER, segment_bytes=2000) as writer:
            for i in range(20):
                await writer.append(scripted_event(i))
            assert len(replay(tmp_path).events) == 20, "written to the OS before append returns"

    asyncio.run(main())
    assert fsync_log.calls == []


def test_segments_rotate_at_their_bound_and_full_ones_are_fsynced(tmp_path: Path, fsync_log: FsyncLog) -> None:
    events = [scripted_event(i) for i in range(40)]
    with JournalWriter(tmp_path, FsyncPolicy.ALWAYS, segment_bytes=3000) as writer:
        for event in events:
            writer.append_blocking(event)
        assert writer.active_segment == len(list_segments(tmp_path)) > 3
    segments = list_segments(tmp_path)
    assert all(p.stat().st_size <= 3000 for p in segments)
    assert {p.stat().st_size for p in segments[:-1]} <= set(fsync_log.sizes())
    assert all(map(same_event, replay(tmp_path).events, events))


def test_a_reopened_writer_starts_a_new_segment_after_the_old_ones(tmp_path: Path) -> None:
    with JournalWriter(tmp_path, FsyncPolicy.NEVER) as writer:
        writer.append_blocking(created("a"))
    with JournalWriter(tmp_path, FsyncPolicy.NEVER) as writer:
        assert writer.active_segment == 2
        writer.append_blocking(created("b"))
    assert [e.session_id for e in replay(tmp_path).events] == ["a", "b"]


def test_a_second_writer_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    with JournalWriter(tmp_path, FsyncPolicy.NEVER), pytest.raises(JournalError, match="in use by another writer"):
        JournalWriter(tmp_path, FsyncPolicy.NEVER)
    JournalWriter(tmp_path, FsyncPolicy.NEVER).close()  # released on close


def test_a_closed_writer_refuses_appends_and_an_unknown_policy_is_a_configuration_error(tmp_path: Path) -> None:
    writer = JournalWriter(tmp_path, "never")
    writer.close()
    writer.close()
    with pytest.raises(JournalError, match="is closed"):
        writer.append_blocking(created("s"))
    with pytest.raises(ConfigurationError, match="'sometimes' is not one of: always, interval, never"):
        JournalWriter(tmp_path, "sometimes")


def test_a_failed_fsync_fails_the_waiting_append_and_every_later_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = JournalWriter(tmp_path, FsyncPolicy.ALWAYS)

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)

    async def main() -> None:
        with pytest.raises(JournalError, match="cannot fsync journal"):
            await writer.append(created("s"))
        with pytest.raises(JournalError, match="cannot fsync journal"):
            await writer.append(created("t"))

    asyncio.run(main())
    monkeypatch.undo()
    writer.close()
