"""`tito serve --workers N`: N tito processes on one host, sharing one journal directory, behind nginx.

The supervisor starts each worker as `python -m tito serve` with the same options plus its own port (PORT+1 ...
PORT+N), its process name (`HOST:PORT`, the router's name for it) and `--journal-shared`, then prints the nginx
config that listens on HOST:PORT and routes each session to one worker (`tito.server.scaleout.router_config`). It
restarts nothing: a worker that dies stays down and the others take its sessions over (nginx moves them along its hash
ring); a restart on the same port would route the sessions others took over back to it (see docs/scale-out.md). Ctrl-C
or SIGTERM stops every worker, each by its own pid.

Imports from tito: server.scaleout.router_config.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

from tito.server.scaleout.router_config import nginx_config

_SUPERVISOR_OPTIONS = {"--workers": 1, "--port": 1, "--process-name": 1, "--journal-shared": 0}
"""Options the supervisor sets per worker (and how many values each takes): dropped from the forwarded ones."""


def worker_argv(argv: Sequence[str], port: int, process_name: str) -> list[str]:
    """The `tito serve` arguments of one worker: the supervisor's own, less its per-worker options, plus them."""
    forwarded: list[str] = []
    skip = 0
    for arg in argv:
        if skip:
            skip -= 1
            continue
        name = arg.split("=", 1)[0]
        if name in _SUPERVISOR_OPTIONS:
            skip = 0 if "=" in arg else _SUPERVISOR_OPTIONS[name]
            continue
        forwarded.append(arg)
    return [*forwarded, "--port", str(port), "--process-name", process_name, "--journal-shared"]


def run_workers(argv: Sequence[str], workers: int, host: str, port: int) -> int:
    """Start the workers, print the nginx config, wait until stopped; exit 1 if every worker died on its own."""
    ports = [port + 1 + index for index in range(workers)]
    addresses = [f"{host}:{worker_port}" for worker_port in ports]
    children = [
        subprocess.Popen([sys.executable, "-m", "tito", *worker_argv(argv, worker_port, address)])
        for worker_port, address in zip(ports, addresses, strict=True)
    ]
    print(nginx_config(addresses, f"{host}:{port}"), flush=True)
    print(f"tito serve --workers {workers}: workers on {', '.join(addresses)} (pids "
          f"{', '.join(str(child.pid) for child in children)}); run nginx with the config above, listening on "
          f"{host}:{port}", file=sys.stderr)  # fmt: skip
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        reported: set[int] = set()
        while not stopping and any(child.poll() is None for child in children):
            for child, address in zip(children, addresses, strict=True):
                if child.poll() is not None and child.pid not in reported:
                    reported.add(child.pid)
                    print(f"tito serve --workers: the worker on {address} exited ({child.returncode}); the others "
                          "take its sessions over", file=sys.stderr)  # fmt: skip
            time.sleep(0.2)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _stop_all(children)
    return 0 if stopping else 1


def _stop_all(children: Sequence[subprocess.Popen[bytes]], timeout: float = 20.0) -> None:
    for child in children:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for child in children:
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
