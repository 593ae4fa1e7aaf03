"""The engine's connection pool against a scripted raw HTTP server: kept-alive reuse, chunked and read-to-close
bodies, a connection the server closed while idle, cancellation, timeouts, malformed replies; streamed replies read
as they arrive (and the SSE lines the engine client takes from them)."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time

import httpx
import pytest

from tests.engines.raw_server import STREAM_HEAD, RawServer, Reply, chunk
from tito.engines.connections import MAX_HEAD_BYTES, ConnectionPool, HttpProtocolError, _BodyPieces, _Connection
from tito.engines.http import HttpEngineClient, SseData, _HttpxStreamed
from tito.errors import EngineRequestError, EngineResponseError, EngineTimeoutError, EngineUnavailableError


def json_reply(body: bytes = b'{"ok": true}', extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n%s" % (
        len(body), extra, body,
    )  # fmt: skip


async def echo(body: bytes, reader: asyncio.StreamReader) -> bytes:
    return json_reply(body)


def pool(port: int, keepalive_expiry: float = 4.0) -> ConnectionPool:
    return ConnectionPool("127.0.0.1", port, timeout=5.0, connect_timeout=2.0, keepalive_expiry=keepalive_expiry)


@pytest.mark.asyncio
async def test_requests_one_after_another_reuse_one_kept_alive_connection():
    async with RawServer(echo) as server:
        client = pool(server.port)
        for index in range(20):
            reply = await client.request("POST", "/generate", (b'{"n": %d}' % index,), {"x-smg-routing-key": "s1"})
            assert (reply.status, reply.content) == (200, b'{"n": %d}' % index)
        assert server.connections == 1
        assert b"x-smg-routing-key: s1\r\n" in server.requests[0] and b"host: 127.0.0.1:" in server.requests[0]
        await client.aclose()


@pytest.mark.asyncio
async def test_a_body_in_pieces_is_sent_as_their_bytes_in_order_with_their_whole_length():
    ids = b"[1,2,3]"
    async with RawServer(echo) as server:
        client = pool(server.port)
        pieces = (b'{"input_ids":', memoryview(ids)[:-1], b",", memoryview(b"[40,50]")[1:], b',"stream":false}')
        reply = await client.request("POST", "/generate", pieces, {})
        assert reply.content == b'{"input_ids":[1,2,3,40,50],"stream":false}'
        assert b"content-length: %d\r\n" % len(reply.content) in server.requests[0]
        await client.aclose()


@pytest.mark.asyncio
async def test_concurrent_requests_each_get_their_own_reply_on_their_own_connection():
    async def slow_echo(body: bytes, reader: asyncio.StreamReader) -> bytes:
        await asyncio.sleep(0.01)
        return json_reply(body)

    async with RawServer(slow_echo) as server:
        client = pool(server.port)
        replies = await asyncio.gather(*(client.request("POST", "/g", (b"%d" % i,), {}) for i in range(50)))
        assert [reply.content for reply in replies] == [b"%d" % i for i in range(50)]
        assert server.connections == 50
        await asyncio.gather(*(client.request("POST", "/g", (b"x",), {}) for _ in range(50)))
        assert server.connections == 50  # the second wave reused them
        await client.aclose()


@pytest.mark.asyncio
async def test_chunked_and_read_to_close_bodies_are_read_whole():
    async def chunked(body: bytes, reader: asyncio.StreamReader) -> bytes:
        return b'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{"a":\r\n3;x=y\r\n 1}\r\n0\r\n\r\n'

    async with RawServer(chunked) as server:
        client = pool(server.port)
        assert (await client.request("POST", "/g", (b"",), {})).content == b'{"a": 1}'
        assert (await client.request("POST", "/g", (b"",), {})).content == b'{"a": 1}'
        assert server.connections == 1
        await client.aclose()

    async def to_close(body: bytes, reader: asyncio.StreamReader) -> bytes:
        return b'HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n{"b": 2}'

    async with RawServer(to_close, close_after_reply=True) as server:
        client = pool(server.port)
        assert (await client.request("POST", "/g", (b"",), {})).content == b'{"b": 2}'
        assert (await client.request("POST", "/g", (b"",), {})).content == b'{"b": 2}'
        assert server.connections == 2
        await client.aclose()


@pytest.mark.asyncio
async def test_a_connection_the_server_closed_while_idle_is_replaced_and_the_request_succeeds():
    async with RawServer(echo, close_after_reply=True) as server:  # closes after each reply, no `connection: close`
        client = pool(server.port)
        for index in range(5):
            assert (await client.request("POST", "/g", (b"%d" % index,), {})).content == b"%d" % index
            await asyncio.sleep(0.02)  # the server's close arrives while the connection is idle
        assert server.connections == 5
        await client.aclose()


@pytest.mark.asyncio
async def test_a_reused_connection_the_server_ends_after_reading_the_request_is_an_error_not_a_resend():
    """The server read the second request (it may have started a generation) and closed without a reply byte: a
    re-send could submit the generation twice, so the request fails and the engine saw it once."""
    replies = 0

    async def reply_once_then_hang_up(body: bytes, reader: asyncio.StreamReader) -> bytes | None:
        nonlocal replies
        replies += 1
        return json_reply(body) if replies == 1 else None

    async with RawServer(reply_once_then_hang_up) as server:
        client = pool(server.port)
        await client.request("POST", "/generate", (b"first",), {})
        with pytest.raises(ConnectionResetError, match="it may have read the request, so it is not sent again"):
            await client.request("POST", "/generate", (b"second",), {})
        assert [request.endswith(b"second") for request in server.requests] == [False, True]
        assert server.connections == 1
        await client.aclose()


@pytest.mark.asyncio
async def test_a_reused_connection_reset_before_the_server_read_the_request_is_sent_again_once():
    """A close with the request unread makes the peer's kernel reset the connection: provably never read, so the
    request goes once more on a new connection."""
    connections = 0
    read_whole: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        first_connection = connections == 1
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            if first_connection and read_whole:  # what a kernel does on a close with the request unread: a reset
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
                return
            body = await reader.readexactly(length)
            read_whole.append(body)
            writer.write(json_reply(body))
            await writer.drain()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        client = pool(int(server.sockets[0].getsockname()[1]))
        await client.request("POST", "/generate", (b"first",), {})
        assert (await client.request("POST", "/generate", (b"second",), {})).content == b"second"
        assert read_whole == [b"first", b"second"] and connections == 2
        await client.aclose()
    finally:
        server.close()


@pytest.mark.asyncio
async def test_a_connection_closed_after_the_request_on_a_fresh_connection_is_an_error_not_a_resend():
    async def hang_up(body: bytes, reader: asyncio.StreamReader) -> None:
        return None

    async with RawServer(hang_up) as server:
        client = pool(server.port)
        with pytest.raises(ConnectionResetError, match="closed the connection before replying"):
            await client.request("POST", "/g", (b"{}",), {})
        assert len(server.requests) == 1
        await client.aclose()


@pytest.mark.asyncio
async def test_an_idle_connection_past_the_keepalive_expiry_is_not_reused():
    async with RawServer(echo) as server:
        client = pool(server.port, keepalive_expiry=0.05)
        await client.request("POST", "/g", (b"1",), {})
        await asyncio.sleep(0.1)
        await client.request("POST", "/g", (b"2",), {})
        assert server.connections == 2
        await client.aclose()


@pytest.mark.asyncio
async def test_a_cancelled_request_closes_its_connection_so_the_engine_sees_the_client_leave():
    left = asyncio.Event()

    async def until_the_client_leaves(body: bytes, reader: asyncio.StreamReader) -> None:
        assert await reader.read() == b""  # the end of the stream: the client closed the connection
        left.set()
        return None

    async with RawServer(until_the_client_leaves) as server:
        client = pool(server.port)
        task = asyncio.create_task(client.request("POST", "/g", (b"{}",), {}))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(left.wait(), 5)
        await client.aclose()


@pytest.mark.asyncio
async def test_engine_client_maps_timeouts_malformed_replies_and_refusals_to_engine_errors():
    async def never(body: bytes, reader: asyncio.StreamReader) -> bytes:
        await asyncio.sleep(30)
        return json_reply()

    async with RawServer(never) as server:
        client = HttpEngineClient("sglang", f"http://127.0.0.1:{server.port}", timeout=0.2)
        with pytest.raises(EngineTimeoutError, match="/generate: no answer in time"):
            await client.post_json("/generate", {"input_ids": [1]})
        await client.aclose()

    async def garbage(body: bytes, reader: asyncio.StreamReader) -> bytes:
        return b"SSH-2.0-OpenSSH\r\n\r\n"

    async with RawServer(garbage) as server:
        with pytest.raises(HttpProtocolError, match="not an HTTP status line"):
            await pool(server.port).request("POST", "/g", (b"",), {})
        client = HttpEngineClient("sglang", f"http://127.0.0.1:{server.port}", timeout=2)
        with pytest.raises(EngineResponseError, match="/generate: not an HTTP status line"):
            await client.post_json("/generate", {})
        await client.aclose()

    async def endless_line(body: bytes, reader: asyncio.StreamReader) -> bytes:
        return b"H" * 100_000

    async with RawServer(endless_line) as server:
        with pytest.raises(HttpProtocolError, match="a status line longer than"):
            await pool(server.port).request("POST", "/g", (b"",), {})

    async def refuse(body: bytes, reader: asyncio.StreamReader) -> bytes:
        return b'HTTP/1.1 400 Bad Request\r\ncontent-length: 41\r\n\r\n{"error": {"message": "prompt too long"}}'

    async with RawServer(refuse) as server:
        closed_port = server.port
        client = HttpEngineClient("sglang", f"http://127.0.0.1:{server.port}/", timeout=2)
        with pytest.raises(EngineRequestError, match=r"\(HTTP 400\): /generate: prompt too long"):
            await client.post_json("/generate", {})
        await client.aclose()
    client = HttpEngineClient("sglang", f"http://127.0.0.1:{closed_port}", timeout=2)
    with pytest.raises(EngineUnavailableError, match="Connect"):
        await client.post_json("/generate", {})
    await client.aclose()


@pytest.mark.asyncio
async def test_a_url_path_prefix_is_kept_and_a_header_with_a_line_break_is_refused():
    async with RawServer(echo) as server:
        client = HttpEngineClient("vllm", f"http://127.0.0.1:{server.port}/engine-a/", timeout=2)
        assert await client.post_json("/v1/completions", {"a": 1}) == {"a": 1}
        assert server.requests[0].startswith(b"POST /engine-a/v1/completions HTTP/1.1\r\n")
        with pytest.raises(ValueError, match="line break"):
            await pool(server.port).request("POST", "/g", (b"",), {"x-key": "a\r\nx-evil: 1"})
        await client.aclose()


@pytest.mark.asyncio
async def test_an_https_engine_url_is_spoken_to_over_tls_not_over_the_plain_pool():
    """https:// goes through httpx (TLS); the plain HTTP/1.1 pool is for http:// only. A server that records the
    first bytes it gets sees a TLS handshake record (0x16), not a request line."""
    first_bytes: list[bytes] = []

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first_bytes.append(await reader.read(5))
        writer.close()

    server = await asyncio.start_server(record, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = HttpEngineClient("sglang", f"https://127.0.0.1:{port}", timeout=5)
    with pytest.raises(EngineUnavailableError):
        await client.post_json("/generate", {"input_ids": [1]})
    await client.aclose()
    server.close()
    assert first_bytes and first_bytes[0][:1] == b"\x16", first_bytes


@pytest.mark.asyncio
async def test_a_streamed_reply_yields_each_piece_as_it_arrives_then_its_connection_is_kept():
    sent_first = asyncio.Event()

    async def two_events(body: bytes, reader: asyncio.StreamReader) -> list[bytes | asyncio.Event | float]:
        return [STREAM_HEAD + chunk(b"data: 1\n\n"), sent_first, chunk(b"data: 2\n\n") + b"0\r\n\r\n"]

    async with RawServer(two_events) as server:
        client = pool(server.port)
        async with client.stream("POST", "/generate", (b"{}",), {}) as reply:
            assert reply.status == 200 and reply.headers["content-type"] == "text/event-stream"
            assert await anext(reply.pieces) == b"data: 1\n\n"  # before the server sent the rest
            sent_first.set()
            assert [piece async for piece in reply.pieces] == [b"data: 2\n\n"]
        sent_first.clear()
        async with client.stream("POST", "/generate", (b"{}",), {}) as reply:
            sent_first.set()
            assert [piece async for piece in reply.pieces] == [b"data: 1\n\n", b"data: 2\n\n"]
        assert await client.request("POST", "/g", (b"{}",), {}) is not None
        assert server.connections == 1, "a stream read to its end leaves its connection for the next request"
        await client.aclose()


def events_apart(count: int, seconds: float) -> Reply:
    """A raw server's reply: a chunked SSE stream of `count` events (`data: 0` ...), `seconds` apart, then its end."""

    async def reply(body: bytes, reader: asyncio.StreamReader) -> list[bytes | asyncio.Event | float]:
        pieces: list[bytes | asyncio.Event | float] = [STREAM_HEAD]
        for index in range(count):
            pieces += [chunk(b"data: %d\n\n" % index), seconds]
        return [*pieces, b"0\r\n\r\n"]

    return reply


