"""A fast stand-in inference engine on a real socket, in its own process: SGLang's or vLLM's wire, scripted ids.

`benchmarks/server_overhead.py --wire` runs it beside `tito serve` so tito is measured the way users run it: an HTTP
engine client, the engine's reply parsing, growing prompts, many connections. It answers every generate call at
once with the same scripted ids (cut at the request's max tokens) and logprobs, in the reply shapes of
tests/engines/fake_sglang.py and fake_vllm.py (SGLang `POST /generate`; vLLM `POST /v1/completions` with a
token-id prompt, `GET /v1/models`). A request with `stream: true` gets the same reply as an SSE stream, one event
per id (SGLang's incremental events, as `--incremental-streaming-output` sends them; vLLM's chunks and a usage
chunk), chunked, all written at once; with ID_MS, each event ID_MS milliseconds per id it carries after the one
before, as an engine sampling at 1000/ID_MS ids a second writes them. A SGLang request's
`sampling_params.stream_interval` K makes an event per K ids (ids 1, K+1, 2K+1, ... and the last), as SGLang does.
It is a raw asyncio HTTP/1.1 server with orjson, not Starlette, so that the engine costs as little as possible: what
tito adds is then the visible part.

Run: python benchmarks/wire_engine.py sglang|vllm PORT IDS [ID_MS]   (IDS: comma-separated reply ids)
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import orjson

MODEL = "wire-engine"
Handler = Callable[[Any], Any]


def logprob(position: int) -> float:
    return -(position + 1) / 8


def sglang_generate(reply_ids: list[int]) -> Handler:
    def answer(body: Any) -> Any:
        params = body["sampling_params"]
        ids = reply_ids[: params["max_new_tokens"]]
        stopped = ids and ids[-1] in params["stop_token_ids"]
        finish = {"type": "stop", "matched": ids[-1]} if stopped else {"type": "length", "length": len(ids)}
        if body.get("stream"):
            every = params.get("stream_interval") or 1  # SGLang's: ids 1, K+1, 2K+1, ... and the last
            ends = [end for end in range(1, len(ids) + 1) if every == 1 or end % every == 1 or end == len(ids)]
            return [
                event(body, ids, start, end, finish if end == len(ids) else None)
                for start, end in zip([0, *ends], ends, strict=False)
            ]
        return event(body, ids, 0, len(ids), finish)

    return answer


def event(body: Any, ids: list[int], start: int, end: int, finish: Any) -> Any:
    """A `/generate` reply (0 to all ids) or an incremental SSE event (the ids from `start`)."""
    meta = {
        "id": body["rid"], "finish_reason": finish, "prompt_tokens": len(body["input_ids"]), "completion_tokens": end,
        "cached_tokens": 0, "weight_version": "default", "e2e_latency": 0.0,
        "output_token_logprobs": [[logprob(i), ids[i], None] for i in range(start, end)],
    }  # fmt: skip
    return {"text": "", "output_ids": ids[start:end], "meta_info": meta}


def vllm_completions(reply_ids: list[int]) -> Handler:
    def answer(body: Any) -> Any:
        prompt = body["prompt"]
        ids = reply_ids[: body["max_tokens"]]
        stopped = bool(ids) and ids[-1] in (body.get("stop_token_ids") or [])
        finish = "stop" if stopped else "length"
        usage = {"prompt_tokens": len(prompt), "completion_tokens": len(ids), "total_tokens": len(prompt) + len(ids)}
        reply = {"id": "cmpl-1", "object": "text_completion", "model": MODEL}
        if body.get("stream"):
            chunks = [{**reply, "choices": [choice(ids, end - 1, end, finish if end == len(ids) else None, prompt)]}
                      for end in range(1, len(ids) + 1)]  # fmt: skip
            return [*chunks, {**reply, "choices": [], "usage": usage}]
        return {**reply, "choices": [choice(ids, 0, len(ids), finish, None)], "usage": usage}

    return answer


def choice(ids: list[int], start: int, end: int, finish: str | None, prompt: list[int] | None) -> Any:
    """A `/v1/completions` choice for `ids[start:end]` (the stream's first chunk carries the prompt's ids)."""
    return {
        "index": 0, "text": "", "finish_reason": finish, "stop_reason": ids[-1] if finish == "stop" else None,
        "token_ids": ids[start:end], "prompt_logprobs": None, "prompt_token_ids": prompt if start == 0 else None,
        "logprobs": {"text_offset": list(range(start, end)), "token_logprobs": [logprob(i) for i in range(start, end)],
                     "tokens": [f"<t{token}>" for token in ids[start:end]], "top_logprobs": None},
    }  # fmt: skip


def routes(kind: str, reply_ids: list[int]) -> dict[tuple[bytes, bytes], Handler]:
    models = {"object": "list", "data": [{"id": MODEL, "object": "model", "max_model_len": 131072}]}
    common: dict[tuple[bytes, bytes], Handler] = {
        (b"GET", b"/health"): lambda body: None,
        (b"GET", b"/v1/models"): lambda body: models,
        (b"GET", b"/get_model_info"): lambda body: {"model_path": MODEL, "is_generation": True},
    }
    if kind == "sglang":
        return {**common, (b"POST", b"/generate"): sglang_generate(reply_ids)}
    return {**common, (b"POST", b"/v1/completions"): vllm_completions(reply_ids)}


def response(status: bytes, body: bytes) -> bytes:
    head = b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\ncontent-length: "
    return head + str(len(body)).encode() + b"\r\n\r\n" + body


def sse_response(events: list[Any]) -> bytes:
    """A 200 `text/event-stream` of `events` and `[DONE]`, each event one chunk of a chunked body."""
    return b"".join(sse_pieces(events))


def sse_pieces(events: list[Any]) -> list[bytes]:
    """`sse_response` in the pieces an engine writes one by one: the head and first event, each later event, and
    the last one with `[DONE]` and the body's end."""
    chunks = [b"data: " + orjson.dumps(event) + b"\n\n" for event in events] + [b"data: [DONE]\n\n"]
    pieces = [b"%x\r\n%b\r\n" % (len(chunk), chunk) for chunk in chunks]
    pieces[0] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" + pieces[0]
    return [*pieces[:-2], pieces[-2] + pieces[-1] + b"0\r\n\r\n"]


