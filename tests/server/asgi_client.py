"""An in-process ASGI client: POSTs straight into an app (no socket, no HTTP client library), so what is timed is
the server's own work (tests/server/test_turn_cost.py, benchmarks/server_overhead.py and access_log.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson


class AsgiClient:
    """POSTs straight into the ASGI app (no socket, no HTTP client library): what is timed is the server's work."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def post(self, path: str, body: Any = None) -> tuple[int, Any]:
        """The reply's status and JSON; `body`: a JSON value, or the bytes of one (written before a timed call)."""
        payload = body if isinstance(body, bytes) else orjson.dumps(body) if body is not None else b""
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
            "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
        }  # fmt: skip
        sent = False
        status = 0
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                await asyncio.sleep(3600)
            sent = True
            return {"type": "http.request", "body": payload, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, send)
        return status, orjson.loads(b"".join(chunks)) if chunks else None
