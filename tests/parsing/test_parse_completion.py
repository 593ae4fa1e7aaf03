"""parse_completion, per family: what the family renders parses back, and malformed output never raises.

Families come from tests/parsing/cases.py (every registered family, rendered by its fixed template or
encoder). Properties, not outputs: a rendered assistant message is the expected
parse, and every malformed completion has a documented status per tool-call attempt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.parsing.cases import (
    PROMPT,
    TOOLS,
    Case,
    assistant_messages,
    case_names,
    get_case,
    render_completion,
    without_generated_ids,
)
from tito.parsing import CallStatus, ParseResult

CASES = case_names()
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("name", CASES)
def test_a_rendered_assistant_message_parses_back_to_itself(name: str) -> None:
    case = get_case(name)

    @PROPERTY
    @given(assistant_messages(case))
    def round_trip(message: dict) -> None:
        completion = render_completion(case, message)
        result = case.tito.parse_completion(completion.completion_ids, completion.prompt_ids, TOOLS)
        assert without_generated_ids(result.message, case) == without_generated_ids(message, case), completion.text
        assert result.finish_reason == ("tool_calls" if message.get("tool_calls") else "stop")
        assert all(attempt.status is CallStatus.OK for attempt in result.attempts)

    round_trip()


@pytest.mark.parametrize("name", CASES)
def test_every_truncation_of_a_completion_parses_without_raising_and_reports_length(name: str) -> None:
    case = get_case(name)

    @settings(max_examples=8, deadline=None)
    @given(assistant_messages(case))
    def truncations(message: dict) -> None:
        completion = render_completion(case, message)
        ids = completion.completion_ids
        for cut in range(len(ids)):
            result = case.tito.parse_completion(ids[:cut], completion.prompt_ids, TOOLS)
            assert result.finish_reason == "length"
            assert "tool_calls" not in result.message or all(
                a.status is not CallStatus.UNCLOSED for a in result.attempts[: len(result.message["tool_calls"])]
            )

    truncations()


@pytest.mark.parametrize("name", CASES)
def test_ids_of_generated_call_are_unique_and_the_result_is_frozen(name: str) -> None:
    case = get_case(name)
    call = {"type": "function", "function": {"name": "search", "arguments": '{"query": "x"}'}}
    message = {
        "role": "assistant",
        "content": "",
        "reasoning_content": "r",
        "tool_calls": [{"id": f"functions.search:{i}", **call} for i in range(2)],
    }
    completion = render_completion(case, message)
    result = case.tito.parse_completion(completion.completion_ids, completion.prompt_ids, TOOLS)
    ids = [call["id"] for call in result.message["tool_calls"]]
    assert len(set(ids)) == 2
    with pytest.raises(AttributeError):
        result.finish_reason = "stop"  # type: ignore[misc]


# ---- malformed completions: one table per output format ----


@dataclass(frozen=True)
class Spelled:
    """A marker written with ordinary text tokens, one character at a time: text, never structure."""

    marker: str


@dataclass(frozen=True)
class Malformed:
    body: tuple[str | Spelled, ...]
    statuses: tuple[CallStatus, ...]
    finish: str
    content: str | None = None
    stopped: bool = True


OK, MISMATCH, BAD, UNCLOSED, UNKNOWN, NAMELESS = (
    CallStatus.OK,
    CallStatus.SCHEMA_MISMATCH,
    CallStatus.INVALID_ARGUMENTS,
    CallStatus.UNCLOSED,
    CallStatus.UNKNOWN_TOOL,
    CallStatus.MISSING_NAME,
)
_DS = "｜DSML｜"


def _dsml(block: str, *invokes: str) -> str:
    return f"\n\n<{_DS}{block}>\n" + "\n".join(invokes) + f"\n</{_DS}{block}>"


def _invoke(name: str | None, *parameters: str, closed: bool = True, dsml: str = "") -> str:
    head = f"<{dsml}invoke" + (f' name="{name}"' if name is not None else "") + ">\n"
    return head + "\n".join(parameters) + (f"\n</{dsml}invoke>" if closed else "")


def _ds_param(key: str, value: str, string: bool) -> str:
    return f'<{_DS}parameter name="{key}" string="{"true" if string else "false"}">{value}</{_DS}parameter>'


def _mm_param(key: str, value: str) -> str:
    return f'<parameter name="{key}">{value}</parameter>'


def _json_call(body: str) -> str:
    return f"<tool_call>\n{body}\n</tool_call>"


def _xml_call(name: str | None, params: str = "<parameter=city>\nParis\n</parameter>\n") -> str:
    function = f"<function={name}>\n" if name is not None else ""
    return f"<tool_call>\n{function}{params}</function>\n</tool_call>"


def _kimi(*calls: str) -> str:
    return "<|tool_calls_section_begin|>" + "".join(calls) + "<|tool_calls_section_end|>"


def _kimi_call(call_id: str, arguments: str, closed: bool = True) -> str:
    return f"<|tool_call_begin|>{call_id}<|tool_call_argument_begin|>{arguments}" + (
        "<|tool_call_end|>" if closed else ""
    )


_GOOD_JSON = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


def _ds_table(block: str) -> dict[str, Malformed]:
    good = _invoke("get_weather", _ds_param("city", "Paris", True), dsml=_DS)
    return {
        "ok": Malformed(("Sure.", _dsml(block, good)), (OK,), "tool_calls", "Sure."),
        "truncated_mid_call": Malformed(
            (
                "Sure.",
                f"\n\n<{_DS}{block}>\n",
                _invoke("get_weather", _ds_param("city", "Pa", True)[:30], closed=False, dsml=_DS),
            ),
            (UNCLOSED,),
            "length",
            "Sure.",
            stopped=False,
        ),
        "bad_json_value": Malformed(
            (_dsml(block, _invoke("get_weather", _ds_param("days", "three", False), dsml=_DS)),), (BAD,), "stop"
        ),
        "schema_mismatch_kept": Malformed(
            (_dsml(block, _invoke("get_weather", _ds_param("days", '"three"', False), dsml=_DS)),),
            (MISMATCH,),
            "tool_calls",
        ),
        "unknown_tool": Malformed((_dsml(block, _invoke("launch", dsml=_DS)),), (UNKNOWN,), "stop"),
        "missing_name": Malformed((_dsml(block, _invoke(None, dsml=_DS)),), (NAMELESS,), "stop"),
        "literal_tag_in_content": Malformed(
            (
                "Use ",
                "\n\n<",
                Spelled(_DS),
                f"{block}> to call.",
            ),
            (),
            "stop",
            f"Use \n\n<{_DS}{block}> to call.",
        ),
        "ok_then_broken": Malformed(
            (_dsml(block, good, _invoke("get_weather", _ds_param("days", "[", False), dsml=_DS)),),
            (OK, BAD),
            "tool_calls",
        ),
    }


TABLES: dict[str, dict[str, Malformed]] = {
    "qwen3_json": {
        "ok": Malformed(("Sure.\n", _json_call(_GOOD_JSON)), (OK,), "tool_calls", "Sure."),
        "truncated_mid_call": Malformed(
            ("Sure.\n<tool_call>\n", _GOOD_JSON[:25]), (UNCLOSED,), "length", "Sure.", stopped=False
        ),
        "bad_json": Malformed((_json_call('{"name": "get_weather", "arguments": {"city": Paris}}'),), (BAD,), "stop"),
        "arguments_not_object": Malformed(
            (_json_call('{"name": "get_weather", "arguments": "Paris"}'),), (BAD,), "stop"
        ),
        "schema_mismatch_kept": Malformed(
            (_json_call('{"name": "get_weather", "arguments": {"days": "three"}}'),), (MISMATCH,), "tool_calls"
        ),
        "unknown_tool": Malformed((_json_call('{"name": "launch", "arguments": {}}'),), (UNKNOWN,), "stop"),
        "missing_name": Malformed((_json_call('{"arguments": {"city": "Paris"}}'),), (NAMELESS,), "stop"),
        "literal_tag_in_content": Malformed(
            (
                "Write ",
                Spelled("<tool_call>"),
                " then JSON.",
            ),
            (),
            "stop",
            "Write <tool_call> then JSON.",
        ),
        "ok_then_broken": Malformed(
            (_json_call(_GOOD_JSON), "\n", _json_call('{"name": "search", "arguments": {')), (OK, BAD), "tool_calls"
        ),
    },
    "qwen3_xml": {
        "ok": Malformed(("Sure.\n\n", _xml_call("get_weather")), (OK,), "tool_calls", "Sure."),
        "truncated_mid_call": Malformed(
            ("Sure.\n\n", _xml_call("get_weather")[:40]), (UNCLOSED,), "length", "Sure.", stopped=False
        ),
        "schema_mismatch_kept": Malformed(
            (_xml_call("get_weather", "<parameter=days>\nthree\n</parameter>\n"),), (MISMATCH,), "tool_calls"
        ),
        "parameter_twice": Malformed(
            (_xml_call("get_weather", "<parameter=city>\nA\n</parameter>\n<parameter=city>\nB\n</parameter>\n"),),
            (BAD,),
            "stop",
        ),
        "unclosed_parameter": Malformed((_xml_call("get_weather", "<parameter=city>\nParis\n"),), (BAD,), "stop"),
        "unknown_tool": Malformed((_xml_call("launch"),), (UNKNOWN,), "stop"),
        "missing_name": Malformed((_xml_call(None),), (NAMELESS,), "stop"),
        "literal_tag_in_content": Malformed(
            (
                "Write ",
                Spelled("<tool_call>"),
                "<function=x>",
            ),
            (),
            "stop",
            "Write <tool_call><function=x>",
        ),
        "ok_then_broken": Malformed(
            (_xml_call("get_weather"), "\n", _xml_call("search", "<parameter=limit>\nmany\n")),
            (OK, BAD),
            "tool_calls",
        ),
    },
    "glm47": {
        "ok": Malformed(
            ("Sure.", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"),
            (OK,),
            "tool_calls",
            "Sure.",
        ),
        "truncated_mid_call": Malformed(
            ("Sure.", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Pa"),
            (UNCLOSED,),
            "length",
            "Sure.",
            stopped=False,
        ),
        "schema_mismatch_kept": Malformed(
            ("<tool_call>get_weather<arg_key>days</arg_key><arg_value>three</arg_value></tool_call>",),
            (MISMATCH,),
            "tool_calls",
        ),
        "key_without_value": Malformed(("<tool_call>get_weather<arg_key>city</arg_key></tool_call>",), (BAD,), "stop"),
        "unknown_tool": Malformed(("<tool_call>launch</tool_call>",), (UNKNOWN,), "stop"),
        "missing_name": Malformed(
            ("<tool_call><arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>",), (NAMELESS,), "stop"
        ),
        "literal_tag_in_content": Malformed(
            (
                "Write ",
                Spelled("<tool_call>"),
                "x",
            ),
            (),
            "stop",
            "Write <tool_call>x",
        ),
        "ok_then_broken": Malformed(
            (
                "<tool_call>search</tool_call>",
                "<tool_call>search<arg_key>limit</arg_key></tool_call>",
            ),
            (OK, BAD),
            "tool_calls",
        ),
    },
    "kimi": {
        "ok": Malformed(
            ("Sure.", _kimi(_kimi_call("functions.get_weather:0", '{"city": "Paris"}'))), (OK,), "tool_calls", "Sure."
        ),
        "truncated_mid_call": Malformed(
            (
                "Sure.",
                _kimi(_kimi_call("functions.get_weather:0", '{"city": "Pa', closed=False))[
                    : -len("<|tool_calls_section_end|>")
                ],
            ),
            (UNCLOSED,),
            "length",
            "Sure.",
            stopped=False,
        ),
        "bad_json": Malformed((_kimi(_kimi_call("functions.get_weather:0", '{"city": Paris}')),), (BAD,), "stop"),
        "schema_mismatch_kept": Malformed(
            (_kimi(_kimi_call("functions.get_weather:0", '{"days": "three"}')),), (MISMATCH,), "tool_calls"
        ),
        "unknown_tool": Malformed((_kimi(_kimi_call("functions.launch:0", "{}")),), (UNKNOWN,), "stop"),
        "missing_name": Malformed((_kimi(_kimi_call("", "{}")),), (NAMELESS,), "stop"),
        "literal_tag_in_content": Malformed(
            (
                "Write ",
                Spelled("<|tool_call_begin|>"),
                "x",
            ),
            (),
            "stop",
            "Write <|tool_call_begin|>x",
        ),
        "ok_then_broken": Malformed(
            (_kimi(_kimi_call("functions.search:0", "{}"), _kimi_call("functions.search:1", "[1]")),),
            (OK, BAD),
            "tool_calls",
        ),
    },
    "minimax": {
        "ok": Malformed(
            (
                "Sure.\n<minimax:tool_call>\n",
                _invoke("get_weather", _mm_param("city", "Paris")),
                "\n</minimax:tool_call>",
            ),
            (OK,),
            "tool_calls",
            "Sure.",
        ),
        "truncated_mid_call": Malformed(
            ("Sure.\n<minimax:tool_call>\n", _invoke("get_weather", _mm_param("city", "Paris"), closed=False)),
            (UNCLOSED,),
            "length",
            "Sure.",
            stopped=False,
        ),
        "schema_mismatch_kept": Malformed(
            ("<minimax:tool_call>\n", _invoke("get_weather", _mm_param("days", "three")), "\n</minimax:tool_call>"),
            (MISMATCH,),
            "tool_calls",
        ),
        "unknown_tool": Malformed(
            ("<minimax:tool_call>\n", _invoke("launch"), "\n</minimax:tool_call>"), (UNKNOWN,), "stop"
        ),
        "missing_name": Malformed(
            ("<minimax:tool_call>\n", _invoke(None), "\n</minimax:tool_call>"), (NAMELESS,), "stop"
        ),
        "literal_tag_in_content": Malformed(
            (
                "Write ",
                Spelled("<minimax:tool_call>"),
                "x",
            ),
            (),
            "stop",
            "Write <minimax:tool_call>x",
        ),
        "ok_then_broken": Malformed(
            (
                "<minimax:tool_call>\n",
                _invoke("search"),
                "\n",
                _invoke("search", "<parameter>lots"),
                "\n</minimax:tool_call>",
            ),
            (OK, BAD),
            "tool_calls",
        ),
    },
    "deepseekv32": _ds_table("function_calls"),
    "deepseekv4": _ds_table("tool_calls"),
    "plain": {},
}


def _malformed_cases() -> list[tuple[str, str]]:
    return [(name, kind) for name in CASES for kind in TABLES[get_case(name).family.output_format]]


def _ids(case: Case, parts: tuple[str | Spelled, ...]) -> list[int]:
    ids: list[int] = []
    for part in parts:
        if isinstance(part, Spelled):
            ids += [token for char in part.marker for token in case.tokenizer.encode(char, add_special_tokens=False)]
        else:
            ids += case.tokenizer.encode(part, add_special_tokens=False)
    return ids


def _prompt_and_reasoning(case: Case) -> tuple[list[int], list[int]]:
    """The generation prompt's ids and a closed reasoning block that continues it."""
    prompt_ids = case.tokenizer.encode(case.render(PROMPT, TOOLS, True), add_special_tokens=False)
    opened = case.parser.prompt_opened(prompt_ids)
    return prompt_ids, _ids(case, ("" if opened else "<think>", "Let me see.", "</think>"))


