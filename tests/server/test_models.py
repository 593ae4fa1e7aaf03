"""Every route's request model is strict where the upstream APIs are: a number of the wrong type or outside the range
the engines and sample formats carry, a non-finite float, a string for a number or a boolean, or a tool result that
answers no call is a 400 naming the field (and the range), and the session it was sent to stays readable."""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.conftest import Server
from tito.server.models import INT32_MAX, INT64_MAX, MAX_JSON_DEPTH, json_safe

USER = [{"role": "user", "content": "hi"}]
HUGE = 2**70


def chat(**fields: Any) -> dict[str, Any]:
    return {"messages": USER, **fields}


def anthropic(**fields: Any) -> dict[str, Any]:
    return {"messages": USER, "max_tokens": 8, **fields}


def responses(**fields: Any) -> dict[str, Any]:
    return {"input": "hi", **fields}


REFUSED = [
    ("v1/chat/completions", chat(seed=HUGE), "seed: must be an integer from 0 to 9223372036854775807"),
    ("v1/chat/completions", chat(seed=-1), "seed: must be an integer from 0"),
    ("v1/chat/completions", chat(top_k=HUGE), f"top_k: must be an integer from -1 to {INT32_MAX}"),
    ("v1/chat/completions", chat(top_k=-5), "top_k: must be an integer from -1"),
    ("v1/chat/completions", chat(max_tokens=2**63), f"max_tokens: must be an integer from 1 to {INT32_MAX}"),
    ("v1/chat/completions", chat(max_tokens="10"), "max_tokens: Input should be a valid integer"),
    ("v1/chat/completions", chat(max_completion_tokens=0), "max_completion_tokens: must be an integer from 1"),
    ("v1/chat/completions", chat(stream="yes"), "stream: Input should be a valid boolean"),
    ("v1/chat/completions", chat(temperature="0.5"), "temperature: Input should be a valid number"),
    ("v1/chat/completions", chat(top_logprobs=21), "top_logprobs: must be an integer from 0 to 20"),
    ("v1/chat/completions", chat(presence_penalty=3.0), "presence_penalty: Input should be less than or equal to 2"),
    ("v1/chat/completions", chat(messages=[{"role": "user", "content": "x", "n": HUGE}]), "messages[0]: n: the"),
    ("v1/chat/completions", chat(tools=[{"type": "function", "x": HUGE}]), "tools[0]: x: the integer"),
    ("v1/chat/completions", chat(chat_template_kwargs={"k": HUGE}), "chat_template_kwargs: k: the integer"),
    ("v1/messages", anthropic(max_tokens=HUGE), f"max_tokens: must be an integer from 1 to {INT32_MAX}"),
    ("v1/messages", anthropic(top_k=-2), "top_k: must be an integer from -1"),
    ("v1/messages", anthropic(stream="true"), "stream: Input should be a valid boolean"),
    ("v1/messages", anthropic(metadata={"user_id": HUGE}), "metadata: user_id: the integer"),
    ("v1/responses", responses(max_output_tokens=HUGE), f"max_output_tokens: must be an integer from 1 to {INT32_MAX}"),
    ("v1/responses", responses(top_p="1"), "top_p: Input should be a valid number"),
    ("v1/responses", responses(store="no"), "store: Input should be a valid boolean"),
    # found by the schema fuzz stage (tests/server/test_fuzz.py): an input that translates to no message was a 500
    ("v1/responses", responses(input=[]), "messages: List should have at least 1 item"),
]


@pytest.mark.parametrize(("route", "body", "named"), REFUSED, ids=[f"{r}:{sorted(b)[-1]}" for r, b, _ in REFUSED])
def test_a_value_outside_the_upstream_contract_is_a_400_naming_the_field(
    server: Server, route: str, body: dict[str, Any], named: str
) -> None:
    session_id = server.new_session()
    reply = server.http.post(f"/sessions/{session_id}/{route}", json=body)
    assert reply.status_code == 400, reply.text
    assert named in reply.text
    assert server.http.get(f"/sessions/{session_id}").status_code == 200


NON_FINITE = [b"1e999", b"-1e999", b"NaN", b"Infinity"]


