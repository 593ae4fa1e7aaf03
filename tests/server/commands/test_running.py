"""`tito serve`'s own listening socket: its accepted connections send each reply at once (TCP_NODELAY); its
process's garbage collector is tuned for a server's heap, and glibc keeps the memory a request frees.

A socket made with proto 0 (what `socket.create_server` gives) leaves asyncio's accepted sockets with Nagle on, and a
reply written in two parts then waits for the client's delayed ACK: about 40 ms added to every request.
"""

from __future__ import annotations

import asyncio
import gc
import platform
import socket
import subprocess
import sys
import time

import httpx
import pytest
from fastapi import FastAPI

from tito.server.commands.running import (
    GC_THRESHOLDS,
    bound_port,
    listening_socket,
    serve_in_thread,
    tune_garbage_collector,
)


def test_connections_accepted_on_the_listening_socket_have_nodelay() -> None:
    async def accepted_nodelay() -> int:
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted = writer.get_extra_info("socket")
            seen.set_result(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        sock = listening_socket("127.0.0.1", 0)
        server = await asyncio.start_server(connected, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", bound_port(sock))
            nodelay = await asyncio.wait_for(seen, 10)
            writer.close()
        return nodelay

    assert asyncio.run(accepted_nodelay()) != 0


def test_a_taken_port_is_an_oserror_and_the_socket_is_closed() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        try:
            listening_socket("127.0.0.1", taken.getsockname()[1])
        except OSError:
            return
    raise AssertionError("binding a taken port must raise OSError")


def test_a_server_in_a_thread_serves_on_the_socket_it_is_given_and_one_on_a_taken_port_fails_at_once() -> None:
    """A caller that must name its port before serving (a Ray actor's journal names its process) binds first and
    hands the socket over: no other process can take the port between the choice and the serving."""
    app = FastAPI()
    app.get("/ping")(lambda: {"ok": True})
    sock = listening_socket("127.0.0.1", 0)
    port = bound_port(sock)
    with serve_in_thread(app, port=port, sock=sock) as url:
        assert url == f"http://127.0.0.1:{port}"
        assert httpx.get(f"{url}/ping", timeout=10).json() == {"ok": True}
        started = time.monotonic()
        with (
            pytest.raises(RuntimeError, match="stopped before it started"),
            serve_in_thread(app, port=port, timeout=60),
        ):
            pass
        assert time.monotonic() - started < 30, "a taken port is told at once, not after the timeout"


def test_the_collector_freezes_the_startup_heap_and_collects_less_often() -> None:
    before = gc.get_threshold()
    startup = {"alive": ["when the server starts"]}  # a container the collector tracks
    try:
        tune_garbage_collector()
        assert gc.get_threshold() == GC_THRESHOLDS and GC_THRESHOLDS[0] > before[0]
        assert gc.get_freeze_count() > 0
        assert not any(found is startup for found in gc.get_objects())  # frozen: no collection walks it
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
    assert any(found is startup for found in gc.get_objects())


_HEAP_PROBE = """
import ctypes, platform
from tito.server.commands.running import keep_freed_heap

class MallInfo2(ctypes.Structure):
    names = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
    _fields_ = [(name, ctypes.c_size_t) for name in names.split()]

mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = MallInfo2
print(keep_freed_heap())
before = mallinfo2()
body = bytearray(8 << 20)
during = mallinfo2()
del body
after = mallinfo2()
print(during.hblkhd - before.hblkhd, during.uordblks - before.uordblks, during.arena - after.arena)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="keep_freed_heap tunes glibc's allocator only")
def test_a_freed_request_sized_block_stays_in_the_heap_for_the_next_request() -> None:
    # In a process of its own: the allocator's settings are process-wide and cannot be put back.
    probe = subprocess.run([sys.executable, "-c", _HEAP_PROBE], capture_output=True, text=True, timeout=60, check=True)
    took, mapped, in_heap, given_back = probe.stdout.split("\n")[0], *map(int, probe.stdout.split("\n")[1].split())
    assert took == "True"
    assert mapped == 0  # 8 MB from the heap, not a mapping of its own (glibc's default: mapped, unmapped when freed)
    assert in_heap >= 8 << 20
    assert given_back == 0  # freed, the block's memory stays the process's for the next body
