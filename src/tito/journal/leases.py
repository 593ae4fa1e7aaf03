"""Leases of a shared journal: which process lives are alive, renewed on a thread, fenced when taken over.

Each process life holds `leases/EPOCH.json` (`journal.shared`): its epoch, name, pid, host, address, the wall time
of its last renewal and its time to live. It renews every `ttl_s / 4`. Another process may take the life's sessions
over once its writer is dead:
- its lease expired (`renewed_at + ttl_s` passed: hosts' clocks must agree within a fraction of the TTL), or
- it was released (a clean shutdown) or fenced (taken over before), or
- on one host, at once: the writer's journal lock is free (the kernel drops an advisory lock when its process dies,
  `kill -9` included), which is how a takeover after a crash starts without waiting for the TTL.
A taker fences the lease first (`fenced_by`), then reads the dead stream. The holder stops writing on its own once
its last renewal is older than half the TTL, or when it finds its lease fenced: so a paused or partitioned process
never writes a session another process took over (it answers 503 and its `/health` fails).

A renewal that comes late (the renewal thread stalled: a loaded host, a slow disk) is not a takeover by itself.
When the lease on disk is neither fenced nor expired (by a quarter of the TTL to spare), no other process can yet
have judged this life dead, so the holder renews and writes on; only a lease that may have expired or that another
process fenced ends this life for good (and its 503s are then honest).

Imports from tito: errors, journal.shared, journal.writer.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from tito.errors import JournalError
from tito.journal.shared import SharedJournalLayout
from tito.journal.writer import DirectoryLock

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Lease:
    epoch: int
    process: str
    """The process's name (its metrics label, its router address by default)."""
    pid: int
    host: str
    renewed_at: float
    """Wall time of the last renewal."""
    ttl_s: float
    address: str | None = None
    released: bool = False
    """Written by a clean shutdown: the sessions may be taken over at once."""
    fenced_by: int | None = None
    """The epoch that declared this life dead to take its sessions over."""

    def expired(self, now: float) -> bool:
        return now > self.renewed_at + self.ttl_s


class WriterState(enum.Enum):
    LIVE = "live"
    DEAD = "dead"
    """Released, fenced, expired, or (one host) its journal lock is free: its sessions may be taken over."""


