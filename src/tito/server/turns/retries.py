"""Which turn request is a retry of one that may already have committed: the official SDKs' retry counter, or an
`Idempotency-Key`.

The openai and anthropic Python SDKs both count their retries in `x-stainless-retry-count` (0 on the first try)
and send no idempotency key of their own; other clients send `Idempotency-Key`, the same on the first try and every
retry. A retry whose request the session committed gets that turn back, never a second sample
(`Trajectory.plan(..., is_retry)` matches it by the request's fingerprint). The key is folded into the
fingerprint, so only a resend with the same key and the same body finds the committed turn: an agent that sends
the same conversation again under a new key asks for a new sample.

The fingerprint is the body's xxh3-128 (it was blake2b until issue 34: hashing an agent's ~70 KB of tools after the
messages cost ~0.1 ms a turn; xxh3 runs at memory speed). It tells a session's own requests apart; a client could
craft two bodies that collide only against its own session, and would get its own committed turn back. A retry sent
after an upgrade across that change does not find a turn committed before it, and samples anew.

Imports nothing from tito.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import xxhash

SDK_RETRY_HEADER = "x-stainless-retry-count"
"""The openai and anthropic SDKs' retry counter: > 0 marks a resend of a request that may already have committed."""
IDEMPOTENCY_HEADER = "idempotency-key"
"""The same value on a request's first try and each retry (IETF httpapi idempotency-key draft)."""


@dataclass(frozen=True)
class RequestKey:
    """What the trajectory matches a retry by: the request's fingerprint and whether it is marked as a retry."""

    fingerprint: str
    is_retry: bool


def request_key(body: bytes, headers: Mapping[str, str], digest: Any = None) -> RequestKey:
    """The fingerprint of the request body (and its idempotency key, when one is sent) and its retry mark;
    `digest`: the body's xxh3-128 state already computed (server.sessions.resent_prefix), else it is here."""
    digest = digest if digest is not None else xxhash.xxh3_128(body)
    idempotency_key = headers.get(IDEMPOTENCY_HEADER)
    if idempotency_key:
        digest.update(b"\0idempotency-key\0" + idempotency_key.encode())
        return RequestKey(digest.hexdigest(), True)
    count = headers.get(SDK_RETRY_HEADER, "0")
    return RequestKey(digest.hexdigest(), count.isdigit() and int(count) > 0)


def unmarked_key(body: bytes) -> RequestKey:
    """A request that is never a retry (counting tokens, a benchmark's direct call): its fingerprint only."""
    return RequestKey(xxhash.xxh3_128(body).hexdigest(), False)
