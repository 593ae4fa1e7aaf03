"""A tool-calling agent loop against `tito serve`, with the official openai SDK; then the training sample.

The agent speaks plain OpenAI chat to http://HOST/sessions/{id}/v1; tito records the exact ids, logprobs and
loss mask of every turn. Start a server first, e.g.

    tito serve --engine local                                   # the embedded SmolLM2
    tito serve --family qwen3 --engine sglang --engine-url http://127.0.0.1:30000 --tokenizer /models/Qwen3-8B

then run: python examples/agent_loop_server.py [--base-url http://127.0.0.1:8000] [--api-key KEY]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import httpx
from openai import OpenAI

TOOLS = [{
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                       "required": ["a", "b"]},
    },
}]  # fmt: skip


def call_tool(name: str, arguments: str) -> str:
    """Run one tool call; a bad call gets an error message the model can read, as agents do."""
    if name != "add":
        return f"error: unknown tool {name!r}"
    try:
        values = json.loads(arguments)
        return str(int(values["a"]) + int(values["b"]))
    except (ValueError, KeyError, TypeError) as exc:
        return f"error: {exc}"


def run(base_url: str, api_key: str | None, max_turns: int) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    session_id = httpx.post(f"{base_url}/sessions", headers=headers).json()["session_id"]
    client = OpenAI(base_url=f"{base_url}/sessions/{session_id}/v1", api_key=api_key or "unused")
    messages: list[Any] = [
        {"role": "system", "content": "You can call the add tool. Answer briefly."},
        {"role": "user", "content": "What is 17 + 25? Use the tool."},
    ]
    for _ in range(max_turns):
        reply = client.chat.completions.create(model="tito", messages=messages, tools=TOOLS, max_tokens=256)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))  # echo the reply back exactly as received
        print(f"assistant ({reply.choices[0].finish_reason}): {message.content or ''}")
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            result = call_tool(call.function.name, call.function.arguments)
            print(f"tool {call.function.name}({call.function.arguments}) -> {result}")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    response = httpx.post(f"{base_url}/sessions/{session_id}/samples", headers=headers, json={"reward": 1.0})
    sample: dict[str, Any] = response.json()["samples"][0]
    httpx.delete(f"{base_url}/sessions/{session_id}", headers=headers)
    print(f"sample: {len(sample['tokens'])} tokens, {sum(sample['loss_mask'])} sampled (loss mask 1), "
          f"status {sample['status']}, reward {sample['reward']}")  # fmt: skip
    return sample


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8000")
    parser.add_argument("--api-key")
    parser.add_argument("--max-turns", type=int, default=6)
    args = parser.parse_args()
    run(args.base_url, args.api_key, args.max_turns)
