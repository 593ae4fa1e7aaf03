"""A resent body read from the previous body's prefix gives the request and digest a whole read gives."""

from __future__ import annotations

import json
import operator
import random
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
import xxhash

from tito.families import get_family
from tito.server.dialects import anthropic, responses
from tito.server.dialects.signing import RoundTripSigner
from tito.server.errors import BadRequestError
from tito.server.models import ChatCompletionRequest, json_objects
from tito.server.sessions import json_spans, resent_prefix
from tito.server.sessions.resent_prefix import ResentPrefix
from tito.server.turns.completions import chat_body_reader, parse_chat_request
from tito.server.turns.retries import unmarked_key
from tito.trajectory.shared_values import SHARED


def reader() -> ResentPrefix[ChatCompletionRequest]:
    return chat_body_reader()


def check(prefix: ResentPrefix[ChatCompletionRequest], body: bytes, from_prefix: bool) -> ChatCompletionRequest:
    read = prefix.read(body)
    whole = parse_chat_request(body)
    assert read.from_prefix is from_prefix
    assert read.request.model_dump() == whole.model_dump()
    assert read.digest.hexdigest() == unmarked_key(body).fingerprint
    return read.request


def body(messages: list[dict[str, Any]], indent: int | None = None, **fields: Any) -> bytes:
    return json.dumps({"model": "m", "messages": messages, **fields}, indent=indent, ensure_ascii=False).encode()


def turns(count: int) -> list[dict[str, Any]]:
    rng = random.Random(count)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief. ü ✓ 漢字"}]
    for turn in range(count):
        messages.append({"role": "user", "content": f"step {turn} " + "x" * rng.randrange(0, 50) + " ✓"})
        messages.append({"role": "assistant", "content": f"done {turn}", "extra": {"n": [1, 2.5, None]}})
    return messages