@pytest.mark.parametrize(("name", "kind"), _malformed_cases(), ids=[f"{n}-{k}" for n, k in _malformed_cases()])
def test_malformed_completions_get_their_documented_status_and_never_raise(name: str, kind: str) -> None:
    case = get_case(name)
    entry = TABLES[case.family.output_format][kind]
    prompt_ids, reasoning_ids = _prompt_and_reasoning(case)
    stop = _ids(case, (case.family.end_of_turn,)) if entry.stopped else []
    result = case.tito.parse_completion(reasoning_ids + _ids(case, entry.body) + stop, prompt_ids, TOOLS)
    assert tuple(attempt.status for attempt in result.attempts) == entry.statuses, result.attempts
    assert result.finish_reason == entry.finish
    assert [call["function"]["name"] for call in result.message.get("tool_calls", [])] == [
        attempt.name for attempt in result.attempts if attempt.status.is_call
    ]
    assert result.message["reasoning_content"] == "Let me see."
    if entry.content is not None:
        assert result.message["content"] == entry.content
    assert all(attempt.detail for attempt in result.failed_calls), "every failure says why"


@pytest.mark.parametrize("name", CASES)
def test_reasoning_cut_by_length_stays_reasoning_with_empty_content_and_no_calls(name: str) -> None:
    case = get_case(name)
    prompt_ids, _ = _prompt_and_reasoning(case)
    opener = () if case.parser.prompt_opened(prompt_ids) else ("<think>",)
    ids = _ids(case, (*opener, "Thinking about <tool_call> and more"))
    result = case.tito.parse_completion(ids, prompt_ids, TOOLS)
    assert result.message == {
        "role": "assistant",
        "content": "",
        "reasoning_content": "Thinking about <tool_call> and more",
    }
    assert (result.finish_reason, result.reasoning_closed, result.attempts) == ("length", False, ())


