"""MiniMax M2.5 / M2.7: the fixed templates equal the official ones on tool loops and differ only as declared.

Official templates are read from ../shared/reference (test reference data, never shipped). The append-only
checks run on every append-role sequence of length 1..3 after histories that end with an assistant; a
negative control shows the same check failing on the official templates.
"""

from __future__ import annotations

import itertools
import re

import pytest

from tito.conformance import TOOLS, shapes
from tito.errors import TemplateRenderError
from tito.families import get_family
from tito.messages import normalize_messages
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
    reasoning_from_the_field_only,
    shape_histories,
    suffix_after,
)

MINIMAX_FAMILIES = ["minimax_m25", "minimax_m27"]
TOOL_LOOPS = ["single_tool", "parallel_tools", "long_chain", "unicode_boolean_arguments", "string_arguments"]


@pytest.mark.parametrize("family", MINIMAX_FAMILIES)
def test_fixed_equals_official_on_tool_loop_histories(family: str) -> None:
    """The canonical agent loop (one user query, every assistant reasoning) and each of its prefixes, final
    answer included: the fixed template serves tool-only sessions with the official bytes."""
    prefixes = [messages_of(shape)[:cut] for shape in TOOL_LOOPS for cut in range(2, len(messages_of(shape)) + 1)]
    assert_same_renders(fixed(family), official(family), prefixes)


@pytest.mark.parametrize("family", MINIMAX_FAMILIES)
def test_fixed_equals_official_on_first_turn_prompts(family: str) -> None:
    first_turns = [messages_of(shape)[:2] for shape in shapes()] + [[messages_of("single_tool")[1]]]
    assert_same_renders(fixed(family), official(family), first_turns)


def raw_corpus() -> list[list[Message]]:
    """What the official template renders that tito does not produce itself (list content, system extras)."""
    return [
        [
            {"role": "system", "content": "Be brief.", "current_date": "2026-01-01", "current_location": "Paris"},
            {"role": "user", "content": [{"type": "text", "text": "a"}, "b", {"type": "image_url", "image_url": {}}]},
            {"role": "assistant", "content": "<think>\ninline reasoning\n</think>\n\nvisible", "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "search", "arguments": {"query": "x"}}},
            ]},
            {"role": "tool", "content": [{"output": "out"}, {"type": "text", "text": "txt"}]},
            {"role": "tool", "content": "plain"},
            {"role": "assistant", "content": "done", "reasoning_content": "r"},
            {"role": "user", "content": "next"},
        ],
        [{"role": "system", "content": ""}, {"role": "user", "content": "default identity"}],
    ]  # fmt: skip


@pytest.mark.parametrize("family", MINIMAX_FAMILIES)
def test_flipped_kwarg_renders_the_official_template(family: str) -> None:
    """clear_thinking=true is the official behaviour: every shape but the mid-session system one (a declared
    deviation) then renders byte-identically, which proves the reasoning deviation is exactly what we say."""
    corpus = [messages_of(shape) for shape in shapes() if shape != "mid_session_system"]
    assert_same_renders(fixed(family, clear_thinking=True), official(family), corpus)
    ours, theirs = fixed_template(family), compile_template(official_source(family))
    for messages, generation in itertools.product(raw_corpus(), (False, True)):
        reference = reasoning_from_the_field_only(messages)  # the verbatim-content deviation
        expected = render_template(theirs, reference, TOOLS, generation, model_identity="I am M.")
        assert render_template(ours, messages, TOOLS, generation, clear_thinking=True, model_identity="I am M.") == (
            expected
        )
        assert render_template(ours, messages, TOOLS, generation, clear_thinking=True) == (
            render_template(theirs, reference, TOOLS, generation)
        )


@pytest.mark.parametrize("family", MINIMAX_FAMILIES)
def test_reasoning_before_the_last_user_message_is_kept(family: str) -> None:
    messages = messages_of("multi_user")
    ours, theirs = fixed(family)(messages), official(family)(messages)
    for turn in messages[:-1]:
        if turn["role"] == "assistant":
            assert f"<think>\n{turn['reasoning_content']}\n</think>\n\n" in ours
            assert turn["reasoning_content"] not in theirs


