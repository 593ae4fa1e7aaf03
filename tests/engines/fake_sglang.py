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
    HANG_LIMIT,
    DropConnection,
    FakeServer,
    RecordedRequest,
    abort_fault,
    missing_release_route,
    scripted_logprob,
    scripted_top_logprobs,
    weight_version_at,
)


def sglang_app(server: FakeServer) -> Starlette:
    async def generate(request: Request) -> Response:
        body = await request.json()
        server.requests.append(RecordedRequest("/generate", dict(request.headers), body))
        behaviour = server.behaviour
        rid = body["rid"]
        fault = server.fault_for(rid)
        if behaviour.status is not None:
            return JSONResponse({"error": {"message": behaviour.error_message}}, status_code=behaviour.status)
        if fault == "status_500":
            return JSONResponse({"error": {"message": "injected fault: the scheduler crashed"}}, status_code=500)
        if fault == "not_found":
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        params = body["sampling_params"]
        ids, finish_type, matched = server.sample(body["input_ids"], params["max_new_tokens"], params["stop_token_ids"])
        if fault == "bad_ids" and ids:
            ids = [10_000_000, *ids[1:]]
        top = body.get("top_logprobs_num") or 0

        def logprob(position: int) -> float | None:
            if position == 0 and fault == "nan_logprobs":
                return None  # SGLang answers with orjson, which writes NaN as null
            return -1e39 if position == 0 and fault == "inf_logprobs" else scripted_logprob(position)

        def event(count: int, finish: dict[str, Any] | None, start: int = 0) -> dict[str, Any]:
            if behaviour.malformed or fault == "missing_fields":
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
                "weight_version": weight_version_at(behaviour, count),
                "output_token_logprobs": [[logprob(i), ids[i], None] for i in range(start, count)],
                "e2e_latency": 0.01,
            }

        def finish_of(count: int) -> dict[str, Any]:
            if server.is_aborted(rid):
                return {"type": "abort", "message": "Aborted", "status_code": None, "err_type": None}
            if fault == "unknown_finish":
                return {"type": "cancelled", "message": "injected fault"}
            if finish_type == "length":
                return {"type": "length", "length": count}
            return {"type": "stop", "matched": matched if matched is not None else 151645}

        if not body.get("stream"):
            if fault in ("slow", "endless"):
                await server.wait_until_aborted(rid, request.is_disconnected)
                return JSONResponse(event(0, finish_of(0)))
            count = 0
            while count < len(ids) and not server.is_aborted(rid):
                await asyncio.sleep(behaviour.token_delay)
                count += 1
            if behaviour.drop_connection or fault == "cut":
                return DropConnection()
            if fault == "malformed_json":
                return Response(b'{"text": "", "output_ids": [1, 2', media_type="application/json")
            return JSONResponse(event(count, finish_of(count)))

        interval = params.get("stream_interval") or 1

        async def events() -> AsyncIterator[bytes]:
            if fault == "slow":
                await server.wait_until_aborted(rid, request.is_disconnected)
            sent = 0
            for count in range(1, len(ids) + 1):
                await asyncio.sleep(behaviour.token_delay)
                if server.is_aborted(rid):
                    break
                if behaviour.stream_error and count > 1:
                    yield b"data: " + json.dumps({"error": {"message": behaviour.stream_error}}).encode() + b"\n\n"
                    break
                if (behaviour.drop_connection or fault == "cut") and count > 1:
                    raise ConnectionResetError("in-test server drops the connection")
                if fault == "malformed_json" and count > 1:
                    yield b'data: {"text": "", "output_ids": [\n\n'
                    break
                finish = finish_of(count) if count == len(ids) and fault != "endless" else None
                if finish is None and interval > 1 and count % interval != 1:
                    continue  # SGLang's per-request stream_interval: ids 1, K+1, 2K+1, ... and the finish
                start = sent if behaviour.incremental else 0
                yield b"data: " + json.dumps(event(count, finish, start)).encode() + b"\n\n"
                sent = count
            if fault == "endless":  # the same cumulative event again and again: nothing new, never a finish
                deadline = asyncio.get_running_loop().time() + HANG_LIMIT
                while not server.is_aborted(rid) and asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(0.01)
                    yield (
                        b"data: "
                        + json.dumps(event(sent, None, sent if behaviour.incremental else 0)).encode()
                        + b"\n\n"
                    )
            if server.is_aborted(rid) or not ids:
                start = sent if behaviour.incremental else 0
                yield b"data: " + json.dumps(event(sent, finish_of(sent), start)).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def abort_request(request: Request) -> Response:
        body = await request.json()
        server.requests.append(RecordedRequest("/abort_request", dict(request.headers), body))
        failed = await abort_fault(server, request)
        if failed is not None:
            return failed
        if body.get("rid"):
            server.aborted.add(body["rid"])
        return Response(status_code=200)

    async def health(request: Request) -> Response:
        return Response(status_code=503 if server.behaviour.status == 503 else 200)

    return Starlette(
        routes=[
            Route("/generate", generate, methods=["POST", "PUT"]),
            Route("/abort_request", abort_request, methods=["POST"]),
            Route("/finish_session", missing_release_route(server), methods=["POST"]),
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
