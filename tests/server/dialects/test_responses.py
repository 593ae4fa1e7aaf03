"""OpenAI Responses on a session, driven by the official openai SDK (`responses.create`, `responses.stream`)
through a real uvicorn server (qwen3, scripted engine): the same turns and samples as chat completions, a real
stream, a signed round trip, and a session that mixes all three dialects.
"""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import anthropic
import openai
import orjson
import pytest

from tests.server.conftest import Server
from tests.server.dialects.support import hang_up_while_sampling, ids_of, samples_of, turns_of
from tests.server.dialects.test_anthropic import ANSWER, CALL, CHAT_TOOLS, QUESTION, STRICT
from tito.families import get_family
from tito.server.dialects import responses as edge
from tito.server.dialects.responses_stream import ResponsesStreamEncoder
from tito.server.dialects.signing import RoundTripSigner
from tito.tokenizer_loading import LocalTokenizer

TOOLS: Any = [{"type": "function", **tool["function"]} for tool in CHAT_TOOLS]
REASONING: Any = {"effort": "high"}


def client(server: Server, session_id: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.chat_url(session_id), api_key="unused", max_retries=0)


def items_of(response: Any) -> list[dict[str, Any]]:
    return [item.model_dump(exclude_none=True) for item in response.output]


def resent(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What Codex sends back of a reply's items: re-serialised arguments (other key order, no spaces)."""
    out = []
    for item in items:
        item = {key: value for key, value in item.items() if key not in ("status",)}
        if item["type"] == "function_call":
            arguments = json.loads(item["arguments"])
            item["arguments"] = json.dumps(dict(reversed(list(arguments.items()))), separators=(",", ":"))
        if item["type"] == "message":
            item["content"] = [{"type": "output_text", "text": part["text"]} for part in item["content"]]
        out.append(item)
    return out


def tool_loop(server: Server, tokenizer: LocalTokenizer, session_id: str, resend: Any) -> list[Any]:
    """A call (whole reply), then the answer (streamed) after the function output; `resend` maps the first
    reply's items to what the agent sends back."""
    server.engine.queue(ids_of(tokenizer, CALL), ids_of(tokenizer, ANSWER))
    responses = client(server, session_id).responses
    items: list[Any] = [{"role": "user", "content": QUESTION}]
    first = responses.create(model="m", input=items, tools=TOOLS, reasoning=REASONING, store=False)
    call = first.output[-1]
    assert call.type == "function_call"
    items += [*resend(items_of(first)), {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}]
    with responses.stream(model="m", input=items, tools=TOOLS, reasoning=REASONING, store=False) as stream:
        second = stream.get_final_response()
    return [first, second]


def test_a_tool_loop_with_reasoning_is_one_sample_equal_to_the_chat_completions_one(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    session_id = server.new_session()
    first, second = tool_loop(server, qwen3_tokenizer, session_id, lambda items: items)
    assert [item.type for item in first.output] == ["reasoning", "message", "function_call"]
    assert first.output[0].content[0].text == "I need the weather first."
    assert json.loads(first.output[2].arguments) == {"city": "Paris", "units": {"temp": "C", "days": [1, 2]}}
    assert second.output_text == "Pack light clothes." and second.status == "completed"

    chat_session = server.new_session()
    server.engine.queue(ids_of(qwen3_tokenizer, CALL), ids_of(qwen3_tokenizer, ANSWER))
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    reply = client(server, chat_session).chat.completions.create(model="m", messages=messages, tools=CHAT_TOOLS)
    message = reply.choices[0].message.model_dump(exclude_none=True)
    assert message["tool_calls"][0]["id"] == first.output[2].call_id
    messages += [message, {"role": "tool", "tool_call_id": first.output[2].call_id, "content": "sunny"}]
    client(server, chat_session).chat.completions.create(model="m", messages=messages, tools=CHAT_TOOLS)

    [sample], [chat_sample] = samples_of(server, session_id), samples_of(server, chat_session)
    for key in ("tokens", "loss_mask", "rollout_logprobs", "response_length"):
        assert sample[key] == chat_sample[key], key
    assert first.usage is not None and first.usage.input_tokens == len(server.engine.requests[-4].prompt_ids)


def test_reserialised_arguments_and_the_resent_reasoning_keep_the_episode_one_sample(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    session_id = server.new_session(matcher=STRICT)
    tool_loop(server, qwen3_tokenizer, session_id, resent)
    assert len(turns_of(server, session_id)) == 2 and len(samples_of(server, session_id)) == 1


def test_reasoning_resent_without_its_text_is_matched_by_its_encrypted_content(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    def summary_only(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        items = resent(items)
        items[0] = {key: items[0][key] for key in ("type", "id", "summary", "encrypted_content")}
        return items

    session_id = server.new_session(matcher=STRICT)
    tool_loop(server, qwen3_tokenizer, session_id, summary_only)
    assert len(samples_of(server, session_id)) == 1


def test_a_forged_encrypted_content_is_not_trusted(server: Server, qwen3_tokenizer: LocalTokenizer) -> None:
    def forged(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        items = resent(items)
        items[0]["encrypted_content"] = items[0]["encrypted_content"][:-4] + "0000"
        return items

    session_id = server.new_session(matcher=STRICT)
    with pytest.raises(openai.BadRequestError):
        tool_loop(server, qwen3_tokenizer, session_id, forged)
    assert len(turns_of(server, session_id)) == 1
    server.engine.replies.clear()


def test_a_stream_adds_up_to_the_whole_reply_with_the_same_ids(server: Server, qwen3_tokenizer: LocalTokenizer) -> None:
    server.engine.queue(ids_of(qwen3_tokenizer, CALL), ids_of(qwen3_tokenizer, CALL))
    whole_session, streamed_session = server.new_session(), server.new_session()
    whole = client(server, whole_session).responses.create(model="m", input=QUESTION, tools=TOOLS)
    with client(server, streamed_session).responses.stream(model="m", input=QUESTION, tools=TOOLS) as stream:
        types = [event.type for event in stream]
        streamed = stream.get_final_response()

    def comparable(response: Any) -> list[dict[str, Any]]:
        items = items_of(response)
        for item in items:
            item.pop("id"), item.pop("encrypted_content", None)
        return items

    assert comparable(whole) == comparable(streamed)
    assert streamed.id == turns_of(server, streamed_session)[0]["response_id"]
    assert [item.id.rsplit("_", 1)[1] for item in streamed.output] == ["0", "1", "2"]
    assert streamed.usage is not None and whole.usage is not None
    assert (streamed.usage.input_tokens, streamed.usage.output_tokens) == (
        whole.usage.input_tokens,
        whole.usage.output_tokens,
    )
    assert types[:2] == ["response.created", "response.in_progress"] and types[-1] == "response.completed"
    for expected in (
        "response.reasoning_text.delta",
        "response.output_text.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ):
        assert expected in types
    assert samples_of(server, whole_session)[0]["tokens"] == samples_of(server, streamed_session)[0]["tokens"]


def test_every_event_carries_its_sequence_number(server: Server, qwen3_tokenizer: LocalTokenizer) -> None:
    server.engine.queue(ids_of(qwen3_tokenizer, CALL))
    session_id = server.new_session()
    body = {"input": QUESTION, "tools": TOOLS, "stream": True}
    with server.http.stream("POST", f"/sessions/{session_id}/v1/responses", json=body) as response:
        chunks = response.read().decode().strip().split("\n\n")
    events = [orjson.loads(chunk.split("\n")[1].removeprefix("data: ")) for chunk in chunks]
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert all(chunk.startswith(f"event: {event['type']}\n") for chunk, event in zip(chunks, events, strict=True))


def test_every_response_repeats_the_requests_tools_and_instructions_as_sent(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    """The tools are written once per tools object and the instructions once a turn, and spliced into each response
    (whole, and the stream's created, in_progress and completed events), turn after turn."""
    session_id, tools = server.new_session(), [*TOOLS, {"type": "web_search"}]
    items: list[Any] = [{"role": "user", "content": QUESTION}]
    for turn in range(2):
        server.engine.queue(ids_of(qwen3_tokenizer, CALL), ids_of(qwen3_tokenizer, CALL))
        body = {"instructions": 'Be brief ✓ "quoted"\n', "input": items, "tools": tools, "store": False}
        whole = server.http.post(f"/sessions/{session_id}/v1/responses", json=body).json()
        with server.http.stream("POST", f"/sessions/{session_id}/v1/responses", json={**body, "stream": True}) as sse:
            chunks = sse.read().decode().strip().split("\n\n")
        events = [orjson.loads(chunk.split("\n")[1].removeprefix("data: ")) for chunk in chunks]
        streamed = [event["response"] for event in events if "response" in event]
        assert [event["type"] for event in events if "response" in event][-1] == "response.completed"
        assert [response["tools"] for response in [whole, *streamed]] == [tools] * 4
        assert [response["instructions"] for response in [whole, *streamed]] == [body["instructions"]] * 4
        call = whole["output"][-1]
        items += [call, {"type": "function_call_output", "call_id": call["call_id"], "output": f"ran {turn}"}]
    server.engine.queue(ids_of(qwen3_tokenizer, ANSWER))
    without = server.http.post(f"/sessions/{server.new_session()}/v1/responses", json={"input": "hi"}).json()
    assert without["tools"] == [] and without["instructions"] is None


def test_a_streams_opening_holds_one_json_of_the_response_for_both_its_events() -> None:
    """The response (an agent's instructions and tools: hundreds of kilobytes) is written once and copied once per
    event, where the send's pieces are joined; joined, the pieces are the two events, numbered."""
    echo = edge.echo_fields(edge.parse_request(b'{"input": "hi", "instructions": "Be brief"}'), edge.RequestTools())
    encoder = ResponsesStreamEncoder("m", "s", "resp_1", echo, RoundTripSigner(b"k" * 32), edge.RequestTools())
    pieces = encoder.opening()
    responses = [piece for piece in pieces if piece.startswith(b'{"id":"resp_1"')]
    assert len(responses) == 2 and responses[0] is responses[1]
    chunks = b"".join(pieces).decode().strip().split("\n\n")
    events = [orjson.loads(chunk.split("\n")[1].removeprefix("data: ")) for chunk in chunks]
    assert [(event["type"], event["sequence_number"]) for event in events] == [
        ("response.created", 0),
        ("response.in_progress", 1),
    ]
    assert [event["response"]["instructions"] for event in events] == ["Be brief"] * 2
    assert [chunk.split("\n")[0] for chunk in chunks] == ["event: response.created", "event: response.in_progress"]


def test_the_first_events_leave_while_the_engine_samples(server: Server, qwen3_tokenizer: LocalTokenizer) -> None:
    server.engine.queue(ids_of(qwen3_tokenizer, ANSWER))
    server.engine.delay = 0.05
    session_id = server.new_session()
    with client(server, session_id).responses.stream(model="m", input=QUESTION) as stream:
        for event in stream:
            if event.type.endswith(".delta"):
                break
        assert turns_of(server, session_id) == []


def test_a_client_that_disconnects_mid_stream_commits_nothing(server: Server, qwen3_tokenizer: LocalTokenizer) -> None:
    server.engine.queue(ids_of(qwen3_tokenizer, ANSWER))
    server.engine.delay = 0.3
    session_id = server.new_session()
    body = {"input": QUESTION, "stream": True}
    hang_up_while_sampling(server, f"/sessions/{session_id}/v1/responses", body, ".delta")
    assert turns_of(server, session_id) == []


def test_an_engine_error_mid_stream_fails_the_response_and_commits_nothing(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    server.engine.queue(ids_of(qwen3_tokenizer, ANSWER))
    server.engine.fault = "break"
    session_id = server.new_session()
    with pytest.raises(openai.APIError, match="mid-stream"):
        for _ in client(server, session_id).responses.create(model="m", input=QUESTION, stream=True):
            pass
    assert turns_of(server, session_id) == []


def test_a_length_cut_is_an_incomplete_response(server: Server, qwen3_tokenizer: LocalTokenizer) -> None:
    server.engine.queue(ids_of(qwen3_tokenizer, ANSWER))
    session_id = server.new_session()
    response = client(server, session_id).responses.create(model="m", input=QUESTION, max_output_tokens=3)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None and response.incomplete_details.reason == "max_output_tokens"


def test_previous_response_id_continues_a_stored_response_or_is_a_400(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    session_id = server.new_session()
    server.engine.queue(ids_of(qwen3_tokenizer, CALL), ids_of(qwen3_tokenizer, ANSWER))
    responses = client(server, session_id).responses
    first = responses.create(model="m", input=QUESTION, tools=TOOLS, instructions="Be brief.")
    output = {"type": "function_call_output", "call_id": first.output[-1].call_id, "output": "sunny"}  # type: ignore[union-attr]
    second = responses.create(model="m", input=[output], tools=TOOLS, previous_response_id=first.id)
    assert second.output_text == "Pack light clothes."
    assert len(samples_of(server, session_id)) == 1
    with pytest.raises(openai.BadRequestError, match="previous_response_id"):
        responses.create(model="m", input="more", previous_response_id="resp_unknown")


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            "input[0].content[0].type",
        ),
        ({"input": "hi", "tools": [{"type": "custom", "name": "apply_patch"}]}, "tools[0].type"),
        (
            {"input": "hi", "tools": [{"type": "namespace", "name": "n", "tools": [{"type": "custom"}]}]},
            "tools[0].tools[0].type",
        ),
        ({"input": "hi", "background": True}, "background"),
        ({"input": "hi", "text": {"format": {"type": "grammar", "grammar": "x"}}}, "text.format.type"),
        ({"input": "hi", "text": {"format": {"type": "json_schema", "name": "n"}}}, "text.format.schema"),
        ({"input": "hi", "text": {"format": {"type": "json_object"}}}, "constrained decoding"),
        ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0].type"),
    ],
)
def test_unsupported_input_is_an_openai_shaped_400_naming_the_field(
    server: Server, body: dict[str, Any], named: str
) -> None:
    session_id = server.new_session()
    response = server.http.post(f"/sessions/{session_id}/v1/responses", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "BadRequestError" and named in error["message"]
    assert turns_of(server, session_id) == []


def assistant_items(reasoning: str, text: str) -> list[dict[str, Any]]:
    """An assistant turn as Responses input items written by hand (no encrypted_content: matched as sent)."""
    return [
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": reasoning}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]},
    ]


def test_a_session_may_mix_dialects(server: Server, qwen3_tokenizer: LocalTokenizer) -> None:
    """Anthropic, then chat completions, then Responses, on one conversation: one trajectory, one sample."""
    session_id = server.new_session()
    server.engine.queue(ids_of(qwen3_tokenizer, CALL), ids_of(qwen3_tokenizer, ANSWER), ids_of(qwen3_tokenizer, ANSWER))
    claude = anthropic.Anthropic(base_url=f"{server.url}/sessions/{session_id}", api_key="unused", max_retries=0)
    function = CHAT_TOOLS[0]["function"]
    claude_tools: Any = [
        {"name": function["name"], "description": function["description"], "input_schema": function["parameters"]}
    ]
    first = claude.messages.create(
        model="m", max_tokens=200, messages=[{"role": "user", "content": QUESTION}], tools=claude_tools
    )
    call = first.content[-1]
    assert call.type == "tool_use"
    stored = server.http.get(f"/sessions/{session_id}").json()["conversation"]
    messages: list[Any] = [*stored, {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    second = client(server, session_id).chat.completions.create(model="m", messages=messages, tools=CHAT_TOOLS)
    messages.append(second.choices[0].message.model_dump(exclude_none=True))
    call_arguments = stored[1]["tool_calls"][0]["function"]["arguments"]
    items: list[Any] = [
        {"role": "user", "content": QUESTION},
        *assistant_items(stored[1]["reasoning_content"], stored[1]["content"]),
        {"type": "function_call", "call_id": call.id, "name": call.name, "arguments": call_arguments},
        {"type": "function_call_output", "call_id": call.id, "output": "sunny"},
        *assistant_items(messages[-1]["reasoning_content"], messages[-1]["content"]),
        {"role": "user", "content": "And for Rome?"},
    ]
    third = client(server, session_id).responses.create(model="m", input=items, tools=TOOLS)
    assert third.status == "completed"
    assert [turn["node_id"] for turn in turns_of(server, session_id)] == [0, 1, 2]
    assert len(samples_of(server, session_id)) == 1
    dialects = [node.turn.metadata.get("dialect") for node in server.state.registry.get(session_id).trajectory.store]
    assert dialects == ["anthropic", None, "responses"]


SPAWN = (
    "<think>\nA helper should look.\n</think>\n\n<tool_call>\n"
    '{"name": "spawn_agent", "arguments": {"message": "List the files."}}\n'
    "</tool_call><|im_end|>"
)
CODEX_TOOLS: Any = [
    {"type": "function", "name": "exec_command", "description": "Run a command.", "parameters": {"type": "object"}},
    {
        "type": "namespace",
        "name": "multi_agent_v1",
        "description": "Sub-agents.",
        "tools": [
            {"type": "function", "name": "spawn_agent", "description": "Spawn one.", "parameters": {"type": "object"}},
            {"type": "function", "name": "wait_agent", "description": "Wait.", "parameters": {"type": "object"}},
        ],
    },
    {"type": "web_search", "external_web_access": True},
]
"""Codex's default tools in small: a function, its sub-agent functions grouped in a namespace, a hosted tool."""


def codex_turn(server: Server, session_id: str, items: list[Any]) -> list[dict[str, Any]]:
    """One streamed turn as Codex sends it (`store: false`, `reasoning` without an effort); the output items."""
    body = {"model": "m", "input": items, "tools": CODEX_TOOLS, "reasoning": {"summary": "auto"}, "store": False}
    with client(server, session_id).responses.stream(**body) as stream:
        events = list(stream)
        response = stream.get_final_response()
    added = [event.item.model_dump(exclude_none=True) for event in events if event.type == "response.output_item.added"]
    assert [item["type"] for item in added] == [item.type for item in response.output]
    return [*items_of(response), *({"added": item} for item in added if item["type"] == "function_call")]


def test_namespace_tools_are_flattened_and_a_call_to_one_comes_back_with_its_namespace(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    server.engine.queue(ids_of(qwen3_tokenizer, SPAWN), ids_of(qwen3_tokenizer, ANSWER))
    session_id = server.new_session(matcher=STRICT)
    items: list[Any] = [{"role": "user", "content": QUESTION}]
    *output, streamed = codex_turn(server, session_id, items)
    call = output[-1]
    assert (call["type"], call["name"], call["namespace"]) == ("function_call", "spawn_agent", "multi_agent_v1")
    assert streamed["added"]["namespace"] == "multi_agent_v1"  # already on the streamed item when it opens
    prompt = qwen3_tokenizer.decode(server.engine.requests[-1].prompt_ids)
    assert '"name": "spawn_agent"' in prompt and '"name": "exec_command"' in prompt and "web_search" not in prompt

    items += [*output, {"type": "function_call_output", "call_id": call["call_id"], "output": "agent 7 spawned"}]
    codex_turn(server, session_id, items)
    assert len(samples_of(server, session_id)) == 1
    store = server.state.registry.get(session_id).trajectory.store
    assert [node.turn.metadata["hosted_tools"] for node in store] == [["web_search"], ["web_search"]]

    server.engine.queue(ids_of(qwen3_tokenizer, SPAWN))
    whole = client(server, server.new_session()).responses.create(model="m", input=QUESTION, tools=CODEX_TOOLS)
    assert whole.output[-1].model_dump(exclude_none=True) == {**call, "id": whole.output[-1].id}


def test_a_resent_call_must_name_the_namespace_its_function_was_declared_in(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    server.engine.queue(ids_of(qwen3_tokenizer, SPAWN))
    session_id = server.new_session()
    items: list[Any] = [{"role": "user", "content": QUESTION}]
    *output, _ = codex_turn(server, session_id, items)
    output[-1]["namespace"] = "other"
    body = {"input": [*items, *output], "tools": CODEX_TOOLS, "store": False}
    response = server.http.post(f"/sessions/{session_id}/v1/responses", json=body)
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert message.startswith(f"input[{len(body['input']) - 1}].namespace: 'other'") and "'multi_agent_v1'" in message
    assert len(turns_of(server, session_id)) == 1


def test_a_resend_of_the_same_tools_reuses_their_translation_and_other_tools_are_translated_anew() -> None:
    session: Any = SimpleNamespace(translations={}, session_id="s", config=SimpleNamespace(hosted_tools="drop"))
    signer, family, reader = RoundTripSigner.for_journal(None), get_family("qwen3"), edge.body_reader()
    items: list[Any] = [{"role": "user", "content": QUESTION}]
    translated = []
    for turn in range(3):
        asked = {"input": items, "tools": CODEX_TOOLS, "store": False, "client_metadata": {"turn_id": f"t{turn}"}}
        request = reader.read(json.dumps(asked).encode()).request  # the fields after the input parsed again, equal
        tools = edge.request_tools_reusing(request, session)
        assert tools == edge.request_tools(request, "drop")
        edge.chat_request_reusing(request, tools, session, signer, family, lambda: pytest.fail("read whole again"))
        translated.append(tools)
        call = {"type": "function_call", "call_id": f"c{turn}", "name": "spawn_agent", "arguments": "{}"}
        items = [*items, call, {"type": "function_call_output", "call_id": f"c{turn}", "output": "spawned"}]
    assert translated[1] is translated[0] and translated[2] is translated[0]
    fewer = reader.read(json.dumps({"input": items, "tools": CODEX_TOOLS[:1]}).encode()).request
    assert edge.request_tools_reusing(fewer, session) == edge.request_tools(fewer, "drop") != translated[0]


def test_a_session_that_refuses_hosted_tools_answers_400_naming_the_tool(server: Server) -> None:
    session_id = server.new_session(hosted_tools="refuse")
    response = server.http.post(f"/sessions/{session_id}/v1/responses", json={"input": "hi", "tools": CODEX_TOOLS})
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("tools[2].type: 'web_search' is a hosted tool")
    assert turns_of(server, session_id) == []
    assert server.http.post("/sessions", json={"hosted_tools": "keep"}).status_code == 400


def test_the_server_option_sets_what_hosted_tools_get(serve: Any) -> None:
    refusing = serve(hosted_tools="refuse")
    session_id = refusing.new_session()
    body = {"input": "hi", "tools": [{"type": "file_search", "vector_store_ids": ["v"]}]}
    assert refusing.http.post(f"/sessions/{session_id}/v1/responses", json=body).status_code == 400
    dropping = refusing.new_session(hosted_tools="drop")
    assert refusing.http.post(f"/sessions/{dropping}/v1/responses", json=body).status_code == 200


def test_text_format_is_the_engines_constrained_decoding(server: Server) -> None:
    schema = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    inner = server.engine.inner
    capable, inner._info = inner._info, replace(inner._info, structured_output=True)
    try:
        text: Any = {"format": {"type": "json_schema", "name": "title", "schema": schema, "strict": True}}
        client(server, server.new_session()).responses.create(model="m", input=QUESTION, text=text)
        assert orjson.loads(server.engine.requests[-1].sampling.json_schema or "null") == schema
        client(server, server.new_session()).responses.create(
            model="m", input=QUESTION, text={"format": {"type": "json_object"}}
        )
        assert server.engine.requests[-1].sampling.json_schema == '{"type":"object"}'
    finally:
        inner._info = capable


def test_a_tool_choice_naming_a_dropped_hosted_tool_leaves_the_choice_to_the_model(server: Server) -> None:
    session_id = server.new_session()
    body = {
        "input": "hi",
        "tools": [{"type": "web_search_2025_08_26"}],
        "tool_choice": {"type": "web_search_2025_08_26"},
    }
    assert server.http.post(f"/sessions/{session_id}/v1/responses", json=body).status_code == 200
    turn = server.state.registry.get(session_id).trajectory.store.get(0).turn
    assert turn.metadata["hosted_tools"] == ["web_search_2025_08_26"] and not turn.tools
