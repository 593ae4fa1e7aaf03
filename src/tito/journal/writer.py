"""Append events to the journal: bounded segment files, one writer per directory, an fsync policy.

A record is written (one `os.write`, into the OS page cache) on the caller's thread under a lock, so it survives
the process being killed as soon as `append` returns. Power loss is what fsync is for, by policy:
- `always`: `append` returns once an fsync covers the record. One background thread runs the fsyncs; appends
  that arrive while it syncs share the next one (group commit). The event loop never blocks on a disk flush.
- `interval`: the background thread fsyncs every `interval_s` when something was written; `append` returns
  after the write (a power loss can lose the last interval).
- `never`: the OS flushes when it likes.
The writer always starts a new segment, so it never appends after bytes it has not read (see recovery).

Imports from tito: errors, trajectory.events, journal.codec, journal.framing, journal.segments.
"""

from __future__ import annotations

import asyncio
import enum
import fcntl
import os
import threading
from pathlib import Path
from types import TracebackType

from tito.errors import ConfigurationError, JournalError
from tito.journal.codec import FORMAT_VERSION, encode_event
from tito.journal.framing import SEGMENT_HEADER_SIZE, frame, segment_header
from tito.journal.segments import fsync_directory, list_segments, segment_number, segment_path, write_all
from tito.trajectory.events import SessionEvent

LOCK_FILE = "journal.lock"


class FsyncPolicy(enum.Enum):
    ALWAYS = "always"
    """An append returns once its record is on stable storage (group commit)."""
    INTERVAL = "interval"
    """Records are fsynced every `interval_s`; an append returns once written to the OS."""
    NEVER = "never"
    """No fsync; survives a process crash, not a power loss."""


