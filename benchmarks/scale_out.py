"""Scale-out behind nginx: turns/s with 1, 2 and 4 tito processes, and the cost of a takeover after `kill -9`.

Everything real and on loopback: `tito serve --engine instant --journal DIR --journal-shared` processes (the
instant engine answers a fixed reply at once, so what is measured is tito, nginx and the client), one nginx
(`tito.server.scaleout.router_config`, hash on the session id) in front, and this process as the load: `--concurrency`
agents, each a session of `--turns` turns (then a new session), over keep-alive HTTP.
  throughput  for each process count, `--seconds` of load after a warm-up: turns/s, and the ratio to 1 process.
              Rounds rotate the process counts (best round kept), so load from others on a shared machine hits
              each count alike. Goal (issue 19): 2 processes >= 1.8x one where two cores are free.
  takeover    2 processes; sessions are created through nginx until the one to be killed holds `--takeover-sessions`
              (each with 2 committed turns); it is killed with SIGKILL, then every one of its sessions sends its
              third turn at once (concurrency `--concurrency`), retrying on 502/503 (after `retry-after-ms`): time
              from the kill to the first completed turn and to the last; then the same sessions' fourth turn (held
              by the survivor now, no takeover) as the baseline of the last. Goal: < 2 s for 1,000 sessions.
The client shares the machine's cores with the servers and nginx: on 2 cores it is a large part of the load, so
the ratios are a floor for what separate client machines would see.

Run: PYTHONPATH=src:. python benchmarks/scale_out.py [--processes 1 2 4] [--seconds 5] [--rounds 2]
     [--concurrency 64] [--turns 5] [--takeover-sessions 1000] [--fsync always]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from tests.engines.servers import free_port
from tests.server.cluster import NGINX, Nginx, TitoProcess

Reply = tuple[int, dict[str, str], Any]
"""Status, headers (lower-case names), JSON body."""


class Cluster:
    """`count` tito processes sharing one journal, behind one nginx."""

    def __init__(self, root: Path, count: int, fsync: str) -> None:
        root.mkdir(parents=True, exist_ok=True)
        engine = ["--engine", "instant", "--journal-fsync", fsync]
        ports = [free_port() for _ in range(count)]
        self.processes = [
            TitoProcess(f"tito-{index}", root / "journal", root / f"tito-{index}.log", engine, port)
            for index, port in enumerate(ports)
        ]
        for process in self.processes:
            process.wait_ready()
        self.nginx = Nginx(root / "nginx", [p.address for p in self.processes], workers=1)

    def stop(self) -> None:
        for process in self.processes:
            process.stop()
        self.nginx.stop()


def client() -> aiohttp.ClientSession:
    """aiohttp, not httpx: httpx's pool serialises many concurrent requests (64 sessions ran ~8x slower with it)."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=512), timeout=aiohttp.ClientTimeout(60))


async def call(http: aiohttp.ClientSession, method: str, url: str, body: Any = None) -> Reply:
    async with http.request(method, url, json=body) as response:
        payload = await response.json() if response.content_type == "application/json" else None
        return response.status, {k.lower(): v for k, v in response.headers.items()}, payload


async def turn(http: aiohttp.ClientSession, url: str, session_id: str, messages: list[dict[str, Any]]) -> Reply:
    """One turn, retried while the reply is a 503 (after its `retry-after-ms`)."""
    while True:
        reply = await call(http, "POST", f"{url}/sessions/{session_id}/v1/chat/completions", {"messages": messages})
        if reply[0] != 503:
            assert reply[0] == 200, reply
            return reply
        await asyncio.sleep(int(reply[1].get("retry-after-ms", "100")) / 1000)


def extend(messages: list[dict[str, Any]], reply: Reply, next_user: str) -> None:
    message = reply[2]["choices"][0]["message"]
    messages.append({key: value for key, value in message.items() if value is not None})
    messages.append({"role": "user", "content": next_user})


async def load(url: str, seconds: float, concurrency: int, turns: int) -> float:
    """Turns/s over `seconds` (after 1 s of warm-up), `concurrency` agents each running sessions of `turns`."""
    counted = [0]
    measuring = [False]

    async def agent(http: aiohttp.ClientSession, index: int) -> None:
        while True:
            session_id = (await call(http, "POST", f"{url}/sessions"))[2]["session_id"]
            messages: list[dict[str, Any]] = [{"role": "user", "content": f"Agent {index}: start."}]
            for step in range(turns):
                reply = await turn(http, url, session_id, messages)
                extend(messages, reply, f"Agent {index}, step {step}: go on.")
                if measuring[0]:
                    counted[0] += 1
            await call(http, "DELETE", f"{url}/sessions/{session_id}")

    async with client() as http:
        tasks = [asyncio.create_task(agent(http, index)) for index in range(concurrency)]
        await asyncio.sleep(1.0)
        measuring[0] = True
        started = time.monotonic()
        await asyncio.sleep(seconds)
        rate = counted[0] / (time.monotonic() - started)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return rate


