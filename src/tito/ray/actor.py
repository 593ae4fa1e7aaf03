"""One tito server inside a Ray actor: the app `tito serve` runs, on the node's address, journaled to a node-local
directory. Ray restarts a crashed actor (`kill -9` included) on the same node (the launcher pins it there); the new
life takes the same port from the directory and replays the journal before it serves, so every session resumes
token-exact at the same URL.

The launcher wraps the class with `ray.remote`; this module imports Ray only to name the actor's node.

Imports from tito: server.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
from dataclasses import replace
from pathlib import Path
from typing import Any

from tito.server import ServerOptions, create_app
from tito.server.commands.launch import build_state
from tito.server.commands.running import bound_port, listening_socket, serve_in_thread


class TitoServerActor:
    """`state_dir` (node-local) holds this server's journal and its port; `host` is the node's address."""

    def __init__(
        self,
        state_dir: str,
        host: str,
        options: ServerOptions,
        engine: str = "instant",
        engine_args: dict[str, Any] | None = None,
    ) -> None:
        directory = self._directory = Path(state_dir)
        (directory / "journal").mkdir(parents=True, exist_ok=True)
        self._stack = contextlib.ExitStack()
        try:
            sock = self._stack.enter_context(_kept_socket(directory / "port", host))
            port = bound_port(sock)
            options = replace(options, journal=directory / "journal", process_name=f"{host}:{port}")
            state = build_state(options, engine=engine, **(engine_args or {}))
            serving = serve_in_thread(create_app(state), host=host, port=port, timeout=120, sock=sock)
            self._url = self._stack.enter_context(serving)
        except BaseException:
            self._stack.close()  # the socket too: a server that does not start holds no port
            raise
        self._state = state

    def url(self) -> str:
        return self._url

    def pid(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def session_ids(self) -> list[str]:
        return sorted(session.session_id for session in self._state.registry)

    def ping(self) -> bool:
        return True

    def stop(self, remove: bool = False) -> None:
        """Stops serving; `remove`: also deletes this server's node-local directory (a finished run)."""
        self._stack.close()
        if remove:
            shutil.rmtree(self._directory, ignore_errors=True)


def _kept_socket(path: Path, host: str) -> socket.socket:
    """A listening socket on the port of this server's earlier lives (the pool knows its URL), else on a free one,
    kept for the next life. Bound here and served on as it is: a port probed, let go and bound again later could be
    taken in between (by another server starting on the node, or any connection's local port)."""
    sock = listening_socket(host, int(path.read_text()) if path.exists() else 0)
    path.write_text(str(bound_port(sock)))
    return sock