@pytest.mark.asyncio
async def test_a_paced_stream_gathers_what_arrives_within_its_interval_into_one_piece_and_never_holds_its_end():
    async with RawServer(events_apart(12, 0.02)) as server:
        paced = ConnectionPool("127.0.0.1", server.port, timeout=5.0, connect_timeout=2.0, stream_interval=0.1)
        async with paced.stream("POST", "/generate", (b"{}",), {}) as reply:
            pieces = [piece async for piece in reply.pieces]
        assert b"".join(pieces) == b"".join(b"data: %d\n\n" % index for index in range(12))
        assert pieces[0] == b"data: 0\n\n"  # the first piece leaves as it arrives
        assert 2 <= len(pieces) <= 6, pieces  # ~240 ms of events in pieces at least 100 ms apart, not 12
        await paced.aclose()

    async def first_then_the_rest_and_the_end(body: bytes, reader: asyncio.StreamReader) -> list[bytes | float]:
        return [STREAM_HEAD + chunk(b"data: 1\n\n"), 0.05, chunk(b"data: 2\n\n") + b"0\r\n\r\n"]

    async with RawServer(first_then_the_rest_and_the_end) as server:
        slow = ConnectionPool("127.0.0.1", server.port, timeout=5.0, connect_timeout=2.0, stream_interval=30.0)
        started = time.monotonic()
        async with slow.stream("POST", "/generate", (b"{}",), {}) as reply:
            assert [piece async for piece in reply.pieces] == [b"data: 1\n\n", b"data: 2\n\n"]
        assert time.monotonic() - started < 10, "the body's end left as it arrived, not after the 30 s interval"
        assert await slow.request("POST", "/g", (b"{}",), {}) is not None  # the stream was read to its end: kept
        assert server.connections == 1
        await slow.aclose()


