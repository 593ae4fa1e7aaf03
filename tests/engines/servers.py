"""In-test SGLang and vLLM servers that speak exactly the wire formats of research/engines.md sections 1 and 2.

A deterministic "model": the i-th sampled id of a prompt is `scripted_id(prompt, i)` with logprob `-(i + 1) / 8`,
unless the test scripts the ids. Both honour max tokens and stop token ids (the matched one is kept), record every
request (path, headers, body), and can be told to fail: an error status with the engine's error body, a slow reply,
a dropped connection, a malformed body. Each runs under uvicorn on 127.0.0.1 (a free port) in a thread.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


def scripted_id(prompt: list[int], position: int) -> int:
    return 1000 + (sum(prompt) * 31 + position * 7) % 5000


def scripted_logprob(position: int) -> float:
    return -(position + 1) / 8


@dataclass
class Behaviour:
    """What the next requests get; tests set fields, the `reset` fixture restores the defaults."""

    reply_ids: list[int] | None = None
    """The ids to 'sample' (cut by max tokens and stop ids); None: `scripted_id`."""
    token_delay: float = 0.0
    """Seconds before each streamed id (and before a whole non-streaming reply, times its length)."""
    status: int | None = None
    """Answer every generate call with this status and the engine's error body."""
    error_message: str = "Token id 999999 is out of vocabulary"
    drop_connection: bool = False
    """Close the connection mid-reply (after the headers, and after the first streamed event)."""
    malformed: bool = False
    """Reply 200 with a body that lacks the ids."""
    incremental: bool = False
    """SGLang `--incremental-streaming-output`: stream deltas instead of cumulative events."""
    weight_version: str = "default"
    usage_chunk: bool = True
    """vLLM: send the final `usage` chunk when `stream_options.include_usage` asks for it."""


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeServer:
    """A running in-test engine server: its URL, what it received, how it behaves."""

    url: str = ""
    behaviour: Behaviour = field(default_factory=Behaviour)
    requests: list[RecordedRequest] = field(default_factory=list)
    aborted: set[str] = field(default_factory=set)
    name: str = ""

    def reset(self) -> None:
        self.behaviour = Behaviour()
        self.requests.clear()
        self.aborted.clear()

    def sample(self, prompt: list[int], max_tokens: int, stop_ids: list[int]) -> tuple[list[int], str, int | None]:
        """(ids, finish type, matched stop id) as the engine would sample them."""
        script = self.behaviour.reply_ids
        ids: list[int] = []
        for position in range(max_tokens):
            if script is not None and position >= len(script):
                return ids, "stop", None  # the script ended: EOS
            token = script[position] if script is not None else scripted_id(prompt, position)
            ids.append(token)
            if token in stop_ids:
                return ids, "stop", token
        return ids, "length", None

    def is_aborted(self, rid: str) -> bool:
        return any(rid.startswith(prefix) for prefix in self.aborted)


# ---- SGLang: POST /generate, /abort_request, GET /health ----


