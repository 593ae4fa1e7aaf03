"""`launch`: N tito servers as Ray actors, by default one per alive node, each pinned to its node (node affinity,
not soft: its journal is on that node's disk) and restarted there by Ray when its process dies. Returns a
`RaySessionPool`: a `SessionPool` over their URLs whose watcher asks Ray about each actor, so a server whose node is
lost (Ray: the actor died for good) has its sessions reported lost at once instead of after `dead_after_s`.

Works inside a trainer's Ray cluster (`ray.init(address=...)` first) or starts a local one.

Imports from tito: client, ray.actor, server.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import ray
from ray.exceptions import ActorDiedError, ActorUnschedulableError, GetTimeoutError, RayActorError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from tito.client import SessionPool
from tito.client.placement import Lost
from tito.client.pool import DEAD_AFTER_S, POOL_DEADLINE_S
from tito.ray.actor import TitoServerActor
from tito.server import ServerOptions

logger = logging.getLogger(__name__)

DEFAULT_STATE_DIR = "/tmp/tito-ray"
"""Node-local: each server's journal and port under `STATE_DIR/NAME-INDEX` on its own node."""
WATCH_EVERY_S = 0.5


class RaySessionPool(SessionPool):
    """A `SessionPool` over tito servers that are Ray actors; `shutdown()` stops them (and their directories)."""

    def __init__(self, actors: Mapping[str, Any], **pool_options: Any) -> None:
        super().__init__(list(actors), **pool_options)
        self.actors = dict(actors)
        self._listeners: list[Callable[[str, str], object]] = []
        self._stopping = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="tito-ray-watch", daemon=True)
        self._watcher.start()

    def on_dead(self, listener: Callable[[str, str], object]) -> None:
        """Also tell `listener(url, reason)` when Ray reports a server's actor dead (e.g. an AsyncSessionPool's
        `mark_dead` over the same URLs)."""
        self._listeners.append(listener)

    def mark_dead(self, url: str, reason: str) -> list[Lost]:
        lost = super().mark_dead(url, reason)
        for listener in self._listeners:
            listener(url, reason)
        return lost

    def _watch(self) -> None:
        """Pings each live actor; Ray queues a ping while it restarts a crashed actor and answers ActorDiedError once
        the actor is gone for good (its node lost)."""
        while not self._stopping.wait(WATCH_EVERY_S):
            for url in self.placement.alive():
                try:
                    ray.get(self.actors[url].ping.remote(), timeout=WATCH_EVERY_S)
                except (ActorDiedError, ActorUnschedulableError) as error:
                    self.mark_dead(url, f"Ray reports its actor dead: {type(error).__name__}")
                except (GetTimeoutError, RayActorError):
                    continue  # restarting, or a slow answer: the pool's own dead_after_s still applies
                except Exception:
                    if self._stopping.is_set():
                        return
                    logger.exception("watching the tito actor at %s failed", url)

    def shutdown(self, remove_state: bool = True) -> None:
        """Stops the watcher and every server actor; `remove_state` deletes their node-local journals."""
        self._stopping.set()
        self._watcher.join(5)
        for url, actor in self.actors.items():
            if url in self.placement.alive():
                try:
                    ray.get(actor.stop.remote(remove_state), timeout=10)
                except Exception as error:  # a dead or stuck actor: killed below all the same
                    logger.warning("stopping the tito actor at %s: %s", url, error)
            ray.kill(actor, no_restart=True)
        self.close()


def launch(
    count: int | None = None,
    *,
    family: str = "qwen3",
    engine: str = "instant",
    engine_args: Mapping[str, Any] | None = None,
    server_options: Mapping[str, Any] | None = None,
    name: str = "tito",
    state_dir: str = DEFAULT_STATE_DIR,
    num_cpus: float = 1.0,
    deadline_s: float = POOL_DEADLINE_S,
    dead_after_s: float = DEAD_AFTER_S,
    ready_timeout_s: float = 300.0,
) -> RaySessionPool:
    """`count` servers (default: one per alive node), spread over the nodes in turn; returns their pool once every
    server answers. `engine_args`: `build_state`'s (`engine_url`, `tokenizer`, ...); `server_options`: the fields
    of `ServerOptions` (`tito serve`'s options; the journal and process name are set per server)."""
    if not ray.is_initialized():
        ray.init()
    nodes = sorted((node for node in ray.nodes() if node["Alive"]), key=lambda node: str(node["NodeID"]))
    if not nodes:
        raise RuntimeError("the Ray cluster has no alive node to start tito servers on")
    options = ServerOptions(family=family, **dict(server_options or {}))
    remote: Any = ray.remote(TitoServerActor)
    actors = []
    for index in range(count or len(nodes)):
        node = nodes[index % len(nodes)]
        pinned = NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)
        placed = remote.options(scheduling_strategy=pinned, max_restarts=-1, max_task_retries=-1, num_cpus=num_cpus)
        actor = placed.remote(f"{state_dir}/{name}-{index}", node["NodeManagerAddress"], options, engine,
                              dict(engine_args or {}))  # fmt: skip
        actors.append(actor)
    urls = ray.get([actor.url.remote() for actor in actors], timeout=ready_timeout_s)
    return RaySessionPool(dict(zip(urls, actors, strict=True)), deadline_s=deadline_s, dead_after_s=dead_after_s)
