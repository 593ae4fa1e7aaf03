"""A journal directory shared by several tito processes: one stream per process life, epochs, adoption claims.

Layout of a shared directory `ROOT`:
- `ROOT/epoch`: the last epoch issued. Each process life takes the next one (under `ROOT/epoch.lock`), so epochs
  are unique and increase: an epoch is the fencing token of everything that life writes.
- `ROOT/streams/EPOCH/`: that life's own journal (ordinary segments, written by one `JournalWriter`), so every
  record carries its writer's epoch by where it lies. `ROOT/leases/EPOCH.json` is its lease (`journal.leases`).
- `ROOT/streams/EPOCH/adopted/SESSION`: a symbolic link to the adopter's epoch, created by the process that took
  session SESSION over from that stream once its writer was dead. Creating a link is atomic and fails when the
  name exists, so the first claimer wins and two processes never both take one session; the epoch is in the link
  itself, so a claim is never seen half-written, and one fsync of `adopted/` makes a batch of claims durable.
  From then on the session's events are read from the adopter's stream only.

Imports from tito: journal.segments.
"""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path

from tito.journal.segments import fsync_directory

STREAMS = "streams"
LEASES = "leases"
ADOPTED = "adopted"
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
            temporary.write_text(str(last + 1))
            _fsync_file(temporary)
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

    def claim(self, stream_epoch: int, session_id: str, adopter_epoch: int) -> int:
        """Claim `session_id` of the stream `stream_epoch` for `adopter_epoch`; returns the epoch holding the claim
        (the adopter's when this call won, an earlier adopter's otherwise). Durable once `claims_dir` is fsynced."""
        adopted = self.claims_dir(stream_epoch)
        adopted.mkdir(exist_ok=True)
        try:
            os.symlink(str(adopter_epoch), adopted / session_id)
        except FileExistsError:
            return int(os.readlink(adopted / session_id))
        return adopter_epoch

    def claims(self, stream_epoch: int) -> dict[str, int]:
        """Every session adopted from the stream and by whom."""
        adopted = self.claims_dir(stream_epoch)
        if not adopted.is_dir():
            return {}
        return {path.name: int(os.readlink(path)) for path in adopted.iterdir()}


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