def event_ids(event: Any) -> int:
    """How many sampled ids a stream event carries (a vLLM usage chunk: none)."""
    if "output_ids" in event:
        return len(event["output_ids"])
    return sum(len(choice["token_ids"]) for choice in event["choices"])


async def serve_connection(
    table: dict[tuple[bytes, bytes], Handler],
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    id_seconds: float = 0.0,
) -> None:
    """Keep-alive HTTP/1.1: one request after another until the client closes; a stream's events `id_seconds`
    apart (0: all at once)."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *header_lines = head[:-4].split(b"\r\n")
            method, path, _ = request_line.split(b" ", 2)
            length = 0
            for line in header_lines:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            payload = await reader.readexactly(length) if length else b""
            handler = table.get((method, path.split(b"?", 1)[0]))
            if handler is None:
                writer.write(response(b"404 Not Found", orjson.dumps({"error": {"message": f"no route {path!r}"}})))
            else:
                answer = handler(orjson.loads(payload) if payload else None)
                if isinstance(answer, list) and id_seconds:
                    for index, piece in enumerate(sse_pieces(answer)):
                        if index:
                            await asyncio.sleep(id_seconds * event_ids(answer[index]))
                        writer.write(piece)
                elif isinstance(answer, list):
                    writer.write(sse_response(answer))
                else:
                    writer.write(response(b"200 OK", orjson.dumps(answer) if answer is not None else b""))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(kind: str, port: int, reply_ids: list[int], id_seconds: float = 0.0) -> None:
    table = routes(kind, reply_ids)
    server = await asyncio.start_server(
        lambda reader, writer: serve_connection(table, reader, writer, id_seconds), "127.0.0.1", port, backlog=4096
    )
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    engine_kind, engine_port, ids_text = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if engine_kind not in ("sglang", "vllm"):
        sys.exit(f"engine kind {engine_kind!r}: choose sglang or vllm")
    id_ms = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    asyncio.run(main(engine_kind, engine_port, [int(token) for token in ids_text.split(",")], id_ms / 1000))
