"""Chat completions through a real uvicorn server and the official openai SDK: ids, retries, races, failures.

Every multi-turn test checks TITO on every turn: the prompt ids of turn N+1 are the stored ids of turn N
(prompt + sampled) followed by the junction and the appended messages' ids.
"""

from __future__ import annotations

import asyncio
import json
import operator
import threading
import time
from typing import Any

import httpx
import openai
import pytest

from tests.server.conftest import Server, ServerFactory
from tito.parsing.pipeline import CompletionParser
from tito.server.commands.launch import INSTANT_REPLY
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import LocalTokenizer


def client(server: Server, session_id: str, **kwargs: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.chat_url(session_id), api_key="unused", max_retries=0, **kwargs)


def as_message(reply: Any) -> dict[str, Any]:
    return reply.choices[0].message.model_dump(exclude_none=True)


def converse(server: Server, session_id: str, user_turns: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    sdk = client(server, session_id)
    messages: list[dict[str, Any]] = []
    for appended in user_turns:
        messages.extend(appended)
        messages.append(as_message(sdk.chat.completions.create(model="m", messages=messages)))
    return messages


def turns_of(server: Server, session_id: str) -> list[dict[str, Any]]:
    response = server.http.get(f"/sessions/{session_id}")
    assert response.status_code == 200, response.text
    return list(response.json()["turns"])


def test_every_turn_prompt_is_the_stored_ids_plus_junction_plus_appended_ids(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    session_id = server.new_session()
    first = len(server.engine.requests)
    user_turns = [
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}],
        [{"role": "user", "content": "A follow-up"}],
        [{"role": "system", "content": "Mid-session system message"}, {"role": "user", "content": "Go on"}],
        [{"role": "assistant", "content": "An injected summary"}, {"role": "user", "content": "Continue"}],
    ]
    messages = converse(server, session_id, user_turns)
    requests = server.engine.requests[first:]
    assert len(requests) == 4
    tt = get_tito_tokenizer(qwen3_tokenizer, "qwen3")
    stored_messages: list[dict[str, Any]] = []
    for turn, (request, appended) in enumerate(zip(requests, user_turns, strict=True)):
        new_messages = [*stored_messages, *appended]
        appended_ids = tt.tokenize_additional_messages(stored_messages, new_messages)
        # An oracle that is not the function the server calls: the tokenizer's own ids of the whole render (the
        # scripted reply is the canonical ids of its message, so the two must agree on every turn).
        rendered = tt.render(new_messages, add_generation_prompt=True)
        assert list(request.prompt_ids) == qwen3_tokenizer.encode(rendered), f"turn {turn}"
        if turn == 0:
            assert list(request.prompt_ids) == appended_ids
        else:
            previous = requests[turn - 1]
            stored_ids = [*previous.prompt_ids, *server.engine.default_reply]
            assert list(request.prompt_ids) == stored_ids + appended_ids, f"turn {turn}"
        stored_messages = messages[: len(new_messages) + 1]
    sample = server.http.post(f"/sessions/{session_id}/samples").json()["samples"][0]
    assert sample["tokens"] == [*requests[-1].prompt_ids, *server.engine.default_reply]


def test_injected_assistant_is_prompt_and_only_sampled_ids_are_trained(server: Server) -> None:
    session_id = server.new_session()
    converse(server, session_id, [
        [{"role": "user", "content": "one"}],
        [{"role": "assistant", "content": "few-shot written by the client"}, {"role": "user", "content": "two"}],
    ])  # fmt: skip
    sample = server.http.post(f"/sessions/{session_id}/samples").json()["samples"][0]
    reply = server.engine.default_reply
    assert sum(sample["loss_mask"]) == 2 * len(reply)
    sampled = [t for t, m in zip(sample["tokens"], sample["loss_mask"], strict=True) if m]
    assert sampled == reply * 2
    assert all(lp == 0.0 for lp, m in zip(sample["rollout_logprobs"], sample["loss_mask"], strict=True) if not m)
    assert sample["response_length"] == len(sample["tokens"]) - len(server.engine.requests[-2].prompt_ids)