class JournalWriter:
    """The one writer of a journal directory (an advisory lock refuses a second)."""

    def __init__(
        self,
        directory: Path,
        fsync: FsyncPolicy | str = FsyncPolicy.ALWAYS,
        *,
        segment_bytes: int = 64 << 20,
        interval_s: float = 0.05,
        lock: DirectoryLock | None = None,
    ) -> None:
        """`lock`: the directory's lock if the caller already holds it (recovery does); the writer releases it."""
        try:
            self.policy = FsyncPolicy(fsync)
        except ValueError as exc:
            choices = ", ".join(p.value for p in FsyncPolicy)
            raise ConfigurationError(f"journal fsync policy {fsync!r} is not one of: {choices}") from exc
        if segment_bytes <= SEGMENT_HEADER_SIZE:
            raise ConfigurationError(f"journal segment_bytes must exceed {SEGMENT_HEADER_SIZE}, got {segment_bytes}")
        self.directory = directory
        self._segment_bytes = segment_bytes
        self._interval_s = interval_s
        self._cond = threading.Condition()
        self._written = 0
        """Records written so far: an append's sequence number."""
        self._synced = 0
        """Records an fsync covers."""
        self._retired: list[int] = []
        """Descriptors of full segments, for the sync thread to fsync and close."""
        self._directory_dirty = False
        self._waiters: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._error: JournalError | None = None
        self._closing = False
        self._lock = lock if lock is not None else DirectoryLock(directory)
        self._fd = -1
        self._size = 0
        self.active_segment = 0
        """Number of the segment being appended to; every lower-numbered segment is closed (compaction's input)."""
        try:
            existing = list_segments(directory)
            self._open_segment((segment_number(existing[-1]) + 1) if existing else 1)
            fsync_directory(directory)
        except OSError as exc:
            self._lock.release()
            raise JournalError(f"cannot start a journal segment in {directory}: {exc}") from exc
        self._thread: threading.Thread | None = None
        if self.policy is not FsyncPolicy.NEVER:
            self._thread = threading.Thread(target=self._sync_loop, name="tito-journal-fsync", daemon=True)
            self._thread.start()

    async def append(self, event: SessionEvent) -> None:
        """Persist `event`; returns when the policy's guarantee holds. Raises JournalError if the journal failed."""
        sequence = self._write(event)
        if self.policy is not FsyncPolicy.ALWAYS:
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._cond:
            if self._error is not None:
                raise self._error
            if self._synced >= sequence:
                return
            self._waiters.append((sequence, loop, future))
            self._cond.notify_all()
        await future

    def append_blocking(self, event: SessionEvent) -> None:
        """`append` for threads without an event loop (tools, tests): blocks until the policy's guarantee holds."""
        sequence = self._write(event)
        if self.policy is not FsyncPolicy.ALWAYS:
            return
        with self._cond:
            self._cond.notify_all()
            while self._synced < sequence and self._error is None:
                self._cond.wait()
            if self._error is not None:
                raise self._error

    def close(self) -> None:
        """Flush (per policy), stop the sync thread and release the directory. Idempotent."""
        with self._cond:
            if self._closing:
                return
            self._closing = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
        os.close(self._fd)
        self._lock.release()

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _write(self, event: SessionEvent) -> int:
        event_type, payload = encode_event(event)
        record = frame(event_type, payload)
        with self._cond:
            if self._error is not None:
                raise self._error
            if self._closing:
                raise JournalError(f"journal {self.directory} is closed")
            try:
                if self._size + len(record) > self._segment_bytes and self._size > SEGMENT_HEADER_SIZE:
                    self._rotate()
                write_all(self._fd, record)
            except OSError as exc:
                self._error = JournalError(
                    f"cannot write journal segment {segment_path(self.directory, self.active_segment)}: {exc}; "
                    "the journal refuses further appends (restart to recover it)"
                )
                raise self._error from exc
            self._size += len(record)
            self._written += 1
            return self._written

    def _open_segment(self, number: int) -> None:
        path = segment_path(self.directory, number)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        write_all(self._fd, segment_header(FORMAT_VERSION))
        self._size = SEGMENT_HEADER_SIZE
        self.active_segment = number

    def _rotate(self) -> None:
        """Called under the lock: start the next segment; the full one is fsynced and closed off this thread."""
        if self.policy is FsyncPolicy.NEVER:
            os.close(self._fd)
        else:
            self._retired.append(self._fd)
            self._directory_dirty = True
            self._cond.notify_all()
        self._open_segment(self.active_segment + 1)

    def _sync_loop(self) -> None:
        while True:
            with self._cond:
                if self.policy is FsyncPolicy.ALWAYS:
                    self._cond.wait_for(lambda: self._closing or self._written > self._synced or bool(self._retired))
                else:
                    self._cond.wait_for(lambda: self._closing, timeout=self._interval_s)
                target, fd, closing = self._written, self._fd, self._closing
                retired, self._retired = self._retired, []
                directory_dirty, self._directory_dirty = self._directory_dirty, False
                needs_sync = target > self._synced
            error: JournalError | None = None
            try:
                for old in retired:
                    os.fsync(old)
                    os.close(old)
                if directory_dirty:
                    fsync_directory(self.directory)
                if needs_sync:
                    os.fsync(fd)
            except OSError as exc:
                error = JournalError(f"cannot fsync journal {self.directory}: {exc}; the journal refuses appends")
            with self._cond:
                if error is None:
                    self._synced = max(self._synced, target)
                elif self._error is None:
                    self._error = error
                failed = self._error is not None
                ready = [w for w in self._waiters if failed or w[0] <= self._synced]
                self._waiters = [w for w in self._waiters if not (failed or w[0] <= self._synced)]
                self._cond.notify_all()
                final = (closing and not self._retired) or failed  # a failed journal takes no more appends
            for _, loop, future in ready:
                loop.call_soon_threadsafe(_settle, future, self._error)
            if final:
                return


def _settle(future: asyncio.Future[None], error: JournalError | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


class DirectoryLock:
    """An exclusive advisory lock on a journal directory: one server (or repair, or compaction owner) at a time."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(self._fd)
            raise JournalError(
                f"journal {directory} is in use by another writer (lock {directory / LOCK_FILE})"
            ) from exc

    def release(self) -> None:
        """Idempotent: the writer and recovery may both release on an error path."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
