"""A raw asyncio HTTP/1.1 server whose replies a test scripts byte for byte (and when each piece leaves): for the
engine clients' connection pool and their reading of streamed replies."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

Reply = Callable[[bytes, asyncio.StreamReader], Awaitable[bytes | list[bytes | asyncio.Event | float] | None]]
"""Given one request's body (and the connection's reader): the raw reply to send, or None to hang up. A list is a
reply sent in pieces: bytes are written at once, an Event is waited for, a float is slept first."""


class RawServer:
    """One asyncio HTTP/1.1 server on 127.0.0.1 whose replies a test scripts; counts connections and requests."""

    def __init__(self, reply: Reply, close_after_reply: bool = False) -> None:
        self.reply = reply
        self.close_after_reply = close_after_reply
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> RawServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.split(b"\r\n")
                length = next(int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length"))
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                reply = await self.reply(body, reader)
                if reply is None:
                    break
                for piece in reply if isinstance(reply, list) else [reply]:
                    if isinstance(piece, asyncio.Event):
                        await piece.wait()
                    elif isinstance(piece, float):
                        await asyncio.sleep(piece)
                    else:
                        writer.write(piece)
                        await writer.drain()
                if self.close_after_reply:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


STREAM_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


def sse_body(events: list[Any]) -> bytes:
    """The chunked body of an SSE stream, one event per chunk (as SGLang and vLLM write them), then [DONE]."""
    payloads = [b"data: " + orjson.dumps(event) + b"\n\n" for event in events] + [b"data: [DONE]\n\n"]
    return b"".join(chunk(payload) for payload in payloads) + b"0\r\n\r\n"
