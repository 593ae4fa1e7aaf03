"""Run the app with uvicorn: in a background thread on 127.0.0.1 (tests, the demo), or on a socket bound first
(`tito serve`).

Imports nothing from tito.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn
from fastapi import FastAPI


@contextlib.contextmanager
def serve_in_thread(app: FastAPI, host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0) -> Iterator[str]:
    """Serve `app` until the block ends; yields the base URL (port 0: a free port chosen by the OS)."""
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="tito-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"uvicorn did not start on {host}:{port} within {timeout:g}s")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout)


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port and listening (port 0: a free one); raises OSError when the address is taken.

    `tito serve` binds before it announces the base URL, so the URL names the real port and never precedes a
    bind error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=2048)


def bound_port(sock: socket.socket) -> int:
    return int(sock.getsockname()[1])


def serve_on_socket(app: FastAPI, sock: socket.socket, log_level: str = "warning") -> None:
    """Serve `app` on the listening `sock` until interrupted (Ctrl-C, SIGTERM); uvicorn's own access log stays off
    (tito writes its own, `tito.server.access_log`)."""
    config = uvicorn.Config(app, log_level=log_level, lifespan="on", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])
