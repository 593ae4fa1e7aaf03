"""Generated conversations for the DeepSeek encoder tests, and the published encoders they are compared with.

Conversations are well-formed agent sessions: an optional system prompt, user turns (sometimes
several in a row), tool-calling assistants with parallel calls answered in any order, mid-session
system notes before a user turn, a user turn right after tool results. The published encoders come
from PyPI llm-router-utils (test dependency only; nothing of them is used by tito).
"""

from __future__ import annotations

import copy
import importlib
import json
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

Message = dict[str, Any]
Encode = Callable[[list[Message], Any, bool, dict[str, Any]], str]

PARITY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""Hypothesis settings of the byte-parity tests against the published encoders."""

_REFERENCE_PACKAGE = "llm_router_utils.sglang.srt.entrypoints.openai"

KEEP = {"drop_thinking": False}
DROP = {"drop_thinking": True}


def reference_encoder(stem: str) -> ModuleType:
    """The published encoder `encoding_<stem>`, or a skip that says how to install it."""
    try:
        return importlib.import_module(f"{_REFERENCE_PACKAGE}.encoding_{stem}")
    except ImportError:
        pytest.skip(f"reference encoder {stem} needs PyPI llm-router-utils: pip install --no-deps llm-router-utils")


def reference_render(
    module: ModuleType, messages: list[Message], tools: list[Message] | None, thinking: bool, drop_thinking: bool
) -> str:
    """The reference prompt as SGLang's serving layer builds it: tools on a leading (maybe empty) system message."""
    placed = copy.deepcopy(messages)
    if not placed or placed[0]["role"] != "system":
        placed.insert(0, {"role": "system", "content": ""})
    if tools:
        placed[0]["tools"] = copy.deepcopy(tools)
    mode = "thinking" if thinking else "chat"
    return str(module.encode_messages(placed, thinking_mode=mode, drop_thinking=drop_thinking))


def assert_encoding_leaves_input_alone(encode: Encode, messages: list[Message], tools: Any, thinking: bool) -> None:
    """Encoding (pinned kwargs, generation prompt due) must not mutate the caller's messages or tools."""
    before = copy.deepcopy((messages, tools))
    encode(messages, tools, True, {**KEEP, "thinking": thinking})
    assert (messages, tools) == before


# Text that exercises escaping and tokenization: quotes, braces, markup-like text, newlines, non-ASCII.
_SNIPPETS = ["", "ok", 'say "hi"', "{json: [1, 2]}", "<b>x</b>", "line\nbreak", "Zürich 東京 🌦️", "  spaced  ", "\n"]
texts = st.one_of(st.sampled_from(_SNIPPETS), st.text(st.characters(exclude_categories=("Cs",)), max_size=24))
nonempty_texts = texts.filter(bool)

_json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(allow_nan=False, allow_infinity=False), texts
)
json_values = st.recursive(
    _json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)),
    max_leaves=6,
)

TOOLS: list[Message] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    },
    {"type": "function", "function": {"name": "search", "description": "Search the web: «quoted» text."}},
]
tool_lists = st.one_of(st.none(), st.just(TOOLS[:1]), st.just(TOOLS))


@st.composite
def tool_calls(draw: st.DrawFn, prefix: str) -> list[Message]:
    """1-3 parallel calls; arguments an object or the JSON text a model wrote (with its own spacing)."""
    calls = []
    for k in range(draw(st.integers(1, 3))):
        arguments: Any = draw(st.dictionaries(st.sampled_from(["city", "query", "limit", "x y"]), json_values))
        if draw(st.booleans()):
            arguments = json.dumps(arguments, ensure_ascii=draw(st.booleans()), separators=(",", ":"))
        name = draw(st.sampled_from(["get_weather", "search"]))
        calls.append({"id": f"{prefix}_{k}", "type": "function", "function": {"name": name, "arguments": arguments}})
    return calls


def assistant(content: str, reasoning: str | None, calls: list[Message] | None = None) -> Message:
    message: Message = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = calls
    return message


@st.composite
def conversations(
    draw: st.DrawFn, one_turn: bool = False, reasoning: st.SearchStrategy[str] = nonempty_texts
) -> list[Message]:
    """A well-formed session; it may end with an assistant, a user turn or a complete set of tool results."""
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(texts)})
    turns = 1 if one_turn else draw(st.integers(1, 4))
    for turn in range(turns):
        if turn and draw(st.integers(0, 3)) == 0:
            messages.append({"role": "system", "content": draw(texts)})
        for _ in range(draw(st.integers(1, 2))):
            messages.append({"role": "user", "content": draw(texts)})
        for step in range(draw(st.integers(0, 2))):
            calls = draw(tool_calls(f"call_{turn}_{step}"))
            messages.append(assistant(draw(texts), draw(st.one_of(st.none(), reasoning)), calls))
            for call in draw(st.permutations(calls)):
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": draw(texts)})
        tool_results_then_user = messages[-1]["role"] == "tool" and turn < turns - 1 and draw(st.booleans())
        if not tool_results_then_user:
            messages.append(assistant(draw(texts), draw(reasoning)))
    ends = [i for i, m in enumerate(messages) if _may_end(messages, i)]
    cut = draw(st.sampled_from(ends))
    return messages[: cut + 1]


def _may_end(messages: list[Message], index: int) -> bool:
    """A conversation may stop after a user turn, an assistant, or the last of a set of tool results."""
    role = messages[index]["role"]
    if role == "tool":
        return index + 1 == len(messages) or messages[index + 1]["role"] != "tool"
    return role in ("user", "assistant")


def generation_prompt_due(messages: list[Message]) -> bool:
    """What the reference encoders do: they write the assistant opener after a trailing user or tool results."""
    return bool(messages) and messages[-1]["role"] in ("user", "tool")


@st.composite
def appended_messages(draw: st.DrawFn, last_assistant: Message, thinking: bool) -> list[Message]:
    """1-4 messages of any append role: tool results (for the last assistant's calls, or unknown ids), user
    turns, system notes, injected assistants (with or without reasoning and tool calls)."""
    roles = draw(st.lists(st.sampled_from(["tool", "user", "system", "assistant"]), min_size=1, max_size=4))
    call_ids = [call["id"] for call in last_assistant.get("tool_calls") or []] + ["unknown_id"]
    new: list[Message] = []
    for i, role in enumerate(roles):
        if role == "tool":
            new.append({"role": "tool", "tool_call_id": draw(st.sampled_from(call_ids)), "content": f"result {i}"})
        elif role == "assistant":
            calls = draw(tool_calls(f"injected_{i}")) if draw(st.booleans()) else None
            new.append(assistant(f"injected {i}", draw(st.one_of(st.none(), texts)), calls))
            call_ids = [call["id"] for call in calls or []] + ["unknown_id"]
        else:
            new.append({"role": role, "content": f"{role} note {i}"})
    return new


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """A stored conversation: a generated session cut right after an assistant."""
    messages = draw(conversations(reasoning=texts))
    cuts = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if not cuts:
        messages.append(assistant(draw(texts), draw(texts)))
        return messages
    return messages[: draw(st.sampled_from(cuts)) + 1]
