"""A journal directory shared by several tito processes: one stream per process life, epochs, adoption claims.

Layout of a shared directory `ROOT`:
- `ROOT/epoch`: the last epoch issued. Each process life takes the next one (under `ROOT/epoch.lock`), so epochs
  are unique and increase: an epoch is the fencing token of everything that life writes.
- `ROOT/streams/EPOCH/`: that life's own journal (ordinary segments, written by one `JournalWriter`), so every
  record carries its writer's epoch by where it lies. `ROOT/leases/EPOCH.json` is its lease (`journal.leases`).
- `ROOT/streams/EPOCH/adopted/SESSION`: a claim, a symbolic link to `ADOPTER+pending`, created by the process that
  takes session SESSION over from that stream once its writer is dead; replaced by a link to `ADOPTER` once the
  adopter's copy of the session's events is whole in its own stream. Creating a link is atomic and fails when the
  name exists, so the first claimer wins and two processes never both take one session; the epoch is in the link,
  so a claim is never seen half-written, and one fsync of `adopted/` makes a batch of claims durable. A pending
  claim whose adopter died (mid-copy) is superseded by the next generation, `SESSION~2`, `SESSION~3`, ..., claimed
  the same way: the source stream still holds the session whole.
- `ROOT/streams/EPOCH/copied/SESSION`: a link to the stream the adopter copied SESSION from, written before the
  copy. A reader trusts a copy only while the source's claim is complete and names the copier; an abandoned copy
  (its claim superseded) is ignored.

Imports from tito: journal.segments.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tito.journal.segments import fsync_directory, write_all

STREAMS = "streams"
LEASES = "leases"
ADOPTED = "adopted"
COPIED = "copied"
_PENDING = "+pending"
_EPOCH_WIDTH = 8
SESSION_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{8,128}")
"""What a session id may be; it names a claim file, so no path separators."""


class SharedJournalLayout:
    """Paths and atomic steps of one shared journal directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / STREAMS).mkdir(parents=True, exist_ok=True)
        (root / LEASES).mkdir(parents=True, exist_ok=True)

    def next_epoch(self) -> int:
        """Issue a new epoch: one more than any issued before (serialised by an advisory lock)."""
        fd = os.open(self.root / "epoch.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            counter = self.root / "epoch"
            last = int(counter.read_text()) if counter.exists() else 0
            last = max(last, *self.stream_epochs(), 0)  # a lost counter never reissues an epoch that wrote
            temporary = counter.with_suffix(".tmp")
            out = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                write_all(out, str(last + 1).encode())
                os.fsync(out)
            finally:
                os.close(out)
            os.replace(temporary, counter)
            fsync_directory(self.root)
            return last + 1
        finally:
            os.close(fd)

    def stream_dir(self, epoch: int) -> Path:
        return self.root / STREAMS / f"{epoch:0{_EPOCH_WIDTH}d}"

    def lease_path(self, epoch: int) -> Path:
        return self.root / LEASES / f"{epoch:0{_EPOCH_WIDTH}d}.json"

    def stream_epochs(self) -> list[int]:
        """Every stream's epoch, oldest first."""
        names = (path.name for path in (self.root / STREAMS).iterdir())
        return sorted(int(name) for name in names if name.isdigit())

    def claims_dir(self, stream_epoch: int) -> Path:
        return self.stream_dir(stream_epoch) / ADOPTED

    def copies_dir(self, stream_epoch: int) -> Path:
        return self.stream_dir(stream_epoch) / COPIED

    def read_claim(self, stream_epoch: int, session_id: str) -> Claim | None:
        """The latest claim on `session_id` of the stream, or None."""
        latest: Claim | None = None
        generation = 1
        while True:
            try:
                target = os.readlink(self.claims_dir(stream_epoch) / _claim_name(session_id, generation))
            except FileNotFoundError:
                return latest
            latest = Claim(int(target.removesuffix(_PENDING)), generation, not target.endswith(_PENDING))
            generation += 1

    def claim(self, stream_epoch: int, session_id: str, adopter_epoch: int, is_dead: Callable[[int], bool]) -> Claim:
        """Claim `session_id` of the stream for `adopter_epoch`, pending until `complete_claim`. Returns the claim
        that holds: this one when it won; an earlier complete one, or a pending one whose claimer `is_dead` says
        lives, otherwise. A pending claim of a dead claimer is superseded by the next generation."""
        adopted = self.claims_dir(stream_epoch)
        adopted.mkdir(exist_ok=True)
        while True:
            latest = self.read_claim(stream_epoch, session_id)
            if latest is not None and (latest.complete or not is_dead(latest.epoch)):
                return latest
            generation = 1 if latest is None else latest.generation + 1
            try:
                os.symlink(f"{adopter_epoch}{_PENDING}", adopted / _claim_name(session_id, generation))
            except FileExistsError:
                continue  # another claimer took this generation first: read it
            return Claim(adopter_epoch, generation, complete=False)

    def complete_claim(self, stream_epoch: int, session_id: str, claim: Claim) -> None:
        """Mark the claimer's copy whole (durable once `claims_dir` is fsynced): only the claimer writes this name."""
        name = _claim_name(session_id, claim.generation)
        temporary = self.claims_dir(stream_epoch) / f".{name}.{claim.epoch}.tmp"
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        os.symlink(str(claim.epoch), temporary)
        os.replace(temporary, self.claims_dir(stream_epoch) / name)

    def record_copy(self, adopter_epoch: int, session_id: str, source_epoch: int) -> None:
        """Note in the adopter's stream where its copy of `session_id` comes from, before copying it (durable once
        `copies_dir` is fsynced): a reader trusts the copy only while the source's claim names the adopter."""
        copies = self.copies_dir(adopter_epoch)
        copies.mkdir(exist_ok=True)
        temporary = copies / f".{session_id}.tmp"
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        os.symlink(str(source_epoch), temporary)
        os.replace(temporary, copies / session_id)

    def copies(self, stream_epoch: int) -> dict[str, int]:
        """The sessions the stream holds as copies, and the stream each was copied from."""
        copies = self.copies_dir(stream_epoch)
        if not copies.is_dir():
            return {}
        return {path.name: int(os.readlink(path)) for path in copies.iterdir() if not path.name.startswith(".")}


@dataclass(frozen=True)
class Claim:
    epoch: int
    """The claimer."""
    generation: int
    complete: bool
    """The claimer's copy of the session's events is whole in its stream; until then the source stream holds them."""


def _claim_name(session_id: str, generation: int) -> str:
    return session_id if generation == 1 else f"{session_id}~{generation}"
