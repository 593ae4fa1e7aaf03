"""`SessionPool` (blocking) and `AsyncSessionPool` (asyncio): sessions spread over several tito servers without a
router. Each session is created on the least-loaded live server (`GET /load`), the agent gets that server's URL
(`SessionHandle.openai_base_url`, affinity by URL), and the pool keeps the map for samples and deletion. A server
that stops answering is dead after `dead_after_s`; its sessions are `Lost` (calls on them raise SessionLostError,
`collect` returns the record to mask), or move to a live server when the servers share a journal directory
(`shared_journal=True`: `tito serve --journal DIR --journal-shared`, docs/scale-out.md's takeover). Every call ends
by its deadline.

Imports from tito: client.aio, client.calls, client.errors, client.placement, client.sync.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from tito.client.aio import AsyncTitoClient
from tito.client.calls import Samples, SessionHandle
from tito.client.errors import AtCapacityError, DeadlineExceededError, ServerUnavailableError, SessionLostError
from tito.client.placement import Lost, Placement
from tito.client.sync import TitoClient

T = TypeVar("T")

POOL_DEADLINE_S = 10.0
DEAD_AFTER_S = 15.0
"""How long a server may fail to answer before it is dead: longer than a restart (Ray restarting a crashed actor,
a process replaying its journal), so a crash that comes back loses nothing."""
POLL_EVERY_S = 0.5
POLL_DEADLINE_S = 1.0


class _PoolBase:
    def __init__(
        self,
        urls: Iterable[str],
        *,
        deadline_s: float,
        dead_after_s: float,
        poll_every_s: float,
        shared_journal: bool,
    ) -> None:
        self.placement = Placement(list(urls), dead_after_s=dead_after_s, poll_every_s=poll_every_s,
                                   shared_journal=shared_journal)  # fmt: skip
        self.deadline_s = deadline_s

    @property
    def urls(self) -> list[str]:
        return list(self.placement.servers)

    def handle(self, session_id: str) -> SessionHandle:
        """The session and the server holding it now (with a shared journal it may move once its server died)."""
        return SessionHandle(session_id, self.placement.server_of(session_id))

    def lost(self) -> list[Lost]:
        """Every session lost so far (its server died): the rollouts a trainer masks."""
        return list(self.placement.lost.values())

    def sessions_on(self, url: str) -> list[str]:
        return sorted(self.placement.servers[url.rstrip("/")].sessions)

    def mark_dead(self, url: str, reason: str) -> list[Lost]:
        """What a supervisor calls when it knows a server is gone (e.g. Ray reports its actor dead)."""
        return self.placement.mark_dead(url, reason)

    def _ends(self, deadline_s: float | None) -> float:
        return time.monotonic() + (self.deadline_s if deadline_s is None else deadline_s)

    def _share(self, ends: float, tried: set[str]) -> float:
        """A create attempt's part of the deadline: what is left, split over this server and those not yet tried
        (a silent server leaves time for the next)."""
        untried = len([url for url in self.placement.alive() if url not in tried])
        return (ends - time.monotonic()) / (1 + untried)

    def _failed(self, url: str, error: ServerUnavailableError) -> None:
        self.placement.note_failure(url, str(error), time.monotonic())

    def _after_failure(self, session_id: str, url: str, error: ServerUnavailableError) -> str | None:
        """A session call got no answer from `url`: the server it moved to (shared journal) to retry on, or None
        (re-raise); SessionLostError when the server is now dead and the session lost."""
        self._failed(url, error)
        now = self.placement.server_of(session_id)  # SessionLostError once lost
        return now if now != url else None


class SessionPool(_PoolBase):
    """A blocking pool over tito servers (`urls`); `deadline_s` bounds every call."""

    def __init__(
        self,
        urls: Iterable[str],
        *,
        api_key: str | None = None,
        deadline_s: float = POOL_DEADLINE_S,
        dead_after_s: float = DEAD_AFTER_S,
        poll_every_s: float = POLL_EVERY_S,
        shared_journal: bool = False,
    ) -> None:
        super().__init__(urls, deadline_s=deadline_s, dead_after_s=dead_after_s, poll_every_s=poll_every_s,
                         shared_journal=shared_journal)  # fmt: skip
        self.clients = {url: TitoClient(url, api_key=api_key, deadline_s=deadline_s) for url in self.urls}
        self._polls = ThreadPoolExecutor(max_workers=max(1, len(self.clients)), thread_name_prefix="tito-pool-poll")
        self._calls = ThreadPoolExecutor(max_workers=16, thread_name_prefix="tito-pool")

    def check(self, deadline_s: float = POLL_DEADLINE_S) -> list[Lost]:
        """Polls every live server's load now; returns the sessions this found lost."""
        return self._poll(self.placement.alive(), deadline_s)

    def create_session(self, *, deadline_s: float | None = None, **options: Any) -> SessionHandle:
        """A session on the least-loaded live server; `options` as `TitoClient.create_session`. A server that is
        full or does not answer is skipped; AtCapacityError when all are full, ServerUnavailableError when none
        answered."""
        ends = self._ends(deadline_s)
        wait_for, background = self.placement.due(time.monotonic())
        for stale in background:
            self._polls.submit(self._poll_one, stale, POLL_DEADLINE_S)
        self._poll(wait_for, _poll_budget(ends))
        refusals: list[tuple[str, Exception]] = []
        tried: set[str] = set()
        while (url := self.placement.pick(tried)) is not None:
            tried.add(url)
            share = self._share(ends, tried)
            if share <= 0:
                self.placement.unpick(url)
                break
            try:
                handle = self.clients[url].create_session(deadline_s=share, **options)
            except (AtCapacityError, ServerUnavailableError) as error:
                self.placement.unpick(url)
                if isinstance(error, ServerUnavailableError):
                    self._failed(url, error)
                refusals.append((url, error))
                continue
            self.placement.place(handle.session_id, url)
            return handle
        raise _no_server(refusals, tried)

    def samples(self, session_id: str, *, deadline_s: float | None = None, **options: Any) -> Samples:
        """The session's samples (`options` as `TitoClient.samples`); SessionLostError when its server died."""
        return self._on_session(session_id, deadline_s, lambda c, left: c.samples(session_id, deadline_s=left,
                                                                                   **options))  # fmt: skip

    def delete_session(self, session_id: str, *, deadline_s: float | None = None) -> None:
        self._on_session(session_id, deadline_s, lambda c, left: c.delete_session(session_id, deadline_s=left))
        self.placement.forget(session_id)

    def collect(
        self,
        session_ids: Iterable[str],
        *,
        rewards: Mapping[str, Mapping[str, float]] | None = None,
        deadline_s: float | None = None,
        **options: Any,
    ) -> dict[str, Samples | Lost]:
        """Every session's samples, or its `Lost` record to mask; `rewards` by session id, then by response id.
        Sessions are fetched in parallel, all by one deadline."""
        ends = self._ends(deadline_s)

        def one(session_id: str) -> Samples | Lost:
            try:
                given = (rewards or {}).get(session_id)
                return self.samples(session_id, rewards=given, deadline_s=ends - time.monotonic(), **options)
            except SessionLostError:
                return self.placement.lost[session_id]

        return dict(zip(list(session_ids), self._calls.map(one, list(session_ids)), strict=True))

    def _on_session(self, session_id: str, deadline_s: float | None, call: Callable[[TitoClient, float], T]) -> T:
        ends = self._ends(deadline_s)
        url = self.placement.server_of(session_id)
        while True:
            try:
                result = call(self.clients[url], _left(ends, session_id, url))
            except ServerUnavailableError as error:
                moved = self._after_failure(session_id, url, error)
                if moved is None:
                    raise
                url = moved
                continue
            self.placement.note_success(url)
            return result

    def _poll(self, urls: list[str], deadline_s: float) -> list[Lost]:
        if not urls or deadline_s <= 0:
            for url in urls:
                self.placement.polled(url)
            return []
        return [lost for found in self._polls.map(self._poll_one, urls, [deadline_s] * len(urls)) for lost in found]

    def _poll_one(self, url: str, deadline_s: float) -> list[Lost]:
        created_before = self.placement.poll_sent(url)
        try:
            load = self.clients[url].load(deadline_s=deadline_s)
        except ServerUnavailableError as error:
            return self.placement.note_failure(url, str(error), time.monotonic())
        finally:
            self.placement.polled(url)
        self.placement.note_load(url, load, time.monotonic(), created_before)
        return []

    def close(self) -> None:
        self._polls.shutdown(wait=False)
        self._calls.shutdown(wait=False)
        for client in self.clients.values():
            client.close()

    def __enter__(self) -> SessionPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncSessionPool(_PoolBase):
    """The same pool for an asyncio rollout loop; `deadline_s` bounds every call."""

    def __init__(
        self,
        urls: Iterable[str],
        *,
        api_key: str | None = None,
        deadline_s: float = POOL_DEADLINE_S,
        dead_after_s: float = DEAD_AFTER_S,
        poll_every_s: float = POLL_EVERY_S,
        shared_journal: bool = False,
    ) -> None:
        super().__init__(urls, deadline_s=deadline_s, dead_after_s=dead_after_s, poll_every_s=poll_every_s,
                         shared_journal=shared_journal)  # fmt: skip
        self.clients = {url: AsyncTitoClient(url, api_key=api_key, deadline_s=deadline_s) for url in self.urls}
        self._background: set[asyncio.Future[list[Lost]]] = set()

    async def check(self, deadline_s: float = POLL_DEADLINE_S) -> list[Lost]:
        """Polls every live server's load now; returns the sessions this found lost."""
        return await self._poll(self.placement.alive(), deadline_s)

    async def create_session(self, *, deadline_s: float | None = None, **options: Any) -> SessionHandle:
        """As `SessionPool.create_session`."""
        ends = self._ends(deadline_s)
        wait_for, background = self.placement.due(time.monotonic())
        for stale in background:
            task = asyncio.ensure_future(self._poll_one(stale, POLL_DEADLINE_S))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        await self._poll(wait_for, _poll_budget(ends))
        refusals: list[tuple[str, Exception]] = []
        tried: set[str] = set()
        while (url := self.placement.pick(tried)) is not None:
            tried.add(url)
            share = self._share(ends, tried)
            if share <= 0:
                self.placement.unpick(url)
                break
            try:
                handle = await self.clients[url].create_session(deadline_s=share, **options)
            except (AtCapacityError, ServerUnavailableError) as error:
                self.placement.unpick(url)
                if isinstance(error, ServerUnavailableError):
                    self._failed(url, error)
                refusals.append((url, error))
                continue
            self.placement.place(handle.session_id, url)
            return handle
        raise _no_server(refusals, tried)

    async def samples(self, session_id: str, *, deadline_s: float | None = None, **options: Any) -> Samples:
        """As `SessionPool.samples`."""
        ends = self._ends(deadline_s)
        url = self.placement.server_of(session_id)
        while True:
            try:
                result = await self.clients[url].samples(session_id, deadline_s=_left(ends, session_id, url),
                                                         **options)  # fmt: skip
            except ServerUnavailableError as error:
                moved = self._after_failure(session_id, url, error)
                if moved is None:
                    raise
                url = moved
                continue
            self.placement.note_success(url)
            return result

    async def delete_session(self, session_id: str, *, deadline_s: float | None = None) -> None:
        ends = self._ends(deadline_s)
        url = self.placement.server_of(session_id)
        while True:
            try:
                await self.clients[url].delete_session(session_id, deadline_s=_left(ends, session_id, url))
            except ServerUnavailableError as error:
                moved = self._after_failure(session_id, url, error)
                if moved is None:
                    raise
                url = moved
                continue
            self.placement.forget(session_id)
            return

    async def collect(
        self,
        session_ids: Iterable[str],
        *,
        rewards: Mapping[str, Mapping[str, float]] | None = None,
        deadline_s: float | None = None,
        **options: Any,
    ) -> dict[str, Samples | Lost]:
        """As `SessionPool.collect`."""
        ends = self._ends(deadline_s)

        async def one(session_id: str) -> Samples | Lost:
            try:
                given = (rewards or {}).get(session_id)
                return await self.samples(session_id, rewards=given, deadline_s=ends - time.monotonic(), **options)
            except SessionLostError:
                return self.placement.lost[session_id]

        ids = list(session_ids)
        return dict(zip(ids, await asyncio.gather(*(one(session_id) for session_id in ids)), strict=True))

    async def _poll(self, urls: list[str], deadline_s: float) -> list[Lost]:
        if not urls or deadline_s <= 0:
            for url in urls:
                self.placement.polled(url)
            return []
        found = await asyncio.gather(*(self._poll_one(url, deadline_s) for url in urls))
        return [lost for each in found for lost in each]

    async def _poll_one(self, url: str, deadline_s: float) -> list[Lost]:
        created_before = self.placement.poll_sent(url)
        try:
            load = await self.clients[url].load(deadline_s=deadline_s)
        except ServerUnavailableError as error:
            return self.placement.note_failure(url, str(error), time.monotonic())
        finally:
            self.placement.polled(url)
        self.placement.note_load(url, load, time.monotonic(), created_before)
        return []

    async def aclose(self) -> None:
        for task in self._background:
            task.cancel()
        for client in self.clients.values():
            await client.aclose()

    async def __aenter__(self) -> AsyncSessionPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _poll_budget(ends: float) -> float:
    """A create's load polls get at most a quarter of its deadline: a silent server must leave time for the others."""
    return min(POLL_DEADLINE_S, (ends - time.monotonic()) / 4)


def _left(ends: float, session_id: str, url: str) -> float:
    left = ends - time.monotonic()
    if left <= 0:
        raise DeadlineExceededError(f"session {session_id}: the deadline passed", url=url)
    return left


def _no_server(refusals: list[tuple[str, Exception]], tried: set[str]) -> Exception:
    """The error of a create no server took: at capacity when every server said so, else unavailable."""
    if not tried:
        return ServerUnavailableError("no live tito server left in the pool", url="")
    said = "; ".join(f"{url}: {error}" for url, error in refusals) or "the deadline passed before any answered"
    if refusals and len(refusals) == len(tried) and all(isinstance(e, AtCapacityError) for _, e in refusals):
        return AtCapacityError("every server is at capacity: " + said)
    return ServerUnavailableError("no server created the session: " + said, url="")