async def takeover(cluster: Cluster, sessions: int, concurrency: int) -> tuple[float, float, float, int]:
    """Seconds from the kill to the first turn and to the last of `sessions` taken over, seconds for the same
    sessions' next turn (no takeover: the baseline), and how many replies were 502/503 retries."""
    victim = cluster.processes[0]
    held: list[tuple[str, list[dict[str, Any]]]] = []
    url = cluster.nginx.url
    async with client() as http:
        gate = asyncio.Semaphore(concurrency)

        async def open_one(index: int) -> None:
            async with gate:
                _, headers, created = await call(http, "POST", f"{url}/sessions")
                session_id = created["session_id"]
                if headers["x-tito-process"] != victim.name or len(held) >= sessions:
                    await call(http, "DELETE", f"{url}/sessions/{session_id}")
                    return
                messages: list[dict[str, Any]] = [{"role": "user", "content": f"Agent {index}: start."}]
                for step in range(2):
                    extend(messages, await turn(http, url, session_id, messages), f"Agent {index}, step {step}.")
                held.append((session_id, messages))

        index = 0
        while len(held) < sessions:
            batch = min(2 * (sessions - len(held)) + 16, 4096)
            await asyncio.gather(*(open_one(index + offset) for offset in range(batch)))
            index += batch
        held = held[:sessions]
        retries = [0]
        first: list[float] = []
        os.kill(victim.process.pid, signal.SIGKILL)
        killed = time.monotonic()

        async def continue_one(session_id: str, messages: list[dict[str, Any]]) -> None:
            async with gate:
                while True:
                    path = f"{url}/sessions/{session_id}/v1/chat/completions"
                    try:
                        status, headers, body = await call(http, "POST", path, {"messages": messages})
                    except aiohttp.ClientError:
                        retries[0] += 1
                        await asyncio.sleep(0.05)
                        continue
                    if status in (502, 503):
                        retries[0] += 1
                        await asyncio.sleep(int(headers.get("retry-after-ms", "50")) / 1000)
                        continue
                    assert status == 200, body
                    extend(messages, (status, headers, body), "once more")
                    if not first:
                        first.append(time.monotonic() - killed)
                    return

        await asyncio.gather(*(continue_one(session_id, messages) for session_id, messages in held))
        last = time.monotonic() - killed
        again = time.monotonic()  # the same sessions' next turn, all now held by the survivor: no takeover
        await asyncio.gather(*(continue_one(session_id, messages) for session_id, messages in held))
        baseline = time.monotonic() - again
    victim.process.wait(10)
    return first[0], last, baseline, retries[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--takeover-sessions", type=int, default=1000)
    parser.add_argument("--fsync", choices=("always", "interval", "never"), default="always")
    args = parser.parse_args()
    if NGINX is None:
        sys.exit("nginx is not installed (apt-get install nginx)")
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}; instant engine; fsync {args.fsync}; "
          f"concurrency {args.concurrency}; sessions of {args.turns} turns")  # fmt: skip
    best: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="tito-scale-out-") as tmp:
        for round_number in range(args.rounds):
            order = (
                args.processes[round_number % len(args.processes) :]
                + args.processes[: round_number % len(args.processes)]
            )
            for count in order:
                root = Path(tmp) / f"r{round_number}-p{count}"
                cluster = Cluster(root, count, args.fsync)
                try:
                    rate = asyncio.run(load(cluster.nginx.url, args.seconds, args.concurrency, args.turns))
                finally:
                    cluster.stop()
                best[count] = max(best.get(count, 0.0), rate)
                print(f"  round {round_number + 1}: {count} process(es): {rate:8.1f} turns/s", flush=True)
        base = best.get(1)
        print(f"{'processes':>9} {'turns/s':>9} {'vs 1':>6}")
        for count in args.processes:
            ratio = f"{best[count] / base:6.2f}" if base else "     -"
            print(f"{count:>9} {best[count]:9.1f} {ratio}")
        if args.takeover_sessions:
            cluster = Cluster(Path(tmp) / "takeover", 2, args.fsync)
            try:
                first, last, baseline, retries = asyncio.run(
                    takeover(cluster, args.takeover_sessions, args.concurrency)
                )
            finally:
                cluster.stop()
            print(f"takeover of {args.takeover_sessions} sessions after kill -9: first turn after {first:.3f} s; "
                  f"a turn of every one of them after {last:.3f} s ({retries} replies were 502/503 and retried); "
                  f"the same sessions' next turn, no takeover: {baseline:.3f} s")  # fmt: skip


if __name__ == "__main__":
    main()
