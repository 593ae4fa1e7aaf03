"""One tito process among several sharing a journal directory: its own stream and lease, and the takeover of a
dead process's sessions.

Start (`SharedJournalOwner.start`): take the next epoch (`tito.journal.shared`), open this life's own stream
(`streams/EPOCH`), write and renew its lease (`tito.journal.leases`), and make the stream, behind a lease check, the
registry's sink. Then, in the background, take back the sessions of this process name's earlier lives (a restart
behind the same router address, which hashes their ids here); `/ready` answers 503 until that is done.

Asked about a session it does not hold (`OwnershipMiddleware`), the process looks for a dead stream holding it (a
writer whose lease expired or was released or, on one host, whose journal lock is free), fences that lease, reads
the stream once in a thread (the client gets a 503 with `Retry-After` meanwhile), claims the session
(`adopted/ID`: the first claimer wins, so two processes never both own it), copies its events into this life's
stream and applies them through `SessionRegistry.apply`, the live path. The request then goes on as if the session
had always been here: the same stored ids, so the next prompt is token-exact.

Imports from tito: errors, journal, server.errors, server.sessions.registry, server.state, trajectory.events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as AsgiMessage  # an ASGI event, not a chat message (tito.chat_message)

from tito.errors import TitoError
from tito.journal import BackgroundCompactor, JournalWriter, SessionLog, open_journal, replay
from tito.journal.leases import LeaseKeeper, WriterState, fence, read_lease, writer_state
from tito.journal.segments import fsync_directory
from tito.journal.shared import SESSION_ID_PATTERN, SharedJournalLayout
from tito.server.errors import (
    LeaseLostError,
    NotReadyError,
    RetryableError,
    SessionHeldElsewhereError,
    TakeoverPendingError,
    error_body,
    retry_headers,
)
from tito.server.state import ServerState
from tito.trajectory.events import SessionDeleted, SessionEvent

logger = logging.getLogger(__name__)

PROCESS_HEADER = b"x-tito-process"
"""On every reply of a process with a shared journal: which process answered (its `--process-name`)."""
RETRY_SOON_S = 0.1
"""Retry-After while a dead stream is read (reading 1,000 sessions takes a fraction of a second)."""
_SESSION_PATH = re.compile(r"/sessions/([^/]+)")


@dataclass(frozen=True)
class DeadStream:
    """A dead life's stream as read once: each session's events in journal order, and its replay log."""

    epoch: int
    events: dict[str, list[SessionEvent]]
    logs: dict[str, SessionLog]


def read_dead_stream(layout: SharedJournalLayout, epoch: int) -> tuple[DeadStream, dict[str, int]]:
    """The stream's sessions, and those it holds as copies with the stream each came from (run in a thread: it
    reads every segment)."""
    replayed = replay(layout.stream_dir(epoch))
    events: dict[str, list[SessionEvent]] = {}
    for event in replayed.events:
        events.setdefault(event.session_id, []).append(event)
    return DeadStream(epoch, events, replayed.sessions), layout.copies(epoch)


class _LeasedSink:
    """The registry's sink: this life's stream, written only while its lease holds (a fenced process never writes
    a session another process may have taken over)."""

    def __init__(self, writer: JournalWriter, keeper: LeaseKeeper) -> None:
        self.writer = writer
        self.keeper = keeper

    async def record(self, event: SessionEvent) -> None:
        if not self.keeper.valid():
            raise LeaseLostError(
                f"this process lost its lease {self.keeper.path} (fenced or not renewed in time); another process "
                "may own its sessions now: retry through the router",
                1.0,
            )
        await self.writer.append(event)


@dataclass
class _Gate:
    """A session's takeover lock and how many requests use it (dropped with the last, never while one waits)."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class GroupSync:
    """fsync one directory for many waiters: every caller waits for an fsync that started after it called, and all
    callers that arrive while one runs share the next (claims of a takeover are made durable in batches)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._next: asyncio.Future[None] | None = None
        self._running = False

    async def sync(self) -> None:
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
        waiting = self._next
        if not self._running:
            self._running = True
            asyncio.get_running_loop().create_task(self._run())
        await waiting

    async def _run(self) -> None:
        try:
            while self._next is not None:
                batch, self._next = self._next, None
                try:
                    await asyncio.to_thread(fsync_directory, self.directory)
                except OSError as exc:
                    batch.set_exception(exc)
                else:
                    batch.set_result(None)
        finally:
            self._running = False


class SharedJournalOwner:
    """This process's part in a shared journal: its stream, its lease, and the sessions it takes over."""

    def __init__(self, state: ServerState) -> None:
        options = state.options
        if options.journal is None:
            raise ValueError("a shared journal needs ServerOptions.journal")
        self.state = state
        self.layout = SharedJournalLayout(options.journal)
        self.epoch = 0
        self.ready = False
        """False until this life's start (taking back its earlier lives' sessions) is done."""
        self.keeper: LeaseKeeper | None = None
        self._writer: JournalWriter | None = None
        self._compactor: BackgroundCompactor | None = None
        self._warm_up: asyncio.Task[None] | None = None
        self._dead: dict[int, DeadStream] = {}
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._unreadable: dict[int, str] = {}
        """Dead streams that could not be read, and why: reported once, never read again by this life (a session
        only they hold is unknown here: 404)."""
        self._where: dict[str, int] = {}
        """Sessions of loaded dead streams not held here, and the stream to claim each from."""
        self._gates: dict[str, _Gate] = {}
        self._syncs: dict[Path, GroupSync] = {}
        metrics = state.metrics
        self._adopted = metrics.counter("tito_sessions_taken_over", "Sessions taken over from dead processes")
        self._read_seconds = metrics.histogram(
            "tito_dead_stream_read_seconds",
            "Time to read a dead process's journal stream",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
        )
        self._ready_gauge = metrics.gauge("tito_ready", "1 when this process serves sessions (its /ready)")
        self._epoch_gauge = metrics.gauge("tito_journal_epoch", "This process life's epoch (its fencing token)")

    @property
    def lease_lost(self) -> bool:
        return self.keeper is not None and not self.keeper.valid()

    @property
    def serving(self) -> bool:
        return self.ready and not self.lease_lost

    async def start(self) -> None:
        options = self.state.options
        self.epoch = self.layout.next_epoch()
        _, self._writer = open_journal(self.layout.stream_dir(self.epoch), options.journal_fsync)
        self.keeper = LeaseKeeper(self.layout, self.epoch, options.process_name, options.lease_ttl)
        self.state.registry.sink = _LeasedSink(self._writer, self.keeper)
        self._compactor = BackgroundCompactor(self._writer)
        self._epoch_gauge.set(self.epoch)
        logger.info("shared journal %s: this is %s, epoch %d", options.journal, options.process_name, self.epoch)
        self._warm_up = asyncio.create_task(self._take_back_earlier_lives())

    def close(self) -> None:
        """Stop renewing and release the lease (the sessions may be taken over at once), then close the stream."""
        if self._warm_up is not None:
            self._warm_up.cancel()
        for task in self._loading.values():
            task.cancel()
        if self._compactor is not None:
            self._compactor.stop()
        if self._writer is not None:
            self._writer.close()
        if self.keeper is not None:
            self.keeper.stop(release=True)

    def check_serving(self) -> None:
        """Raise the 503 a session request gets while this process cannot serve sessions."""
        if self.lease_lost:
            raise LeaseLostError("this process lost its journal lease and serves no sessions; retry", 1.0)
        if not self.ready:
            raise NotReadyError("this process is still replaying its journal; retry shortly (see /ready)", 0.25)

    async def resolve(self, session_id: str) -> None:
        """Hold `session_id` here if a dead process held it; return without it when no process known to be dead
        held it (the route answers 404). Raises a RetryableError (503) while that cannot be decided yet."""
        registry = self.state.registry
        if registry.knows(session_id) or SESSION_ID_PATTERN.fullmatch(session_id) is None:
            return
        gate = self._gates.setdefault(session_id, _Gate())
        gate.users += 1
        try:
            async with gate.lock:  # one takeover of a session at a time in this process
                while not registry.knows(session_id):
                    epoch = self._where.get(session_id)
                    if epoch is None:
                        epoch = self._discover(session_id)
                        if epoch is None:
                            return
                    await self._adopt(session_id, epoch)
        finally:
            gate.users -= 1
            if not gate.users:
                del self._gates[session_id]

    def _discover(self, session_id: str) -> int | None:
        """Start reading every newly dead stream; the stream holding `session_id` if one read already does.
        Raises TakeoverPendingError while a stream is being read or a silent writer's lease has not yet expired."""
        now = time.time()
        retry_after: float | None = None
        for epoch in self.layout.stream_epochs():
            if epoch == self.epoch or epoch in self._dead or epoch in self._unreadable:
                continue
            if epoch in self._loading:
                retry_after = RETRY_SOON_S
                continue
            verdict, lease = writer_state(self.layout, epoch, now)
            if verdict is WriterState.DEAD:
                self._start_reading(epoch)
                retry_after = RETRY_SOON_S
            elif lease is not None and now - lease.renewed_at > lease.ttl_s / 2:
                retry_after = max(retry_after or 0.0, lease.renewed_at + lease.ttl_s - now)  # may be dying
        if session_id in self._where:
            return self._where[session_id]
        if retry_after is not None:
            raise TakeoverPendingError(
                f"session {session_id} is not held here; a process that may have held it died and its journal is "
                "being taken over: retry",
                retry_after,
            )
        return None

    def _start_reading(self, epoch: int) -> None:
        """Fence the dead life's lease (it may write no more), then read its stream in a thread."""
        fence(self.layout, epoch, self.epoch)
        self._loading[epoch] = asyncio.create_task(self._read(epoch))

    async def _read(self, epoch: int) -> None:
        started = time.monotonic()
        try:
            stream, copies = await asyncio.to_thread(read_dead_stream, self.layout, epoch)
        except (OSError, TitoError) as exc:
            path = self.layout.stream_dir(epoch)
            self._unreadable[epoch] = f"{path}: {type(exc).__name__}: {exc}"
            logger.error(
                "shared journal: the dead stream %s (epoch %d) is unreadable, so its sessions cannot be taken over "
                "(this process will not read it again; repair or move it and restart): %s: %s",
                path, epoch, type(exc).__name__, exc,
            )  # fmt: skip
            return
        finally:
            self._loading.pop(epoch, None)
        self._dead[epoch] = stream
        for session_id in stream.events:  # a copy is looked up from its source, whose claim says if it is whole
            self._where.setdefault(session_id, copies.get(session_id, epoch))
        self._read_seconds.observe(time.monotonic() - started)
        logger.info(
            "shared journal: read epoch %d's stream (%d sessions, %d of them copies) in %.3f s",
            epoch, len(stream.events), len(copies), time.monotonic() - started,
        )  # fmt: skip

    def _is_dead(self, epoch: int) -> bool:
        return writer_state(self.layout, epoch, time.time())[0] is WriterState.DEAD

    def _await_reading(self, epoch: int) -> NoReturn:
        """Raise the 503 a request gets while the dead stream `epoch` is (now) being read."""
        if epoch not in self._loading:
            self._start_reading(epoch)
        raise TakeoverPendingError(
            "a dead process's journal is being read to take its sessions over: retry", RETRY_SOON_S
        )

    async def _sync(self, directory: Path) -> None:
        await self._syncs.setdefault(directory, GroupSync(directory)).sync()

    async def _adopt(self, session_id: str, epoch: int) -> None:
        """Claim `session_id` from the dead stream `epoch` and rebuild it here; when another life claimed it first,
        follow the session to that life's stream (or answer 503 while it lives).

        Order, each step durable before the next: claim (pending) and the copy's source noted; the events copied
        into this life's stream; the claim completed; only then the session is served here. Killed anywhere before
        the end, the claim stays pending with a dead claimer and the next taker claims the next generation from the
        source, which still holds the session whole."""
        if epoch not in self._dead:
            self._await_reading(epoch)
        claim = self.layout.claim(epoch, session_id, self.epoch, self._is_dead)
        if claim.epoch != self.epoch:
            if not claim.complete:
                message = f"process epoch {claim.epoch} is taking session {session_id} over right now; retry"
                raise TakeoverPendingError(message, RETRY_SOON_S)
            self._follow(session_id, claim.epoch)
            return
        stream = self._dead[epoch]
        log = stream.logs.get(session_id)
        now = time.time()
        registry = self.state.registry
        if log is None or log.status(now) != "live":
            reason = log.status(now) if log is not None else "deleted"
            registry.apply(SessionDeleted(session_id, now, reason))  # answers 410, as its owner would have
            del self._where[session_id]
            registry.on_session_end(session_id)  # its dead owner may not have released it at the router
            return
        self.layout.record_copy(self.epoch, session_id, epoch)
        await asyncio.gather(self._sync(self.layout.claims_dir(epoch)), self._sync(self.layout.copies_dir(self.epoch)))
        events = stream.events[session_id]
        await asyncio.gather(*(registry.sink.record(event) for event in events))  # written in order, one fsync
        if self.lease_lost:
            raise LeaseLostError(f"this process lost its lease while taking session {session_id} over; retry", 1.0)
        self.layout.complete_claim(epoch, session_id, claim)
        await self._sync(self.layout.claims_dir(epoch))
        for event in events:
            registry.apply(event)
        registry.get(session_id).last_used = time.monotonic() - max(0.0, now - log.last_activity)
        del self._where[session_id]
        self._adopted.inc()

    def _follow(self, session_id: str, holder: int) -> None:
        """The session was taken over by `holder` (its copy whole): look for it in that life's stream once dead."""
        if holder in self._dead or holder in self._unreadable:
            if holder in self._dead and session_id in self._dead[holder].events:
                self._where[session_id] = holder
            else:
                del self._where[session_id]
            return
        verdict, lease = writer_state(self.layout, holder, time.time())
        if verdict is WriterState.LIVE:
            name = lease.process if lease is not None else f"epoch {holder}"
            raise SessionHeldElsewhereError(
                f"session {session_id} was taken over by the live process {name} (epoch {holder}), but the router "
                "sent it here; retry (the router sends it there while this process is down or after a hand-back)",
                1.0,
            )
        self._await_reading(holder)

    async def _take_back_earlier_lives(self) -> None:
        """Take over every live session of this process name's dead earlier lives, then declare this process ready."""
        try:
            name = self.state.options.process_name
            for epoch in self.layout.stream_epochs():
                lease = read_lease(self.layout.lease_path(epoch))
                if epoch == self.epoch or lease is None or lease.process != name:
                    continue
                if writer_state(self.layout, epoch, time.time())[0] is WriterState.LIVE:
                    logger.warning("shared journal: another live process is also named %s (epoch %d)", name, epoch)
                    continue
                if epoch not in self._dead:
                    self._start_reading(epoch)
                    with contextlib.suppress(asyncio.CancelledError):
                        await self._loading[epoch]
                for session_id in list(self._dead[epoch].events if epoch in self._dead else ()):
                    with contextlib.suppress(RetryableError):
                        await self.resolve(session_id)
        finally:
            self.ready = True
            self._ready_gauge.set(1)


class OwnershipMiddleware:
    """Before a session route runs: this process serves sessions, and holds the session (taken over if need be).
    Every reply names the process that gave it (`X-Tito-Process`). Pure ASGI, so the happy path costs a dict
    lookup."""

    def __init__(self, app: ASGIApp, owner: SharedJournalOwner) -> None:
        self.app = app
        self.owner = owner
        self.process = owner.state.options.process_name.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_naming_the_process(message: AsgiMessage) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (PROCESS_HEADER, self.process)]
            await send(message)

        path: str = scope["path"]
        match = _SESSION_PATH.match(path)
        if match is not None or path == "/sessions":
            try:
                self.owner.check_serving()
                if match is not None:
                    await self.owner.resolve(match.group(1))
            except RetryableError as exc:
                self.owner.state.metrics.errors.labels(type(exc).__name__).inc()
                await retry_response(exc)(scope, receive, send_naming_the_process)
                return
        await self.app(scope, receive, send_naming_the_process)


def retry_response(exc: RetryableError) -> ASGIApp:
    """A 503 the openai SDK retries after the given time (`retry-after-ms`, else `Retry-After` in seconds)."""
    return JSONResponse(error_body(exc), status_code=exc.http_status, headers=retry_headers(exc))
