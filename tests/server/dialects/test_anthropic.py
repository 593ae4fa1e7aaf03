"""Anthropic Messages on a session, driven by the official anthropic SDK through a real uvicorn server (qwen3,
scripted engine): the same turns, trajectory and samples as chat completions, a real stream, a signed round trip.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
import pytest

from tests.server.conftest import Server, running_server
from tests.server.dialects.support import hang_up_while_sampling, ids_of, samples_of, turns_of
from tito.server.dialects.anthropic import message_body
from tito.server.dialects.signing import RoundTripSigner
from tito.server.sessions.resent_prefix import Settled
from tito.tokenizer_loading import LocalTokenizer

CALL = (
    "<think>\nI need the weather first.\n</think>\n\nLet me check.\n<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris", "units": {"temp": "C", "days": [1, 2]}}}\n'
    "</tool_call><|im_end|>"
)
ANSWER = "<think>\nIt is sunny.\n</think>\n\nPack light clothes.<|im_end|>"
TOOLS = [
    {
        "name": "get_weather",
        "description": "Weather for a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
CHAT_TOOLS = [
    {
        "type": "function",
        "function": {"name": tool["name"], "description": tool["description"], "parameters": tool["input_schema"]},
    }
    for tool in TOOLS
]
QUESTION = "What should I pack for Paris?"
THINKING: Any = {"type": "enabled", "budget_tokens": 1024}
STRICT = "strict"
"""The matching policy under which a re-serialised message is not the stored one (the server's default `harness`
policy accepts re-serialised arguments by itself): the signature is then what keeps the episode one sample."""


def claude(server: Server, session_id: str, retries: int = 0) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=f"{server.url}/sessions/{session_id}", api_key="unused", max_retries=retries)


def chat(server: Server, session_id: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.chat_url(session_id), api_key="unused", max_retries=0)


def blocks(message: anthropic.types.Message) -> list[dict[str, Any]]:
    return [block.model_dump(exclude_none=True) for block in message.content]


def reordered(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What an agent that re-serialises a reply sends back: tool input keys reversed (nested too)."""

    def reverse(value: Any) -> Any:
        return {key: reverse(value[key]) for key in reversed(value)} if isinstance(value, dict) else value

    content = copy.deepcopy(content)
    for block in content:
        if block["type"] == "tool_use":
            block["input"] = reverse(block["input"])
    return content


def tool_loop(server: Server, tokenizer: LocalTokenizer, session_id: str, content_of: Any) -> list[Any]:
    """Two turns: a call (whole reply), then the answer (streamed) after the tool result; `content_of` is what the
    agent sends back of the first reply's content."""
    server.engine.queue(ids_of(tokenizer, CALL), ids_of(tokenizer, ANSWER))
    client = claude(server, session_id)
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    first = client.messages.create(model="m", max_tokens=200, messages=messages, tools=TOOLS, thinking=THINKING)
    call = first.content[-1]
    assert call.type == "tool_use"
    messages.append({"role": "assistant", "content": content_of(blocks(first))})
    messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}]})
    with client.messages.stream(model="m", max_tokens=200, messages=messages, tools=TOOLS, thinking=THINKING) as stream:
        second = stream.get_final_message()
    return [first, second]