def test_reply_is_openai_shaped_with_usage_and_finish_reason(server: Server) -> None:
    session_id = server.new_session()
    reply = client(server, session_id).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hello"}], temperature=0.5, top_p=0.9, seed=7,
        max_completion_tokens=64, stop=["never"], extra_body={"top_k": 5, "min_p": 0.1, "an_unknown_field": 1},
    )  # fmt: skip
    assert reply.id.startswith("chatcmpl-")
    assert reply.choices[0].finish_reason == "stop"
    assert reply.choices[0].message.content == INSTANT_REPLY
    assert reply.usage is not None and reply.usage.completion_tokens == len(server.engine.default_reply)
    assert reply.usage.prompt_tokens == len(server.engine.requests[-1].prompt_ids)
    assert reply.usage.prompt_tokens_details is not None and reply.usage.prompt_tokens_details.cached_tokens == 0
    sampling = server.engine.requests[-1].sampling
    assert (sampling.temperature, sampling.top_p, sampling.seed, sampling.max_new_tokens) == (0.5, 0.9, 7, 64)
    assert (sampling.top_k, sampling.min_p, sampling.stop) == (5, 0.1, ("never",))
    assert sampling.stop_token_ids == (151645, 151643)  # the family's stop tokens reach the engine: im_end, endoftext