def read_lease(path: Path) -> Lease | None:
    """The lease at `path`, or None when there is none (a life that has not written one yet)."""
    try:
        return Lease(**json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:
        raise JournalError(f"lease file {path} is unreadable: {exc}") from exc


def write_lease(path: Path, lease: Lease, *, durable: bool = False) -> None:
    """Replace the lease atomically (write a temp file, rename it over): a reader sees the old or the new one."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, json.dumps(asdict(lease)).encode())
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)


def writer_state(layout: SharedJournalLayout, epoch: int, now: float) -> tuple[WriterState, Lease | None]:
    """Whether the life `epoch` may still write; a life without a lease is starting (live) unless its lock is free."""
    lease = read_lease(layout.lease_path(epoch))
    if lease is not None and (lease.released or lease.fenced_by is not None or lease.expired(now)):
        return WriterState.DEAD, lease
    if lease is not None and lease.host != socket.gethostname():
        return WriterState.LIVE, lease  # another host's lock says nothing here: only the TTL does
    if lease is None:
        return WriterState.LIVE, None  # starting: it takes its lock before it writes its lease
    try:
        probe = DirectoryLock(layout.stream_dir(epoch))
    except JournalError:
        return WriterState.LIVE, lease
    probe.release()
    return WriterState.DEAD, lease


def fence(layout: SharedJournalLayout, epoch: int, by_epoch: int) -> None:
    """Mark the life `epoch` taken over by `by_epoch` (durably), before its stream is read."""
    path = layout.lease_path(epoch)
    lease = read_lease(path)
    if lease is None or lease.fenced_by is not None:
        return
    write_lease(path, replace(lease, fenced_by=by_epoch), durable=True)


class LeaseKeeper:
    """This process's lease: written at start, renewed on a thread, released on a clean stop.

    `valid()` is what the journal sink asks before each write: False once the lease was found fenced, or once the
    last renewal is older than half the TTL and a renewal now cannot prove that no other process took over (see the
    module docstring: a stall is recovered from while the lease on disk is unfenced and unexpired)."""

    def __init__(
        self, layout: SharedJournalLayout, epoch: int, process: str, ttl_s: float, address: str | None = None
    ) -> None:
        self.layout = layout
        self.path = layout.lease_path(epoch)
        self.ttl_s = ttl_s
        self.lease = Lease(epoch, process, os.getpid(), socket.gethostname(), time.time(), ttl_s, address)
        self.fenced = False
        self._valid_until = 0.0
        self._stop = threading.Event()
        self._renewing = threading.Lock()
        """One renewal at a time: the thread's, or a writer's that found the thread late (`valid`)."""
        self._renew()
        self._thread = threading.Thread(target=self._run, name="tito-lease", daemon=True)
        self._thread.start()

    def valid(self) -> bool:
        if self.fenced:
            return False
        if time.monotonic() < self._valid_until:
            return True
        if self._stop.is_set() or not self._renewing.acquire(blocking=False):
            return False  # stopped, or the thread is renewing right now: this write waits for its verdict
        try:
            self._renew()  # the renewal thread is late: renew here, if the disk proves no takeover
        except OSError:
            logger.exception("lease %s: renewal failed", self.path)
        finally:
            self._renewing.release()
        return not self.fenced and time.monotonic() < self._valid_until

    def stop(self, release: bool = True) -> None:
        """Stop renewing; `release`: mark the lease released so its sessions are taken over without waiting."""
        self._stop.set()
        self._thread.join()
        on_disk = read_lease(self.path)
        if release and not self.fenced and (on_disk is None or on_disk.fenced_by is None):
            write_lease(self.path, replace(self.lease, released=True), durable=True)

    def _renew(self) -> None:
        started = time.monotonic()
        on_disk = read_lease(self.path)
        if on_disk is not None and on_disk.fenced_by is not None:
            if not self.fenced:
                logger.error("lease %s fenced by epoch %s: this process writes no more", self.path, on_disk.fenced_by)
            self.fenced = True
            return
        overdue = bool(self._valid_until) and started > self._valid_until
        deadline = self._safe_until(on_disk)
        if overdue and time.time() >= deadline:
            logger.error(
                "lease %s lapsed (renewal overdue, the lease may have expired): this process writes no more", self.path
            )
            self.fenced = True  # another process may already have taken the sessions over
            return
        self.lease = replace(self.lease, renewed_at=time.time())
        write_lease(self.path, self.lease)
        if overdue:
            if time.time() >= deadline:  # the write itself came too late to prove anything
                logger.error(
                    "lease %s lapsed (its late renewal landed too late): this process writes no more", self.path
                )
                self.fenced = True
                return
            logger.warning(
                "lease %s: renewal %.2fs overdue, but the lease was neither fenced nor expired: no takeover, renewed",
                self.path, started - self._valid_until,
            )  # fmt: skip
        self._valid_until = started + self.ttl_s / 2

    def _safe_until(self, on_disk: Lease | None) -> float:
        """Wall time before which no other process can judge this life dead by its TTL (a quarter TTL to spare
        for hosts' clocks): the last renewal on disk plus three quarters of the TTL."""
        renewed_at = on_disk.renewed_at if on_disk is not None else self.lease.renewed_at
        return renewed_at + self.ttl_s * 3 / 4

    def _run(self) -> None:
        while not self._stop.wait(self.ttl_s / 4):
            if self.fenced:
                return
            try:
                with self._renewing:
                    self._renew()
            except OSError:
                logger.exception("lease %s: renewal failed; retrying", self.path)
