"""An in-test SGLang server: native `POST /generate` (JSON or cumulative/incremental SSE), `/abort_request`.

Shapes from research/engines.md section 1 (SGLang 0.5.23 source); smg's backend detection needs `/v1/models`,
`/server_info` and `/version`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.engines.fake_engine import (
    DropConnection,
    FakeServer,
    RecordedRequest,
    scripted_logprob,
    scripted_top_logprobs,
)


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
        top = body.get("top_logprobs_num") or 0

        def event(count: int, finish: dict[str, Any] | None, start: int = 0) -> dict[str, Any]:
            if behaviour.malformed:
                return {"text": "", "meta_info": {"id": rid}}
            info = meta(count, finish, start)
            if top:  # top_logprobs_num: per position [logprob, id, text] triples, best first
                info["output_top_logprobs"] = [
                    [[lp, token, None] for token, lp in scripted_top_logprobs(ids[i], i, top)]
                    for i in range(start, count)
                ]
            return {"text": "", "output_ids": ids[start:count], "meta_info": info}

        def meta(count: int, finish: dict[str, Any] | None, start: int) -> dict[str, Any]:
            return {
                "id": rid,
                "finish_reason": finish,
                "prompt_tokens": len(body["input_ids"]),
                "completion_tokens": count,
                "cached_tokens": 3,
                "weight_version": behaviour.weight_version,
                "output_token_logprobs": [[scripted_logprob(i), ids[i], None] for i in range(start, count)],
                "e2e_latency": 0.01,
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
                if behaviour.stream_error and count > 1:
                    yield b"data: " + json.dumps({"error": {"message": behaviour.stream_error}}).encode() + b"\n\n"
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
