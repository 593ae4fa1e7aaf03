"""One parse case per registered family (its tokenizer and its own render), plus hypothesis strategies
for assistant messages."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from tests.conftest import family_tokenizer
from tito.families.base import Family, Junction, ToolArguments
from tito.families.registry import FAMILIES
from tito.parsing import CompletionParser, build_completion_parser
from tito.tokenizer import TitoTokenizer, get_tito_tokenizer
from tito.tokenizer_loading import Tokenizer

Message = dict[str, Any]
Render = Callable[[list[Message], Sequence[Message] | None, bool], str]

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"},
                    "metric": {"type": "boolean"},
                    "options": {"type": "object"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the web.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "limit": {"type": "number"}, "filters": {"type": "object"}},
            },
        },
    },
]


@dataclass(frozen=True)
class Case:
    """A family to parse for, its tokenizer and the render that produces its completions."""

    name: str
    family: Family
    tokenizer: Tokenizer
    tito: TitoTokenizer
    """Renders with reasoning on, and parses (`tito.parse_completion`, the one way in)."""

    @property
    def render(self) -> Render:
        return self.tito.render

    @cached_property
    def parser(self) -> CompletionParser:
        """The family's parser, for what it reads of a prompt (`prompt_opened`)."""
        return build_completion_parser(self.family, self.tokenizer)

    @property
    def object_arguments(self) -> bool:
        return self.family.tool_arguments is ToolArguments.OBJECT

    @property
    def keeps_call_ids(self) -> bool:
        return self.family.output_format == "kimi"


def case_names() -> list[str]:
    """Every family with a parser to test: the registered ones but `default`."""
    return [name for name in FAMILIES if name != "default"]


@cache
def get_case(name: str) -> Case:
    family = FAMILIES[name]
    tokenizer = family_tokenizer(name)
    thinking_on = {family.thinking_kwarg: True} if family.thinking_kwarg else None  # reasoning is rendered
    return Case(name, family, tokenizer, get_tito_tokenizer(tokenizer, name, thinking_on))


# ---- completions from rendered messages ----

PROMPT: list[Message] = [{"role": "user", "content": "What should I pack for Paris?"}]


@dataclass(frozen=True)
class Completion:
    prompt_ids: list[int]
    completion_ids: list[int]
    text: str


def render_completion(case: Case, assistant: Message, tools: Sequence[Message] | None = TOOLS) -> Completion:
    """The ids the model would have sampled for `assistant`: the in-context ids after the generation prompt,
    through the stop token (for a stop-is-next-opener family, the opener of what follows)."""
    prompt = case.render(PROMPT, tools, True)
    full = case.render([*PROMPT, assistant], tools, False)
    assert full.startswith(prompt), (
        f"{case.name}: the render of the assistant does not continue the generation prompt "
        f"({prompt[-30:]!r} vs {full[len(prompt) - 30 : len(prompt) + 30]!r})"
    )
    completion = full[len(prompt) :]
    family = case.family
    if family.junction is Junction.STOP_IS_NEXT_OPENER:
        opener = "<|observation|>" if assistant.get("tool_calls") and "<|observation|>" in family.stop_tokens else None
        completion += opener or family.end_of_turn
    else:
        completion = completion[: completion.rindex(family.end_of_turn) + len(family.end_of_turn)]
    prompt_ids = case.tokenizer.encode(prompt, add_special_tokens=False)
    full_ids = case.tokenizer.encode(prompt + completion, add_special_tokens=False)
    if full_ids[: len(prompt_ids)] == prompt_ids:
        return Completion(prompt_ids, full_ids[len(prompt_ids) :], completion)
    # BPE merged across the prompt's end (`<think>\n` + `\n</think>`): an engine samples after the prompt's
    # own ids, so the completion is the rest encoded on its own.
    return Completion(prompt_ids, case.tokenizer.encode(completion, add_special_tokens=False), completion)


# ---- hypothesis strategies ----

ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n\t.,:;!?'\"{}[]()-_/\\*#@&%$=+éüßñжΩ中文字✓—😀"
)
"""Precomposed characters only (tokenizers normalise to NFC); no `<`, `>`, `|`, `~`, so no text spells a marker."""

text = st.text(alphabet=ALPHABET, max_size=24)
trimmed_text = text.map(str.strip)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), text)
json_value = st.recursive(
    json_leaf,
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(text, children, max_size=3)),
    max_leaves=8,
)
string_value = st.one_of(text, st.sampled_from(["true", "false", "3", "null", "[1, 2]", '{"a": 1}', ""]))
number_value = st.one_of(st.integers(-1000, 1000), st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False))
_BY_TYPE = {
    "string": string_value,
    "integer": st.integers(-(10**9), 10**9),
    "boolean": st.booleans(),
    "number": number_value,
    "object": st.dictionaries(text, json_value, max_size=3),
    "array": st.lists(json_value, max_size=3),
}


@st.composite
def arguments_for(draw: st.DrawFn, tool: dict[str, Any]) -> dict[str, Any]:
    properties = tool["function"]["parameters"]["properties"]
    names = draw(st.lists(st.sampled_from(sorted(properties)), unique=True, max_size=len(properties)))
    return {name: draw(_BY_TYPE[properties[name]["type"]]) for name in names}


@st.composite
def assistant_messages(draw: st.DrawFn, case: Case, tools: list[dict[str, Any]] = TOOLS) -> Message:
    """An assistant message in the family's canonical form (what its render writes and its parse returns)."""
    reasoning = draw(trimmed_text)  # every fixed template renders empty reasoning as the block it sampled
    content = draw(trimmed_text)
    message: Message = {"role": "assistant", "content": content, "reasoning_content": reasoning}
    chosen = draw(st.lists(st.sampled_from(tools), max_size=3))
    calls = []
    for index, tool in enumerate(chosen):
        arguments = draw(arguments_for(tool))
        if case.object_arguments:
            arguments_text = json.dumps(arguments, ensure_ascii=False)
        else:  # JSON-text formats keep the model's spelling, whatever it is
            ensure_ascii = draw(st.booleans())
            separators = draw(st.sampled_from([(", ", ": "), (",", ":")]))
            arguments_text = json.dumps(arguments, ensure_ascii=ensure_ascii, separators=separators)
        name = tool["function"]["name"]
        call_id = f"functions.{name}:{index}" if case.keeps_call_ids else f"call_{index}"
        calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments_text}})
    if calls:
        message["tool_calls"] = calls
    # Text that spells one of the family's tokens (`[EOS]`) would be encoded as that token.
    written = json.dumps(message, ensure_ascii=False)
    assume(not any(token in written for token in (*case.family.special_tokens, *case.family.stop_tokens)))
    return message


def without_generated_ids(message: Message, case: Case) -> Message:
    """The message with tito-assigned call ids dropped (Kimi's ids are the model's own and stay)."""
    if case.keeps_call_ids or not message.get("tool_calls"):
        return message
    return {**message, "tool_calls": [{k: v for k, v in call.items() if k != "id"} for call in message["tool_calls"]]}
