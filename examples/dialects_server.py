"""One Anthropic Messages session and one OpenAI Responses session against `tito serve`, each a streamed tool loop
driven by the official SDK (as Claude Code and Codex speak), then each session's training sample.

Both dialects land on the same sessions, trajectory and samples as chat completions. Start a server first, e.g.

    tito serve --engine local                                   # the embedded SmolLM2
    tito serve --family qwen3 --engine sglang --engine-url http://127.0.0.1:30000 --tokenizer /models/Qwen3-8B

then run: python examples/dialects_server.py [--base-url http://127.0.0.1:8000] [--api-key KEY]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import anthropic
import httpx
from openai import OpenAI

SYSTEM = "You can call the add tool. Answer briefly."
QUESTION = "What is 17 + 25? Use the tool."
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}


def add(arguments: dict[str, Any]) -> str:
    try:
        return str(int(arguments["a"]) + int(arguments["b"]))
    except (KeyError, TypeError, ValueError) as exc:
        return f"error: {exc}"


def anthropic_session(base_url: str, session_id: str, api_key: str | None, max_turns: int) -> None:
    """Claude Code's loop: messages.stream, the reply's blocks sent back as received, tool results as blocks."""
    client = anthropic.Anthropic(base_url=f"{base_url}/sessions/{session_id}", api_key=api_key or "unused")
    tools: Any = [{"name": "add", "description": "Add two integers.", "input_schema": SCHEMA}]
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    for _ in range(max_turns):
        with client.messages.stream(
            model="tito", system=SYSTEM, max_tokens=256, messages=messages, tools=tools
        ) as stream:
            for text in stream.text_stream:
                print(text, end="", flush=True)
            reply = stream.get_final_message()
        print(f"\n[anthropic] stop_reason {reply.stop_reason}")
        content = [block.model_dump(exclude_none=True) for block in reply.content]  # sent back as received
        messages.append({"role": "assistant", "content": content})
        calls = [block for block in reply.content if block.type == "tool_use"]
        if not calls:
            return
        results = [{"type": "tool_result", "tool_use_id": call.id, "content": add(call.input)} for call in calls]  # type: ignore[arg-type]
        messages.append({"role": "user", "content": results})


def responses_session(base_url: str, session_id: str, api_key: str | None, max_turns: int) -> None:
    """Codex's loop: responses.stream with store=false, every output item sent back, function outputs appended."""
    client = OpenAI(base_url=f"{base_url}/sessions/{session_id}/v1", api_key=api_key or "unused")
    tools: Any = [{"type": "function", "name": "add", "description": "Add two integers.", "parameters": SCHEMA}]
    items: list[Any] = [{"role": "user", "content": QUESTION}]
    for _ in range(max_turns):
        with client.responses.stream(
            model="tito", instructions=SYSTEM, input=items, tools=tools, max_output_tokens=256, store=False
        ) as stream:
            for event in stream:
                if event.type == "response.output_text.delta":
                    print(event.delta, end="", flush=True)
            reply = stream.get_final_response()
        print(f"\n[responses] status {reply.status}")
        items.extend(item.model_dump(exclude_none=True) for item in reply.output)
        calls = [item for item in reply.output if item.type == "function_call"]
        if not calls:
            return
        for call in calls:
            result = add(json.loads(call.arguments))
            items.append({"type": "function_call_output", "call_id": call.call_id, "output": result})


def run(base_url: str, api_key: str | None, max_turns: int) -> dict[str, dict[str, Any]]:
    """Both sessions; returns each one's sample."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    samples: dict[str, dict[str, Any]] = {}
    for name, loop in (("anthropic", anthropic_session), ("responses", responses_session)):
        session_id = httpx.post(f"{base_url}/sessions", headers=headers).json()["session_id"]
        loop(base_url, session_id, api_key, max_turns)
        response = httpx.post(f"{base_url}/sessions/{session_id}/samples", headers=headers, json={"reward": 1.0})
        [sample] = response.json()["samples"]
        print(f"[{name}] sample: {len(sample['tokens'])} tokens, {sum(sample['loss_mask'])} sampled, "
              f"{sample['metadata'].get('num_turns')} turns, status {sample['status']}")  # fmt: skip
        samples[name] = sample
        httpx.delete(f"{base_url}/sessions/{session_id}", headers=headers)
    return samples


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8000")
    parser.add_argument("--api-key")
    parser.add_argument("--max-turns", type=int, default=6)
    args = parser.parse_args()
    run(args.base_url, args.api_key, args.max_turns)