def test_a_tool_loop_with_thinking_is_one_sample_equal_to_the_chat_completions_one(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    session_id = server.new_session()
    first, second = tool_loop(server, qwen3_tokenizer, session_id, lambda content: content)
    assert [block.type for block in first.content] == ["thinking", "text", "tool_use"]
    assert first.stop_reason == "tool_use" and second.stop_reason == "end_turn"
    assert first.content[0].thinking == "I need the weather first."
    assert first.content[2].input == {"city": "Paris", "units": {"temp": "C", "days": [1, 2]}}
    assert [block.type for block in second.content] == ["thinking", "text"]
    assert second.content[1].text == "Pack light clothes."

    chat_session = server.new_session()
    server.engine.queue(ids_of(qwen3_tokenizer, CALL), ids_of(qwen3_tokenizer, ANSWER))
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    reply = chat(server, chat_session).chat.completions.create(model="m", messages=messages, tools=CHAT_TOOLS)
    message = reply.choices[0].message.model_dump(exclude_none=True)
    assert message["tool_calls"][0]["id"] == first.content[2].id  # the stored tool-call id, in both dialects
    messages += [message, {"role": "tool", "tool_call_id": first.content[2].id, "content": "sunny"}]
    chat(server, chat_session).chat.completions.create(model="m", messages=messages, tools=CHAT_TOOLS)

    [sample], [chat_sample] = samples_of(server, session_id), samples_of(server, chat_session)
    for key in ("tokens", "loss_mask", "rollout_logprobs", "response_length"):
        assert sample[key] == chat_sample[key], key
    assert first.usage.input_tokens == len(server.engine.requests[-4].prompt_ids)
    assert second.usage.output_tokens == len(ids_of(qwen3_tokenizer, ANSWER))


def test_a_reserialised_tool_input_and_the_resent_thinking_block_keep_the_episode_one_sample(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    session_id = server.new_session(matcher=STRICT)
    tool_loop(server, qwen3_tokenizer, session_id, reordered)
    assert [turn["node_id"] for turn in turns_of(server, session_id)] == [0, 1]
    assert len(samples_of(server, session_id)) == 1


def test_the_session_keeps_translated_messages_as_chat_messages_only_and_a_changed_field_reads_the_body_whole(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    """Once translated, a request's messages are stand-ins in what the session keeps (server.sessions.resent_prefix:
    settle); a resend whose field after the messages changed holds stand-ins no kept translation covers, so it is
    read whole again. Either way the episode stays one sample."""
    session_id = server.new_session()
    server.engine.queue(*(ids_of(qwen3_tokenizer, text) for text in (CALL, CALL, CALL, ANSWER)))
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    for turn in range(4):
        body: dict[str, Any] = {"model": "m", "max_tokens": 200, "messages": messages, "tools": TOOLS}
        if turn >= 2:
            body["temperature"] = 0.5  # after the messages: the bytes after the array differ from turn 2 on
        response = server.http.post(f"/sessions/{session_id}/v1/messages", json=body)
        assert response.status_code == 200, response.text
        kept = server.state.registry.get(session_id).translations["anthropic"][0].request.messages
        assert len(kept) == len(messages) and all(type(message) is Settled for message in kept)
        content = response.json()["content"]
        result = {"type": "tool_result", "tool_use_id": content[-1].get("id"), "content": f"sunny, day {turn}"}
        messages = [*messages, {"role": "assistant", "content": content}, {"role": "user", "content": [result]}]
    assert [turn["node_id"] for turn in turns_of(server, session_id)] == [0, 1, 2, 3]
    [sample] = samples_of(server, session_id)
    assert sample["tokens"][: len(server.engine.requests[-1].prompt_ids)] == list(server.engine.requests[-1].prompt_ids)


def forged(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    content = reordered(content)
    content[0]["signature"] = content[0]["signature"][:-4] + "0000"
    return content


def test_a_forged_signature_is_not_trusted(server: Server, qwen3_tokenizer: LocalTokenizer) -> None:
    session_id = server.new_session(matcher=STRICT)
    with pytest.raises(anthropic.BadRequestError) as refused:
        tool_loop(server, qwen3_tokenizer, session_id, forged)
    assert refused.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert len(turns_of(server, session_id)) == 1  # the linear rules refused the changed message: nothing recorded
    server.engine.replies.clear()


def test_a_signature_from_another_session_is_not_trusted(server: Server, qwen3_tokenizer: LocalTokenizer) -> None:
    other = server.new_session(matcher=STRICT)
    server.engine.queue(ids_of(qwen3_tokenizer, CALL))
    other_first = claude(server, other).messages.create(
        model="m", max_tokens=200, messages=[{"role": "user", "content": QUESTION}], tools=TOOLS
    )
    foreign = other_first.content[0].model_dump()["signature"]
    session_id = server.new_session(matcher=STRICT)

    def with_foreign_signature(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
        content = reordered(content)
        content[0]["signature"] = foreign
        return content

    with pytest.raises(anthropic.BadRequestError):
        tool_loop(server, qwen3_tokenizer, session_id, with_foreign_signature)
    server.engine.replies.clear()


def test_in_a_tree_session_an_untrusted_resend_branches_instead(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    session_id = server.new_session(trajectory="tree", matcher=STRICT)
    tool_loop(server, qwen3_tokenizer, session_id, forged)
    assert len(samples_of(server, session_id)) == 2  # never silently re-tokenised into the first turn's path


def test_a_stream_adds_up_to_the_whole_reply_with_the_same_ids(server: Server, qwen3_tokenizer: LocalTokenizer) -> None:
    server.engine.queue(ids_of(qwen3_tokenizer, CALL), ids_of(qwen3_tokenizer, CALL))
    whole_session, streamed_session = server.new_session(), server.new_session()
    messages: Any = [{"role": "user", "content": QUESTION}]
    whole = claude(server, whole_session).messages.create(model="m", max_tokens=200, messages=messages, tools=TOOLS)
    with claude(server, streamed_session).messages.stream(
        model="m", max_tokens=200, messages=messages, tools=TOOLS
    ) as stream:
        types = [event.type for event in stream]
        streamed = stream.get_final_message()
    signatures = [whole.content[0].model_dump().pop("signature"), streamed.content[0].model_dump().pop("signature")]
    assert all(signature.startswith("tito1.") for signature in signatures)
    unsigned = [[{k: v for k, v in b.items() if k != "signature"} for b in blocks(m)] for m in (whole, streamed)]
    assert unsigned[0] == unsigned[1]
    assert streamed.id == turns_of(server, streamed_session)[0]["response_id"]
    assert (streamed.stop_reason, streamed.usage.output_tokens) == (whole.stop_reason, whole.usage.output_tokens)
    assert streamed.usage.input_tokens == whole.usage.input_tokens
    assert types[0] == "message_start" and types[-1] == "message_stop"
    whole_sample, streamed_sample = samples_of(server, whole_session)[0], samples_of(server, streamed_session)[0]
    assert whole_sample["tokens"] == streamed_sample["tokens"]


def raw_events(server: Server, session_id: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
    url = f"/sessions/{session_id}/v1/messages"
    with server.http.stream("POST", url, json={"max_tokens": 200, "stream": True, **body}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        text = response.read().decode()
    events = []
    for chunk in text.strip().split("\n\n"):
        name, data = chunk.split("\n")
        events.append((name.removeprefix("event: "), orjson.loads(data.removeprefix("data: "))))
    return events


def test_the_stream_is_anthropics_event_sequence(server: Server, qwen3_tokenizer: LocalTokenizer) -> None:
    server.engine.queue(ids_of(qwen3_tokenizer, CALL))
    session_id = server.new_session()
    events = raw_events(server, session_id, {"messages": [{"role": "user", "content": QUESTION}], "tools": TOOLS})
    assert all(name == data["type"] for name, data in events)
    shape = [
        (data["type"], data.get("delta", {}).get("type") or data.get("content_block", {}).get("type"))
        for _, data in events
    ]
    compact = [step for index, step in enumerate(shape) if index == 0 or step != shape[index - 1]]
    assert compact == [
        ("message_start", None),
        ("content_block_start", "thinking"),
        ("content_block_delta", "thinking_delta"),
        ("content_block_delta", "signature_delta"),
        ("content_block_stop", None),
        ("content_block_start", "text"),
        ("content_block_delta", "text_delta"),
        ("content_block_stop", None),
        ("content_block_start", "tool_use"),
        ("content_block_delta", "input_json_delta"),
        ("content_block_stop", None),
        ("message_delta", None),
        ("message_stop", None),
    ]
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert [data["index"] for _, data in events if data["type"] == "content_block_start"] == [0, 1, 2]


def test_the_first_events_leave_while_the_engine_samples(server: Server, qwen3_tokenizer: LocalTokenizer) -> None:
    server.engine.queue(ids_of(qwen3_tokenizer, ANSWER))
    server.engine.delay = 0.05  # per chunk: the engine samples slowly
    session_id = server.new_session()
    messages: Any = [{"role": "user", "content": QUESTION}]
    with claude(server, session_id).messages.stream(model="m", max_tokens=200, messages=messages) as stream:
        for event in stream:
            if event.type == "content_block_delta":
                break
        assert turns_of(server, session_id) == []  # a delta arrived while the engine was still sampling


def test_a_client_that_disconnects_mid_stream_commits_nothing(server: Server, qwen3_tokenizer: LocalTokenizer) -> None:
    server.engine.queue(ids_of(qwen3_tokenizer, ANSWER))
    server.engine.delay = 0.3  # per chunk; cut short by the abort
    session_id = server.new_session()
    body = {"messages": [{"role": "user", "content": QUESTION}], "max_tokens": 200, "stream": True}
    hang_up_while_sampling(server, f"/sessions/{session_id}/v1/messages", body, "content_block_delta")
    assert turns_of(server, session_id) == []


def test_an_engine_error_mid_stream_is_raised_by_the_sdk_and_commits_nothing(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    server.engine.queue(ids_of(qwen3_tokenizer, ANSWER))
    server.engine.fault = "break"
    session_id = server.new_session()
    messages: Any = [{"role": "user", "content": QUESTION}]
    client = claude(server, session_id)
    with (
        pytest.raises(anthropic.APIStatusError, match="mid-stream"),
        client.messages.stream(model="m", max_tokens=200, messages=messages) as stream,
    ):
        stream.get_final_message()
    assert turns_of(server, session_id) == []


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}, "messages[0].content[0].type"),
        (
            {"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "web_search_20250305", "name": "w"}]},
            "tools[0].type",
        ),
        ({"messages": [{"role": "user", "content": "hi"}], "mcp_servers": [{}]}, "mcp_servers"),
        ({"messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": "hi"}], "thinking": {"type": "sometimes"}}, "thinking.type"),
    ],
)
def test_unsupported_input_is_an_anthropic_shaped_400_naming_the_field(
    server: Server, body: dict[str, Any], named: str
) -> None:
    session_id = server.new_session()
    response = server.http.post(f"/sessions/{session_id}/v1/messages", json={"max_tokens": 10, **body})
    assert response.status_code == 400
    error = response.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert named in error["error"]["message"]
    assert turns_of(server, session_id) == []


def test_a_missing_max_tokens_and_an_unknown_session_are_anthropic_errors(server: Server) -> None:
    session_id = server.new_session()
    response = server.http.post(
        f"/sessions/{session_id}/v1/messages", json={"messages": [{"role": "user", "content": "hi"}]}
    )
    assert response.status_code == 400 and "max_tokens" in response.json()["error"]["message"]
    with pytest.raises(anthropic.NotFoundError) as missing:
        claude(server, "no-such-session").messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert missing.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]


def test_count_tokens_is_the_prompt_the_next_turn_runs_on(server: Server, qwen3_tokenizer: LocalTokenizer) -> None:
    session_id = server.new_session()
    server.engine.queue(ids_of(qwen3_tokenizer, CALL), ids_of(qwen3_tokenizer, ANSWER))
    client = claude(server, session_id)
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    first = client.messages.create(model="m", max_tokens=200, messages=messages, tools=TOOLS)
    messages.append({"role": "assistant", "content": blocks(first)})
    result = {
        "type": "tool_result",
        "tool_use_id": first.content[-1].id,
        "content": [{"type": "text", "text": "sunny"}],
    }
    messages.append({"role": "user", "content": [result]})
    counted = client.messages.count_tokens(model="m", messages=messages, tools=TOOLS)
    client.messages.create(model="m", max_tokens=200, messages=messages, tools=TOOLS)
    assert counted.input_tokens == len(server.engine.requests[-1].prompt_ids)
    other = client.messages.count_tokens(model="m", messages=[{"role": "user", "content": "something else"}])
    assert 0 < other.input_tokens < counted.input_tokens  # a conversation the session cannot extend: rendered whole


def test_count_tokens_counts_no_resend_in_the_session_or_the_metrics(server: Server) -> None:
    """count_tokens asks what a turn would cost; it is no resend (neither an extension nor a refused one)."""
    session_id = server.new_session()
    client = claude(server, session_id)
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    first = client.messages.create(model="m", max_tokens=50, messages=messages)
    counted_before = resend_metrics(server)
    extended = [*messages, {"role": "assistant", "content": blocks(first)}, {"role": "user", "content": "and?"}]
    client.messages.count_tokens(model="m", messages=extended)
    client.messages.count_tokens(model="m", messages=[{"role": "user", "content": "something else"}])
    resends = server.http.get(f"/sessions/{session_id}").json()["resends"]
    assert resends == {"matched_exactly": 0, "matched_by_policy": 0, "branched": 0, "failed": 0, "rules": {}}
    assert resend_metrics(server) == counted_before


def resend_metrics(server: Server) -> list[str]:
    return [line for line in server.http.get("/metrics").text.splitlines() if line.startswith("tito_resends_total")]


def test_an_sdk_retry_returns_the_committed_message_without_sampling(server: Server) -> None:
    session_id = server.new_session()
    body = {"max_tokens": 50, "messages": [{"role": "user", "content": QUESTION}]}
    url = f"/sessions/{session_id}/v1/messages"
    first = server.http.post(url, json=body).json()
    calls = len(server.engine.requests)
    again = server.http.post(url, json=body, headers={"x-stainless-retry-count": "1"}).json()
    assert len(server.engine.requests) == calls and again == first
    assert len(turns_of(server, session_id)) == 1


def test_the_dialect_is_recorded_in_the_turn_metadata_only(server: Server) -> None:
    session_id = server.new_session()
    claude(server, session_id).messages.create(model="m", max_tokens=20, messages=[{"role": "user", "content": "hi"}])
    turn = server.state.registry.get(session_id).trajectory.store.get(0).turn
    assert turn.metadata["dialect"] == "anthropic" and turn.response_id.startswith("msg_")


def test_a_matched_stop_sequence_is_the_stop_reason_and_names_the_sequence(server: Server) -> None:
    session_id = server.new_session()
    claude(server, session_id).messages.create(model="m", max_tokens=500, messages=[{"role": "user", "content": "hi"}])
    turn = server.state.registry.get(session_id).trajectory.store.get(0).turn
    assert message_body(turn, "m", RoundTripSigner(b"k" * 32))["stop_reason"] == "end_turn"
    stopped = replace(turn, finish_reason="stop", metadata={**turn.metadata, "stop_string": "END"})
    body = message_body(stopped, "m", RoundTripSigner(b"k" * 32))
    assert (body["stop_reason"], body["stop_sequence"]) == ("stop_sequence", "END")
    cut = message_body(replace(turn, finish_reason="length"), "m", RoundTripSigner(b"k" * 32))
    assert cut["stop_reason"] == "max_tokens"


def test_a_journaled_servers_signatures_survive_a_restart(qwen3_tokenizer: LocalTokenizer, tmp_path: Path) -> None:
    with running_server(qwen3_tokenizer, journal=tmp_path) as before:
        session_id = before.new_session(matcher=STRICT)
        before.engine.queue(ids_of(qwen3_tokenizer, CALL))
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        first = claude(before, session_id).messages.create(model="m", max_tokens=200, messages=messages, tools=TOOLS)
    with running_server(qwen3_tokenizer, journal=tmp_path) as after:
        after.engine.queue(ids_of(qwen3_tokenizer, ANSWER))
        result = {"type": "tool_result", "tool_use_id": first.content[-1].id, "content": "sunny"}  # type: ignore[union-attr]
        messages += [{"role": "assistant", "content": reordered(blocks(first))}, {"role": "user", "content": [result]}]
        claude(after, session_id).messages.create(model="m", max_tokens=200, messages=messages, tools=TOOLS)
        assert len(turns_of(after, session_id)) == 2 and len(samples_of(after, session_id)) == 1


MID_CONVERSATION = [
    {"role": "user", "content": QUESTION},
    {"role": "system", "content": [{"type": "text", "text": "Available agent types: general-purpose"}]},
]


def test_a_system_message_inside_messages_is_rendered_at_its_place(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    """Claude Code's newer models send `messages[1] = {"role": "system", ...}` (beta mid-conversation-system)."""
    session_id = server.new_session()
    reply = claude(server, session_id).messages.create(
        model="claude-opus-4-8", max_tokens=50, system="You are a coding agent.", messages=MID_CONVERSATION
    )
    assert reply.stop_reason == "end_turn"
    prompt = qwen3_tokenizer.decode(server.engine.requests[-1].prompt_ids)
    at = [prompt.index(text) for text in ("You are a coding agent.", QUESTION, "Available agent types")]
    assert at == sorted(at) and "<|im_start|>system\nAvailable agent types: general-purpose<|im_end|>" in prompt
    turn = server.state.registry.get(session_id).trajectory.store.get(0).turn
    assert [message["role"] for message in turn.request_messages] == ["system", "user", "system"]


def test_a_session_that_refuses_system_appends_says_the_role_is_not_supported(server: Server) -> None:
    """The words Claude Code's fallback looks for ("not supported" with "role 'system'"), so it resends without
    mid-conversation system messages."""
    session_id = server.new_session(allowed_append_roles=["user", "tool"])
    response = server.http.post(
        f"/sessions/{session_id}/v1/messages", json={"max_tokens": 10, "messages": MID_CONVERSATION}
    )
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert "role 'system' is not supported" in message and "allowed append roles: user, tool" in message
    assert turns_of(server, session_id) == []


@pytest.mark.parametrize("stream", [False, True])
def test_replies_name_the_model_the_request_asked_for(server: Server, stream: bool) -> None:
    """With `"model": ""` Claude Code drops its thinking blocks on resend; the asked model is echoed in every
    dialect."""
    session_id = server.new_session()
    hi = [{"role": "user", "content": "hi"}]
    if stream:
        with claude(server, session_id).messages.stream(model="claude-opus-4-8", max_tokens=20, messages=hi) as events:
            assert events.get_final_message().model == "claude-opus-4-8"
        chunks = chat(server, server.new_session()).chat.completions.create(model="qwen-x", messages=hi, stream=True)  # type: ignore[arg-type]
        assert {chunk.model for chunk in chunks} == {"qwen-x"}
    else:
        reply = claude(server, session_id).messages.create(model="claude-opus-4-8", max_tokens=20, messages=hi)
        assert reply.model == "claude-opus-4-8"
        completion = chat(server, server.new_session()).chat.completions.create(model="qwen-x", messages=hi)  # type: ignore[arg-type]
        assert completion.model == "qwen-x"
    nameless = server.http.post(
        f"/sessions/{server.new_session()}/v1/messages", json={"max_tokens": 20, "messages": hi}
    )
    assert nameless.json()["model"] == server.state.model_name  # none asked: the served model's name


def test_head_on_the_session_base_url_is_the_probe_claude_code_sends(server: Server) -> None:
    session_id = server.new_session()
    assert server.http.head(f"/sessions/{session_id}").status_code == 200
    assert server.http.head(f"/sessions/{session_id}/v1").status_code == 200
    assert server.http.head(f"/sessions/{session_id}/api/hello").status_code == 200
    assert server.http.head("/sessions/no-such-session").status_code == 404


TITLE_FORMAT = {
    "type": "json_schema",
    "schema": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
}


def test_structured_output_is_the_engines_constrained_decoding_and_is_recorded(server: Server) -> None:
    """Claude Code's title request asks for `output_config.format` json_schema: the engine gets the schema."""
    inner = server.engine.inner
    capable, inner._info = inner._info, replace(inner._info, structured_output=True)
    try:
        session_id = server.new_session()
        body = {
            "max_tokens": 50,
            "messages": [{"role": "user", "content": "hi"}],
            "output_config": {"format": TITLE_FORMAT},
        }
        response = server.http.post(f"/sessions/{session_id}/v1/messages", json=body)
        assert response.status_code == 200, response.text
        schema = server.engine.requests[-1].sampling.json_schema
        assert schema is not None and orjson.loads(schema) == TITLE_FORMAT["schema"]
        turn = server.state.registry.get(session_id).trajectory.store.get(0).turn
        assert orjson.loads(turn.metadata["sampling"]["json_schema"]) == TITLE_FORMAT["schema"]
        chat_body = {"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_object"}}
        assert (
            server.http.post(
                server.chat_url(server.new_session())[len(server.url) :] + "/chat/completions", json=chat_body
            ).status_code
            == 200
        )
        assert server.engine.requests[-1].sampling.json_schema == '{"type":"object"}'
    finally:
        inner._info = capable


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (
            "/v1/messages",
            {
                "max_tokens": 9,
                "messages": [{"role": "user", "content": "hi"}],
                "output_config": {"format": TITLE_FORMAT},
            },
        ),
        (
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": "hi"}],
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "t", "schema": TITLE_FORMAT["schema"]},
                },
            },
        ),
    ],
)
def test_structured_output_on_an_engine_that_cannot_constrain_decoding_is_a_400(
    server: Server, path: str, body: dict[str, Any]
) -> None:
    session_id = server.new_session()
    response = server.http.post(f"/sessions/{session_id}{path}", json=body)
    assert response.status_code == 400, response.text
    assert "structured output (json_schema) needs constrained decoding" in response.text and "instant" in response.text
    assert turns_of(server, session_id) == []


def test_a_malformed_output_format_names_the_field(server: Server) -> None:
    session_id = server.new_session()
    body = {
        "max_tokens": 9,
        "messages": [{"role": "user", "content": "hi"}],
        "output_config": {"format": {"type": "xml"}},
    }
    response = server.http.post(f"/sessions/{session_id}/v1/messages", json=body)
    assert response.status_code == 400 and "output_config.format.type" in response.json()["error"]["message"]