def test_tool_calls_come_back_with_ids_and_invalid_calls_are_counted(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    end = qwen3_tokenizer.encode("<|im_end|>", add_special_tokens=False)
    good = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    bad = '<tool_call>\n{"name": "get_weather", "arguments": {"city": \n</tool_call>'
    server.engine.queue(qwen3_tokenizer.encode(good, add_special_tokens=False) + end,
                        qwen3_tokenizer.encode(bad, add_special_tokens=False) + end)  # fmt: skip
    session_id = server.new_session()
    sdk = client(server, session_id)
    messages: list[Any] = [{"role": "user", "content": "weather?"}]
    first = sdk.chat.completions.create(model="m", messages=messages, tools=tools)
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls"
    assert call.id and json.loads(call.function.arguments) == {"city": "Paris"}
    messages += [as_message(first), {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    second = sdk.chat.completions.with_raw_response.create(model="m", messages=messages, tools=tools)
    body = second.http_response.json()
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["tito"]["invalid_tool_calls"] == 1
    sample = server.http.post(f"/sessions/{session_id}/samples").json()["samples"][0]
    assert sample["metadata"]["turns"][1]["invalid_tool_calls"][0]["status"] == "invalid_arguments"


def test_role_gate_refuses_a_disallowed_appended_role_and_changes_nothing(serve: ServerFactory) -> None:
    gated = serve(allowed_append_roles=("user", "tool"))
    session_id = gated.new_session()
    converse(gated, session_id, [[{"role": "user", "content": "hi"}]])
    messages = [{"role": "user", "content": "x"}]
    before = turns_of(gated, session_id)
    sdk = client(gated, session_id)
    history = gated.state.registry.get(session_id).trajectory.conversations["c0"].trajectory.messages()  # type: ignore[union-attr]
    with pytest.raises(openai.BadRequestError, match="role 'system'"):
        sdk.chat.completions.create(model="m", messages=[*history, {"role": "system", "content": "no"}, *messages])
    assert turns_of(gated, session_id) == before


def test_pinned_and_unknown_template_kwargs_are_400(server: Server) -> None:
    session_id = server.new_session()
    sdk = client(server, session_id)
    messages = [{"role": "user", "content": "hi"}]
    for kwargs, match in [({"clear_thinking": True}, "pins clear_thinking"), ({"not_a_flag": 1}, "not_a_flag")]:
        with pytest.raises(openai.BadRequestError, match=match):
            sdk.chat.completions.create(model="m", messages=messages, extra_body={"chat_template_kwargs": kwargs})
    assert turns_of(server, session_id) == []


def test_per_request_thinking_kwarg_changes_that_turns_generation_prompt(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    session_id = server.new_session()
    thinking_off = {"chat_template_kwargs": {"enable_thinking": False}}
    client(server, session_id).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], extra_body=thinking_off
    )
    prompt_text = qwen3_tokenizer.decode(list(server.engine.requests[-1].prompt_ids))
    assert prompt_text.endswith("<think>\n\n</think>\n\n")


def test_one_step_retry_replaces_the_last_turn(server: Server) -> None:
    session_id = server.new_session()
    messages = converse(server, session_id, [[{"role": "user", "content": "q1"}], [{"role": "user", "content": "q2"}]])
    first_turn = turns_of(server, session_id)[0]
    sdk = client(server, session_id)
    sdk.chat.completions.create(model="m", messages=[*messages[:2], {"role": "user", "content": "q2 changed"}])
    turns = turns_of(server, session_id)
    assert len(turns) == 2 and turns[0] == first_turn

    single = server.new_session()
    opening = converse(server, single, [[{"role": "user", "content": "q1"}]])
    client(server, single).chat.completions.create(model="m", messages=opening[:1])  # drop the reply: roll back
    assert len(turns_of(server, single)) == 1


def test_deep_divergence_is_400_naming_where_and_changes_nothing(server: Server) -> None:
    session_id = server.new_session()
    messages = converse(server, session_id, [[{"role": "user", "content": f"q{i}"}] for i in range(3)])
    before = turns_of(server, session_id)
    sdk = client(server, session_id)
    rewritten = [*messages[:2], {"role": "user", "content": "q1 rewritten"}, *messages[3:]]
    with pytest.raises(openai.BadRequestError, match=r"message 2 differs.*'content'.*discard 2"):
        sdk.chat.completions.create(model="m", messages=rewritten)
    assert turns_of(server, session_id) == before
    converse(server, session_id, [])  # nothing appended: still fine
    sdk.chat.completions.create(model="m", messages=[*messages, {"role": "user", "content": "q3"}])
    assert len(turns_of(server, session_id)) == 4


def test_a_turn_cut_by_length_cannot_be_extended_but_can_be_retried(server: Server) -> None:
    session_id = server.new_session()
    sdk = client(server, session_id)
    messages: list[Any] = [{"role": "user", "content": "long answer please"}]
    cut = sdk.chat.completions.create(model="m", messages=messages, max_tokens=2)
    assert cut.choices[0].finish_reason == "length"
    with pytest.raises(openai.ConflictError, match="cut by the length limit"):
        sdk.chat.completions.create(model="m", messages=[*messages, as_message(cut), {"role": "user", "content": "go"}])
    assert turns_of(server, session_id)[0]["finish_reason"] == "length"
    again = sdk.chat.completions.create(model="m", messages=messages)
    assert again.choices[0].finish_reason == "stop"
    assert len(turns_of(server, session_id)) == 1


def test_sdk_retry_of_a_committed_request_returns_it_without_sampling(server: Server) -> None:
    session_id = server.new_session()
    body = {"model": "m", "messages": [{"role": "user", "content": "once"}]}
    url = f"/sessions/{session_id}/v1/chat/completions"
    first = server.http.post(url, json=body).json()
    calls = len(server.engine.requests)
    retried = server.http.post(url, json=body, headers={"x-stainless-retry-count": "1"}).json()
    assert retried == first
    assert len(server.engine.requests) == calls
    resent = server.http.post(url, json=body).json()  # same bytes, no retry header: a new turn (one-step retry)
    assert resent["id"] != first["id"] and len(server.engine.requests) == calls + 1
    assert len(turns_of(server, session_id)) == 1


def test_of_two_concurrent_requests_the_loser_gets_409_and_the_winner_is_recorded(server: Server) -> None:
    """Two requests extending the same conversation at once: one commits, the other is refused (a linear
    conversation has one head); requests of different conversations both commit (tests/server/test_episodes.py)."""
    session_id = server.new_session()
    opening = converse(server, session_id, [[{"role": "user", "content": "start"}]])
    first = turns_of(server, session_id)[0]["response_id"]
    server.engine.delay = 0.2

    async def race() -> list[Any]:
        sdk = openai.AsyncOpenAI(base_url=server.chat_url(session_id), api_key="unused")  # default retries on
        calls = [sdk.chat.completions.create(model="m", messages=[*opening, {"role": "user", "content": f"racer {i}"}])
                 for i in range(2)]  # fmt: skip
        try:
            return list(await asyncio.gather(*calls, return_exceptions=True))
        finally:
            await sdk.close()

    results = asyncio.run(race())
    winners = [r for r in results if not isinstance(r, Exception)]
    losers = [r for r in results if isinstance(r, openai.ConflictError)]
    assert len(winners) == 1 and len(losers) == 1, results
    assert "moved on" in str(losers[0]) or "committed a turn" in str(losers[0])
    assert [t["response_id"] for t in turns_of(server, session_id)] == [first, winners[0].id]


def test_delete_during_an_in_flight_turn_aborts_the_engine_request_and_the_session_is_gone(server: Server) -> None:
    session_id = server.new_session()
    server.engine.delay = 5.0
    sdk = client(server, session_id)
    errors: list[Any] = []

    def turn() -> None:
        try:
            sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        except openai.APIStatusError as exc:
            errors.append(exc)

    worker = threading.Thread(target=turn)
    calls = len(server.engine.requests)
    worker.start()
    deadline = time.monotonic() + 5
    while len(server.engine.requests) == calls and time.monotonic() < deadline:  # the turn reached the engine
        time.sleep(0.01)
    assert server.http.delete(f"/sessions/{session_id}").status_code == 204
    worker.join(5)
    assert server.engine.aborted == [server.engine.requests[-1].request_id]
    assert errors and errors[0].status_code == 410 and "deleted during the turn" in errors[0].message
    gone = server.http.get(f"/sessions/{session_id}")
    assert gone.status_code == 410 and gone.json()["error"]["type"] == "SessionGoneError"


DIALECT_TURNS = {
    "chat": ("v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
    "anthropic": ("v1/messages", {"max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}),
    "responses": ("v1/responses", {"input": "hi"}),
}
EVERY_PATH = [(dialect, stream) for dialect in DIALECT_TURNS for stream in (False, True)]


def one_turn(server: Server, session_id: str, dialect: str, stream: bool) -> tuple[int, str]:
    """The status and body of one turn in a dialect, whole or streamed (a stream's failure is an event in it)."""
    path, body = DIALECT_TURNS[dialect]
    response = server.http.post(f"/sessions/{session_id}/{path}", json={**body, "stream": stream})
    return response.status_code, response.text


@pytest.mark.parametrize(("dialect", "stream"), EVERY_PATH)
def test_a_session_deleted_between_the_engines_end_and_the_commit_is_410_on_every_path(
    server: Server, monkeypatch: pytest.MonkeyPatch, dialect: str, stream: bool
) -> None:
    """finish_turn is the one place a turn is finished: no path replies with a node that was never recorded."""
    registry = server.state.registry
    commit = registry.commit

    async def deleted_first(session: Any, plan: Any, event: Any) -> Any:
        await registry.delete(session.session_id)
        return await commit(session, plan, event)

    monkeypatch.setattr(registry, "commit", deleted_first)
    session_id = server.new_session()
    status, text = one_turn(server, session_id, dialect, stream)
    assert status == (200 if stream else 410), text
    assert "was deleted during the turn; the turn was not recorded" in text
    assert '"node_id"' not in text
    assert server.http.get(f"/sessions/{session_id}").status_code == 410


@pytest.mark.parametrize(("dialect", "stream"), EVERY_PATH)
def test_a_parser_that_raises_is_502_naming_the_parser_on_every_path(
    server: Server, monkeypatch: pytest.MonkeyPatch, dialect: str, stream: bool
) -> None:
    def broken(*args: Any) -> Any:
        raise RuntimeError("a parser bug")

    monkeypatch.setattr(CompletionParser, "parse_marked", broken)
    session_id = server.new_session()
    status, text = one_turn(server, session_id, dialect, stream)
    assert status == (200 if stream else 502), text
    assert "EngineResponseError" in text or "api_error" in text
    assert "the sampled ids could not be parsed: RuntimeError: a parser bug" in text
    assert turns_of(server, session_id) == []


@pytest.mark.parametrize(("fault", "status", "error_type"), [
    ("down", 503, "EngineUnavailableError"),
    ("hang", 504, "EngineTimeoutError"),
    ("malformed", 502, "EngineResponseError"),
])  # fmt: skip
def test_engine_failures_are_5xx_and_leave_the_session_unchanged(
    serve: ServerFactory, fault: str, status: int, error_type: str
) -> None:
    flaky = serve(engine_timeout=0.3)
    session_id = flaky.new_session()
    converse(flaky, session_id, [[{"role": "user", "content": "fine"}]])
    before = turns_of(flaky, session_id)
    flaky.engine.fault = fault
    history = flaky.state.registry.get(session_id).trajectory.conversations["c0"].trajectory.messages()  # type: ignore[union-attr]
    response = flaky.http.post(
        f"/sessions/{session_id}/v1/chat/completions",
        json={"messages": [*history, {"role": "user", "content": "next"}]},
    )
    assert (response.status_code, response.json()["error"]["type"]) == (status, error_type)
    assert turns_of(flaky, session_id) == before
    flaky.engine.fault = None


@pytest.mark.parametrize(("body", "match"), [
    ({"messages": "not a list"}, "messages"),
    ({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}, "temperature"),
    ({"messages": [{"role": "user", "content": "x"}], "n": 2}, "n=2"),
    ({"messages": [{"role": "user", "content": "x"}], "stream": True, "stream_options": {"include_usage": []}},
     "stream_options"),
    ({"messages": [{"role": "user", "content": 5}]}, "message 0.*content"),
])  # fmt: skip
def test_bad_request_bodies_are_400_naming_the_field(server: Server, body: dict[str, Any], match: str) -> None:
    session_id = server.new_session()
    response = server.http.post(f"/sessions/{session_id}/v1/chat/completions", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["type"] in ("BadRequestError", "MessageError")
    assert __import__("re").search(match, response.json()["error"]["message"]), response.json()


def test_unknown_session_is_404_with_an_error_body(server: Server) -> None:
    response = httpx.post(f"{server.url}/sessions/{'0' * 32}/v1/chat/completions", json={"messages": []})
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "SessionNotFoundError"


def test_a_reserialised_tool_call_is_refused_by_a_strict_session_and_the_sampled_turn_kept(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    """Under the default `harness` matcher the same resend attaches (tests/server/sessions/test_resends.py)."""
    call = '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call><|im_end|>'
    server.engine.queue(qwen3_tokenizer.encode(call, add_special_tokens=False))
    session_id = server.new_session(matcher="strict")
    messages = converse(server, session_id, [[{"role": "user", "content": "call f"}]])
    echoed = json.loads(json.dumps(messages[1]))
    arguments = echoed["tool_calls"][0]["function"]["arguments"]
    echoed["tool_calls"][0]["function"]["arguments"] = json.dumps(json.loads(arguments), indent=2)
    tool = {"role": "tool", "tool_call_id": echoed["tool_calls"][0]["id"], "content": "done"}
    before = turns_of(server, session_id)
    with pytest.raises(openai.BadRequestError, match=r"arguments.*send it back exactly as received"):
        client(server, session_id).chat.completions.create(model="m", messages=[messages[0], echoed, tool])
    assert turns_of(server, session_id) == before


def test_a_resent_reply_is_kept_as_the_session_stored_one_and_the_tools_as_the_process_held_ones(
    server: Server,
) -> None:
    """What the session's body reader keeps of a resend is no second copy: the reply it repeats as it was given is
    the stored reply object, and the tools are the process's held ones."""
    session_id = server.new_session()
    url = f"/sessions/{session_id}/v1/chat/completions"
    tools = [{"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hello"}]
    reply = server.http.post(url, json={"messages": messages, "tools": tools}).json()["choices"][0]["message"]
    messages += [reply, {"role": "user", "content": "and then?"}]
    assert server.http.post(url, json={"messages": messages, "tools": tools}).status_code == 200
    session = server.state.registry.get(session_id)
    kept = session.resent_bodies["chat"]._lasts[0]
    stored = session.trajectory.store.get(0).turn
    assert kept.elements[1] is stored.assistant and kept.request.messages[1] is stored.assistant
    assert kept.request.tools is not None and all(map(operator.is_, kept.request.tools, stored.tools or ()))
