"""Kimi K2.5 / K2.6: the fixed templates equal the official ones on agent loops and differ only as declared.

Official templates are read from ../shared/reference (test reference data, never shipped). The append-only
checks run on every append-role sequence of length 1..3 after histories that end with an assistant, in both
thinking modes; a negative control shows the same check failing on the official templates.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest

from tito.conformance import TOOLS, shapes
from tito.families import get_family
from tito.rendering import compile_template, render_template
from tito.tokenizer import CONTEXT_STUB_ASSISTANT, CONTEXT_STUB_USER, get_tito_tokenizer

from .rendering_helpers import (
    Message,
    Render,
    append_only_failures,
    append_sequences,
    appended_messages,
    assert_same_renders,
    assert_transformers_renders_alike,
    bind,
    cut_after_last,
    fixed,
    fixed_template,
    messages_of,
    official,
    official_source,
    proxy_tokenizer,
    shape_histories,
    suffix_after,
)

KIMI_FAMILIES = ["kimi25", "kimi26"]
THINKING_MODES: list[dict[str, Any]] = [{}, {"thinking": True}, {"thinking": False}]
TOOL_LOOPS = ["single_tool", "parallel_tools", "long_chain", "unicode_boolean_arguments", "string_arguments"]


def assert_renders_alike(family: str, conversations: list[list[Message]], **kwargs: Any) -> None:
    """Fixed and official (both given `kwargs`) render alike, with and without tools and generation prompt."""
    assert_same_renders(fixed(family, **kwargs), official(family, **kwargs), conversations, THINKING_MODES)


def agent_loop_prefixes(family: str) -> list[list[Message]]:
    """Every prefix (from the first user query on) of the tool loops; for kimi25 up to the final answer, where
    official K2.5 drops all reasoning (the declared deviation, pinned separately below)."""
    prefixes = []
    for shape in TOOL_LOOPS:
        messages = messages_of(shape)
        end = len(messages) - 1 if family == "kimi25" else len(messages)
        prefixes += [messages[:cut] for cut in range(2, end + 1)]
    return prefixes


@pytest.mark.parametrize("family", KIMI_FAMILIES)
def test_fixed_equals_official_on_the_canonical_agent_loop(family: str) -> None:
    # The official template is given the pinned kwarg too: K2.6 reads its own preserve_thinking, K2.5 ignores it.
    assert_renders_alike(family, agent_loop_prefixes(family), **get_family(family).fixed_template.extra_kwargs)


@pytest.mark.parametrize("family", KIMI_FAMILIES)
def test_fixed_equals_official_on_first_turn_prompts(family: str) -> None:
    first_turns = [messages_of(shape)[:2] for shape in shapes()] + [[messages_of("single_tool")[1]]]
    assert_renders_alike(family, first_turns)


def broader_corpus() -> list[list[Message]]:
    """Every conformance shape plus what the official templates render that tito does not produce itself."""
    corpus = [messages_of(shape) for shape in shapes()]
    corpus.append([
        {"role": "user", "name": "alice", "content": [
            {"type": "text", "text": "Look: "}, {"type": "image_url", "image_url": {"url": "x"}},
            {"type": "video_url", "video_url": {"url": "y"}}, {"type": "text", "text": "done"},
        ]},
        {"role": "assistant", "content": None, "reasoning_content": "r", "tool_calls": [
            {"id": "functions.search:0", "type": "function", "function": {"name": "search", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "functions.search:0", "content": [{"type": "text", "text": "none"}]},
        {"role": "assistant", "content": "ok"},
    ])  # fmt: skip
    return corpus


@pytest.mark.parametrize("family", KIMI_FAMILIES)
def test_flipped_kwarg_renders_the_official_template(family: str) -> None:
    """preserve_thinking=false is the official behaviour: then every shape renders byte-identically, which
    proves the declared reasoning deviation is the only difference there. Rendered raw (no normalisation),
    so the templates' own handling of list content is compared too."""
    ours, theirs = fixed_template(family), compile_template(official_source(family))
    for messages, tools, generation, thinking in itertools.product(
        broader_corpus(), (None, TOOLS), (False, True), THINKING_MODES
    ):
        expected = render_template(theirs, messages, tools, generation, **thinking)
        assert render_template(ours, messages, tools, generation, preserve_thinking=False, **thinking) == expected


@pytest.mark.parametrize("family", KIMI_FAMILIES)
def test_tools_ts_str_replaces_the_json_tool_declaration_as_official(family: str) -> None:
    messages = messages_of("single_tool")[:2]
    kwargs = {"tools_ts_str": "namespace functions { ... }"}
    assert fixed(family)(messages, TOOLS, True, **kwargs) == official(family, preserve_thinking=True)(
        messages, TOOLS, True, **kwargs
    )


def test_kimi25_keeps_the_reasoning_official_k25_drops_at_a_final_answer() -> None:
    """The declared kimi25 deviation: official K2.5 rewrites every earlier assistant once a final answer exists."""
    messages = messages_of("single_tool")
    ours, theirs = fixed("kimi25")(messages), official("kimi25")(messages)
    for turn in messages:
        if turn["role"] == "assistant":
            kept = f"<think>{turn['reasoning_content']}</think>"
            assert kept in ours and kept not in theirs
            ours = ours.replace(kept, "<think></think>")
    assert ours == theirs, "the dropped reasoning is the only difference"


@pytest.mark.parametrize("family", KIMI_FAMILIES)
def test_null_reasoning_renders_empty_where_official_writes_none(family: str) -> None:
    call = {"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "reasoning_content": None, "tool_calls": [call]},
    ]
    assert "<think></think>a<|tool_calls_section_begin|>" in fixed(family)(messages)
    assert "<think>None</think>" in official(family, preserve_thinking=True)(messages)


