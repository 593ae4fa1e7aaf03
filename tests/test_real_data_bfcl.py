"""Real agent data: the Berkeley Function Calling Leaderboard's tools and ground-truth calls, through every family.

For a bounded, seeded sample of BFCL entries (single-turn parallel/multiple/live categories, and multi-turn
sessions) each ground-truth call is rendered as the assistant turn the model would have sampled, tokenized,
parsed back and compared with the calls it came from. Multi-turn sessions build every prompt incrementally
(`merge_tokens`) and check that the stored ids stay its exact prefix (Invariant 2) on real schemas.

BFCL schemas use their own type names (`dict`, `float`, `tuple`, `any`); XML-parameter parsers read them by meaning
(issue 9 item 1), so every family returns the same calls. Skips when `bfcl-eval` is not installed.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import random
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import family_tito
from tito.conformance import simulated_stored_ids
from tito.families import list_families
from tito.tokenizer import TitoTokenizer

Message = dict[str, Any]
SAMPLE_SIZE = 6
SEED = 9
SINGLE_TURN = ("parallel", "parallel_multiple", "multiple", "simple_python", "live_parallel_multiple", "live_multiple")
MULTI_TURN_CLASSES = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
FIXED_FAMILIES = [name for name in list_families() if name != "default"]


def _data_dir() -> Path:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("bfcl-eval is not installed (pip install bfcl-eval): it ships the BFCL data this test reads")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _json_values(path: Path) -> list[Any]:
    """Every JSON value in a file of concatenated values (BFCL writes JSON lines, some of them pretty-printed)."""
    text, decoder, values, position = path.read_text(encoding="utf-8"), json.JSONDecoder(), [], 0
    while position < len(text):
        if text[position].isspace():
            position += 1
            continue
        value, position = decoder.raw_decode(text, position)
        values.append(value)
    return values


@cache
def _entries(category: str) -> list[tuple[Message, Message]]:
    """A seeded sample of (question entry, ground-truth entry) pairs of one category."""
    data = _data_dir()
    questions = _json_values(data / f"BFCL_v4_{category}.json")
    answers = {answer["id"]: answer for answer in _json_values(data / "possible_answer" / f"BFCL_v4_{category}.json")}
    pairs = [(question, answers[question["id"]]) for question in questions if question["id"] in answers]
    return random.Random(SEED).sample(pairs, min(SAMPLE_SIZE, len(pairs)))


def _tools(functions: list[Message]) -> list[Message]:
    return [{"type": "function", "function": function} for function in functions]


def _first_allowed(ground_truth_call: Message) -> tuple[str, dict[str, Any]]:
    """BFCL lists every accepted value of a parameter; take the first, leaving out an optional one (`""`)."""
    ((name, parameters),) = ground_truth_call.items()
    return name, {key: values[0] for key, values in parameters.items() if values and values[0] != ""}


def _python_call(source: str, functions: dict[str, Message]) -> tuple[str, dict[str, Any]]:
    """A multi-turn ground-truth call such as `mv(source='a', destination='b')`; positional arguments take the
    schema's parameter names in order."""
    call = ast.parse(source, mode="eval").body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise ValueError(f"not a plain call: {source}")
    names = list(functions[call.func.id]["parameters"].get("properties", {}))
    arguments = {names[i]: ast.literal_eval(arg) for i, arg in enumerate(call.args)}
    arguments.update({kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg})
    return call.func.id, arguments


def _call_id(name: str, turn: int, index: int) -> str:
    """Kimi's template renders the id and its parser reads the name from it: `functions.NAME:INDEX`."""
    return f"functions.{name}:{turn * 100 + index}"


def _assistant(calls: list[tuple[str, dict[str, Any]]], turn: int) -> Message:
    return {
        "role": "assistant",
        "content": "",
        "reasoning_content": "Call the tools the request needs.",
        "tool_calls": [
            {"id": _call_id(name, turn, i), "type": "function", "function": {"name": name, "arguments": arguments}}
            for i, (name, arguments) in enumerate(calls)
        ],
    }


def _sample_and_parse(
    tt: TitoTokenizer, old: list[Message], new: list[Message], stored: list[int], tools: list[Message]
) -> tuple[list[int], list[tuple[str, Any]]]:
    """The prompt built incrementally, the assistant's sampled ids simulated from the full render, parsed back."""
    prompt = (
        tt.merge_tokens(old, new[:-1], stored, tools) if old else tt.tokenize_additional_messages([], new[:-1], tools)
    )
    turn_ids = simulated_stored_ids(tt, new, tools)
    assert turn_ids[: len(prompt)] == prompt, "the prompt is not a prefix of the rendered turn (Invariant 2)"
    result = tt.parse_completion(turn_ids[len(prompt) :], prompt, tools)
    assert not result.failed_calls, [(a.status.value, a.detail, a.raw[:200]) for a in result.failed_calls]
    parsed = [
        (call["function"]["name"], json.loads(call["function"]["arguments"]))
        for call in result.message.get("tool_calls") or []
    ]
    return turn_ids, parsed


def _expected(calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, Any]]:
    """What the calls read as after a JSON round trip (tuples become lists)."""
    return [(name, json.loads(json.dumps(arguments))) for name, arguments in calls]


def _case(family: str, category: str) -> Any:
    return pytest.param(family, category, id=f"{family}-{category}")


@pytest.mark.parametrize(("family", "category"), [_case(f, c) for f in FIXED_FAMILIES for c in SINGLE_TURN])
def test_ground_truth_calls_render_and_parse_back(family: str, category: str) -> None:
    tt = family_tito(family)
    for question, answer in _entries(category):
        tools = _tools(question["function"])
        messages = [*question["question"][0]]
        calls = [_first_allowed(call) for call in answer["ground_truth"]]
        _, parsed = _sample_and_parse(tt, [], [*messages, _assistant(calls, 0)], [], tools)
        assert parsed == _expected(calls), question["id"]


@pytest.mark.parametrize(("family", "category"), [_case(f, "multi_turn_base") for f in FIXED_FAMILIES])
def test_multi_turn_sessions_stay_token_exact_and_parse_back(family: str, category: str) -> None:
    tt = family_tito(family)
    data = _data_dir()
    for question, answer in _entries(category):
        docs = [
            _json_values(data / "multi_turn_func_doc" / f"{MULTI_TURN_CLASSES[c]}.json")
            for c in question["involved_classes"]
        ]
        functions = {doc["name"]: doc for doc_list in docs for doc in doc_list}
        tools = _tools(list(functions.values()))
        old: list[Message] = []
        stored: list[int] = []
        for turn, (user_messages, ground_truth) in enumerate(
            zip(question["question"], answer["ground_truth"], strict=False)
        ):
            calls = [_python_call(source, functions) for source in ground_truth]
            new = [*old, *user_messages]
            if calls:
                new.append(_assistant(calls, turn))
                stored, parsed = _sample_and_parse(tt, old, new, stored, tools)
                assert parsed == _expected(calls), (question["id"], turn)
                old = new
                new = [
                    *old,
                    *(
                        {"role": "tool", "tool_call_id": _call_id(name, turn, i), "content": "ok"}
                        for i, (name, _) in enumerate(calls)
                    ),
                ]
            new.append({"role": "assistant", "content": "Done.", "reasoning_content": "All calls answered."})
            stored, _ = _sample_and_parse(tt, old, new, stored, tools)
            old = new
