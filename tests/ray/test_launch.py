"""`tito.ray.launch` on a real multi-node Ray cluster on this machine (`ray.cluster_utils.Cluster`, every node on
127.0.0.1: RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0): servers land on distinct nodes; 100 sessions x 5 turns spread
over them and stay on their server; a server killed with `kill -9` mid-load is restarted by Ray and every session
ends with all its turns and the samples of an uninterrupted run; a removed node's sessions are reported lost in a
bounded time while the others go on; no pool call outlives its deadline.

Needs tito[ray] (`-m ray`, its own venv in .ci/run). Ray is imported inside the fixtures: the default run collects
this module without Ray installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tito.client import DeadlineExceededError, Lost, Samples, SessionHandle

pytestmark = pytest.mark.ray

TURN_DEADLINE_S = 120.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head and one worker node, one CPU each, no dashboard; the driver connected to it. Every node on 127.0.0.1:
    RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, set before Ray is imported (Ray reads it then) and inherited by its nodes."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    import ray
    from ray.cluster_utils import Cluster

    running = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    running.add_node(num_cpus=1)
    ray.init(address=running.address, log_to_driver=False)
    try:
        yield running
    finally:
        ray.shutdown()
        running.shutdown()


def descendants(pid: int) -> set[int]:
    """Every process under `pid` (Ray's GCS, raylets and workers are children and grandchildren of the driver)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, stack = set(), [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.add(child)
            stack.append(child)
    return found


def listening_addresses(pids: set[int]) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp writes them) of the TCP sockets `pids` listen on."""
    inodes = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                addresses.add(fields[1].rsplit(":", 1)[0])
    return addresses


LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}
"""127.0.0.1, ::ffff:127.0.0.1 and ::1 as /proc/net/tcp and tcp6 write them."""


async def agent(http: httpx.AsyncClient, handle: SessionHandle, turns: int, committed: list[int]) -> list[str]:
    """`turns` turns on the session's own server, each resending the conversation; a turn that gets no answer (its
    server is restarting) is resent until it is answered: tito answers a committed turn's resend from its record."""
    messages: list[dict[str, str]] = []
    ids = []
    for number in range(turns):
        messages.append({"role": "user", "content": f"step {number}"})
        ends = time.monotonic() + TURN_DEADLINE_S
        while True:
            try:
                reply = await http.post(f"{handle.openai_base_url}/chat/completions", json={"messages": messages})
                if reply.status_code == 200:
                    break
                assert reply.status_code >= 500, reply.text
            except httpx.TransportError:
                pass
            assert time.monotonic() < ends, f"session {handle.session_id}: turn {number} never answered"
            await asyncio.sleep(0.1)
        body = reply.json()
        messages.append({"role": "assistant", "content": body["choices"][0]["message"]["content"] or ""})
        ids.append(body["id"])
        committed[0] += 1
    return ids


async def run_agents(handles: list[SessionHandle], turns: int, committed: list[int]) -> list[list[str]]:
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(timeout=30, limits=limits, trust_env=False) as http:
        return list(await asyncio.gather(*(agent(http, handle, turns, committed) for handle in handles)))


def test_servers_spread_over_nodes_and_a_killed_one_is_restarted_with_every_turn_kept(
    cluster: Any, tmp_path: Path
) -> None:
    import ray

    from tito.ray import launch

    pool = launch(name="kill", state_dir=str(tmp_path), num_cpus=0.5, dead_after_s=TURN_DEADLINE_S)
    try:
        nodes = {url: ray.get(actor.node_id.remote()) for url, actor in pool.actors.items()}
        assert len(set(nodes.values())) == 2 == len(nodes)
        assert {urlsplit(url).hostname for url in pool.urls} == {"127.0.0.1"}
        assert urlsplit(f"//{cluster.address}").hostname == "127.0.0.1"
        listening = listening_addresses(descendants(os.getpid()))
        assert listening and listening <= LOOPBACK, listening  # Ray and tito listen on loopback only

        handles = [pool.create_session(group_id=f"g{number % 10}") for number in range(100)]
        on = {url: [h.session_id for h in handles if h.server_url == url] for url in pool.urls}
        assert sorted(len(ids) for ids in on.values()) == [50, 50]

        victim = pool.urls[0]
        old_pid = ray.get(pool.actors[victim].pid.remote())
        committed = [0]

        async def load_and_kill() -> list[list[str]]:
            agents = asyncio.ensure_future(run_agents(handles, 5, committed))
            while committed[0] < 150:
                await asyncio.sleep(0.01)
            os.kill(old_pid, signal.SIGKILL)
            return await agents

        replies = asyncio.run(load_and_kill())

        assert ray.get(pool.actors[victim].pid.remote(), timeout=60) != old_pid  # Ray restarted it
        for url, actor in pool.actors.items():  # every session stayed on its server, the restarted one too
            assert ray.get(actor.session_ids.remote()) == sorted(on[url])
        results = pool.collect([h.session_id for h in handles], deadline_s=60)
        assert pool.lost() == []
        reference: list[int] | None = None
        for handle, ids in zip(handles, replies, strict=True):
            got = results[handle.session_id]
            assert isinstance(got, Samples)
            [sample] = got.samples
            assert [span["response_id"] for span in sample["spans"]] == ids  # no committed turn lost or doubled
            reference = reference or sample["tokens"]
            assert sample["tokens"] == reference  # the same conversation, token for token, killed or not
            assert sample["loss_mask"] == results[handles[-1].session_id].samples[0]["loss_mask"]  # type: ignore[union-attr]
    finally:
        pool.shutdown()


def test_a_lost_node_has_its_sessions_reported_lost_while_the_others_go_on(cluster: Any, tmp_path: Path) -> None:
    import ray

    from tito.ray import launch

    doomed_node = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    pool = launch(name="loss", state_dir=str(tmp_path), num_cpus=0.5)
    try:
        assert len(pool.urls) == 3
        doomed = next(url for url, actor in pool.actors.items()
                      if ray.get(actor.node_id.remote()) == doomed_node.node_id)  # fmt: skip
        handles = [pool.create_session() for _ in range(12)]
        asyncio.run(run_agents(handles, 1, [0]))
        on_doomed = {h.session_id for h in handles if h.server_url == doomed}
        assert len(on_doomed) == 4

        stopped = ray.get(pool.actors[doomed].pid.remote())
        os.kill(stopped, signal.SIGSTOP)  # a server that accepts connections and never answers
        try:
            started = time.monotonic()
            with pytest.raises(DeadlineExceededError):
                pool.samples(next(iter(on_doomed)), deadline_s=1.0)
            assert time.monotonic() - started < 1.5
        finally:
            os.kill(stopped, signal.SIGCONT)

        removed_at = time.monotonic()
        cluster.remove_node(doomed_node)
        while {record.session_id for record in pool.lost()} != on_doomed:
            assert time.monotonic() - removed_at < 60, "the lost node's sessions were not reported lost in 60 s"
            time.sleep(0.1)
        reported_in = time.monotonic() - removed_at

        survivors = [h for h in handles if h.session_id not in on_doomed]
        asyncio.run(run_agents(survivors, 2, [0]))  # the first turn's resend is answered from its record, then one more
        results = pool.collect([h.session_id for h in handles], deadline_s=30)
        assert {sid for sid, got in results.items() if isinstance(got, Lost)} == on_doomed
        for handle in survivors:
            got = results[handle.session_id]
            assert isinstance(got, Samples) and len(got.samples[0]["spans"]) == 2
        print(f"lost node reported in {reported_in:.1f}s")
    finally:
        pool.shutdown()