@pytest.mark.asyncio
async def test_events_sparser_than_the_interval_each_leave_as_they_come_with_no_timer_started(
    monkeypatch: pytest.MonkeyPatch,
):
    """An engine asked for an event per several ids writes them further apart than the interval: the gathering's
    timer starts with an arrival, so none is started that would only wake to an empty buffer."""
    gathered: list[float] = []
    gather_until = _Connection.gather_until

    async def counted(self: _Connection, when: float) -> None:
        gathered.append(when)
        await gather_until(self, when)

    monkeypatch.setattr(_Connection, "gather_until", counted)

    async with RawServer(events_apart(4, 0.06)) as server:
        paced = ConnectionPool("127.0.0.1", server.port, timeout=5.0, connect_timeout=2.0, stream_interval=0.02)
        async with paced.stream("POST", "/generate", (b"{}",), {}) as reply:
            pieces = [piece async for piece in reply.pieces]
        await paced.aclose()
    assert pieces == [b"data: %d\n\n" % index for index in range(4)], "each event its own piece, as it came"
    assert gathered == [], "no gathering started: every event came after the interval"


@pytest.mark.asyncio
async def test_leaving_a_stream_before_its_end_closes_the_connection_so_the_engine_sees_the_client_leave():
    left = asyncio.Event()

    async def first_event_then_wait(body: bytes, reader: asyncio.StreamReader) -> list[bytes | asyncio.Event | float]:
        async def watch() -> None:
            assert await reader.read() == b""  # the end of the stream: the client closed the connection
            left.set()

        asyncio.get_running_loop().create_task(watch())
        return [STREAM_HEAD + chunk(b"data: 1\n\n"), left]

    async with RawServer(first_event_then_wait) as server:
        client = pool(server.port)
        async with client.stream("POST", "/generate", (b"{}",), {}) as reply:
            assert await anext(reply.pieces) == b"data: 1\n\n"
        await asyncio.wait_for(left.wait(), 5)
        await client.aclose()


