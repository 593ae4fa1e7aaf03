"""`TitoClient`: a trainer's calls to one tito server (or nginx in front of several), blocking, each under a deadline.

Imports from tito: client.calls, client.errors.
"""

from __future__ import annotations

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


class TitoClient:
    """Sessions, samples and readiness over tito's HTTP API; `deadline_s` bounds every call (retries included)."""

    def __init__(self, base_url: str, *, api_key: str | None = None, deadline_s: float = DEFAULT_DEADLINE_S) -> None:
        self.base_url = base_url.rstrip("/")
        self.deadline_s = deadline_s
        self._http = httpx.Client(base_url=self.base_url, headers=headers(api_key), trust_env=False)

    def create_session(
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
        return self.send(call, deadline_s)

    def samples(
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
        return self.send(call, deadline_s)

    def delete_session(self, session_id: str, *, deadline_s: float | None = None) -> None:
        self.send(delete_call(session_id), deadline_s)

    def load(self, *, deadline_s: float | None = None) -> ServerLoad:
        return self.send(load_call(), deadline_s)

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Returns once `/ready` answers 200 (a server replaying its journal answers 503 meanwhile)."""
        ends = time.monotonic() + timeout_s
        while True:
            try:
                self.send(ready_call(), max(ends - time.monotonic(), 0.001))
                return
            except TitoClientError as error:
                if time.monotonic() >= ends:
                    raise ServerUnavailableError(f"{self.base_url} not ready in {timeout_s:g}s: {error}",
                                                 url=self.base_url) from error  # fmt: skip
            time.sleep(0.05)

    def send(self, call: Call[T], deadline_s: float | None = None) -> T:
        attempts = Attempts(self.base_url, call, self.deadline_s if deadline_s is None else deadline_s)
        while True:
            remaining = attempts.remaining()
            try:
                response = self._http.request(call.method, call.path, json=call.body, timeout=remaining)
            except httpx.TransportError as error:
                wait = attempts.after_transport_error(error)
            else:
                retry = attempts.after_response(response)
                if retry is None:
                    result: T = attempts.result(response)
                    return result
                wait = retry
            time.sleep(wait)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> TitoClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