@pytest.mark.parametrize("name", CASES)
def test_the_trailing_stop_token_is_not_content(name: str) -> None:
    case = get_case(name)
    prompt_ids, reasoning_ids = _prompt_and_reasoning(case)
    for stop in case.family.stop_tokens:
        ids = reasoning_ids + _ids(case, ("Done.", stop))
        result = case.tito.parse_completion(ids, prompt_ids, TOOLS)
        assert (result.message["content"], result.finish_reason) == ("Done.", "stop"), stop


@pytest.mark.parametrize("name", CASES)
def test_without_prompt_ids_a_closing_think_marker_implies_the_prompt_opened_reasoning(name: str) -> None:
    case = get_case(name)
    ids = _ids(case, ("I should answer.", "</think>", "Done.", case.family.end_of_turn))
    result = case.tito.parse_completion(ids)
    assert (result.message["reasoning_content"], result.message["content"]) == ("I should answer.", "Done.")


@pytest.mark.parametrize("name", CASES)
@given(tools=st.sampled_from([None, TOOLS]))
@settings(max_examples=4, deadline=None)
def test_without_request_tools_any_name_is_accepted(name: str, tools: list | None) -> None:
    case = get_case(name)
    message = {"role": "assistant", "content": "", "reasoning_content": "r", "tool_calls": [
        {"id": "functions.launch:0", "type": "function", "function": {"name": "launch", "arguments": "{}"}}
    ]}  # fmt: skip
    completion = render_completion(case, message, tools=None)
    result = case.tito.parse_completion(completion.completion_ids, completion.prompt_ids, tools)
    assert result.attempts[0].status is (CallStatus.OK if tools is None else CallStatus.UNKNOWN_TOOL)