@pytest.mark.asyncio
async def test_each_wait_for_a_piece_has_the_timeout_not_the_whole_stream():
    async def slow_pieces(body: bytes, reader: asyncio.StreamReader) -> list[bytes | asyncio.Event | float]:
        pieces: list[bytes | asyncio.Event | float] = [STREAM_HEAD]
        for index in range(5):
            pieces += [0.1, chunk(b"data: %d\n\n" % index)]
        return [*pieces, b"0\r\n\r\n"]

    async def stalls(body: bytes, reader: asyncio.StreamReader) -> list[bytes | asyncio.Event | float]:
        return [STREAM_HEAD + chunk(b"data: 0\n\n"), 2.0, b"0\r\n\r\n"]

    async with RawServer(slow_pieces) as server:
        client = ConnectionPool("127.0.0.1", server.port, timeout=0.3, connect_timeout=2.0)
        async with client.stream("POST", "/generate", (b"{}",), {}) as reply:
            assert len([piece async for piece in reply.pieces]) == 5  # 0.5 s in all, each wait 0.1 s
        await client.aclose()
    async with RawServer(stalls) as server:
        client = ConnectionPool("127.0.0.1", server.port, timeout=0.3, connect_timeout=2.0)
        with pytest.raises(TimeoutError):
            async with client.stream("POST", "/generate", (b"{}",), {}) as reply:
                async for _ in reply.pieces:
                    pass
        await client.aclose()


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_sse_data_lines_end_at_lf_crlf_or_cr_wherever_the_pieces_split(end: bytes):
    text = (
        b'data: {"a": 1}' + end + end + b": a comment" + end + b"event: x" + end + b'data:{"b": "[DONE]"}' + end + end
        + b"data: [DONE]" + end + end + b'data: {"after": 1}' + end
    )  # fmt: skip
    for split in range(1, len(text)):
        data = SseData()
        payloads = data.feed(text[:split]) + data.feed(text[split:]) + data.end()
        assert [payload.strip() for payload in payloads] == [b'{"a": 1}', b'{"b": "[DONE]"}'], split
        assert data.done, split


