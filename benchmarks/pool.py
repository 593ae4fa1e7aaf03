"""The same agents through one tito server and through `AsyncSessionPool` over two servers, side by side in one run.

Everything real and on loopback: `tito serve --engine instant` processes (the instant engine answers a fixed reply
at once, so what is measured is tito, the pool and the client), and this process as the load (aiohttp for the
agents' turns: httpx's pool serialises many concurrent requests; the pool's own calls are httpx): `--concurrency`
agents, each a session of `--turns` turns (each resending the whole conversation), then its samples and its
deletion, then a new session, for `--seconds`. Rounds alternate one server / the pool (best round kept), so load
from others on a shared machine hits both alike.
  turns/s          committed turns per second of the phase.
  CPU ms/turn      tito's own cost: the `tito serve` processes' user+system CPU over the phase (/proc) / turns.
  pool ms/call     wall time of the pool's create/samples/delete over that one server (a third phase: the pool
                   over the same single server), less the same call through a plain AsyncTitoClient: the pool's
                   choice, its /load polls and its map, under the same load.
  bookkeeping us   the pool's own work per session without I/O (pick, place, look up, forget), in a tight loop.
The client shares the machine's cores with the servers: on 2 cores the client is a large part of the load.

Run: PYTHONPATH=src:. python benchmarks/pool.py [--seconds 5] [--rounds 2] [--concurrency 32] [--turns 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from tests.engines.servers import free_port

from tito.client import AsyncSessionPool, AsyncTitoClient
from tito.client.calls import ServerLoad
from tito.client.placement import Placement

SRC = Path(__file__).resolve().parents[1] / "src"


class TitoServe:
    """`python -m tito serve --family qwen3 --engine instant` on a free loopback port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "tito", "serve", "--family", "qwen3", "--engine", "instant",
                   "--port", str(self.port)]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/ready", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError(f"tito serve on {self.url} did not become ready")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        os.kill(self.process.pid, signal.SIGTERM)
        self.process.wait(10)


@dataclass
class Phase:
    turns: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    call_seconds: dict[str, list[float]] = field(default_factory=lambda: {"create": [], "samples": [], "delete": []})

    @property
    def rate(self) -> float:
        return self.turns / self.seconds

    @property
    def cpu_ms(self) -> float:
        return 1000 * self.cpu_seconds / max(self.turns, 1)

    def mean_ms(self, call: str) -> float:
        values = self.call_seconds[call]
        return 1000 * sum(values) / max(len(values), 1)


async def timed(phase: Phase, call: str, awaitable: Any) -> Any:
    started = time.perf_counter()
    result = await awaitable
    phase.call_seconds[call].append(time.perf_counter() - started)
    return result


async def run_phase(sessions: Any, servers: list[TitoServe], args: argparse.Namespace) -> Phase:
    """`sessions`: an AsyncSessionPool or an AsyncTitoClient (the same three calls)."""
    phase = Phase()
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as http:
        ends = time.monotonic() + args.seconds

        async def agent() -> None:
            while time.monotonic() < ends:
                handle = await timed(phase, "create", sessions.create_session())
                messages: list[dict[str, str]] = []
                for number in range(args.turns):
                    messages.append({"role": "user", "content": f"step {number}"})
                    url = f"{handle.openai_base_url}/chat/completions"
                    async with http.post(url, json={"messages": messages}) as reply:
                        reply.raise_for_status()
                        body = await reply.json()
                    messages.append({"role": "assistant", "content": body["choices"][0]["message"]["content"]})
                    phase.turns += 1
                await timed(phase, "samples", sessions.samples(handle.session_id))
                await timed(phase, "delete", sessions.delete_session(handle.session_id))

        cpu = sum(server.cpu_seconds() for server in servers)
        started = time.monotonic()
        await asyncio.gather(*(agent() for _ in range(args.concurrency)))
        phase.seconds = time.monotonic() - started
        phase.cpu_seconds = sum(server.cpu_seconds() for server in servers) - cpu
    return phase


def bookkeeping_us(sessions: int = 20_000) -> float:
    """The pool's own work per session with no I/O: pick a server, place, look up, forget."""
    placement = Placement(["http://a", "http://b"], dead_after_s=15, poll_every_s=0.5, shared_journal=False)
    for url in placement.servers:
        placement.note_load(url, ServerLoad(0, 0, True), now=0.0)
    started = time.perf_counter()
    for number in range(sessions):
        url = placement.pick(set())
        assert url is not None
        placement.place(str(number), url)
        placement.server_of(str(number))
        placement.forget(str(number))
    return 1e6 * (time.perf_counter() - started) / sessions


async def main(args: argparse.Namespace) -> None:
    servers = [TitoServe() for _ in range(3)]
    try:
        for server in servers:
            server.wait_ready()
        single, pair = servers[0], servers[1:]
        best: dict[str, Phase] = {}
        for round_number in range(args.rounds):
            async with AsyncTitoClient(single.url, max_connections=args.concurrency * 2) as client:
                one = await run_phase(client, [single], args)
            async with AsyncSessionPool([single.url]) as pool:
                over_one = await run_phase(pool, [single], args)
            async with AsyncSessionPool([server.url for server in pair]) as pool:
                two = await run_phase(pool, pair, args)
            print(f"round {round_number + 1}: one server {one.rate:.0f} turns/s, pool over it {over_one.rate:.0f}, "
                  f"pool of two {two.rate:.0f} turns/s")  # fmt: skip
            for name, phase in (("one", one), ("pool of one", over_one), ("pool", two)):
                if name not in best or phase.rate > best[name].rate:
                    best[name] = phase
        one, over_one, two = best["one"], best["pool of one"], best["pool"]
        print(f"\nagents {args.concurrency}, {args.turns} turns per session, {args.seconds:g} s per phase, best of "
              f"{args.rounds} rounds; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")  # fmt: skip
        print(f"{'':20}{'one server':>12}{'pool of 2':>12}{'ratio':>8}{'pool over 1':>14}")
        print(f"{'turns/s':20}{one.rate:12.0f}{two.rate:12.0f}{two.rate / one.rate:8.2f}{over_one.rate:14.0f}")
        print(f"{'tito CPU ms/turn':20}{one.cpu_ms:12.2f}{two.cpu_ms:12.2f}{two.cpu_ms / one.cpu_ms:8.2f}"
              f"{over_one.cpu_ms:14.2f}")  # fmt: skip
        for call in ("create", "samples", "delete"):
            extra = over_one.mean_ms(call) - one.mean_ms(call)
            row = f"{call + ' ms/call':20}{one.mean_ms(call):12.2f}{two.mean_ms(call):12.2f}{'':8}"
            print(f"{row}{over_one.mean_ms(call):14.2f}  the pool's own: {extra:+.2f} ms")
        print(f"pool bookkeeping per session (pick, place, look up, forget): {bookkeeping_us():.1f} us")
    finally:
        for server in servers:
            server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--turns", type=int, default=5)
    asyncio.run(main(parser.parse_args()))