@pytest.mark.parametrize("family", MINIMAX_FAMILIES)
def test_a_mid_session_system_message_renders_as_a_system_turn(family: str) -> None:
    messages = messages_of("mid_session_system")
    assert "[e~[\n]~b]system\nBudget: one more tool call.[e~[\n]~b]ai\n" in fixed(family)(messages)
    assert "Budget" not in official(family)(messages), "official drops it silently"


@pytest.mark.parametrize("family", MINIMAX_FAMILIES)
def test_a_tool_result_may_follow_an_assistant_without_tool_calls(family: str) -> None:
    messages = [*messages_of("multi_user")[:3], {"role": "tool", "content": "late result"}]
    assert fixed(family)(messages).endswith("]~b]tool\n<response>late result</response>[e~[\n")
    with pytest.raises(TemplateRenderError, match="no previous assistant message with a tool call"):
        official(family)(messages)


@pytest.mark.parametrize("family", MINIMAX_FAMILIES)
def test_null_content_and_empty_reasoning_render_as_sampled(family: str) -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [call]}]
    ours, theirs = fixed(family)(messages), official(family)(messages)
    assert "]~b]ai\n<think>\n\n</think>\n\n\n<minimax:tool_call>\n" in ours
    assert "]~b]ai\nNone\n<minimax:tool_call>\n" in theirs
    assert fixed(family)([*messages, {"role": "tool", "content": None}]).endswith("<response></response>[e~[\n")


# ---- tool-call arguments --------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", MINIMAX_FAMILIES)
def test_parameters_spell_non_strings_as_json_and_strings_verbatim(family: str) -> None:
    arguments = {"flag": True, "none": None, "n": 2, "s": "true", "obj": {"k": [1, "é"]}}
    as_object = {"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}
    as_text = {"id": "d", "type": "function", "function": {"name": "g", "arguments": '{"flag": false, "s": "x y"}'}}
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [as_object]}]
    text = fixed(family)([*messages, {"role": "assistant", "content": "", "tool_calls": [as_text]}])
    for parameter in ('flag">true<', 'none">null<', 'n">2<', 's">true<', 'obj">{"k": [1, "é"]}<'):
        assert f'<parameter name="{parameter}/parameter>\n' in text
    assert '<invoke name="g">\n<parameter name="flag">false</parameter>\n<parameter name="s">x y</parameter>\n' in text
    assert "True" not in text and "None" not in text


@pytest.mark.parametrize("family", MINIMAX_FAMILIES)
def test_undecoded_string_arguments_are_refused_with_the_reason(family: str) -> None:
    call = {"function": {"name": "f", "arguments": "{}"}}
    template = fixed_template(family)
    with pytest.raises(TemplateRenderError, match="must be an object"):
        render_template(template, [{"role": "assistant", "content": "", "tool_calls": [call]}])


@pytest.mark.parametrize("family", MINIMAX_FAMILIES)
def test_every_marker_the_template_emits_is_a_declared_special_token(family: str) -> None:
    template = fixed_template(family)
    text = "".join(render_template(template, messages, TOOLS, True) for messages in raw_corpus())
    emitted = set(re.findall(r"\]~!?b[\[\]]|\[e~\[|</?think>|</?minimax:tool_call>", text))
    assert emitted == set(get_family(family).special_tokens)


# ---- append-only ----------------------------------------------------------------------------------------------

APPEND_SEQUENCES = append_sequences("minimax_m25")


def expected_turns(appended: list[Message]) -> list[str]:
    """The well-formed text each appended message must render as; consecutive tool results share one turn."""
    turns = []
    for i, message in enumerate(appended):
        content = message["content"]
        if message["role"] == "tool":
            opens = i == 0 or appended[i - 1]["role"] != "tool"
            closes = i == len(appended) - 1 or appended[i + 1]["role"] != "tool"
            turns.append(
                ("]~b]tool" if opens else "") + f"\n<response>{content}</response>" + ("[e~[\n" if closes else "")
            )
        elif message["role"] == "assistant":
            turns.append(f"]~b]ai\n<think>\n{message['reasoning_content']}\n</think>\n\n{content}[e~[\n")
        else:
            turns.append(f"]~b]{message['role']}\n{content}[e~[\n")
    return turns