def test_sse_data_gives_a_last_line_without_its_line_end_at_the_end():
    data = SseData()
    assert data.feed(b'data: {"a": 1}\n\ndata: {"b"') == [b' {"a": 1}']
    assert data.feed(b": 2}") == []
    assert data.end() == [b' {"b": 2}'] and not data.done


@pytest.mark.asyncio
async def test_the_engine_clients_streams_go_over_the_pool_and_reuse_one_connection():
    async def events(body: bytes, reader: asyncio.StreamReader) -> bytes:
        return STREAM_HEAD + chunk(b'data: {"n": 1}\n\n') + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"

    async with RawServer(events) as server:
        client = HttpEngineClient("sglang", f"http://127.0.0.1:{server.port}", timeout=5.0)
        for _ in range(3):
            assert [events async for events in client.post_sse("/generate", {"stream": True})] == [[{"n": 1}]]
        assert server.connections == 1
        await client.aclose()


@pytest.mark.asyncio
async def test_a_streamed_post_over_httpx_gives_the_status_the_body_as_it_arrives_and_closes_the_response():
    """The https engine's path (httpx, not the pool): the same reply shape, its response closed with the block."""

    async def events(body: bytes, reader: asyncio.StreamReader) -> bytes:
        return STREAM_HEAD + chunk(b'data: {"n": 1}\n\n') + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"

    async with RawServer(events) as server, httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as http:
        streamed = _HttpxStreamed(http, http.build_request("POST", "/generate", content=b"{}"))
        async with streamed as reply:
            assert reply.status == 200 and reply.headers["content-type"] == "text/event-stream"
            assert b"".join([piece async for piece in reply.pieces]) == b'data: {"n": 1}\n\ndata: [DONE]\n\n'
        assert streamed._response is not None and streamed._response.is_closed


