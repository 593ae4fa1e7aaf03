"""Leases: a live writer is seen live; a crashed (lock free), released, fenced or silent (TTL) one is dead; a fenced
holder stops writing on its own."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from tito.journal.leases import Lease, LeaseKeeper, WriterState, fence, read_lease, write_lease, writer_state
from tito.journal.shared import SharedJournalLayout
from tito.journal.writer import DirectoryLock


def start_life(layout: SharedJournalLayout, ttl_s: float = 2.0) -> tuple[int, DirectoryLock, LeaseKeeper]:
    """What a process start does: an epoch, its stream's lock (held by its journal writer), then its lease."""
    epoch = layout.next_epoch()
    lock = DirectoryLock(layout.stream_dir(epoch))
    return epoch, lock, LeaseKeeper(layout, epoch, f"process-{epoch}", ttl_s)


def test_a_live_writer_is_live_and_a_crashed_one_is_dead_at_once(tmp_path: Path) -> None:
    layout = SharedJournalLayout(tmp_path)
    epoch, lock, keeper = start_life(layout)
    try:
        assert writer_state(layout, epoch, time.time())[0] is WriterState.LIVE
        assert keeper.valid()
        lock.release()  # what the kernel does when the process dies, kill -9 included
        assert writer_state(layout, epoch, time.time())[0] is WriterState.DEAD
    finally:
        keeper.stop(release=False)


def test_a_clean_stop_releases_the_lease(tmp_path: Path) -> None:
    layout = SharedJournalLayout(tmp_path)
    epoch, lock, keeper = start_life(layout)
    keeper.stop(release=True)
    verdict, lease = writer_state(layout, epoch, time.time())
    assert verdict is WriterState.DEAD and lease is not None and lease.released
    lock.release()


def test_another_hosts_writer_is_dead_only_once_its_lease_expired(tmp_path: Path) -> None:
    layout = SharedJournalLayout(tmp_path)
    epoch = layout.next_epoch()
    layout.stream_dir(epoch).mkdir(parents=True)  # its lock lives on another host: free here
    now = time.time()
    write_lease(layout.lease_path(epoch), Lease(epoch, "remote", 1, "another-host", now, 2.0))
    assert writer_state(layout, epoch, now + 1.9)[0] is WriterState.LIVE
    assert writer_state(layout, epoch, now + 2.1)[0] is WriterState.DEAD


def test_a_fenced_holder_finds_the_fence_and_writes_no_more(tmp_path: Path) -> None:
    layout = SharedJournalLayout(tmp_path)
    epoch, lock, keeper = start_life(layout, ttl_s=0.2)
    try:
        fence(layout, epoch, by_epoch=99)
        deadline = time.monotonic() + 5
        while keeper.valid() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not keeper.valid() and keeper.fenced
        keeper.stop(release=True)
        lease = read_lease(layout.lease_path(epoch))
        assert lease is not None and lease.fenced_by == 99 and not lease.released, "a stop keeps the fence"
    finally:
        lock.release()


def test_a_holder_whose_renewal_is_overdue_stops_writing_before_others_may_take_over(tmp_path: Path) -> None:
    layout = SharedJournalLayout(tmp_path)
    epoch, lock, keeper = start_life(layout, ttl_s=0.4)
    try:
        keeper.stop(release=False)  # a paused process: no more renewals
        lease = read_lease(layout.lease_path(epoch))
        assert lease is not None
        time.sleep(0.25)  # past half the TTL since its last renewal
        assert not keeper.valid(), "the holder stops at half the TTL"
        lock.release()  # seen from another host (no lock to probe), only the TTL counts
        write_lease(layout.lease_path(epoch), dataclasses.replace(lease, host="another-host"))
        assert writer_state(layout, epoch, lease.renewed_at + 0.3)[0] is WriterState.LIVE, "others wait the TTL"
        assert writer_state(layout, epoch, lease.renewed_at + 0.5)[0] is WriterState.DEAD
    finally:
        lock.release()


def test_a_stalled_renewal_whose_lease_no_one_could_take_over_renews_and_writes_on(tmp_path: Path) -> None:
    """A renewal thread that stalls past half the TTL (a loaded host) while the lease on disk is neither fenced nor
    expired: no other process can have judged this life dead, so it stays valid (no self-fencing for good)."""
    layout = SharedJournalLayout(tmp_path)
    epoch, lock, keeper = start_life(layout, ttl_s=4.0)
    try:
        keeper._valid_until = time.monotonic() - 0.01  # the state a renewal thread stalled past TTL/2 leaves
        assert keeper.valid(), "a writer finding the renewal late renews, since the disk proves no takeover"
        keeper._valid_until = time.monotonic() - 0.01
        with keeper._renewing:
            keeper._renew()  # the stalled thread, waking
        assert keeper.valid() and not keeper.fenced
        lease = read_lease(layout.lease_path(epoch))
        assert lease is not None and time.time() - lease.renewed_at < 1.0 and lease.fenced_by is None
    finally:
        keeper.stop(release=False)
        lock.release()


def test_a_stalled_renewal_whose_lease_may_have_expired_or_was_fenced_stops_for_good(tmp_path: Path) -> None:
    layout = SharedJournalLayout(tmp_path)
    for fenced in (False, True):
        epoch, lock, keeper = start_life(layout, ttl_s=4.0)
        try:
            keeper.stop(release=False)  # no thread renews meanwhile
            lease = read_lease(layout.lease_path(epoch))
            assert lease is not None
            if fenced:
                fence(layout, epoch, by_epoch=99)
            else:  # its last renewal on disk is a whole TTL old: another host may have taken over
                write_lease(layout.lease_path(epoch), dataclasses.replace(lease, renewed_at=time.time() - 4.1))
            keeper._valid_until = time.monotonic() - 0.01
            keeper._stop.clear()  # as if the thread were only late, not stopped
            assert not keeper.valid() and keeper.fenced
            on_disk = read_lease(layout.lease_path(epoch))
            assert on_disk is not None and (on_disk.fenced_by == 99) is fenced, "nothing renewed over the fence"
        finally:
            lock.release()
