"""One parse case per family, plus hypothesis strategies for assistant messages.

Families not yet in the registry (written concurrently) get a stand-in: a Family value with the
official template's markers and stop tokens, rendered by the official template or the reference
DeepSeek encoder (test reference data only, never shipped). Once a family is registered the case
switches to the registry's family and its own fixed render through TitoTokenizer.render.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from tests.conftest import reference_path
from tito.conformance import builtin_tokenizer_for
from tito.families.base import Family, FixedTemplate, Junction, ToolArguments
from tito.families.registry import FAMILIES
from tito.rendering import compile_template, render_template
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import Tokenizer, build_proxy_tokenizer, load_tokenizer

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

# ---- stand-ins for families other helpers are writing (markers and stops from the official templates) ----

_GLM_SPECIALS = (
    "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>", "<|endoftext|>",
    "<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>",
    "</arg_value>", "<tool_response>", "</tool_response>",
)  # fmt: skip
_KIMI_SPECIALS = (
    "<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>", "<|im_end|>", "<think>", "</think>",
    "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>", "<|tool_call_end|>",
)  # fmt: skip
_MINIMAX_SPECIALS = ("]~!b[", "]~b]", "[e~[", "<think>", "</think>", "<minimax:tool_call>", "</minimax:tool_call>")
_NEMOTRON_SPECIALS = (
    "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>",
    "</tool_response>",
)  # fmt: skip
_DEEPSEEK_SPECIALS = (
    "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
    "<think>", "</think>", "｜DSML｜",
)  # fmt: skip


def _unrendered(*_: object) -> str:
    raise AssertionError("stand-in families render through the case's reference renderer")


def _stand_in(
    name: str,
    output_format: str,
    stops: tuple[str, ...],
    specials: tuple[str, ...],
    junction: Junction = Junction.PLAIN,
    tool_arguments: ToolArguments = ToolArguments.OBJECT,
) -> Family:
    return Family(
        name=name,
        summary="test stand-in until the family is registered",
        fixed_template=FixedTemplate(None, {}, ()),
        junction=junction,
        end_of_turn=stops[0],
        stop_tokens=stops,
        assistant_opener="",
        output_format=output_format,
        special_tokens=specials,
        tool_arguments=tool_arguments,
        encoder=_unrendered,
    )


@dataclass(frozen=True)
class StandIn:
    family: Family
    reference: str
    """Official template file name, or `dsv32`/`dsv4` for the reference encoders."""
    kwargs: tuple[tuple[str, Any], ...] = ()
    real_tokenizer: str | None = None


_GLM_STOPS = ("<|user|>", "<|observation|>", "<|endoftext|>")
STAND_INS: dict[str, StandIn] = {
    "glm47": StandIn(
        _stand_in("glm47", "glm47", _GLM_STOPS, _GLM_SPECIALS, Junction.STOP_IS_NEXT_OPENER), "glm-4.7.jinja"
    ),
    # kimi-k2.6.jinja with preserve_thinking writes K2.5's exact format and keeps the last turn's reasoning.
    "kimi25": StandIn(
        _stand_in("kimi25", "kimi", ("<|im_end|>",), _KIMI_SPECIALS, tool_arguments=ToolArguments.JSON_TEXT),
        "kimi-k2.6.jinja",
        (("preserve_thinking", True),),
    ),
    "kimi26": StandIn(
        _stand_in("kimi26", "kimi", ("<|im_end|>",), _KIMI_SPECIALS, tool_arguments=ToolArguments.JSON_TEXT),
        "kimi-k2.6.jinja",
        (("preserve_thinking", True),),
    ),
    "minimax_m25": StandIn(_stand_in("minimax_m25", "minimax", ("[e~[",), _MINIMAX_SPECIALS), "minimax-m2.5.jinja"),
    "minimax_m27": StandIn(_stand_in("minimax_m27", "minimax", ("[e~[",), _MINIMAX_SPECIALS), "minimax-m2.7.jinja"),
    "nemotron3": StandIn(
        _stand_in("nemotron3", "qwen3_xml", ("<|im_end|>",), _NEMOTRON_SPECIALS), "nemotron-3-nano.jinja"
    ),
    "deepseekv32": StandIn(
        _stand_in("deepseekv32", "deepseekv32", ("<｜end▁of▁sentence｜>",), _DEEPSEEK_SPECIALS), "dsv32"
    ),
    "deepseekv4": StandIn(
        _stand_in("deepseekv4", "deepseekv4", ("<｜end▁of▁sentence｜>",), _DEEPSEEK_SPECIALS),
        "dsv4",
        real_tokenizer="deepseekv4",
    ),
}
OFFICIAL_RENDERS_EMPTY_REASONING = frozenset({"deepseekv4", "kimi25", "kimi26"})
"""Stand-ins whose reference render of empty reasoning continues the thinking generation prompt; the official
GLM, MiniMax, Nemotron and DeepSeek V3.2 renders drop the block. Every registered fixed template keeps it."""


@dataclass(frozen=True)
class Case:
    """A family to parse for, its tokenizer and the render that produces its completions."""

    name: str
    family: Family
    tokenizer: Tokenizer
    render: Render
    registered: bool

    @property
    def object_arguments(self) -> bool:
        return self.family.tool_arguments is ToolArguments.OBJECT

    @property
    def keeps_call_ids(self) -> bool:
        return self.family.output_format == "kimi"


def case_names() -> list[str]:
    """Every family with a parser to test: the registered ones (but `default`) and the stand-ins."""
    return [name for name in FAMILIES if name != "default"] + [name for name in STAND_INS if name not in FAMILIES]


@cache
def get_case(name: str) -> Case:
    if name in FAMILIES:
        family = FAMILIES[name]
        tokenizer = _builtin_tokenizer(name)
        tito_tokenizer = get_tito_tokenizer(tokenizer, name)
        return Case(name, family, tokenizer, tito_tokenizer.render, registered=True)
    stand_in = STAND_INS[name]
    family = stand_in.family
    tokenizer = _tokenizer(stand_in.real_tokenizer, family.special_tokens)
    return Case(name, family, tokenizer, _reference_render(stand_in), registered=False)


@cache
def _builtin_tokenizer(name: str) -> Tokenizer:
    return builtin_tokenizer_for(name)[0]


@cache
def _tokenizer(real: str | None, specials: tuple[str, ...]) -> Tokenizer:
    return load_tokenizer(real) if real else build_proxy_tokenizer(specials)


def _reference_render(stand_in: StandIn) -> Render:
    if stand_in.reference in ("dsv32", "dsv4"):
        from llm_router_utils.sglang.srt.entrypoints.openai import encoding_dsv4, encoding_dsv32

        encoder = encoding_dsv32 if stand_in.reference == "dsv32" else encoding_dsv4
        return lambda messages, tools, generation: encoder.encode_messages(list(messages), thinking_mode="thinking")
    template = compile_template(reference_path("templates", stand_in.reference).read_text(encoding="utf-8"))
    kwargs = dict(stand_in.kwargs)
    object_arguments = stand_in.family.tool_arguments is ToolArguments.OBJECT

    def render(messages: list[Message], tools: Sequence[Message] | None, generation: bool) -> str:
        if object_arguments:
            messages = [_decoded_arguments(message) for message in messages]
        return render_template(template, messages, tools, generation, **kwargs)

    return render


def _decoded_arguments(message: Message) -> Message:
    if not message.get("tool_calls"):
        return message
    calls = [
        {**call, "function": {**call["function"], "arguments": json.loads(call["function"]["arguments"])}}
        for call in message["tool_calls"]
    ]
    return {**message, "tool_calls": calls}


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
    keeps_empty = case.registered or case.name in OFFICIAL_RENDERS_EMPTY_REASONING
    reasoning = draw(trimmed_text if keeps_empty else trimmed_text.filter(bool))
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