CHUNKED_WITH_TRAILERS = b'5;ext=1\r\n{"a":\r\n3\r\n 1}\r\n0\r\nx-trailer: t\r\n\r\n'


@pytest.mark.asyncio
@pytest.mark.parametrize("split", range(1, len(CHUNKED_WITH_TRAILERS)))
async def test_a_chunked_body_split_anywhere_is_decoded_whole_or_streamed_and_the_connection_kept(split: int):
    async def in_two_parts(body: bytes, reader: asyncio.StreamReader) -> list[bytes | asyncio.Event | float]:
        return [STREAM_HEAD + CHUNKED_WITH_TRAILERS[:split], 0.002, CHUNKED_WITH_TRAILERS[split:]]

    async with RawServer(in_two_parts) as server:
        client = pool(server.port)
        assert (await client.request("POST", "/g", (b"",), {})).content == b'{"a": 1}'
        async with client.stream("POST", "/g", (b"",), {}) as reply:
            assert b"".join([piece async for piece in reply.pieces]) == b'{"a": 1}'
        assert server.connections == 1
        await client.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"zz\r\nabc\r\n0\r\n\r\n", "malformed chunk size"),
        (b"3\r\nabcXY0\r\n\r\n", "not followed by CRLF"),
        (b"3\r\nabc\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n", "after the end of a chunked body"),
    ],
)
async def test_a_malformed_chunked_body_is_a_protocol_error_streamed_or_whole(body: bytes, error: str):
    async def malformed(request: bytes, reader: asyncio.StreamReader) -> bytes:
        return STREAM_HEAD + body

    async with RawServer(malformed) as server:
        client = pool(server.port)
        with pytest.raises(HttpProtocolError, match=error):
            await client.request("POST", "/g", (b"",), {})
        with pytest.raises(HttpProtocolError, match=error):
            async with client.stream("POST", "/g", (b"",), {}) as reply:
                async for _ in reply.pieces:
                    pass
        await client.aclose()


