"""The added cost of the Anthropic Messages and Responses dialects next to chat completions (issue #17).

Section `stream`: the benchmark completion of benchmarks/parsing.py (long reasoning, a short answer, two parallel
tool calls) streamed through `tito.server.turns.streaming.stream_turn`, the code every `stream: true` request runs, with
each dialect's encoder, from an in-process engine that hands out prepared 1-id or 16-id chunks at no cost (so all
time measured is tito's): the whole streamed turn (parse, encoding, ids collection, build and commit), per engine
chunk and per SSE event, and the ratio of each dialect's turn to chat's, measured side by side, interleaved.
Section `edge`: what a whole-reply turn adds outside the engine: parsing the body and translating it into the
internal chat request, then writing the reply of the committed turn (a 6-message tool conversation, thinking on).
Section `http`: a whole-reply turn over real HTTP (uvicorn in a thread, the `instant` engine): the 6-message
conversation above sent as a session's first turn, each dialect's body to its route, interleaved; the best and
median round trip, and the ratio of the best to chat's (the best is what a loaded machine disturbs least).
Goal: each dialect within 1.2x of chat completions.

Run from the repository root:
  PYTHONPATH=src python benchmarks/dialects.py [--sections stream edge http] [--sizes 500 4000] [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test support modules below

from benchmarks.parsing import best_seconds, completion_of
from benchmarks.streaming import SERVER_FAMILY, ChunkedEngine, never_disconnects, prepared_turn
from tests.parsing.cases import get_case

from tito.server import ServerOptions, ServerState, create_app
from tito.server.commands.launch import build_state
from tito.server.commands.running import serve_in_thread
from tito.server.dialects import anthropic, responses
from tito.server.dialects.anthropic_stream import AnthropicStreamEncoder
from tito.server.dialects.edge import new_id
from tito.server.dialects.responses_stream import ResponsesStreamEncoder
from tito.server.dialects.signing import RoundTripSigner
from tito.server.turns.completions import PreparedTurn, parse_chat_request, reply_body
from tito.server.turns.streaming import ChatStreamEncoder, StreamEncoder, stream_turn
from tito.trajectory.events import SessionConfig, TurnCommitted

TARGET_RATIO = 1.2
CHUNK_SIZES = (1, 16)
DIALECTS = ("chat", "anthropic", "responses")
SIGNER = RoundTripSigner(b"benchmark-key".ljust(32, b"\0"))
RESPONSES_BODY = responses.ResponsesRequest(input="go")

EncoderFor = Callable[[ServerState, PreparedTurn], StreamEncoder]
ENCODERS: dict[str, EncoderFor] = {
    "chat": lambda state, prepared: ChatStreamEncoder(
        state.model_name, prepared.request, prepared.tito_tokenizer.tokenizer
    ),
    "anthropic": lambda state, prepared: AnthropicStreamEncoder(
        state.model_name, prepared.session.session_id, new_id("msg"), len(prepared.prompt_ids), SIGNER
    ),
    "responses": lambda state, prepared: ResponsesStreamEncoder(
        state.model_name, prepared.session.session_id, new_id("resp"), responses.echo_fields(RESPONSES_BODY), SIGNER
    ),
}


async def one_turn(state: ServerState, dialect: str) -> tuple[float, int]:
    """The streamed turn's seconds and the SSE events it sent (the `data:` records of every event)."""
    prepared = await prepared_turn(state)
    encoder = ENCODERS[dialect](state, prepared)
    events = 0
    start = time.perf_counter()
    async for event in stream_turn(state, prepared, never_disconnects, time.monotonic(), encoder):
        events += event.count(b"data: ")
        assert b"event: error" not in event, event
    return time.perf_counter() - start, events


def stream_section(args: argparse.Namespace) -> bool:
    print(f"{SERVER_FAMILY} through stream_turn, each dialect's encoder (best of {args.runs}, interleaved)")
    print(f"{'tokens':>7} {'chunk':>5} {'dialect':>10} {'turn us':>9} {'us/chunk':>9} {'events':>7} {'us/event':>9} "
          f"{'x chat':>7}")  # fmt: skip
    worst = 0.0
    case = get_case(SERVER_FAMILY)
    for size in args.sizes:
        ids, _ = completion_of(case, size)
        for chunk_size in CHUNK_SIZES:
            engine = ChunkedEngine(ids, chunk_size)
            state = ServerState(case.tokenizer, engine, ServerOptions(family=SERVER_FAMILY))
            best: dict[str, float] = dict.fromkeys(DIALECTS, float("inf"))
            events: dict[str, int] = {}
            for _ in range(args.runs):
                for dialect in DIALECTS:
                    seconds, events[dialect] = asyncio.run(one_turn(state, dialect))
                    best[dialect] = min(best[dialect], seconds)
            for dialect in DIALECTS:
                ratio = best[dialect] / best["chat"]
                if dialect != "chat":
                    worst = max(worst, ratio)
                print(
                    f"{len(ids):7} {chunk_size:5} {dialect:>10} {best[dialect] * 1e6:9.1f} "
                    f"{best[dialect] / len(engine.chunks) * 1e6:9.2f} {events[dialect]:7} "
                    f"{best[dialect] / events[dialect] * 1e6:9.2f} {ratio:7.2f}",
                    flush=True,
                )
    passed = worst <= TARGET_RATIO
    print(f"\nworst dialect turn / chat turn = {worst:.2f} (<= {TARGET_RATIO}): {'PASS' if passed else 'MISS'}")
    return passed


