"""Sessions the inspector tests look at, driven through a real server with the openai SDK.

A tree session with a one-step retry (a superseded sibling the default picker drops), a deeper branch, and a tool
call (one well-formed attempt, one malformed); and a plain linear session. The scripted engine answers with the
qwen3 family's own ids, so tokens, pieces, junctions and parse statuses are real.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.server.conftest import Server
from tests.server.turns.test_completions import as_message, client

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
TOOL_REPLY = (
    "Let me check.\n<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_weather", "arguments": {city: Paris}}\n</tool_call><|im_end|>'
)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


@dataclass(frozen=True)
class TreeScenario:
    session_id: str
    tool_node: int
    """The node whose reply made two tool-call attempts (one ok, one with invalid arguments)."""
    superseded_retry: int
    """The first answer to a question later re-asked: a leaf the default picker drops."""
    kept_leaves: tuple[int, ...]


def tree_session(server: Server) -> TreeScenario:
    """Node 0 answers the question with two tool-call attempts; 1 answers the tool result and is retried as 2 (1 is
    superseded); 3 continues from 2; 4 branches from 0 with a different follow-up. Kept leaves: 3 and 4."""
    session_id = server.new_session(trajectory="tree")
    sdk = client(server, session_id)
    tokenizer = server.state.tokenizers.tokenizer
    server.engine.queue(tokenizer.encode(TOOL_REPLY, add_special_tokens=False))
    messages: list[dict[str, Any]] = [user("What is the weather in Paris?")]
    first = as_message(sdk.chat.completions.create(model="m", messages=messages, tools=[WEATHER_TOOL]))
    tool_calls = first.get("tool_calls") or []
    messages.append(first)
    messages.append({"role": "tool", "tool_call_id": tool_calls[0]["id"], "content": "18 C, sunny"})
    sdk.chat.completions.create(model="m", messages=messages, tools=[WEATHER_TOOL])  # node 1
    retried = as_message(sdk.chat.completions.create(model="m", messages=messages, tools=[WEATHER_TOOL]))  # node 2
    messages.append(retried)
    messages.append(user("And tomorrow?"))
    sdk.chat.completions.create(model="m", messages=messages, tools=[WEATHER_TOOL])  # node 3
    branch = [user("What is the weather in Paris?"), first, user("Never mind: what about Rome?")]
    sdk.chat.completions.create(model="m", messages=branch, tools=[WEATHER_TOOL])  # node 4: a branch below node 0
    return TreeScenario(session_id, tool_node=0, superseded_retry=1, kept_leaves=(3, 4))


def linear_session(server: Server, turns: int = 3) -> str:
    session_id = server.new_session(trajectory="linear")
    sdk = client(server, session_id)
    messages: list[dict[str, Any]] = []
    for index in range(turns):
        messages.append(user(f"question {index}"))
        messages.append(as_message(sdk.chat.completions.create(model="m", messages=messages)))
    return session_id