@pytest.mark.parametrize("indent", [None, 2])
def test_a_growing_conversation_is_read_from_the_previous_bodys_prefix(indent: int | None) -> None:
    prefix = reader()
    tools = [{"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}]
    messages = turns(12)
    for count in range(1, 12):
        read = check(prefix, body(messages[: 2 * count], indent, tools=tools, stream=True), count > 1)
        assert are_held(read.tools)


def test_the_same_body_again_reads_as_before_and_a_changed_field_reads_whole() -> None:
    prefix = reader()
    first = check(prefix, body(turns(3)), False)
    assert check(prefix, body(turns(3)), True) is first
    check(prefix, body(turns(3), temperature=0.5), False)
    check(prefix, body([*turns(3), {"role": "user", "content": "more"}], temperature=0.7, tools=[]), True)


def test_fields_parsed_again_after_a_changed_later_field_are_the_previous_requests_where_equal() -> None:
    """The bytes after the array changed (Codex's `client_metadata` does every turn), so the request's other fields
    are parsed again: where equal they are the previous request's very objects (no second copy kept, and a dialect
    finds its translation by identity); a changed one is the new value."""
    prefix = reader()
    messages = turns(3)
    tools = [{"type": "function", "function": {"name": "run", "description": "Run it ✓", "parameters": {}}}]
    first = check(prefix, body(messages[:3], tools=tools, seed=1), False)
    later = check(prefix, body(messages[:5], tools=tools, seed=2), True)
    assert later.tools is first.tools and later.seed == 2
    assert later.messages[:3] == first.messages[:3] and all(map(operator.is_, later.messages[:3], first.messages))


def test_rewritten_last_messages_read_from_the_first_rewritten_one() -> None:
    """Claude Code moves its cache marks on the last messages each turn: the bytes part a few elements back."""
    prefix = reader()
    messages = turns(6)
    check(prefix, body(messages), False)
    messages[-1] = {**messages[-1], "cache_control": {"type": "ephemeral"}}
    messages[-3] = {**messages[-3], "content": "rewritten"}
    check(prefix, body([*messages, {"role": "user", "content": "next"}]), True)


def test_a_changed_early_message_or_a_shorter_conversation_is_read_whole() -> None:
    prefix = reader()
    messages = turns(8)
    check(prefix, body(messages), False)
    changed = [{"role": "system", "content": "Other."}, *messages[1:], {"role": "user", "content": "go"}]
    check(prefix, body(changed), False)
    check(prefix, body(changed[:5]), False)


def test_an_invalid_new_message_is_refused_naming_its_place_in_the_whole_array() -> None:
    prefix = reader()
    messages = turns(4)
    check(prefix, body(messages), False)
    with pytest.raises(BadRequestError, match=r"messages\[9\]"):
        prefix.read(body([*messages, "not an object"]))
    with pytest.raises(BadRequestError):
        prefix.read(body(messages)[:-3] + b",{]}")
    check(prefix, body([*messages, {"role": "user", "content": "ok"}]), True)


def test_anthropic_and_responses_bodies_are_read_from_the_previous_ones_prefix_too() -> None:
    conversation = turns(6)
    anthropic_reader, responses_reader = anthropic.body_reader(), responses.body_reader()
    for count in range(1, 6):
        messages = [m for m in conversation[1 : 2 * count] if m["role"] in ("user", "assistant")]
        messages = [{"role": m["role"], "content": m["content"]} for m in messages]
        asked = json.dumps({"model": "m", "max_tokens": 64, "messages": messages, "stream": True}).encode()
        read = anthropic_reader.read(asked)
        assert read.from_prefix is (count > 1)
        assert read.request.model_dump() == anthropic.parse_request(asked).model_dump()
        assert read.digest.hexdigest() == unmarked_key(asked).fingerprint
        asked = json.dumps({"model": "m", "input": messages, "instructions": "Be brief."}).encode()
        read = responses_reader.read(asked)
        assert read.from_prefix is (count > 1)
        assert read.request.model_dump() == responses.parse_request(asked).model_dump()
    assert not responses_reader.read(b'{"input": "a string"}').from_prefix
    with pytest.raises(BadRequestError, match="max_tokens"):
        anthropic_reader.read(json.dumps({"messages": [*messages, {"role": "user", "content": "x"}]}).encode())


def test_an_anthropic_resend_translates_only_its_new_messages_to_the_same_chat_request() -> None:
    session: Any = SimpleNamespace(translations={}, session_id="s")
    signer = RoundTripSigner.for_journal(None)
    family = get_family("qwen3")
    reader = anthropic.body_reader()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the test."}]
    tools = [{"name": "run", "description": "Run a command.", "input_schema": {"type": "object"}}]
    whole_reads = []
    for turn in range(6):
        # from the fifth body on a field after the messages changed: that body holds stand-ins no kept translation
        # covers (its other fields are not the translated request's), so it is read whole again and translated whole
        asked = {"model": "m", "max_tokens": 64, "system": "Be brief.", "messages": messages, "tools": tools}
        asked_bytes = json.dumps({**asked, "temperature": 0.5} if turn >= 4 else asked).encode()
        read = reader.read(asked_bytes)
        request = read.request
        assert read.from_prefix is (turn > 0)

        def whole(body: bytes = asked_bytes, turn: int = turn) -> anthropic.AnthropicRequest:
            whole_reads.append(turn)
            return reader.read_whole(body).request

        expected = anthropic.chat_request(anthropic.parse_request(asked_bytes), session, signer, family)
        reused = anthropic.chat_request_reusing(request, session, signer, family, whole)
        assert reused.model_dump() == expected.model_dump()
        assert are_held(reused.tools)
        kept = session.translations["anthropic"][0].request.messages
        assert len(kept) == len(messages) and all(type(m) is resent_prefix.Settled for m in kept)
        assert reader._lasts[0].elements is kept  # the reader keeps the stand-ins, not the messages' JSON
        call = {"type": "tool_use", "id": f"call-{turn}", "name": "run", "input": {"cmd": "pytest"}}
        result = {"type": "tool_result", "tool_use_id": f"call-{turn}", "content": "1 failed ✓"}
        messages = [*messages, {"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    assert whole_reads == [4]
    assert len(session.translations["anthropic"][0].ends) == len(messages) - 2


def test_a_responses_resend_translates_only_its_items_after_the_last_closed_assistant_turn() -> None:
    session: Any = SimpleNamespace(translations={}, session_id="s")
    signer = RoundTripSigner.for_journal(None)
    family = get_family("qwen3")
    reader = responses.body_reader()
    tools = [{"type": "function", "name": "run", "parameters": {"type": "object"}}]
    items: list[dict[str, Any]] = [{"role": "user", "content": "Fix the test."}]
    for turn in range(5):
        # Codex's `client_metadata`, after the input, changes every turn: the other fields are parsed again, equal
        metadata = {"turn_id": f"t{turn}"}
        asked = json.dumps(
            {"model": "m", "instructions": "Be brief.", "input": items, "tools": tools, "client_metadata": metadata}
        ).encode()
        request = reader.read(asked).request
        request_tools = responses.request_tools(request, "drop")
        assert are_held(request_tools.chat) and request_tools.echoed == orjson.dumps(tools)
        whole = responses.chat_request(responses.parse_request(asked), request_tools, session, signer, family)
        reused = responses.chat_request_reusing(
            request, request_tools, session, signer, family, lambda: pytest.fail("the translation was not reused")
        )
        assert reused.model_dump() == whole.model_dump()
        assert are_held(reused.tools)
        # the items up to the last that closes every assistant message are stand-ins; those after it stay JSON
        said_by_model = [item.get("role") == "assistant" or item.get("type") == "function_call" for item in items]
        closed = max(index for index, by_model in enumerate(said_by_model) if not by_model)
        kept = session.translations["responses"][0].request.input
        assert [type(item) is resent_prefix.Settled for item in kept] == [i <= closed for i in range(len(items))]
        said = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Running."}]}
        call = {"type": "function_call", "call_id": f"c{turn}", "name": "run", "arguments": '{"cmd": "pytest"}'}
        output = {"type": "function_call_output", "call_id": f"c{turn}", "output": "1 failed ✓"}
        # a turn's assistant items (text, then a call) are one chat message: a resend that stopped after the text
        # must not reuse a translation cut inside it
        items = [*items, said, call, output] if turn % 2 else [*items, said]


def are_held(tools: list[dict[str, Any]] | None) -> bool:
    """The tools are the process's held objects (a session keeps no copy of its own), found without encoding."""
    assert tools
    return SHARED.held_tuple(tools) == tuple(tools) and all(map(operator.is_, SHARED.held_tuple(tools), tools))


def test_turns_of_interleaved_conversations_are_each_read_from_their_own_previous_body() -> None:
    validated: list[int] = []
    prefix = counting_reader(validated)
    main, side = turns(6), [{"role": "system", "content": "Summarise."}, {"role": "user", "content": "the log"}]
    check(prefix, body(main[:3]), False)
    check(prefix, body(side), True)  # from the head the two share, kept apart from the main conversation
    for count in range(5, 13, 2):
        check(prefix, body(main[:count]), True)
        side = [*side, {"role": "assistant", "content": "ok"}, {"role": "user", "content": f"more {count}"}]
        check(prefix, body(side), True)
    assert validated == [2] * 9  # each body read from its own conversation's last, not from the head it shares


def counting_reader(validated: list[int]) -> ResentPrefix[ChatCompletionRequest]:
    """The chat reader, counting the elements each validation of new elements alone gets."""

    def validate_elements(array: bytes) -> list[Any]:
        elements = json_objects(array)
        validated.append(len(elements))
        return elements

    prefix = chat_body_reader()
    prefix.validate_elements = validate_elements
    return prefix


def read_as_whole(prefix: ResentPrefix[ChatCompletionRequest], body: bytes) -> bool:
    """`prefix.read(body)` gives what a whole read gives: the same request and digest, or the same error."""
    try:
        whole = parse_chat_request(body)
    except BadRequestError as exc:
        with pytest.raises(BadRequestError) as raised:
            prefix.read(body)
        assert str(raised.value) == str(exc)
        return False
    read = prefix.read(body)
    assert read.request.model_dump() == whole.model_dump()
    assert read.digest.hexdigest() == unmarked_key(body).fingerprint
    return read.from_prefix


@pytest.mark.parametrize("indent", [None, 2])
def test_appended_messages_are_validated_once_and_not_scanned_until_a_body_parts_among_them(
    monkeypatch: pytest.MonkeyPatch, indent: int | None
) -> None:
    """A body that ends with the previous body's bytes after the array: its new messages are validated at once
    and never scanned for their ends; a later body that rewrites one of them finds those ends then."""
    scans: list[int] = []
    scan = json_spans.continue_array
    monkeypatch.setattr(json_spans, "continue_array", lambda *args: scans.append(1) or scan(*args))
    validated: list[int] = []
    prefix = counting_reader(validated)
    messages = turns(8)
    assert not read_as_whole(prefix, body(messages[:3], indent, tools=[]))
    scans.clear()
    for count in (6, 9, 12):
        assert read_as_whole(prefix, body(messages[:count], indent, tools=[]))
    assert (scans, validated) == ([], [3, 3, 3])
    messages[9] = {**messages[9], "cache_control": {"type": "ephemeral"}}  # the oldest of the last KEPT rewritten
    assert read_as_whole(prefix, body([*messages[:12], {"role": "user", "content": "next"}], indent, tools=[]))
    assert len(scans) == 1  # the ends of the last read's new messages, to read from the rewritten one
    assert validated[-1] == 4


def test_a_field_added_after_the_array_whose_bytes_end_like_the_previous_rest_is_read_from_the_prefix() -> None:
    """`...]}` ends both bodies, but the array closes earlier in the new one: its new messages are scanned."""
    prefix = reader()
    messages = turns(4)
    check(prefix, body(messages), False)
    check(prefix, body([*messages, {"role": "user", "content": "go"}], tools=[{"type": "function"}]), True)


def validating(prefix: ResentPrefix[Any], validated: list[bytes]) -> ResentPrefix[Any]:
    """`prefix`, keeping each body its whole-request validation gets in `validated`."""
    whole = prefix.validate
    prefix.validate = lambda body: validated.append(body) or whole(body)
    return prefix


@pytest.mark.parametrize(
    ("rest", "count"),
    [
        (b'"t": [1], "s": true, "c": {"x": 1}}', 3),
        (b'"t": [1], "s": true, "c": {"x": 2}}', 2),
        (b'"t": [1], "s": false, "c": {"x": 1}}', 1),
        (b'"t": [2], "s": true, "c": {"x": 1}}', 0),
        (b'"t": [1], "s": true}', 2),
        (b'"t": [1]}', 1),
    ],
)
def test_the_members_after_the_array_are_unchanged_up_to_the_first_that_differs(rest: bytes, count: int) -> None:
    """Counted with the members but the last tried first (Codex changes only its last), the digest state of the
    unchanged bytes returned either way."""
    first = b'{"m": [], "t": [1], "s": true, "c": {"x": 1}}'
    located = json_spans.find_array(first.decode(), "m")
    later = json_spans.members_in_bytes(first.decode(), located.after)
    members = resent_prefix._NO_MEMBERS.continued(first, located.close, 0, xxhash.xxh3_128(), later)
    assert members is not None and members.names == ("t", "s", "c") and members.unique == 0b101
    body = b'{"m": [], ' + rest
    found, state = members.unchanged(body, located.close)
    assert found == count
    end = located.close + members.ends[count - 1] if count else located.close
    assert state.digest() == xxhash.xxh3_128_digest(body[located.close : end])


@pytest.mark.parametrize("indent", [None, 2])
def test_a_changed_later_member_is_validated_without_the_unchanged_arrays_and_objects_before_it(
    indent: int | None,
) -> None:
    """Codex's `client_metadata`, after its tools, changes every turn: the tools are the previous request's, never
    validated again; the unchanged scalars before the change are validated again (a dialect's checks of a field
    see them), the changed member and everything after it too."""
    validated: list[bytes] = []
    prefix = validating(chat_body_reader(), validated)
    messages = turns(8)
    tools = [{"type": "function", "function": {"name": "run", "description": "Run it ✓", "parameters": {}}}]
    first = check(prefix, body(messages[:3], indent, tools=tools, seed=1, metadata={"turn": 0}), False)
    for count in range(5, 17, 2):
        validated.clear()
        later = check(prefix, body(messages[:count], indent, tools=tools, seed=1, metadata={"turn": count}), True)
        assert later.tools is first.tools and later.model_extra == {"metadata": {"turn": count}}
        assert len(validated) == 1 and b"Run it" not in validated[0]
        assert b'"seed"' in validated[0] and f"step {count // 2 - 1} ".encode() in validated[0]


def test_a_codex_resend_reads_its_new_items_and_client_metadata_and_keeps_its_tools_include_and_instructions() -> None:
    """Codex's body: long instructions before `input`; tools, scalars, `include` (a field tito does not declare) and
    `client_metadata`, which changes every turn, after it."""
    validated: list[bytes] = []
    prefix = validating(responses.body_reader(), validated)
    tools = [{"type": "function", "name": "exec_command", "description": "Run ✓", "parameters": {}, "strict": False}]
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": "go"}]
    first = None
    for turn in range(6):
        asked = orjson.dumps({
            "model": "m", "instructions": 'Be brief ✓ "quoted"\n' * 40, "input": items, "tools": tools,
            "tool_choice": "auto", "store": False, "stream": True, "include": ["reasoning.encrypted_content"],
            "client_metadata": {"turn_id": f"turn-{turn}"},
        })  # fmt: skip
        validated.clear()
        read = prefix.read(asked)
        assert read.request.model_dump() == responses.parse_request(asked).model_dump()
        assert read.digest.hexdigest() == unmarked_key(asked).fingerprint
        if first is None:
            first = read.request
        else:
            assert read.from_prefix and read.request.tools is first.tools
            assert read.request.model_extra["include"] is first.model_extra["include"]
            assert read.request.instructions is first.instructions
            assert len(validated) == 1 and b"exec_command" not in validated[0] and b"include" not in validated[0]
            assert b"Be brief" not in validated[0] and b'"model":"m"' in validated[0]
        items = [*items, {"type": "function_call_output", "call_id": f"c{turn}", "output": "ok " * turn}]


def test_long_members_before_the_array_are_the_previous_requests_unless_a_later_member_repeats_their_name() -> None:
    """Arrays, objects and long strings before the conversation are taken from the previous request when later
    members changed (short ones are validated again); a member after the array with the same name is the value."""
    validated: list[bytes] = []
    prefix = validating(chat_body_reader(), validated)
    note, short = "ü ✓ \\ " * 64, "s" * 10
    messages = turns(8)

    def asked(count: int) -> bytes:
        fields = {"note": note, "short": short, "response_format": {"type": "text"}, "model": "m"}
        after = {"stop": ["\n"], "metadata": {"turn": count}}
        return json.dumps({**fields, "messages": messages[:count], **after}).encode()

    first = check(prefix, asked(3), False)
    validated.clear()
    second = check(prefix, asked(5), True)
    assert second.model_extra is not None and first.model_extra is not None
    assert second.model_extra["note"] is first.model_extra["note"] and second.response_format is first.response_format
    assert len(validated) == 1 and b'"short": "ssssssssss"' in validated[0] and b"note" not in validated[0]
    repeated = check(prefix, asked(7)[:-1] + b', "note": "later"}', True)
    assert repeated.model_extra is not None and repeated.model_extra["note"] == "later"
    assert check(prefix, asked(9), True).model_extra == {**first.model_extra, "metadata": {"turn": 9}}
    assert b"note" in validated[2]  # the previous request's value was the later member's
    assert check(prefix, asked(11), True).model_extra == {**first.model_extra, "metadata": {"turn": 11}}
    assert len(validated) == 4 and b"note" not in validated[3]


def test_a_later_member_that_repeats_an_unchanged_one_gives_its_value_as_a_whole_read_does() -> None:
    prefix = reader()
    messages = turns(6)
    tools: list[dict[str, Any]] = [{"type": "function", "function": {"name": "run"}}]
    asked = body(messages[:3], tools=tools, metadata={"turn": 0})
    check(prefix, asked, False)
    repeated = body(messages[:5], tools=tools, metadata={"turn": 1})[:-1] + b', "tools": []}'
    assert check(prefix, repeated, True).tools == []
    assert check(prefix, body(messages[:7], tools=tools, metadata={"turn": 2}), True).tools == tools
    before = reader()  # a name repeated before the array: the member after it is the value
    for count, turn in ((3, 0), (5, 1), (7, 2)):
        asked = b'{"tools": [], ' + body(messages[:count], tools=tools, metadata={"turn": turn})[1:]
        assert check(before, asked, count > 3).tools == tools


def test_a_changed_first_member_after_the_array_or_an_invalid_later_one_reads_as_a_whole_read() -> None:
    prefix = reader()
    messages = turns(8)
    tools: list[dict[str, Any]] = [{"type": "function", "function": {"name": "run"}}]
    check(prefix, body(messages[:3], tools=tools, metadata={"turn": 0}), False)
    check(prefix, body(messages[:5], tools=[], metadata={"turn": 1}), True)  # its new messages scanned
    check(prefix, body(messages[:7], tools=[], metadata={"turn": 2}), True)
    assert not read_as_whole(prefix, body(messages[:9], tools=[], metadata={"turn": 3}, n=3))  # refused
    assert not read_as_whole(prefix, body(messages[:9], tools=[], temperature=float("nan")))  # not JSON
    check(prefix, body(messages[:9], tools=[], metadata={"turn": 4}), True)


def test_random_resends_with_later_members_changing_every_turn_read_as_whole_reads() -> None:
    """Appends, rewrites of the last few messages and malformed tails, each body with a long string and an object
    before the conversation, an unchanged array and object after it (tools), then members of which some change every
    turn (a spacing, a scalar, an object, a repeated name, one left out, one repeating a name before the array)."""
    rng = random.Random(11)
    prefix = reader()
    messages = turns(2)
    tools = [{"type": "function", "function": {"name": "run", "parameters": {"a": [1, "]}"]}}}]
    head = b'{"note": ' + json.dumps("ü ✓ " * 80).encode() + b', "format": {"a": [1]}, '
    changed_reads = 0
    for step in range(300):
        if rng.random() < 0.7 or len(messages) < 3:
            messages = messages + turns(rng.randrange(1, 4) + step)[-rng.randrange(1, 3) :]
        else:
            at = len(messages) - rng.randrange(1, min(len(messages), 5))
            messages = [*messages[:at], {**messages[at], "cache_control": {"step": step}}, *messages[at + 1 :]]
        if len(messages) > 40:
            messages = messages[:2]
        later = rng.choice(
            [
                {"metadata": {"turn": step}},
                {"seed": step},
                {"stream": step % 2 == 0, "metadata": {"ü": "✓" * step}},
                {},
                {"note": step, "metadata": {}},
            ]
        )
        asked = head + body(messages, None, tools=tools, stop=["\n"], **later)[1:]
        if rng.random() < 0.1:
            asked = asked[:-1] + rng.choice([b', "tools": null}', b',"stop":[]}', b" }", b',"seed":1.5}', b',"x":{]}'])
        changed_reads += read_as_whole(prefix, asked)
    assert changed_reads > 150


@pytest.mark.parametrize(
    ("tail", "from_prefix"),
    [
        (b', {"role": "user", "content": "ok"} ]', True),
        (b'\n\t,\r\n {"role":"user","content":"ok ] } \\" \\\\"}\n]', True),
        (
            b',{"role":"user","content":"\\u00fc \xc3\xbc \xe2\x9c\x93 \\ud83d\\ude00"},{"role":"user","content":"x"}]',
            True,
        ),
        (b', {"role": "user", "content": "ok", "role": "assistant"}]', True),
        (b', {"role": "user", "content": [1, 2.5e3, -0, true, false, null, {"a": []}]}]', True),
        (b', {"role": "user", "content": "ok"}, ]', False),
        (b', {"role": "user", "content": "ok"} {"role": "user", "content": "no comma"}]', False),
        (b',, {"role": "user", "content": "ok"}]', False),
        (b', {"role": "user", "content": "unclosed]', False),
        (b', {"role": "user", "content": "\xff"}]', False),
        (b', {"role": "user", "content": "ok"}, 7]', False),
        (b', "a string"]', False),
        (b", ]", False),
        (b" ]", False),
    ],
)
@pytest.mark.parametrize("rest", [b"}", b' , "tools": [] }', b',"stream":false}'])
def test_a_resent_array_however_its_new_bytes_are_spaced_escaped_or_malformed_reads_as_a_whole_read(
    tail: bytes, from_prefix: bool, rest: bytes
) -> None:
    messages = turns(3)
    head = body(messages)[: -len(b"]}")]
    prefix = reader()
    check(prefix, head + b"]" + rest, False)
    assert read_as_whole(prefix, head + tail + rest) is from_prefix
    read_as_whole(prefix, head + tail + b"}")  # the rest changed too


def test_random_resends_read_as_whole_reads() -> None:
    """Appends of a few messages, rewrites of the last few, changed fields after the array, other spacing and
    malformed tails, in random order: each read gives what a whole read gives."""
    rng = random.Random(7)
    prefix = reader()
    messages = turns(2)
    fields: dict[str, Any] = {}
    indent: int | None = None
    appended_from_prefix = 0
    for step in range(300):
        roll = rng.random()
        if roll < 0.5:
            messages = messages + turns(rng.randrange(1, 4) + step)[-rng.randrange(1, 4) :]
        elif roll < 0.65 and len(messages) > 1:
            at = len(messages) - rng.randrange(1, min(len(messages), 7))
            messages = [
                *messages[:at],
                {**messages[at], "cache_control": {"step": step, "ü": "✓"}},
                *messages[at + 1 :],
            ]
        elif roll < 0.75:
            fields = rng.choice([{}, {"tools": []}, {"temperature": 0.5}, {"stream": True, "tools": [{"a": "]}"}]}])
        elif roll < 0.8:
            indent = rng.choice([None, 1, 2])
        elif roll < 0.9:
            asked = body(messages, indent, **fields)
            cut = asked.rindex(b"]") if not fields else asked.index(b"]", asked.index(b'"messages"'))
            read_as_whole(prefix, asked[:cut] + rng.choice([b",]", b",{}]", b',"x"]', b"{", b",{]"]) + asked[cut + 1 :])
            continue
        if len(messages) > 40:
            messages = messages[:2]
        from_prefix = read_as_whole(prefix, body(messages, indent, **fields))
        appended_from_prefix += from_prefix and roll < 0.5
    assert appended_from_prefix > 100


def test_a_reader_keeps_only_the_last_elements_of_a_previous_body_not_the_body() -> None:
    """What a session's reader keeps does not grow with the history: the bytes of the last few elements, and
    digests of the rest (a body whose early bytes or later fields changed is still read whole)."""
    prefix, messages = reader(), turns(60)
    tools = [{"type": "function", "function": {"name": "run", "description": "x" * 5000}}]
    kept = []
    for count in range(1, 61):
        sent = body(messages[: 2 * count], tools=tools)
        check(prefix, sent, count > 1)
        kept.append(sum(len(last.tail) for last in prefix._lasts))
    assert max(kept) < 600 < len(sent) / 20
    early = body([{**messages[0], "content": "Be long."}, *messages[1:121]], tools=tools)
    assert check(prefix, body(messages[:121], tools=tools), True) and not prefix.read(early).from_prefix
    check(prefix, body(messages[:122], tools=tools), True)
    check(prefix, body(messages[:123], tools=[{**tools[0], "type": "custom"}]), False)


def test_a_resent_reply_the_session_stores_is_kept_as_the_stored_object() -> None:
    """The reader keeps the session's own reply where a body resends it as it is (equal as JSON: `1` is not
    `1.0`), on a whole read and on a read from the prefix alike."""
    messages = turns(3)
    stored = [dict(messages[2]), dict(messages[4])]
    prefix = chat_body_reader(SimpleNamespace(recent_replies=lambda count: stored[:count]))  # type: ignore[arg-type]
    first = check(prefix, body(messages[:3]), False)
    assert first.messages[2] is stored[0]
    later = check(prefix, body(messages[:5]), True)
    assert later.messages[2] is stored[0] and later.messages[4] is stored[1]
    as_float = {**messages[4], "extra": {"n": [1.0, 2.5, None]}}
    assert as_float == stored[1]
    resent = check(prefix, body([*messages[:4], as_float]), True)
    assert resent.messages[4] is not stored[1] and resent.messages[4]["extra"]["n"][0] == 1.0