TOOL_ARGUMENTS = '{"city": "Paris", "units": {"temp": "C", "days": [1, 2]}}'
CHAT_BODY = {
    "messages": [
        {"role": "system", "content": "You are a helpful agent."},
        {"role": "user", "content": "What should I pack for Paris?"},
        {
            "role": "assistant",
            "reasoning_content": "I need the weather first.",
            "content": "Let me check.",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": TOOL_ARGUMENTS}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24 C"},
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
    "max_tokens": 256,
}
ANTHROPIC_BODY = {
    "system": "You are a helpful agent.",
    "messages": [
        {"role": "user", "content": "What should I pack for Paris?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "I need the weather first.", "signature": "unverified"},
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": orjson.loads(TOOL_ARGUMENTS)},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "sunny, 24 C"}]},
    ],
    "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
    "max_tokens": 256,
    "thinking": {"type": "enabled", "budget_tokens": 1024},
}
RESPONSES_TURN_BODY = {
    "instructions": "You are a helpful agent.",
    "input": [
        {"role": "user", "content": "What should I pack for Paris?"},
        {"type": "reasoning", "summary": [], "encrypted_content": "unverified",
         "content": [{"type": "reasoning_text", "text": "I need the weather first."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me check."}]},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": TOOL_ARGUMENTS},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 24 C"},
    ],
    "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
    "max_output_tokens": 256,
    "reasoning": {"effort": "high"},
}  # fmt: skip


def edge_section(args: argparse.Namespace) -> bool:
    case = get_case(SERVER_FAMILY)
    ids, _ = completion_of(case, 500)
    state = ServerState(case.tokenizer, ChunkedEngine(ids, 16), ServerOptions(family=SERVER_FAMILY))
    session = asyncio.run(state.registry.create(SessionConfig()))
    family = state.tokenizers.family
    turn: TurnCommitted = asyncio.run(one_committed_turn(state))
    bodies = {name: orjson.dumps(body) for name, body in
              (("chat", CHAT_BODY), ("anthropic", ANTHROPIC_BODY), ("responses", RESPONSES_TURN_BODY))}  # fmt: skip
    echo = responses.echo_fields(responses.parse_request(bodies["responses"]))
    work: dict[str, Callable[[], Any]] = {
        "chat": lambda: (parse_chat_request(bodies["chat"]), orjson.dumps(reply_body(turn, "m"))),
        "anthropic": lambda: (
            anthropic.chat_request(anthropic.parse_request(bodies["anthropic"]), session, SIGNER, family),
            orjson.dumps(anthropic.message_body(turn, "m", SIGNER)),
        ),
        "responses": lambda: (
            responses.chat_request(responses.parse_request(bodies["responses"]), session, SIGNER, family),
            orjson.dumps(responses.response_body(turn, "m", echo, SIGNER)),
        ),
    }
    print("\nedge of a whole-reply turn: parse + translate the body, write the reply (best, us)")
    best = {name: best_seconds(function) for name, function in work.items()}
    for name, seconds in best.items():
        print(f"{name:>10} {seconds * 1e6:9.1f} us")
    print("(the engine call, prompt ids and commit are the same steps for every dialect; a turn costs milliseconds)")
    return True


def http_section(args: argparse.Namespace) -> bool:
    state = build_state(ServerOptions(family=SERVER_FAMILY), engine="instant")
    routes = {"chat": "chat/completions", "anthropic": "messages", "responses": "responses"}
    bodies = {"chat": CHAT_BODY, "anthropic": ANTHROPIC_BODY, "responses": RESPONSES_TURN_BODY}
    seconds: dict[str, list[float]] = {name: [] for name in DIALECTS}
    with serve_in_thread(create_app(state)) as url, httpx.Client(base_url=url) as http:
        for run in range(args.runs * 5 + 3):
            for name in DIALECTS:
                session_id = http.post("/sessions").json()["session_id"]
                start = time.perf_counter()
                response = http.post(f"/sessions/{session_id}/v1/{routes[name]}", json=bodies[name])
                elapsed = time.perf_counter() - start
                assert response.status_code == 200, response.text
                if run >= 3:  # warm-up
                    seconds[name].append(elapsed)
    print(f"\nwhole-reply turn over HTTP, instant engine ({args.runs * 5} per dialect, interleaved; ratio of the best)")
    best = {name: min(values) for name, values in seconds.items()}
    worst = 0.0
    for name, values in seconds.items():
        ratio = best[name] / best["chat"]
        worst = max(worst, ratio)
        print(f"{name:>10} best {best[name] * 1e6:9.1f} us, median {statistics.median(values) * 1e6:9.1f} us, "
              f"{ratio:6.2f} x chat")  # fmt: skip
    passed = worst <= TARGET_RATIO
    print(f"worst dialect turn / chat turn = {worst:.2f} (<= {TARGET_RATIO}): {'PASS' if passed else 'MISS'}")
    return passed


async def one_committed_turn(state: ServerState) -> TurnCommitted:
    """A committed turn with reasoning, content and two tool calls to write replies of."""
    prepared = await prepared_turn(state)
    async for _ in stream_turn(state, prepared, never_disconnects, time.monotonic()):
        pass
    return next(iter(prepared.session.trajectory.store)).turn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", nargs="+", choices=("stream", "edge", "http"), default=["stream", "edge", "http"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[500, 4000])
    parser.add_argument("--runs", type=int, default=20, help="streamed turns per dialect and row")
    args = parser.parse_args()
    passed = True
    if "stream" in args.sections:
        passed = stream_section(args) and passed
    if "edge" in args.sections:
        passed = edge_section(args) and passed
    if "http" in args.sections:
        passed = http_section(args) and passed
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