@pytest.mark.asyncio
async def test_each_request_times_out_at_its_own_deadline_while_the_others_on_the_pool_go_on():
    """One timer serves all of a pool's deadlines: a request due before others times out at its own deadline, and
    the timer is armed again for the ones still waiting."""

    async def answer_after(body: bytes, reader: asyncio.StreamReader) -> bytes:
        await asyncio.sleep(30 if body == b"never" else float(body))
        return json_reply(body)

    async with RawServer(answer_after) as server:
        client = ConnectionPool("127.0.0.1", server.port, timeout=0.3, connect_timeout=2.0)
        loop = asyncio.get_running_loop()

        async def timed(body: bytes, after: float) -> tuple[bytes | str, float]:
            await asyncio.sleep(after)
            began = loop.time()
            try:
                return (await client.request("POST", "/g", (body,), {})).content, loop.time() - began
            except TimeoutError:
                return "timed out", loop.time() - began

        first, second, third = await asyncio.gather(timed(b"never", 0), timed(b"0.2", 0.2), timed(b"never", 0.25))
        assert first[0] == "timed out" and 0.29 <= first[1] < 0.45, first
        assert second[0] == b"0.2", second  # past the first one's deadline, within its own
        assert third[0] == "timed out" and 0.29 <= third[1] < 0.45, third
        await client.aclose()


def test_a_pool_used_again_on_another_event_loop_still_times_out():
    """The pool's one timer belongs to an event loop; on the next loop a deadline arms a timer there."""
    ready = threading.Event()
    stop = asyncio.Event()
    ports: list[int] = []
    server_loops: list[asyncio.AbstractEventLoop] = []

    async def answer(body: bytes, reader: asyncio.StreamReader) -> bytes:
        await asyncio.sleep(30 if body == b"never" else 0)
        return json_reply(body)

    async def serve() -> None:
        async with RawServer(answer) as server:
            ports.append(server.port)
            server_loops.append(asyncio.get_running_loop())
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),))  # which cancels the handler left waiting
    thread.start()
    assert ready.wait(5)
    client = ConnectionPool("127.0.0.1", ports[0], timeout=0.3, connect_timeout=2.0)

    async def once(body: bytes) -> bytes:
        try:
            return (await client.request("POST", "/g", (body,), {})).content
        finally:
            await client.aclose()

    assert asyncio.run(once(b"now")) == b"now"
    began = time.monotonic()
    with pytest.raises(TimeoutError):
        asyncio.run(asyncio.wait_for(once(b"never"), 5))  # wait_for: a missed deadline fails, not hangs
    assert time.monotonic() - began < 2, "the request's own deadline, not wait_for's"
    server_loops[0].call_soon_threadsafe(stop.set)
    thread.join(5)


REPLY = json_reply(b'{"a": 1}', b"x-extra: 1\r\n")


@pytest.mark.asyncio
@pytest.mark.parametrize("split", range(1, len(REPLY)))
async def test_a_reply_split_anywhere_in_its_head_or_body_is_read_whole_or_streamed(split: int):
    async def in_two_parts(body: bytes, reader: asyncio.StreamReader) -> list[bytes | asyncio.Event | float]:
        return [REPLY[:split], 0.002, REPLY[split:]]

    async with RawServer(in_two_parts) as server:
        client = pool(server.port)
        reply = await client.request("POST", "/g", (b"",), {})
        assert (reply.status, reply.headers["x-extra"], reply.content) == (200, "1", b'{"a": 1}')
        async with client.stream("POST", "/g", (b"",), {}) as streamed:
            assert streamed.headers["content-length"] == "8"
            assert b"".join([piece async for piece in streamed.pieces]) == b'{"a": 1}'
        assert server.connections == 1
        await client.aclose()


