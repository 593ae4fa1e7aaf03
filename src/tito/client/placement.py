"""The pool's bookkeeping, without I/O: each server's last known load and health, which server holds each session,
which sessions are lost. `SessionPool` and `AsyncSessionPool` do the calls and tell it what they saw.

A server is placed on by its score (live sessions + turns in flight at its last `/load`, + sessions placed on it
that load cannot hold yet), ties going to the one chosen least recently. A load answers for the sessions created before
its poll was sent, not for those picked since: a poll in the background can answer after later creates (resetting the
count then made a server that had just taken sessions look empty, and the next ones went there too).

A server that fails to answer is *failing*; one failing for
`dead_after_s` (or marked dead by its supervisor: `tito.ray` when Ray reports its actor dead) is *dead*: its
sessions become `Lost`, or, with `shared_journal`, move to live servers, which take them over from the journal on
their next request. A dead server stays dead for this pool (a lost session is never reported alive again).

Imports from tito: client.calls, client.errors.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field

from tito.client.calls import ServerLoad
from tito.client.errors import BadRequestError, SessionLostError


@dataclass(frozen=True)
class Lost:
    """A session whose server died: the trainer masks its rollout (`error()` is the exception calls raise)."""

    session_id: str
    server_url: str
    reason: str

    def error(self) -> SessionLostError:
        return SessionLostError(self.session_id, self.server_url, self.reason)


@dataclass
class Server:
    url: str
    load: ServerLoad | None = None
    polled_at: float = float("-inf")
    placed_since_poll: int = 0
    """Sessions picked for this server that its last load does not count (created after its poll, or in flight)."""
    created: int = 0
    """Sessions created on it through the pool, in all."""
    created_in_load: int = 0
    """Of `created`, how many a load has counted (those created before its poll was sent)."""
    chosen_at: int = 0
    failing_since: float | None = None
    dead_reason: str | None = None
    sessions: set[str] = field(default_factory=set)

    @property
    def score(self) -> int:
        return (self.load.score if self.load else 0) + self.placed_since_poll


class Placement:
    """Servers by URL, the session -> server map and the lost sessions; safe to call from several threads."""

    def __init__(self, urls: list[str], *, dead_after_s: float, poll_every_s: float, shared_journal: bool) -> None:
        if not urls:
            raise BadRequestError("a session pool needs at least one server URL")
        self.servers = {url.rstrip("/"): Server(url.rstrip("/")) for url in urls}
        self.dead_after_s = dead_after_s
        self.poll_every_s = poll_every_s
        self.shared_journal = shared_journal
        self.owner: dict[str, str] = {}
        self.lost: dict[str, Lost] = {}
        self._polling: set[str] = set()
        self._lock = threading.Lock()
        self._choices = itertools.count(1)

    def alive(self) -> list[str]:
        return [server.url for server in self.servers.values() if server.dead_reason is None]

    def stale(self, now: float) -> list[str]:
        """Live servers whose load is older than `poll_every_s`."""
        with self._lock:
            live = [s for s in self.servers.values() if s.dead_reason is None]
            return [s.url for s in live if now - s.polled_at >= self.poll_every_s]

    def due(self, now: float) -> tuple[list[str], list[str]]:
        """The polls a create starts, each marked in flight until `polled`: (servers never heard from, which it
        waits for; stale ones, polled in the background). Concurrent creates never poll a server twice at once."""
        with self._lock:
            live = [s for s in self.servers.values() if s.dead_reason is None and s.url not in self._polling]
            stale = [s for s in live if now - s.polled_at >= self.poll_every_s]
            self._polling.update(s.url for s in stale)
            never = [s.url for s in stale if s.load is None and s.failing_since is None]
            return never, [s.url for s in stale if s.url not in never]

    def polled(self, url: str) -> None:
        with self._lock:
            self._polling.discard(url)

    def candidates(self) -> list[str]:
        """Live servers, the one to place on first: ready before not ready, answering before failing, then the
        least loaded, ties going to the least recently chosen."""
        with self._lock:
            return [server.url for server in self._ranked(set())]

    def pick(self, tried: set[str]) -> str | None:
        """The first candidate not in `tried`, counted as placed on at once (concurrent creates spread); None when
        none is left. `unpick` undoes the count when the create fails."""
        with self._lock:
            ranked = self._ranked(tried)
            if not ranked:
                return None
            ranked[0].placed_since_poll += 1
            ranked[0].chosen_at = next(self._choices)
            return ranked[0].url

    def unpick(self, url: str) -> None:
        with self._lock:
            server = self.servers[url]
            server.placed_since_poll = max(0, server.placed_since_poll - 1)

    def _ranked(self, tried: set[str]) -> list[Server]:
        live = [s for s in self.servers.values() if s.dead_reason is None and s.url not in tried]
        live.sort(key=lambda s: (s.load is not None and not s.load.ready, s.failing_since is not None,
                                 s.score, s.chosen_at))  # fmt: skip
        return live

    def poll_sent(self, url: str) -> int:
        """What a poll of `url` sent now will count: the sessions created on it so far (pass it to `note_load`)."""
        with self._lock:
            return self.servers[url].created

    def note_load(self, url: str, load: ServerLoad, now: float, created_before: int | None = None) -> None:
        """The load a poll of `url` answered; `created_before`: `poll_sent`'s count when it was sent (None: now)."""
        with self._lock:
            server = self.servers[url]
            covered = server.created if created_before is None else created_before
            counted_now = max(0, covered - server.created_in_load)
            server.created_in_load = max(server.created_in_load, covered)
            server.placed_since_poll = max(0, server.placed_since_poll - counted_now)
            server.load, server.polled_at, server.failing_since = load, now, None

    def note_success(self, url: str) -> None:
        with self._lock:
            self.servers[url].failing_since = None

    def note_failure(self, url: str, reason: str, now: float) -> list[Lost]:
        """A call to `url` got no answer; past `dead_after_s` of failing the server is dead (its sessions lost)."""
        with self._lock:
            server = self.servers[url]
            if server.failing_since is None:
                server.failing_since = now
            if now - server.failing_since < self.dead_after_s:
                return []
        return self.mark_dead(url, f"no answer for {now - server.failing_since:.1f}s: {reason}")

    def mark_dead(self, url: str, reason: str) -> list[Lost]:
        """The server is dead: its sessions move to live servers (shared journal) or are lost; returns the lost."""
        url = url.rstrip("/")
        with self._lock:
            server = self.servers[url]
            if server.dead_reason is not None:
                return []
            server.dead_reason = reason
            orphans, server.sessions = sorted(server.sessions), set()
            heirs = sorted((s for s in self.servers.values() if s.dead_reason is None), key=lambda s: s.score)
            if self.shared_journal and heirs:
                for session_id, heir in zip(orphans, itertools.cycle(heirs), strict=False):
                    self.owner[session_id] = heir.url
                    heir.sessions.add(session_id)
                return []
            lost = [Lost(session_id, url, reason) for session_id in orphans]
            for record in lost:
                self.owner.pop(record.session_id, None)
                self.lost[record.session_id] = record
            return lost

    def place(self, session_id: str, url: str) -> None:
        """The session lives on `url` (picked for it, or found there)."""
        with self._lock:
            server = self.servers[url]
            server.sessions.add(session_id)
            server.created += 1
            server.failing_since = None
            self.owner[session_id] = url

    def server_of(self, session_id: str) -> str:
        """The URL of the server holding the session; SessionLostError when it was lost."""
        with self._lock:
            if session_id in self.owner:
                return self.owner[session_id]
            if session_id in self.lost:
                raise self.lost[session_id].error()
        raise BadRequestError(f"session {session_id} was not created through this pool (or was deleted from it)")

    def forget(self, session_id: str) -> None:
        with self._lock:
            url = self.owner.pop(session_id, None)
            if url is not None:
                self.servers[url].sessions.discard(session_id)
            self.lost.pop(session_id, None)
