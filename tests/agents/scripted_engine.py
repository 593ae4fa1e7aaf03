"""An in-test SGLang server that plays an agent's episode: it decodes each prompt, asks the test's policy what the
assistant says next (a message: text, reasoning, tool calls in the agent's own tool names), and samples that
message as the family's chat template renders it, so tito parses the tool calls back exactly as from a model.

Speaks SGLang's native wire (`POST /generate`, JSON or cumulative SSE; `/health`, `/get_model_info`,
`/abort_request`), which `tito serve --engine sglang` drives. Every generation is recorded (prompt text, sampled
ids) for the suite's checks.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tito.family_tokenizer import builtin_tokenizer_for
from tito.tokenizer import TitoTokenizer, get_tito_tokenizer

Message = dict[str, Any]
Policy = Callable[[str], Message]
"""Given the decoded prompt, the assistant message to sample (`content`, `reasoning_content`, `tool_calls` with
`arguments` as a JSON object)."""

TOOL_STUB = [{"type": "function", "function": {"name": "tool", "parameters": {"type": "object"}}}]


@dataclass
class Generation:
    prompt: str
    output_ids: list[int]
    aborted: bool = False
    json_schema: str | None = None
    """`sampling_params.json_schema`: the structured output tito asked the engine to constrain decoding to."""


@dataclass
class Renderer:
    """An assistant message as the completion text the family's template renders for it (stop token included),
    after a prompt that ends with thinking on or off."""

    family: str
    modes: dict[bool, TitoTokenizer]
    stop_texts: tuple[str, ...]

    @classmethod
    def for_family(cls, family: str) -> Renderer:
        tokenizer, _ = builtin_tokenizer_for(family)
        modes = {on: get_tito_tokenizer(tokenizer, family, {"enable_thinking": on}) for on in (True, False)}
        stops = tuple(tokenizer.decode([token]) for token in modes[True].stop_token_ids)
        return cls(family, modes, stops)

    def thinking(self, prompt: str) -> bool:
        """Whether `prompt` ends with the generation prompt of thinking on (the longer tail that matches wins)."""
        head: list[Message] = [{"role": "user", "content": "go"}]
        tails = {}
        for on, tito in self.modes.items():
            bare, asked = tito.render(head, TOOL_STUB), tito.render(head, TOOL_STUB, add_generation_prompt=True)
            tails[on] = asked[len(bare) :]
        matching = [on for on, tail in tails.items() if prompt.endswith(tail)]
        return max(matching, key=lambda on: len(tails[on])) if matching else True

    def completion(self, message: Message, thinking: bool) -> str:
        tito = self.modes[thinking]
        asked = {**message, "role": "assistant", "content": message.get("content") or ""}
        calls = [
            {
                "id": f"call_{index}",
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"], ensure_ascii=False)},
            }
            for index, call in enumerate(message.get("tool_calls") or ())
        ]
        if calls:
            asked["tool_calls"] = calls
        if not thinking:
            asked.pop("reasoning_content", None)
        head: list[Message] = [{"role": "user", "content": "go"}]
        prompt = tito.render(head, TOOL_STUB, add_generation_prompt=True)
        after: Message = (
            {"role": "tool", "tool_call_id": "call_0", "content": "ok"} if calls else {"role": "user", "content": "ok"}
        )
        whole = tito.render([*head, asked], TOOL_STUB)
        longer = tito.render([*head, asked, after], TOOL_STUB)
        assert whole.startswith(prompt) and longer.startswith(prompt), self.family
        text = longer[len(prompt) :]
        start = max(0, len(whole) - len(prompt) - 16)
        ends = [(text.find(stop, start), stop) for stop in self.stop_texts]
        at, stop = min((index, stop) for index, stop in ends if index >= 0)
        return text[:at] + stop


class ScriptedSglang:
    """The engine server, run by uvicorn on a thread at `url` while the `with` block lasts."""

    def __init__(self, family: str, policy: Policy) -> None:
        self.renderer = Renderer.for_family(family)
        self.tokenizer = self.renderer.modes[True].tokenizer
        self.policy = policy
        self.generations: list[Generation] = []
        self.errors: list[str] = []
        self._aborted: set[str] = set()
        self.url = ""
        """Set once serving: the OS picks the port (no other process can hold it)."""
        config = uvicorn.Config(self._app(), host="127.0.0.1", port=0, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self) -> ScriptedSglang:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline, "the scripted engine did not start"
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)

    def sampled(self) -> list[Generation]:
        """The generations that ran to their end (an aborted one commits nothing)."""
        return [generation for generation in self.generations if not generation.aborted]

    def _reply_ids(self, prompt_ids: Sequence[int], max_new_tokens: int) -> tuple[Generation, list[int]]:
        prompt = self.tokenizer.decode(list(prompt_ids))
        try:
            text = self.renderer.completion(self.policy(prompt), self.renderer.thinking(prompt))
        except Exception as exc:  # a policy bug shows in the test, not as an engine hang
            self.errors.append(f"{type(exc).__name__}: {exc}")
            raise
        ids = list(self.tokenizer.encode(text, add_special_tokens=False))[:max_new_tokens]
        generation = Generation(prompt, ids)
        self.generations.append(generation)
        return generation, ids

    def _app(self) -> Starlette:
        async def generate(request: Request) -> Response:
            body = await request.json()
            rid = body["rid"]
            generation, ids = self._reply_ids(body["input_ids"], body["sampling_params"]["max_new_tokens"])
            generation.json_schema = body["sampling_params"].get("json_schema")
            finish_type = "length" if len(ids) == body["sampling_params"]["max_new_tokens"] else "stop"

            def event(count: int, last: bool) -> dict[str, Any]:
                finish = None
                if last:
                    finish = {"type": "length", "length": count} if finish_type == "length" else {"type": "stop"}
                    if rid in self._aborted:
                        finish = {"type": "abort", "message": "Aborted"}
                        generation.aborted = True
                return {
                    "text": "",
                    "output_ids": ids[:count],
                    "meta_info": {
                        "id": rid,
                        "finish_reason": finish,
                        "prompt_tokens": len(body["input_ids"]),
                        "completion_tokens": count,
                        "cached_tokens": 0,
                        "output_token_logprobs": [[-0.5, token, None] for token in ids[:count]],
                    },
                }

            if not body.get("stream"):
                return JSONResponse(event(len(ids), True))

            async def events() -> AsyncIterator[bytes]:
                step = max(1, len(ids) // 4)
                counts = [*range(step, len(ids), step), len(ids)]
                for count in counts:
                    await asyncio.sleep(0.005)
                    yield b"data: " + json.dumps(event(count, count == len(ids))).encode() + b"\n\n"
                yield b"data: [DONE]\n\n"

            return StreamingResponse(events(), media_type="text/event-stream")

        async def abort(request: Request) -> Response:
            self._aborted.add((await request.json()).get("rid", ""))
            return JSONResponse({})

        async def health(request: Request) -> Response:
            return Response(status_code=200)

        async def model_info(request: Request) -> Response:
            return JSONResponse({"model_path": "scripted", "is_generation": True})

        return Starlette(
            routes=[
                Route("/generate", generate, methods=["POST"]),
                Route("/abort_request", abort, methods=["POST"]),
                Route("/health", health),
                Route("/get_model_info", model_info),
            ]
        )
