"""A trainer's client for tito servers over the HTTP API only, so it works against one `tito serve`, nginx in front
of several, or a `SessionPool` over many (`tito.ray` starts them as Ray actors): create a session, hand its base URL
to the agent, take its samples with rewards, delete it. Every call has a deadline; errors are typed (`errors`).

Modules: errors (the typed errors), calls (requests, replies and retries both clients share), sync (`TitoClient`),
aio (`AsyncTitoClient`), placement (the pool's map and choice, no I/O), pool (`SessionPool`, `AsyncSessionPool`).

Imports nothing from tito (the HTTP API is its only contract with the server).
"""

from tito.client.aio import AsyncTitoClient
from tito.client.calls import Samples, ServerLoad, SessionHandle
from tito.client.errors import (
    AtCapacityError,
    BadRequestError,
    DeadlineExceededError,
    ServerError,
    ServerUnavailableError,
    SessionGoneError,
    SessionLostError,
    TitoClientError,
)
from tito.client.placement import Lost
from tito.client.pool import AsyncSessionPool, SessionPool
from tito.client.sync import TitoClient

__all__ = [
    "AsyncSessionPool",
    "AsyncTitoClient",
    "AtCapacityError",
    "BadRequestError",
    "DeadlineExceededError",
    "Lost",
    "Samples",
    "ServerError",
    "ServerLoad",
    "ServerUnavailableError",
    "SessionGoneError",
    "SessionHandle",
    "SessionLostError",
    "SessionPool",
    "TitoClient",
    "TitoClientError",
]