@pytest.mark.asyncio
async def test_a_reply_arriving_byte_by_byte_is_read_whole_and_streamed_in_the_pieces_that_came():
    async def byte_by_byte(body: bytes, reader: asyncio.StreamReader) -> list[bytes | asyncio.Event | float]:
        pieces: list[bytes | asyncio.Event | float] = []
        for index in range(len(REPLY)):
            pieces += [REPLY[index : index + 1], 0.001]
        return pieces

    async with RawServer(byte_by_byte) as server:
        client = pool(server.port)
        assert (await client.request("POST", "/g", (b"",), {})).content == b'{"a": 1}'
        async with client.stream("POST", "/g", (b"",), {}) as streamed:
            pieces = [piece async for piece in streamed.pieces]
        assert b"".join(pieces) == b'{"a": 1}' and len(pieces) > 1
        assert server.connections == 1
        await client.aclose()


@pytest.mark.asyncio
async def test_a_streamed_body_that_arrived_before_it_was_asked_for_is_one_piece_and_reading_pauses_past_a_limit():
    """What arrives while no one reads is kept, in one piece per read; past twice MAX_HEAD_BYTES the connection
    stops reading from its socket until the body is read on, so a slow consumer does not buffer a whole reply."""
    big = b"y" * (8 * MAX_HEAD_BYTES)

    async def events_then_big(body: bytes, reader: asyncio.StreamReader) -> bytes:
        if body == b"big":
            return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%b" % (len(big), big)
        return STREAM_HEAD + chunk(b"data: 1\n\n") + chunk(b"data: 2\n\n") + b"0\r\n\r\n"

    async with RawServer(events_then_big) as server:
        client = pool(server.port)
        async with client.stream("POST", "/g", (b"",), {}) as streamed:
            await asyncio.sleep(0.05)  # the whole body arrives before the first read asks for it
            assert [piece async for piece in streamed.pieces] == [b"data: 1\n\ndata: 2\n\n"]
        async with client.stream("POST", "/g", (b"big",), {}) as streamed:
            await asyncio.sleep(0.1)
            assert isinstance(streamed.pieces, _BodyPieces)
            assert 0 < len(streamed.pieces.connection.buffer) <= 2 * MAX_HEAD_BYTES + 256 * 1024
            assert b"".join([piece async for piece in streamed.pieces]) == big
        assert (await client.request("POST", "/g", (b"big",), {})).content == big
        assert server.connections == 1
        await client.aclose()


@pytest.mark.asyncio
async def test_a_large_body_to_a_slow_reader_waits_for_the_transport_to_drain_within_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
):
    """The transport pauses the request's writing past its high-water mark and resumes it as the server reads; a
    server that never reads the body times the request out."""
    events: dict[_Connection, list[str]] = {}
    original_pause, original_resume = _Connection.pause_writing, _Connection.resume_writing

    def pause(connection: _Connection) -> None:
        events.setdefault(connection, []).append("pause")
        original_pause(connection)

    def resume(connection: _Connection) -> None:
        events.setdefault(connection, []).append("resume")
        original_resume(connection)

    monkeypatch.setattr(_Connection, "pause_writing", pause)
    monkeypatch.setattr(_Connection, "resume_writing", resume)
    body = b"z" * (32 * 1024 * 1024)
    read_on = asyncio.Event()
    handlers: list[asyncio.Task[None]] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.append(asyncio.current_task())  # type: ignore[arg-type]
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await read_on.wait()
            received = 0
            while received < length and (piece := await reader.read(65536)):
                received += len(piece)
                await asyncio.sleep(0)
            writer.write(json_reply(b"%d" % received))
            await writer.drain()
            await reader.read()  # until the client closes
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        client = ConnectionPool("127.0.0.1", server.sockets[0].getsockname()[1], timeout=0.5, connect_timeout=2.0)
        with pytest.raises(TimeoutError):
            await client.request("POST", "/g", (body,), {})  # the server does not read the body before the deadline
        assert list(events.values()) == [["pause"]]
        read_on.set()
        client.timeout = 10
        assert (await client.request("POST", "/g", (body,), {})).content == b"%d" % len(body)
        second = list(events.values())[1]
        assert second[0] == "pause" and second[-1] == "resume", second
        await client.aclose()
        await asyncio.wait_for(asyncio.gather(*handlers), 5)
    finally:
        server.close()