# ---- schema type names as real schemas write them (issue 9) ----

REAL_WORLD_TYPES: list[tuple[str, object]] = [
    ("float", 0.05),
    ("double", 2.5),
    ("Number", 3),
    ("int32", 7),
    ("Integer", -2),
    ("long", 10**12),
    ("String", "0.05"),
    ("str", "true"),
    ("Boolean", True),
    ("bool", False),
    ("dict", {"a": [1, None]}),
    ("Map", {"k": "v"}),
    ("tuple", [1, "two"]),
    ("list", []),
    ("any", {"free": "form"}),
    ("any", "free text"),
    ("no_such_type", 5),
]
MISMATCHED_TYPES: list[tuple[str, object]] = [("integer", "three"), ("float", [1]), ("bool", "maybe")]


def _one_parameter_tool(type_name: str) -> list[dict]:
    parameters = {"type": "object", "properties": {"p": {"type": type_name}}}
    return [{"type": "function", "function": {"name": "f", "description": "d", "parameters": parameters}}]


def _sampled_call(case: Case, type_name: str, value: object) -> ParseResult:
    tools = _one_parameter_tool(type_name)
    arguments = json.dumps({"p": value})
    call = {"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": arguments}}
    message = {"role": "assistant", "content": "", "reasoning_content": "r", "tool_calls": [call]}
    completion = render_completion(case, message, tools)
    return case.tito.parse_completion(completion.completion_ids, completion.prompt_ids, tools)


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize(("type_name", "value"), REAL_WORLD_TYPES, ids=[f"{t}-{v!r}" for t, v in REAL_WORLD_TYPES])
def test_a_call_typed_with_a_real_world_type_name_parses_back_in_every_family(
    name: str, type_name: str, value: object
) -> None:
    result = _sampled_call(get_case(name), type_name, value)
    (attempt,) = result.attempts
    assert attempt.status is CallStatus.OK, attempt.detail
    assert result.finish_reason == "tool_calls"
    assert json.loads(result.message["tool_calls"][0]["function"]["arguments"]) == {"p": value}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize(("type_name", "value"), MISMATCHED_TYPES, ids=[f"{t}-{v!r}" for t, v in MISMATCHED_TYPES])
def test_a_value_that_does_not_fit_its_schema_keeps_the_call_and_records_the_mismatch(
    name: str, type_name: str, value: object
) -> None:
    result = _sampled_call(get_case(name), type_name, value)
    (attempt,) = result.attempts
    assert attempt.status is CallStatus.SCHEMA_MISMATCH and "'p'" in attempt.detail
    assert result.finish_reason == "tool_calls"
    assert json.loads(result.message["tool_calls"][0]["function"]["arguments"]) == {"p": value}
