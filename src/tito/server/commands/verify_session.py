"""`tito verify-session`: a scripted multi-turn, tool-using session through a real engine, checked turn by turn.

A local tito session (the app `tito serve` runs, in-process on 127.0.0.1) sits in front of the engine at
`--engine-url`; the openai SDK drives it through a fixed script (a tool call and its result, a follow-up, an injected
assistant with reasoning before a new user turn, which a template that drops history reasoning renders differently).
Each turn is checked:
- `template`: the engine's own render and tokenization of the conversation so far (its `/tokenize` with the
  messages, tools and kwargs) against tito's prompt ids. Outside the sampled spans they must be equal; inside them
  they may differ, since the engine re-renders each parsed reply while tito keeps the sampled ids verbatim (a
  non-canonical tokenization, a think block the model never opened: that is TITO's point). A difference in the
  prompt region fails, naming the first differing token: the engine serves another template or tokenizer.
  Skipped where the engine has no `/tokenize`.
- `merge`: the turn's prompt keeps the previous turn's prompt and sampled ids verbatim (less the junction's drop).
- `parse`: the sampled ids parsed into the assistant message the reply carried.
- `logprobs`: one finite logprob per sampled id.
and at the end `sample`: the session's samples are one sequence, its tokens the last prompt + sampled ids, its
loss mask 1 exactly on every turn's sampled ids.

Imports from tito: engines, families, server.app, server.commands, server.state,
tokenizer_protocol, trajectory.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from openai import OpenAI

from tito.server.app import create_app
from tito.server.commands.launch import build_state
from tito.server.commands.running import serve_in_thread
from tito.server.state import ServerOptions, ServerState
from tito.tokenizer_protocol import Tokenizer
from tito.trajectory.nodes import PathSequence

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "The city name."}},
                "required": ["city"],
            },
        },
    }
]
INJECTED_CALL = {"id": "call_verify_0", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}  # fmt: skip


@dataclass(frozen=True)
class Check:
    """One check of one turn (turn 0 is the whole session's sample)."""

    turn: int
    name: str
    outcome: str
    """`passed`, `failed` or `skipped`."""
    detail: str = ""


@dataclass(frozen=True)
class VerifyOptions:
    engine: str
    engine_url: str
    family: str
    tokenizer: str | None = None
    chat_template_kwargs: Mapping[str, Any] | None = None
    max_tokens: int = 64
    temperature: float = 1.0
    seed: int = 7


def scripted_steps(turn: int, last_reply: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The messages appended before turn `turn` (1-based), given the model's previous reply."""
    if turn == 1:
        return [
            {"role": "system", "content": "You are a weather assistant. Use the tools you are given."},
            {"role": "user", "content": "What is the weather in Oslo right now?"},
        ]
    if turn == 2:
        calls = (last_reply or {}).get("tool_calls") or []
        if calls:
            return [{"role": "tool", "tool_call_id": call["id"], "content": '{"celsius": 4, "sky": "rain"}'}
                    for call in calls]  # fmt: skip
        return [
            {"role": "assistant", "content": None, "reasoning_content": "I should look the weather up.",
             "tool_calls": [INJECTED_CALL]},
            {"role": "tool", "tool_call_id": INJECTED_CALL["id"], "content": '{"celsius": 4, "sky": "rain"}'},
        ]  # fmt: skip
    if turn == 3:
        return [{"role": "user", "content": "Thanks. Should I take an umbrella?"}]
    return [
        {"role": "assistant", "content": "Summary: rain in Oslo, 4 degrees.",
         "reasoning_content": "The user will want a short recap."},
        {"role": "user", "content": "And what about Bergen tomorrow?"},
    ]  # fmt: skip


TURNS = 4


def run_verify_session(options: VerifyOptions) -> list[Check]:
    """Run the script through a local tito session in front of the engine; every check of every turn."""
    server_options = ServerOptions(family=options.family, chat_template_kwargs=dict(options.chat_template_kwargs or {}))
    state = build_state(server_options, engine=options.engine, engine_url=options.engine_url,
                        tokenizer=options.tokenizer)  # fmt: skip
    checks: list[Check] = []
    with serve_in_thread(create_app(state)) as base_url, httpx.Client(base_url=options.engine_url, timeout=120) as eng:
        session_id = httpx.post(f"{base_url}/sessions").json()["session_id"]
        client = OpenAI(base_url=f"{base_url}/sessions/{session_id}/v1", api_key="unused", max_retries=0)
        model = _served_model(eng)
        messages: list[dict[str, Any]] = []
        reply: dict[str, Any] | None = None
        previous: PathSequence | None = None
        for turn in range(1, TURNS + 1):
            messages.extend(scripted_steps(turn, reply))
            completion = client.chat.completions.create(
                model=state.model_name, messages=messages, tools=TOOLS,  # type: ignore[arg-type]
                max_tokens=options.max_tokens, temperature=options.temperature, seed=options.seed,
            )  # fmt: skip
            reply = completion.choices[0].message.model_dump(exclude_none=True)
            path = _head_sequence(state, session_id)
            prompt_ids = list(path.tokens[: path.spans[-1].start])
            sampled_ids = list(path.tokens[path.spans[-1].start : path.spans[-1].end])
            engine_ids = _engine_tokenize(eng, model, messages, _template_kwargs(state))
            checks.append(template_check(turn, state.tokenizers.tokenizer, prompt_ids, engine_ids, path))
            checks.append(
                merge_check(turn, previous, prompt_ids, state.tokenizers.family.junction.trailing_ids_dropped)
            )
            checks.append(parse_check(turn, completion.choices[0].finish_reason, reply))
            checks.append(
                logprob_check(turn, sampled_ids, list(path.logprobs[path.spans[-1].start : path.spans[-1].end]))
            )
            messages.append(reply)
            previous = path
            if completion.choices[0].finish_reason == "length":
                detail = f"turn {turn} was cut by the length limit ({options.max_tokens} ids): raise --max-tokens"
                checks.append(Check(turn, "script", "failed", detail + "; a cut turn cannot be continued"))
                return checks
        samples = httpx.post(f"{base_url}/sessions/{session_id}/samples").json()["samples"]
        checks.append(sample_check(samples, previous))
    return checks


def _served_model(engine: httpx.Client) -> str:
    reply = engine.get("/v1/models")
    data = reply.json().get("data") if reply.status_code == 200 else None
    return str(data[0]["id"]) if data else "default"


def _template_kwargs(state: ServerState) -> dict[str, Any]:
    return dict(state.tokenizers.default.template_kwargs)


def _head_sequence(state: ServerState, session_id: str) -> PathSequence:
    """The session's current path: its last turn's prompt + sampled ids, loss mask and logprobs."""
    sequences = state.registry.get(session_id).trajectory.sample_sequences()
    return sequences[-1]


def _engine_tokenize(
    engine: httpx.Client, model: str, messages: Sequence[Mapping[str, Any]], kwargs: Mapping[str, Any]
) -> list[int] | None:
    """The engine's own render + tokenization of the conversation with a generation prompt; None without /tokenize."""
    body = {"model": model, "messages": [_with_reasoning_alias(m) for m in messages], "tools": TOOLS,
            "add_generation_prompt": True,
            "add_special_tokens": False, "chat_template_kwargs": dict(kwargs)}  # fmt: skip
    reply = engine.post("/tokenize", json=body)
    if reply.status_code == 404:
        return None
    reply.raise_for_status()
    return [int(token) for token in reply.json()["tokens"]]


def _with_reasoning_alias(message: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM (0.32) reads an assistant's reasoning from `reasoning` and hands the template both names; SGLang reads
    `reasoning_content`. Sending both lets either engine render what tito stored."""
    if message.get("reasoning_content") is None:
        return dict(message)
    return {**message, "reasoning": message["reasoning_content"]}


def template_check(
    turn: int, tokenizer: Tokenizer, prompt_ids: Sequence[int], engine_ids: Sequence[int] | None, path: PathSequence
) -> Check:
    if engine_ids is None:
        return Check(turn, "template", "skipped", "the engine has no /tokenize")
    if list(engine_ids) == list(prompt_ids):
        return Check(turn, "template", "passed", f"{len(prompt_ids)} ids equal the engine's")
    sampled = [(span.start, span.end) for span in path.spans[:-1]]
    drift = [
        (i1, i2, j1, j2)
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, prompt_ids, engine_ids, autojunk=False).get_opcodes()
        if tag != "equal" and not any(start - 1 <= i1 and i2 <= end + 1 for start, end in sampled)
    ]
    if not drift:
        detail = "equal outside sampled spans; the engine re-renders sampled turns, tito keeps their ids verbatim"
        return Check(turn, "template", "passed", detail)
    i1, i2, j1, j2 = drift[0] if drift else _first_difference(prompt_ids, engine_ids)
    return Check(
        turn,
        "template",
        "failed",
        f"token {i1}: tito {list(prompt_ids[i1 : i2 + 1][:4])} {tokenizer.decode(list(prompt_ids[i1 : i1 + 4]))!r}, "
        f"engine {list(engine_ids[j1 : j2 + 1][:4])} {tokenizer.decode(list(engine_ids[j1 : j1 + 4]))!r}: the engine "
        "renders or tokenizes the conversation differently (another chat template or tokenizer?)",
    )


def _first_difference(left: Sequence[int], right: Sequence[int]) -> tuple[int, int, int, int]:
    index = next((i for i, (a, b) in enumerate(zip(left, right, strict=False)) if a != b), min(len(left), len(right)))
    return index, index, index, index


def merge_check(turn: int, previous: PathSequence | None, prompt_ids: Sequence[int], dropped: int) -> Check:
    if previous is None:
        return Check(turn, "merge", "passed", "first turn: nothing stored")
    kept = len(previous.tokens) - dropped
    if list(prompt_ids[:kept]) != list(previous.tokens[:kept]):
        first = _first_difference(prompt_ids[:kept], previous.tokens[:kept])[0]
        return Check(turn, "merge", "failed", f"token {first}: the prompt does not keep the stored ids verbatim")
    return Check(turn, "merge", "passed", f"keeps {kept} stored ids verbatim")


def parse_check(turn: int, finish_reason: str | None, reply: Mapping[str, Any]) -> Check:
    if finish_reason not in ("stop", "length", "tool_calls"):
        return Check(turn, "parse", "failed", f"finish_reason {finish_reason!r}")
    parts = [key for key in ("reasoning_content", "content", "tool_calls") if reply.get(key)]
    return Check(turn, "parse", "passed", f"finish {finish_reason}; {', '.join(parts) or 'empty message'}")


def logprob_check(turn: int, sampled_ids: Sequence[int], logprobs: Sequence[float]) -> Check:
    if len(logprobs) != len(sampled_ids) or not sampled_ids:
        return Check(turn, "logprobs", "failed", f"{len(logprobs)} logprobs for {len(sampled_ids)} sampled ids")
    bad = next((i for i, value in enumerate(logprobs) if not math.isfinite(value) or value > 0.0), None)
    if bad is not None:
        return Check(
            turn, "logprobs", "failed", f"sampled token {bad} (id {sampled_ids[bad]}): logprob {logprobs[bad]}"
        )
    return Check(turn, "logprobs", "passed", f"{len(logprobs)} finite, <= 0")


def sample_check(samples: Sequence[Mapping[str, Any]], last: PathSequence | None) -> Check:
    if len(samples) != 1 or last is None:
        return Check(0, "sample", "failed", f"{len(samples)} samples: the session must be one sequence")
    sample = samples[0]
    if sample["tokens"] != list(last.tokens) or sample["loss_mask"] != list(last.loss_mask):
        return Check(0, "sample", "failed", "the sample is not the last turn's prompt + sampled ids with its mask")
    return Check(
        0, "sample", "passed", f"one sequence of {len(sample['tokens'])} tokens, {sum(last.loss_mask)} sampled"
    )


def checks_json(checks: Sequence[Check]) -> str:
    return json.dumps([check.__dict__ for check in checks])
