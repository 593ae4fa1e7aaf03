"""Every dialect on the families agents run, against the in-test SGLang server (its real `/generate` wire format):
a two-turn tool loop with thinking on (the call as a whole reply, the answer streamed, the call sent back
re-serialised) is one sample, equal bit for bit to the chat-completions sample of the same conversation."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from tests.engines.fake_engine import FakeServer
from tests.engines.servers import start_fake
from tests.parsing.cases import TOOLS, get_case, render_completion
from tito.server import create_app
from tito.server.commands.launch import build_state
from tito.server.commands.running import serve_in_thread
from tito.server.state import ServerOptions

pytestmark = pytest.mark.usefixtures("shared_builtin_tokenizers")  # tests.conftest

FAMILIES = ["qwen3", "qwen35", "glm47", "deepseekv4", "minimax_m27"]
QUESTION = "What should I pack for Paris?"
ARGUMENTS = {"city": "Paris", "days": 2, "options": {"units": "C", "tags": ["rain", "wind"]}}
CALL: dict[str, Any] = {
    "role": "assistant",
    "reasoning_content": "I need the weather first.",
    "content": "Let me check.",
    "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(ARGUMENTS)}}
    ],
}
ANSWER: dict[str, Any] = {"role": "assistant", "reasoning_content": "It is mild.", "content": "Pack a light coat."}
CLAUDE_TOOLS: Any = [
    {
        "name": t["function"]["name"],
        "description": t["function"]["description"],
        "input_schema": t["function"]["parameters"],
    }
    for t in TOOLS
]
RESPONSES_TOOLS: Any = [{"type": "function", **tool["function"]} for tool in TOOLS]


@pytest.fixture(scope="module")
def sglang() -> Iterator[FakeServer]:
    server, thread = start_fake("sglang")
    yield server
    thread.stop()


class Tito:
    """A tito server for one family in front of the in-test SGLang server, which samples `script` in turn."""

    def __init__(self, url: str, engine: FakeServer, family: str) -> None:
        self.url = url
        self.engine = engine
        case = get_case(family)
        self.scripts = [render_completion(case, message).completion_ids for message in (CALL, ANSWER)]
        self.dropped = case.family.junction.trailing_ids_dropped
        switch = case.family.thinking_kwarg
        self.chat_kwargs = {switch: True} if switch else None

    def session(self) -> str:
        """A session under the `strict` matcher: a re-serialised call is then the stored one only through its
        signed round-trip value (the default `harness` policy would accept it by itself)."""
        http = openai.OpenAI(base_url=self.url, api_key="-")
        return str(http.post("/sessions", body={"matcher": "strict"}, cast_to=dict)["session_id"])

    def script(self, turn: int) -> None:
        self.engine.behaviour.reply_ids = list(self.scripts[turn])

    def sample(self, session_id: str) -> dict[str, Any]:
        samples = openai.OpenAI(base_url=self.url, api_key="-").post(f"/sessions/{session_id}/samples", cast_to=dict)
        assert len(samples["samples"]) == 1, "the episode split into several samples"
        return dict(samples["samples"][0])


@pytest.fixture
def tito(request: pytest.FixtureRequest, sglang: FakeServer) -> Iterator[Tito]:
    sglang.reset()
    family = request.param
    state = build_state(ServerOptions(family=family), engine="sglang", engine_url=sglang.url)
    with serve_in_thread(create_app(state)) as url:
        yield Tito(url, sglang, family)


def chat_sample(tito: Tito) -> tuple[dict[str, Any], str]:
    """The chat-completions sample of the same conversation, and the stored tool-call id."""
    session_id = tito.session()
    client = openai.OpenAI(base_url=f"{tito.url}/sessions/{session_id}/v1", api_key="-", max_retries=0)
    extra = {"chat_template_kwargs": tito.chat_kwargs} if tito.chat_kwargs else None
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    tito.script(0)
    reply = client.chat.completions.create(model="m", messages=messages, tools=TOOLS, extra_body=extra)
    message = reply.choices[0].message.model_dump(exclude_none=True)
    call_id = message["tool_calls"][0]["id"]
    messages += [message, {"role": "tool", "tool_call_id": call_id, "content": "mild, 14 C"}]
    tito.script(1)
    client.chat.completions.create(model="m", messages=messages, tools=TOOLS, extra_body=extra)
    return tito.sample(session_id), call_id


def reversed_keys(value: Any) -> Any:
    return {key: reversed_keys(value[key]) for key in reversed(value)} if isinstance(value, dict) else value


def anthropic_sample(tito: Tito) -> tuple[dict[str, Any], str]:
    session_id = tito.session()
    client = anthropic.Anthropic(base_url=f"{tito.url}/sessions/{session_id}", api_key="-", max_retries=0)
    thinking: Any = {"type": "enabled", "budget_tokens": 1024}
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    tito.script(0)
    first = client.messages.create(model="m", max_tokens=500, messages=messages, tools=CLAUDE_TOOLS, thinking=thinking)
    content = [block.model_dump(exclude_none=True) for block in first.content]
    assert [block["type"] for block in content] == ["thinking", "text", "tool_use"]
    assert content[0]["thinking"] == CALL["reasoning_content"] and content[2]["input"] == ARGUMENTS
    resent = copy.deepcopy(content)
    resent[2]["input"] = reversed_keys(resent[2]["input"])
    result = {"type": "tool_result", "tool_use_id": content[2]["id"], "content": "mild, 14 C"}
    messages += [{"role": "assistant", "content": resent}, {"role": "user", "content": [result]}]
    tito.script(1)
    with client.messages.stream(
        model="m", max_tokens=500, messages=messages, tools=CLAUDE_TOOLS, thinking=thinking
    ) as stream:
        second = stream.get_final_message()
    assert [(block.type, getattr(block, "text", None)) for block in second.content][-1] == ("text", ANSWER["content"])
    return tito.sample(session_id), content[2]["id"]


def responses_sample(tito: Tito) -> tuple[dict[str, Any], str]:
    session_id = tito.session()
    responses = openai.OpenAI(base_url=f"{tito.url}/sessions/{session_id}/v1", api_key="-", max_retries=0).responses
    reasoning: Any = {"effort": "high"}
    items: list[Any] = [{"role": "user", "content": QUESTION}]
    tito.script(0)
    first = responses.create(model="m", input=items, tools=RESPONSES_TOOLS, reasoning=reasoning, store=False)
    output = [item.model_dump(exclude_none=True) for item in first.output]
    assert [item["type"] for item in output] == ["reasoning", "message", "function_call"]
    assert json.loads(output[2]["arguments"]) == ARGUMENTS
    resent = copy.deepcopy(output)
    resent[2]["arguments"] = json.dumps(reversed_keys(ARGUMENTS), separators=(",", ":"))
    items += [*resent, {"type": "function_call_output", "call_id": output[2]["call_id"], "output": "mild, 14 C"}]
    tito.script(1)
    with responses.stream(model="m", input=items, tools=RESPONSES_TOOLS, reasoning=reasoning, store=False) as stream:
        second = stream.get_final_response()
    assert second.output_text == ANSWER["content"]
    return tito.sample(session_id), output[2]["call_id"]


@pytest.mark.parametrize("tito", FAMILIES, indirect=True)
@pytest.mark.parametrize("dialect", ["anthropic", "responses"])
def test_a_dialect_tool_loop_is_the_chat_completions_sample_bit_for_bit(tito: Tito, dialect: str) -> None:
    sample, call_id = (anthropic_sample if dialect == "anthropic" else responses_sample)(tito)
    reference, chat_call_id = chat_sample(tito)
    assert call_id == chat_call_id  # the dialect's tool id is the stored tool-call id
    for key in ("tokens", "loss_mask", "rollout_logprobs", "response_length"):
        assert sample[key] == reference[key], key
    sampled = len(tito.scripts[0]) + len(tito.scripts[1])
    assert sum(sample["loss_mask"]) == sampled - tito.dropped  # both turns' sampled ids, the junction's drop aside


@pytest.mark.parametrize("family", ["qwen35", "deepseekv4"])
def test_the_dialects_thinking_settings_are_the_familys_thinking_switch(family: str) -> None:
    state = build_state(ServerOptions(family=family), engine="instant")
    switch = state.tokenizers.family.thinking_kwarg
    assert switch is not None
    question: Any = [{"role": "user", "content": QUESTION}]
    with serve_in_thread(create_app(state)) as url:
        http = openai.OpenAI(base_url=url, api_key="-")
        recorded: list[Any] = []
        settings = [("anthropic", False), ("anthropic", True), ("responses", False), ("responses", True)]
        for dialect, setting in [*settings, ("responses", None)]:
            session_id = str(http.post("/sessions", cast_to=dict)["session_id"])
            if dialect == "anthropic":
                claude = anthropic.Anthropic(base_url=f"{url}/sessions/{session_id}", api_key="-", max_retries=0)
                thinking: Any = {"type": "enabled", "budget_tokens": 100} if setting else {"type": "disabled"}
                claude.messages.create(model="m", max_tokens=20, messages=question, thinking=thinking)
            else:
                responses = openai.OpenAI(base_url=f"{url}/sessions/{session_id}/v1", api_key="-").responses
                effort: Any = {"summary": "auto"} if setting is None else {"effort": "high" if setting else "none"}
                responses.create(model="m", input=question, reasoning=effort)
            turn = state.registry.get(session_id).trajectory.store.get(0).turn
            recorded.append(turn.metadata["chat_template_kwargs"][switch])
    assert recorded == [False, True, False, True, True]  # a reasoning object without an effort (Codex's): on