@pytest.mark.parametrize("number", NON_FINITE)
def test_a_non_finite_number_is_refused_everywhere_a_number_is_read(server: Server, number: bytes) -> None:
    session_id = server.new_session()
    headers = {"content-type": "application/json"}
    user = b'"messages":[{"role":"user","content":"x"}]'
    bodies = {
        f"/sessions/{session_id}/v1/chat/completions": b'{%s,"temperature":%%s}' % user,
        f"/sessions/{session_id}/v1/messages": b'{%s,"max_tokens":4,"top_p":%%s}' % user,
        f"/sessions/{session_id}/v1/responses": b'{"input":"x","temperature":%s}',
        f"/sessions/{session_id}/samples": b'{"reward":%s}',
        "/sessions": b'{"ttl_seconds":%s}',
    }
    for path, body in bodies.items():
        reply = server.http.post(path, content=body % number, headers=headers)
        assert reply.status_code == 400, (path, reply.text)
        assert "finite" in reply.text or "valid number" in reply.text, (path, reply.text)


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"max_nodes": HUGE}, f"max_nodes: must be an integer from 1 to {INT32_MAX}"),
        ({"max_nodes": 0}, "max_nodes: must be an integer from 1"),
        ({"max_nodes": "4"}, "max_nodes: Input should be a valid integer"),
        ({"ttl_seconds": 1e300}, "ttl_seconds: Input should be less than or equal to"),
        ({"strict_append_only": "yes"}, "strict_append_only: Input should be a valid boolean"),
        ({"chat_template_kwargs": {"enable_thinking": HUGE}}, "chat_template_kwargs: enable_thinking: the integer"),
    ],
)
def test_a_session_is_never_created_with_a_value_it_cannot_store(
    server: Server, body: dict[str, Any], named: str
) -> None:
    reply = server.http.post("/sessions", json=body)
    assert reply.status_code == 400, reply.text
    assert named in reply.text


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"reward": "1"}, "reward: Input should be a valid number"),
        ({"rewards": {"x": "1"}}, "rewards.x: Input should be a valid number"),
        ({"max_seq_len": HUGE}, f"max_seq_len: must be an integer from 1 to {INT32_MAX}"),
        ({"metadata": {"step": HUGE}}, "metadata: step: the integer"),
    ],
)
def test_a_samples_request_outside_the_formats_range_is_a_400(server: Server, body: dict[str, Any], named: str) -> None:
    session_id = server.new_session()
    assert server.http.post(f"/sessions/{session_id}/v1/chat/completions", json=chat()).status_code == 200
    reply = server.http.post(f"/sessions/{session_id}/samples", json=body)
    assert reply.status_code == 400, reply.text
    assert named in reply.text
    assert server.http.post(f"/sessions/{session_id}/samples").status_code == 200


def test_the_widest_values_in_range_are_taken_and_read_back(server: Server) -> None:
    session_id = server.new_session(max_nodes=INT32_MAX)
    reply = server.http.post(
        f"/sessions/{session_id}/v1/chat/completions", json=chat(seed=INT64_MAX, top_k=INT32_MAX, max_tokens=4)
    )
    assert reply.status_code == 200, reply.text
    spans = server.http.post(f"/sessions/{session_id}/samples").json()["samples"][0]["spans"]
    assert spans[0]["sampling"]["seed"] == INT64_MAX
    assert server.http.get(f"/sessions/{session_id}/turns/0").status_code == 200


def test_a_tool_result_that_answers_no_call_is_a_400_naming_it(server: Server) -> None:
    session_id = server.new_session()
    first = server.http.post(f"/sessions/{session_id}/v1/chat/completions", json=chat())
    assert first.status_code == 200, first.text
    reply = first.json()["choices"][0]["message"]
    orphan = [*USER, reply, {"role": "tool", "tool_call_id": "call_never_made", "content": "42"}]
    refused = server.http.post(f"/sessions/{session_id}/v1/chat/completions", json=chat(messages=orphan))
    assert refused.status_code == 400, refused.text
    assert "message 2: field 'tool_call_id': 'call_never_made' answers no tool call" in refused.text


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "where", "words"),
    [
        ({"a": [1, {"b": 2**64}]}, "", "a[1].b: the integer 18446744073709551616 is outside the 64-bit range"),
        ({"a": 1, "b": {"c": float("nan")}}, "metadata", "metadata.b.c: nan is not a finite number"),
        ([0, float("-inf")], "", "[1]: -inf is not a finite number"),
        (-(2**63) - 1, "seed", "seed: the integer -9223372036854775809 is outside the 64-bit range"),
        (
            _nested(MAX_JSON_DEPTH + 2),
            "",
            "[0]" * (MAX_JSON_DEPTH + 1) + f": nested deeper than {MAX_JSON_DEPTH} levels",
        ),
    ],
)
def test_a_value_json_readers_cannot_take_back_is_refused_naming_its_place(
    value: object, where: str, words: str
) -> None:
    with pytest.raises(ValueError) as refused:
        json_safe(value, where)
    assert str(refused.value) == words
    json_safe({"ok": [INT64_MAX, -INT64_MAX - 1, 1.5, None, True, "text", _nested(MAX_JSON_DEPTH - 2)]}, where)
