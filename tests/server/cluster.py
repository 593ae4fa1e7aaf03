"""Several `tito serve --journal-shared` processes behind a real nginx, on free loopback ports, for the scale-out
test and benchmark. Every process is a child started here and stopped by its own pid.

nginx runs in the foreground (`daemon off;`) with `-p TMPDIR -c CONF -e stderr`, so its pid, temp files and log stay
in the temporary directory. `NGINX` is None where the binary is missing (`.ci/run` installs Debian's `nginx`).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from tests.engines.servers import free_port
from tito.server.scaleout.router_config import nginx_config

SRC = Path(__file__).resolve().parents[2] / "src"
NGINX = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)


def free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports (held open together while chosen, so none repeats)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class TitoProcess:
    """`python -m tito serve ... --journal DIR --journal-shared` on a free port; `ready()` waits for /ready."""

    def __init__(
        self, name: str, journal: Path, log: Path, engine_args: Sequence[str], port: int | None = None
    ) -> None:
        self.name = name
        self.port = port or free_port()
        self.address = f"127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "tito", "serve", "--family", "qwen3", *engine_args, "--port", str(self.port),
                   "--journal", str(journal), "--journal-shared", "--process-name", name]  # fmt: skip
        with log.open("ab") as output:
            env = {**os.environ, "PYTHONPATH": str(SRC)}
            self.process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env)
        self.log = log

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=f"http://{self.address}", timeout=5) as http:
            while True:
                try:
                    if http.get("/ready").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.kill()
                    raise AssertionError(f"tito {self.name} did not become ready; its log:\n{self.log.read_text()}")
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: what a crash looks like to the others (no lease release, no flush)."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


class Nginx:
    """A real nginx routing `listen` to the tito processes by session id (and, optionally, engines by key)."""

    def __init__(
        self,
        directory: Path,
        tito_addresses: Sequence[str],
        *,
        engine_addresses: Sequence[str] = (),
        workers: int = 1,
        ports: tuple[int, int] | None = None,
    ) -> None:
        """`ports`: its own (tito) and engine listening ports, else free ones found now."""
        if NGINX is None:
            raise RuntimeError("nginx is not installed (apt-get install nginx)")
        directory.mkdir(parents=True, exist_ok=True)
        own, engine = ports or free_ports(2)
        self.port = own
        self.engine_port = engine if engine_addresses else None
        config = nginx_config(
            tito_addresses,
            f"127.0.0.1:{self.port}",
            engine_addresses=engine_addresses,
            engine_listen=f"127.0.0.1:{self.engine_port}" if self.engine_port else None,
            nginx_workers=str(workers),
            user="root" if os.geteuid() == 0 else None,
        )
        conf = directory / "nginx.conf"
        conf.write_text(config)
        self.log = directory / "nginx.log"
        with self.log.open("ab") as output:
            command = [NGINX, "-p", str(directory), "-c", str(conf), "-e", "stderr", "-g", "daemon off;"]
            self.process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        for port in (self.port, self.engine_port):
            while port is not None:
                try:
                    httpx.get(f"http://127.0.0.1:{port}/nginx-is-up", timeout=1)
                    break
                except httpx.TransportError:
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        self.stop()
                        raise AssertionError(f"nginx did not start; its log:\n{self.log.read_text()}") from None
                    time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def engine_url(self) -> str:
        return f"http://127.0.0.1:{self.engine_port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGQUIT)  # graceful: workers finish and exit
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