# ---- tool-call arguments --------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", KIMI_FAMILIES)
def test_string_arguments_render_verbatim_and_objects_as_json(family: str) -> None:
    spelled = '{"b":  1, "a": false}'
    calls = [
        {"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": spelled}},
        {"id": "functions.g:1", "type": "function", "function": {"name": "g", "arguments": {"x": None, "y": True}}},
    ]
    text = fixed(family)([{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": calls}])
    assert f"<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{spelled}<|tool_call_end|>" in text
    assert '<|tool_call_argument_begin|>{"x": null, "y": true}<|tool_call_end|>' in text


@pytest.mark.parametrize("family", KIMI_FAMILIES)
def test_every_marker_the_template_emits_is_a_declared_special_token(family: str) -> None:
    text = "".join(render_template(fixed_template(family), messages, TOOLS, True) for messages in broader_corpus())
    emitted = set(re.findall(r"<\|[a-z0-9_]+\|>|</?think>", text)) - {"<|kimi_k25_video_placeholder|>"}
    assert emitted <= set(get_family(family).special_tokens)
    assert "<|im_middle|>" in emitted and "<|tool_call_argument_begin|>" in emitted


# ---- append-only ----------------------------------------------------------------------------------------------

APPEND_SEQUENCES = append_sequences("kimi25")


def expected_turn(family: str, message: Message, thinking: dict[str, Any]) -> str:
    """The complete, well-formed turn each appended role must render as."""
    content = message["content"]
    if message["role"] == "assistant":
        reasoning = "" if family == "kimi25" and thinking.get("thinking") is False else message["reasoning_content"]
        return f"<|im_assistant|>assistant<|im_middle|><think>{reasoning}</think>{content}<|im_end|>"
    if message["role"] == "tool":
        return f"<|im_system|>tool<|im_middle|>## Return of {message['tool_call_id']}\n{content}<|im_end|>"
    marker = "<|im_user|>" if message["role"] == "user" else "<|im_system|>"
    return f"{marker}{message['role']}<|im_middle|>{content}<|im_end|>"


def kimi_append_failures(
    render: Render, family: str, history: list[Message], appended: list[Message], thinking: dict[str, Any]
) -> list[str]:
    """Invariant 1 and 6 at text level, with tools and the thinking mode; an empty list means the append is clean."""
    turns = [expected_turn(family, m, thinking) for m in appended]
    return append_only_failures(bind(render, TOOLS, **thinking), family, history, appended, turns)


@pytest.mark.parametrize("family", KIMI_FAMILIES)
@pytest.mark.parametrize("sequence", APPEND_SEQUENCES, ids="-".join)
def test_every_append_sequence_extends_the_render_with_well_formed_turns(family: str, sequence: tuple[str]) -> None:
    render = fixed(family)
    appended = appended_messages(sequence)
    for (name, history), thinking in itertools.product(shape_histories().items(), THINKING_MODES):
        assert not kimi_append_failures(render, family, history, appended, thinking), (name, thinking)
        # tito renders appended messages after a stub context (Family.context): the suffix must not depend on
        # anything before it, not even on the stored assistant.
        with_tools = bind(render, TOOLS, **thinking)
        full = suffix_after(with_tools, history, appended)
        for context in ([CONTEXT_STUB_USER, CONTEXT_STUB_ASSISTANT], [CONTEXT_STUB_USER, history[-1]]):
            assert suffix_after(with_tools, context, appended) == full, (name, thinking, context[-1])


@pytest.mark.parametrize("family", KIMI_FAMILIES)
def test_official_template_fails_the_append_check_where_it_rewrites_history(family: str) -> None:
    """Negative control: an injected assistant moves the official split and erases earlier reasoning."""
    history = shape_histories()["tool_call"]
    for sequence in (("assistant",), ("tool", "assistant"), ("user", "system", "assistant")):
        appended = appended_messages(sequence)
        failures = kimi_append_failures(official(family), family, history, appended, {})
        assert failures and failures[0].startswith("history rewritten"), sequence
        assert not kimi_append_failures(fixed(family), family, history, appended, {}), sequence


# ---- token level ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", KIMI_FAMILIES)
@pytest.mark.parametrize("sequence", APPEND_SEQUENCES, ids="-".join)
def test_merge_tokens_equals_the_ids_of_the_full_render(family: str, sequence: tuple[str]) -> None:
    """Stored ids (the old render cut right after the sampled `<|im_end|>`) + appended ids == full render ids."""
    tokenizer = proxy_tokenizer(family)
    end_id = tokenizer.convert_tokens_to_ids(get_family(family).end_of_turn)
    appended = appended_messages(sequence)
    for (name, history), thinking in itertools.product(
        shape_histories().items(), ({"thinking": True}, {"thinking": False})
    ):
        tt = get_tito_tokenizer(tokenizer, family, thinking)
        ids = tokenizer.encode(tt.render(history, TOOLS), add_special_tokens=False)
        stored = cut_after_last(ids, end_id)
        assert stored == ids, "PLAIN junction: nothing follows <|im_end|> in the render"
        expected = tokenizer.encode(tt.render(history + appended, TOOLS, True), add_special_tokens=False)
        assert tt.merge_tokens(history, history + appended, stored, TOOLS) == expected, (name, thinking)


@pytest.mark.parametrize("family", KIMI_FAMILIES)
def test_fixed_template_renders_identically_in_transformers(family: str) -> None:
    """Engines (SGLang, vLLM) render the .jinja through transformers: it must give the same bytes."""
    kwargs = dict(get_family(family).fixed_template.extra_kwargs)
    cases = itertools.product(broader_corpus(), [TOOLS], (False, True), [kwargs])
    assert_transformers_renders_alike(family, cases)