def minimax_append_failures(render: Render, family: str, history: list[Message], appended: list[Message]) -> list[str]:
    """Invariants 1 and 6 at text level, with tools; a refused render is a failure too (the official refuses some
    sequences). An empty list means the append is clean."""
    try:
        return append_only_failures(bind(render, TOOLS), family, history, appended, expected_turns(appended))
    except TemplateRenderError as exc:
        return [f"render failed: {exc}"]


@pytest.mark.parametrize("family", MINIMAX_FAMILIES)
@pytest.mark.parametrize("sequence", APPEND_SEQUENCES, ids="-".join)
def test_every_append_sequence_extends_the_render_with_well_formed_turns(family: str, sequence: tuple[str]) -> None:
    render = fixed(family)
    appended = appended_messages(sequence)
    for name, history in shape_histories().items():
        assert not minimax_append_failures(render, family, history, appended), name
        # tito renders appended messages after a stub context (Family.context): the suffix must not depend on
        # anything before it, not even on the stored assistant.
        full_suffix = suffix_after(bind(render, TOOLS), history, appended)
        for context in ([CONTEXT_STUB_USER, CONTEXT_STUB_ASSISTANT], [CONTEXT_STUB_USER, history[-1]]):
            assert full_suffix == suffix_after(bind(render, TOOLS), context, appended), name


@pytest.mark.parametrize("family", MINIMAX_FAMILIES)
def test_official_template_fails_the_append_check_where_it_rewrites_history(family: str) -> None:
    """Negative control: a new user query erases earlier reasoning, a system message vanishes, and a tool
    result after an injected assistant is refused by the official template."""
    history = shape_histories()["tool_call"]
    expected_failure = {("user",): "history rewritten", ("system",): "turn missing", ("assistant", "tool"): "render"}
    for sequence, failure in expected_failure.items():
        appended = appended_messages(sequence)
        failures = minimax_append_failures(official(family), family, history, appended)
        assert failures and failures[0].startswith(failure), (sequence, failures)
        assert not minimax_append_failures(fixed(family), family, history, appended), sequence


# ---- token level ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", MINIMAX_FAMILIES)
@pytest.mark.parametrize("sequence", APPEND_SEQUENCES, ids="-".join)
def test_merge_tokens_equals_the_ids_of_the_full_render(family: str, sequence: tuple[str]) -> None:
    """Stored ids (the old render cut right after the sampled `[e~[`, before the template's `\\n`) + merged
    ids == the ids of the full render: the junction inserts the newline."""
    tokenizer = proxy_tokenizer(family)
    end_id = tokenizer.convert_tokens_to_ids(get_family(family).end_of_turn)
    appended = appended_messages(sequence)
    tt = get_tito_tokenizer(tokenizer, family)
    for name, history in shape_histories().items():
        ids = tokenizer.encode(tt.render(history, TOOLS), add_special_tokens=False)
        stored = cut_after_last(ids, end_id)
        assert len(stored) == len(ids) - 1, "the render writes one `\\n` token after the stop token"
        expected = tokenizer.encode(tt.render(history + appended, TOOLS, True), add_special_tokens=False)
        assert tt.merge_tokens(history, history + appended, stored, TOOLS) == expected, name


def test_templates_differ_only_in_the_identity_line() -> None:
    """M2.7 is M2.5 with its own default identity, as the official templates are."""
    m25, m27 = (get_family(name).fixed_template.source() for name in MINIMAX_FAMILIES)
    assert m25.replace("MiniMax-M2.5", "MiniMax-M2.7") == m27


@pytest.mark.parametrize("family", MINIMAX_FAMILIES)
def test_fixed_template_renders_identically_in_transformers(family: str) -> None:
    """Engines (SGLang, vLLM) render the .jinja through transformers: it must give the same bytes."""
    kwargs = dict(get_family(family).fixed_template.extra_kwargs)
    shaped = [normalize_messages(messages_of(shape), get_family(family).tool_arguments) for shape in shapes()]
    assert_transformers_renders_alike(
        family, itertools.product([*shaped, *raw_corpus()], [TOOLS], (False, True), [kwargs])
    )
