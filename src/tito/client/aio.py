"""`AsyncTitoClient`: the same calls as `TitoClient` for an asyncio rollout loop; each call is cancelled at its
deadline (`asyncio.timeout`), so none outlives it.

Imports from tito: client.calls, client.errors.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any, TypeVar

import httpx

from tito.client.calls import (
    DEFAULT_DEADLINE_S,
    Attempts,
    Call,
    Samples,
    ServerLoad,
    SessionHandle,
    create_call,
    delete_call,
    headers,
    load_call,
    ready_call,
    samples_call,
)
from tito.client.errors import ServerUnavailableError, TitoClientError

T = TypeVar("T")


class AsyncTitoClient:
    """Sessions, samples and readiness over tito's HTTP API; `deadline_s` bounds every call (retries included)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_connections: int = 100,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.deadline_s = deadline_s
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=headers(api_key), limits=limits,
                                       trust_env=False)  # fmt: skip

    async def create_session(
        self,
        *,
        trajectory: str | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        matcher: str | None = None,
        group_id: str | None = None,
        allowed_append_roles: list[str] | None = None,
        ttl_seconds: float | None = None,
        max_nodes: int | None = None,
        strict_append_only: bool | None = None,
        deadline_s: float | None = None,
    ) -> SessionHandle:
        """A new session; the options the server does not get come from its launch options (`tito serve`)."""
        call = create_call(
            self.base_url, trajectory=trajectory, chat_template_kwargs=chat_template_kwargs, matcher=matcher,
            group_id=group_id, allowed_append_roles=allowed_append_roles, ttl_seconds=ttl_seconds,
            max_nodes=max_nodes, strict_append_only=strict_append_only,
        )  # fmt: skip
        return await self.send(call, deadline_s)

    async def samples(
        self,
        session_id: str,
        *,
        format: str = "json",
        reward: float | None = None,
        rewards: Mapping[str, float] | None = None,
        max_seq_len: int | None = None,
        group_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        deadline_s: float | None = None,
    ) -> Samples:
        """The session's samples in `format`; `rewards` by response id (a reply's `id`), `max_seq_len` the budget."""
        call = samples_call(session_id, format, reward=reward, rewards=rewards, max_seq_len=max_seq_len,
                            group_id=group_id, metadata=metadata)  # fmt: skip
        return await self.send(call, deadline_s)

    async def delete_session(self, session_id: str, *, deadline_s: float | None = None) -> None:
        await self.send(delete_call(session_id), deadline_s)

    async def load(self, *, deadline_s: float | None = None) -> ServerLoad:
        return await self.send(load_call(), deadline_s)

    async def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Returns once `/ready` answers 200 (a server replaying its journal answers 503 meanwhile)."""
        ends = time.monotonic() + timeout_s
        while True:
            try:
                await self.send(ready_call(), max(ends - time.monotonic(), 0.001))
                return
            except TitoClientError as error:
                if time.monotonic() >= ends:
                    raise ServerUnavailableError(f"{self.base_url} not ready in {timeout_s:g}s: {error}",
                                                 url=self.base_url) from error  # fmt: skip
            await asyncio.sleep(0.05)

    async def send(self, call: Call[T], deadline_s: float | None = None) -> T:
        attempts = Attempts(self.base_url, call, self.deadline_s if deadline_s is None else deadline_s)
        try:
            async with asyncio.timeout(attempts.deadline_s):
                return await self._attempt(call, attempts)
        except TimeoutError:
            raise attempts.deadline_exceeded("cancelled at the deadline") from None

    async def _attempt(self, call: Call[T], attempts: Attempts) -> T:
        while True:
            remaining = attempts.remaining()
            try:
                response = await self._http.request(call.method, call.path, json=call.body, timeout=remaining)
            except httpx.TransportError as error:
                wait = attempts.after_transport_error(error)
            else:
                retry = attempts.after_response(response)
                if retry is None:
                    result: T = attempts.result(response)
                    return result
                wait = retry
            await asyncio.sleep(wait)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncTitoClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