def sglang_app(server: FakeServer) -> Starlette:
    async def generate(request: Request) -> Response:
        body = await request.json()
        server.requests.append(RecordedRequest("/generate", dict(request.headers), body))
        behaviour = server.behaviour
        if behaviour.status is not None:
            return JSONResponse({"error": {"message": behaviour.error_message}}, status_code=behaviour.status)
        params = body["sampling_params"]
        ids, finish_type, matched = server.sample(body["input_ids"], params["max_new_tokens"], params["stop_token_ids"])
        rid = body["rid"]

        def event(count: int, finish: dict[str, Any] | None, start: int = 0) -> dict[str, Any]:
            if behaviour.malformed:
                return {"text": "", "meta_info": {"id": rid}}
            return {
                "text": "",
                "output_ids": ids[start:count],
                "meta_info": {
                    "id": rid,
                    "finish_reason": finish,
                    "prompt_tokens": len(body["input_ids"]),
                    "completion_tokens": count,
                    "cached_tokens": 3,
                    "weight_version": behaviour.weight_version,
                    "output_token_logprobs": [[scripted_logprob(i), ids[i], None] for i in range(start, count)],
                    "e2e_latency": 0.01,
                },
            }

        def finish_of(count: int) -> dict[str, Any]:
            if server.is_aborted(rid):
                return {"type": "abort", "message": "Aborted", "status_code": None, "err_type": None}
            if finish_type == "length":
                return {"type": "length", "length": count}
            return {"type": "stop", "matched": matched if matched is not None else 151645}

        if not body.get("stream"):
            count = 0
            while count < len(ids) and not server.is_aborted(rid):
                await asyncio.sleep(behaviour.token_delay)
                count += 1
            if behaviour.drop_connection:
                return DropConnection()
            return JSONResponse(event(count, finish_of(count)))

        async def events() -> AsyncIterator[bytes]:
            sent = 0
            for count in range(1, len(ids) + 1):
                await asyncio.sleep(behaviour.token_delay)
                if server.is_aborted(rid):
                    break
                if behaviour.drop_connection and count > 1:
                    raise ConnectionResetError("in-test server drops the connection")
                finish = finish_of(count) if count == len(ids) else None
                start = sent if behaviour.incremental else 0
                yield b"data: " + json.dumps(event(count, finish, start)).encode() + b"\n\n"
                sent = count
            if server.is_aborted(rid) or not ids:
                start = sent if behaviour.incremental else 0
                yield b"data: " + json.dumps(event(sent, finish_of(sent), start)).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def abort_request(request: Request) -> Response:
        body = await request.json()
        server.requests.append(RecordedRequest("/abort_request", dict(request.headers), body))
        if body.get("rid"):
            server.aborted.add(body["rid"])
        return Response(status_code=200)

    async def health(request: Request) -> Response:
        return Response(status_code=503 if server.behaviour.status == 503 else 200)

    return Starlette(
        routes=[
            Route("/generate", generate, methods=["POST", "PUT"]),
            Route("/abort_request", abort_request, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
            Route("/health_generate", health, methods=["GET"]),
            Route("/get_model_info", _model_info, methods=["GET"]),
            Route("/model_info", _model_info, methods=["GET"]),
            Route("/get_server_info", _server_info, methods=["GET"]),
            Route("/server_info", _server_info, methods=["GET"]),
            Route("/v1/models", _sglang_models, methods=["GET"]),
            Route("/version", _version, methods=["GET"]),
        ]
    )


async def _model_info(request: Request) -> Response:
    return JSONResponse({"model_path": "tiny", "is_generation": True, "weight_version": "default"})


async def _server_info(request: Request) -> Response:
    info = {"model_path": "tiny", "served_model_name": "tiny", "context_length": 4096, "version": "0.5.23"}
    return JSONResponse(info)


async def _sglang_models(request: Request) -> Response:
    model = {"id": "tiny", "object": "model", "owned_by": "sglang", "root": "tiny", "max_model_len": 4096}
    return JSONResponse({"object": "list", "data": [model]})


async def _version(request: Request) -> Response:
    return JSONResponse({"version": "0.5.23"})


# ---- vLLM: POST /v1/completions, /inference/v1/generate, /inference/v1/abort_requests, GET /v1/models ----


def vllm_app(server: FakeServer) -> Starlette:
    async def completions(request: Request) -> Response:
        body = await request.json()
        server.requests.append(RecordedRequest("/v1/completions", dict(request.headers), body))
        behaviour = server.behaviour
        if behaviour.status is not None:
            error = {"message": behaviour.error_message, "type": "BadRequestError", "param": None}
            return JSONResponse({"error": {**error, "code": behaviour.status}}, status_code=behaviour.status)
        prompt = body["prompt"]
        ids, finish_type, matched = server.sample(prompt, body["max_tokens"], body.get("stop_token_ids") or [])
        usage = {"prompt_tokens": len(prompt), "total_tokens": len(prompt) + len(ids), "completion_tokens": len(ids)}
        usage["prompt_tokens_details"] = {"cached_tokens": 16, "created_cache_tokens": None, "multimodal_tokens": None}

        def choice(start: int, end: int, finish: str | None, first: bool) -> dict[str, Any]:
            if behaviour.malformed:
                return {"index": 0, "text": "", "finish_reason": finish}
            return {
                "index": 0,
                "text": "".join(f"<t{token}>" for token in ids[start:end]),
                "logprobs": {
                    "text_offset": list(range(start, end)),
                    "token_logprobs": [scripted_logprob(i) for i in range(start, end)],
                    "tokens": [f"<t{token}>" for token in ids[start:end]],
                    "top_logprobs": [{f"<t{ids[i]}>": scripted_logprob(i)} for i in range(start, end)],
                },
                "finish_reason": finish,
                "stop_reason": matched if finish == "stop" else None,
                "token_ids": ids[start:end],
                "prompt_logprobs": None,
                "prompt_token_ids": prompt if first else None,
            }

        if not body.get("stream"):
            await asyncio.sleep(behaviour.token_delay * len(ids))
            if behaviour.drop_connection:
                return DropConnection()
            reply = {"id": "cmpl-1", "object": "text_completion", "model": body["model"]}
            return JSONResponse({**reply, "choices": [choice(0, len(ids), finish_type, True)], "usage": usage})

        async def events() -> AsyncIterator[bytes]:
            for index in range(len(ids)):
                await asyncio.sleep(behaviour.token_delay)
                if behaviour.drop_connection and index > 0:
                    raise ConnectionResetError("in-test server drops the connection")
                finish = finish_type if index == len(ids) - 1 else None
                chunk = {
                    "id": "cmpl-1",
                    "object": "text_completion",
                    "choices": [choice(index, index + 1, finish, not index)],
                }
                yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
            if not ids:
                chunk = {"id": "cmpl-1", "choices": [choice(0, 0, finish_type, True)]}
                yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
            if behaviour.usage_chunk and (body.get("stream_options") or {}).get("include_usage"):
                yield b"data: " + json.dumps({"id": "cmpl-1", "choices": [], "usage": usage}).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def generate(request: Request) -> Response:
        body = await request.json()
        server.requests.append(RecordedRequest("/inference/v1/generate", dict(request.headers), body))
        params = body["sampling_params"]
        request_id = "generate-tokens-" + body.get("request_id", "x")
        ids, finish_type, matched = server.sample(body["token_ids"], params["max_tokens"], params["stop_token_ids"])
        for _ in ids:
            await asyncio.sleep(server.behaviour.token_delay)
            if server.is_aborted(request_id):
                ids, finish_type, matched = ids[:1], "abort", None
                break
        content = [{"token_id": token, "logprob": scripted_logprob(i), "rank": 3} for i, token in enumerate(ids)]
        versions = [{"version": server.behaviour.weight_version, "start": 0, "end": len(ids)}]
        choice = {"index": 0, "finish_reason": finish_type, "stop_reason": matched, "token_ids": ids}
        choice |= {"weight_versions": versions, "logprobs": {"content": content}}
        usage = {"prompt_tokens": len(body["token_ids"]), "completion_tokens": len(ids)}
        return JSONResponse({"request_id": request_id, "model": body["model"], "usage": usage, "choices": [choice]})

    async def abort_requests(request: Request) -> Response:
        body = await request.json()
        server.requests.append(RecordedRequest("/inference/v1/abort_requests", dict(request.headers), body))
        server.aborted.update(body["request_ids"])
        return Response(status_code=200)

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "tiny", "object": "model", "max_model_len": 2048}]})

    async def health(request: Request) -> Response:
        return Response(status_code=200)

    return Starlette(
        routes=[
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/inference/v1/generate", generate, methods=["POST"]),
            Route("/inference/v1/abort_requests", abort_requests, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ]
    )


class DropConnection(Response):
    """Send the status line and headers, then fail: uvicorn closes the connection without a body."""

    def __init__(self) -> None:
        super().__init__(status_code=200, media_type="application/json")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"100")]})
        raise ConnectionResetError("in-test server drops the connection")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerThread:
    """uvicorn serving `app` on 127.0.0.1 in a daemon thread; `stop()` shuts it down (and waits, bounded)."""

    def __init__(self, app: Callable[..., Any], port: int | None = None) -> None:
        self.port = port or free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="critical", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"in-test server on port {self.port} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


def start_fake(kind: str) -> tuple[FakeServer, ServerThread]:
    server = FakeServer(name=kind)
    thread = ServerThread(sglang_app(server) if kind == "sglang" else vllm_app(server)).start()
    server.url = thread.url
    return server, thread


def main() -> None:
    """Serve one in-test engine in its own process (benchmarks): python -m tests.engines.servers sglang|vllm PORT."""
    import sys

    kind, port = sys.argv[1], int(sys.argv[2])
    server = FakeServer(name=kind, url=f"http://127.0.0.1:{port}")
    app = sglang_app(server) if kind == "sglang" else vllm_app(server)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="critical", lifespan="off")


if __name__ == "__main__":
    main()
