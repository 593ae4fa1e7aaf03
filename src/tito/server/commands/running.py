"""How tito runs its app under uvicorn: the connection settings, the in-thread server (tests, the demo: started, then
stopped) and `tito serve`'s socket, bound before the base URL is announced.

Connections: an idle kept-alive connection is held for `KEEP_ALIVE_SECONDS`, longer than HTTP clients keep an idle
connection (httpx and the openai SDK 5 s, aiohttp 15 s), so a client never sends a request on a connection the
server is closing at that moment (with uvicorn's default of 5 s, equal to httpx's, such a request dies with a reset:
httpx.ReadError). The listen backlog holds a burst of new connections until they are accepted.

A request the HTTP server cannot parse (a malformed chunk size, a bad Content-Length) is the client's error: uvicorn
answers 400 and its warning line is logged at INFO (`ClientErrorsAtInfo`); the route reading the body answers 499,
counted under its own name in /metrics, never as an internal error.

`tito serve`'s process also tunes Python's garbage collector for a server's heap (`tune_garbage_collector`) and, under
glibc, keeps the heap memory a request frees for the next one (`keep_freed_heap`).

Imports nothing from tito.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn
from fastapi import FastAPI

KEEP_ALIVE_SECONDS = 75
LISTEN_BACKLOG = 4096
GC_THRESHOLDS = (50_000, 20, 100)
"""`tito serve`'s collector thresholds (Python's default: 700, 10, 10); see `tune_garbage_collector`."""
HEAP_FROM_BYTES = 32 << 20
"""Allocations up to this size come from the heap, not a mapping of their own (glibc's `M_MMAP_THRESHOLD`; the most
its own adaptive threshold rises to on 64-bit)."""
HEAP_KEPT_BYTES = 64 << 20
"""Free memory at the heap's top kept for reuse rather than given back to the system (glibc's `M_TRIM_THRESHOLD`)."""
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


class ClientErrorsAtInfo(logging.Filter):
    """uvicorn's line for a request it cannot parse, at INFO (shown only where INFO is on for uvicorn)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and record.getMessage().startswith("Invalid HTTP request received"):
            record.levelno, record.levelname = logging.INFO, "INFO"
            return logging.getLogger(record.name).isEnabledFor(logging.INFO)
        return True


def _client_errors_at_info() -> None:
    """Install `ClientErrorsAtInfo` on uvicorn's error logger (after uvicorn configured its logging), once."""
    uvicorn_errors = logging.getLogger("uvicorn.error")
    if not any(isinstance(existing, ClientErrorsAtInfo) for existing in uvicorn_errors.filters):
        uvicorn_errors.addFilter(ClientErrorsAtInfo())


@contextlib.contextmanager
def serve_in_thread(
    app: FastAPI, host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0, sock: socket.socket | None = None
) -> Iterator[str]:
    """Serve `app` until the block ends; yields the base URL (port 0: a free port chosen by the OS). With `sock` (a
    `listening_socket`), on it: a caller that must know its port before serving binds first, so no other process
    can take the port in between."""
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                            timeout_keep_alive=KEEP_ALIVE_SECONDS, backlog=LISTEN_BACKLOG)  # fmt: skip
    _client_errors_at_info()
    server = uvicorn.Server(config)

    def run() -> None:
        with contextlib.suppress(SystemExit):  # uvicorn's exit from a failed startup (a taken port): it logs why
            server.run(sockets=None if sock is None else [sock])

    thread = threading.Thread(target=run, name="tito-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError(f"uvicorn on {host}:{port} stopped before it started (its log says why)")
        if time.monotonic() > deadline:
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
    # proto TCP, not 0 (socket.create_server's): asyncio sets TCP_NODELAY only on accepted sockets whose proto is TCP;
    # with Nagle left on, every reply written in two parts waited for the client's delayed ACK (~40 ms a request).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def bound_port(sock: socket.socket) -> int:
    return int(sock.getsockname()[1])


def tune_garbage_collector() -> None:
    """Freeze what exists at startup and collect far less often than Python's default.

    A server holds every live session's messages and nodes: hundreds of thousands of long-lived objects, which each
    full collection walks while the event loop waits, and every turn's in-flight request bodies are promoted into
    the old generation, so full collections keep coming. Measured (benchmarks/RESULTS.md, 256 sessions to 33k
    tokens): 23 full collections of up to 190 ms each over 8,192 turns, each finding nothing. Reference counting
    frees tito's objects; cycles are still collected, by the young generations and by rarer full collections."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def keep_freed_heap() -> bool:
    """Under glibc: allocate up to HEAP_FROM_BYTES from the heap and keep up to HEAP_KEPT_BYTES of freed heap; False
    where the C library does not take that (no `mallopt`, or musl's, which does nothing).

    Every turn's request body (an agent's resent conversation, 0.1-1 MB) is gathered by uvicorn into a bytearray and
    copied into bytes. With glibc's defaults those blocks could be mapped fresh, or the heap's top given back and
    taken again, so a body was written into new pages the kernel had to fault in and zero: 13% of `tito serve`'s
    CPU in a perf profile (Python 3.12, Responses turns at ~15-23k tokens, 64 sessions), 1.5% with freed memory
    kept. Side by side, a turn's CPU at ~18k tokens is 0.84-0.97x on Python 3.12 and 0.93-0.99x on 3.11, and the
    same at ~10k and ~34k (benchmarks/RESULTS.md); the cost is up to HEAP_KEPT_BYTES of free heap kept."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, HEAP_FROM_BYTES)) and bool(mallopt(_M_TRIM_THRESHOLD, HEAP_KEPT_BYTES))


def serve_on_socket(app: FastAPI, sock: socket.socket, log_level: str = "warning") -> None:
    """Serve `app` on the listening `sock` until interrupted (Ctrl-C, SIGTERM); uvicorn's own access log stays off
    (tito writes its own, `tito.server.access_log`). The process's collector is tuned for a server
    (`tune_garbage_collector`) and its allocator keeps freed heap (`keep_freed_heap`). Per request uvicorn adds no
    ASGI layer of its own: tito reads neither the client's address nor the scheme that `X-Forwarded-*` headers would
    rewrite, and its replies carry no `server` header."""
    tune_garbage_collector()
    keep_freed_heap()
    config = uvicorn.Config(app, log_level=log_level, lifespan="on", access_log=False,
                            timeout_keep_alive=KEEP_ALIVE_SECONDS, backlog=LISTEN_BACKLOG,
                            proxy_headers=False, server_header=False)  # fmt: skip
    _client_errors_at_info()
    uvicorn.Server(config).run(sockets=[sock])
