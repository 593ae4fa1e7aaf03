"""nemotron3: the fixed template renders Nemotron 3 Nano/Super exactly, append-only, with Qwen's newline junction.

The official templates (shared/reference) are byte references only; tito ships its own. Token-level checks run
on a proxy tokenizer (the Qwen3 vocabulary with Nemotron's markers atomic), since Nemotron's is not offline.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tito.families import get_family
from tito.rendering import render_template
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import LocalTokenizer

from . import rendering_helpers as shared
from .rendering_helpers import (
    BROAD,
    STUB_CONTEXT,
    Message,
    append_only_failures,
    append_sequences,
    appended_messages,
    assert_reasoning_kept_without_the_pinned_kwarg,
    assert_transformers_renders_loop_alike,
    bind,
    broad_conversations,
    call,
    coding_loop,
    cut_after_last,
    fixed_template,
    loop_and_first_turns,
    loop_histories,
    proxy_tokenizer,
    suffix_after,
)
from .rendering_helpers import reference_template as official

FAMILY = get_family("nemotron3")
FIXED = fixed_template("nemotron3")
fixed = shared.fixed("nemotron3")
"""Our render with the family's pinned kwargs, of messages normalised as tito hands them to the template."""
PINNED = dict(FAMILY.fixed_template.extra_kwargs)
NANO, SUPER = "nemotron-3-nano.jinja", "nemotron-3-super.jinja"
THINKING_MODES: tuple[dict[str, bool], ...] = ({}, {"enable_thinking": True}, {"enable_thinking": False})

TOOLS: list[Message] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "  Read a file.  ",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Relative path."},
                    "lines": {"type": "array", "items": {"type": "integer"}},
                    "mode": {"type": "string", "enum": ["text", "bytes"], "default": "text"},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run",
            "description": "Run a shell command.",
            "parameters": {"type": "object", "properties": {"cmd": {"type": ["string", "null"]}, "timeout": {}}},
        },
    },
]


def canonical_loop() -> list[Message]:
    """System, one user query, tool calls and results (one and two at a time), every assistant reasoning."""
    return coding_loop({"path": "Makefile", "options": {"follow": "yes"}})


# ---- parity with the official templates ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("official_name", "effort"), [(NANO, {}), (SUPER, {}), (SUPER, {"low_effort": True})], ids=["nano", "super", "low"]
)
@pytest.mark.parametrize("thinking", THINKING_MODES, ids=["default", "on", "off"])
@pytest.mark.parametrize("generation", [False, True], ids=["plain", "generation"])
def test_fixed_equals_official_on_the_agent_loop_and_first_turns(
    official_name: str, effort: dict[str, bool], thinking: dict[str, bool], generation: bool
) -> None:
    reference = official(official_name)
    for messages, tools in itertools.product(loop_and_first_turns(canonical_loop()), (None, TOOLS)):
        expected = render_template(reference, messages, tools, generation, **thinking, **effort)
        assert fixed(messages, tools, generation, **thinking, **effort) == expected, [m["role"] for m in messages]


# A broad corpus: any role order (a tool result never first: a declared deviation), several users, reasoning
# absent/empty/padded, reasoning inside content, parallel calls. Left out, as declared deviations tested below:
# null content and boolean/null argument values.
_CONVERSATION = broad_conversations(
    st.sampled_from(["text", "", "  spaced ", 7, 2.5, [1, "a", None], {"k": {"n": True}}]),
    "<think>\nin content\n</think>\nanswer",
)


def quotes_think_tags(messages: list[Message]) -> bool:
    """Official Nemotron reads think tags in an assistant's content as its reasoning even beside a
    reasoning_content, so no official input renders the verbatim-content deviation: tested on its own."""
    return any(m["role"] == "assistant" and "think>" in (m.get("content") or "") for m in messages)


def opens_with_tool(messages: list[Message]) -> bool:
    turns = messages[1:] if messages[0]["role"] == "system" else messages
    return bool(turns) and turns[0]["role"] == "tool"


@BROAD
@given(_CONVERSATION, st.sampled_from([None, TOOLS]), st.booleans(), st.sampled_from(THINKING_MODES))
def test_with_truncation_on_the_fixed_template_is_the_official_one(
    messages: list[Message], tools: list[Message] | None, generation: bool, thinking: dict[str, bool]
) -> None:
    """The kept reasoning is the whole of the main deviation: flip the pinned kwarg and any conversation matches."""
    assume(not opens_with_tool(messages) and not quotes_think_tags(messages))
    flipped = {"truncate_history_thinking": True, **thinking}
    expected = render_template(official(NANO), messages, tools, generation, **flipped)
    assert render_template(FIXED, messages, tools, generation, **flipped) == expected


def spell_out_empty_reasoning(messages: list[Message]) -> list[Message]:
    """What the deviation changes: an assistant without reasoning gets the empty block the prompt opened."""
    spelled = []
    for m in messages:
        reasoning = m.get("reasoning_content")
        content = m.get("content") or ""
        if (
            m["role"] == "assistant"
            and not (isinstance(reasoning, str) and reasoning.strip())
            and "<think>" not in content
            and "</think>" not in content
        ):
            m = {key: value for key, value in m.items() if key != "reasoning_content"}
            m["content"] = "<think>\n\n</think>\n" + content
        spelled.append(m)
    return spelled


@BROAD
@given(_CONVERSATION, st.sampled_from([None, TOOLS]), st.booleans(), st.sampled_from(THINKING_MODES))
def test_with_reasoning_kept_only_empty_reasoning_under_thinking_renders_differently(
    messages: list[Message], tools: list[Message] | None, generation: bool, thinking: dict[str, bool]
) -> None:
    """Official with truncation off equals ours once an empty reasoning under thinking on is spelled out."""
    assume(not opens_with_tool(messages) and not quotes_think_tags(messages))
    thinking_on = thinking.get("enable_thinking", True)
    reference = spell_out_empty_reasoning(messages) if thinking_on else messages
    expected = render_template(official(NANO), reference, tools, generation, **PINNED, **thinking)
    assert render_template(FIXED, messages, tools, generation, **PINNED, **thinking) == expected


def test_non_string_arguments_render_as_json_where_the_official_writes_python() -> None:
    arguments = {"s": 'say "hi"', "b": True, "f": False, "n": None, "x": 1.5, "l": [1, None], "o": {"k": True}}
    messages = [
        {"role": "assistant", "content": "", "reasoning_content": "r", "tool_calls": [call("c", "run", arguments)]}
    ]
    ours = fixed(messages)
    for key, value in zip(
        arguments, ['say "hi"', "true", "false", "null", "1.5", "[1, null]", '{"k": true}'], strict=True
    ):
        assert f"<parameter={key}>\n{value}\n</parameter>\n" in ours
    python_spelled = render_template(official(NANO), messages)
    assert (
        "<parameter=b>\nTrue\n</parameter>" in python_spelled and "<parameter=n>\nNone\n</parameter>" in python_spelled
    )
    assert python_spelled.replace("True", "true").replace("False", "false").replace("None", "null") == ours


def test_arguments_as_json_text_are_decoded_before_rendering() -> None:
    message = {"role": "assistant", "content": "", "tool_calls": [call("c", "run", {})]}
    message["tool_calls"][0]["function"]["arguments"] = '{"cmd": "ls", "timeout": 5, "dry": false}'
    assert "<parameter=cmd>\nls\n</parameter>\n<parameter=timeout>\n5\n</parameter>\n<parameter=dry>\nfalse\n" in (
        fixed([message])
    )


def test_reasoning_is_kept_when_the_template_is_served_without_the_pinned_kwarg() -> None:
    """An engine that loads the .jinja without tito's kwargs still renders append-only."""
    history = [*canonical_loop(), {"role": "user", "content": "next"}]
    assert_reasoning_kept_without_the_pinned_kwarg("nemotron3", history, TOOLS)


def test_null_content_renders_empty_where_the_official_writes_none() -> None:
    messages = [{"role": "user", "content": None}, {"role": "tool", "tool_call_id": "c", "content": None}]
    assert "None" not in fixed(messages)
    assert "None" in render_template(official(NANO), messages)


def test_low_effort_marks_every_user_message_so_appending_a_user_moves_nothing() -> None:
    conversation = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "a", "reasoning_content": "r"},
        {"role": "user", "content": "second"},
    ]
    note = "\n\n{reasoning effort: low}<|im_end|>"
    assert fixed(conversation, low_effort=True).count(note) == 2
    assert render_template(official(SUPER), conversation, low_effort=True).count(note) == 1


def test_transformers_renders_the_fixed_template_identically() -> None:
    """Engines render the shipped .jinja through transformers: it must give the bytes tito gives."""
    assert_transformers_renders_loop_alike("nemotron3", canonical_loop(), TOOLS)


# ---- append-only rendering -----------------------------------------------------------------------------------


def histories() -> dict[str, list[Message]]:
    """Conversations ending with a generated assistant: after an answer, after a tool call, a bare chat."""
    return loop_histories(canonical_loop())


def rendered_turn(message: Message, low_effort: bool = False) -> str:
    """How Nemotron writes one appended message: a system message is a system turn, an assistant a whole turn."""
    role, content = message["role"], message["content"]
    if role == "assistant":
        return f"<|im_start|>assistant\n<think>\n{message['reasoning_content']}\n</think>\n{content}<|im_end|>\n"
    if role == "tool":
        return f"<tool_response>\n{content}\n</tool_response>\n"
    note = "\n\n{reasoning effort: low}" if low_effort and role == "user" else ""
    return f"<|im_start|>{role}\n{content}{note}<|im_end|>\n"


ROLE_SEQUENCES = append_sequences("nemotron3")


@pytest.mark.parametrize("roles", ROLE_SEQUENCES, ids="-".join)
def test_every_role_sequence_appends_well_formed_after_any_history(roles: tuple[str, ...]) -> None:
    appended = appended_messages(roles, "c1")
    modes = [*THINKING_MODES[1:], {"low_effort": True}]
    for (name, history), kwargs in itertools.product(histories().items(), modes):
        render = bind(fixed, TOOLS, **kwargs)
        assert not append_only_failures(render, "nemotron3", history, appended), (name, kwargs)
        before = render(history, False)
        assert before.endswith(FAMILY.end_of_turn + FAMILY.junction.trailer)
        suffix = suffix_after(render, history, appended)
        assert suffix.startswith("<|im_start|>")
        low_effort = kwargs.get("low_effort", False)
        assert all(rendered_turn(m, low_effort) in suffix for m in appended), (
            "each appended message is a well-formed turn"
        )
        for context in ([{"role": "user", "content": "."}, history[-1]], STUB_CONTEXT):
            local = suffix_after(bind(fixed, None, **kwargs), context, appended)
            assert local == suffix, "appended messages must render the same after any assistant, without tools"


@pytest.mark.parametrize(("official_name", "kwargs"), [(NANO, {}), (SUPER, {"low_effort": True})], ids=["nano", "low"])
def test_the_official_template_fails_the_append_only_check_for_a_user_turn(
    official_name: str, kwargs: dict[str, bool]
) -> None:
    """Negative control: truncated reasoning (Nano) and the moving effort note (Super) rewrite history."""
    reference = official(official_name)

    def render(messages: list[Message], generation: bool) -> str:
        return render_template(reference, messages, TOOLS, generation, **kwargs)

    history = histories()["answered"]
    assert append_only_failures(render, "nemotron3", history, appended_messages(["user"], "c1"))
    assert not append_only_failures(render, "nemotron3", history, appended_messages(["tool"], "c1"))


# ---- token level ---------------------------------------------------------------------------------------------


def stored_ids(tokenizer: LocalTokenizer, text: str) -> list[int]:
    """What the engine returns: the render's ids cut right after the sampled `<|im_end|>` (no newline)."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    (end_id,) = tokenizer.encode(FAMILY.end_of_turn)
    stored = cut_after_last(ids, end_id)
    assert tokenizer.decode(ids[len(stored) :]) == "\n"
    return stored


@pytest.mark.parametrize("thinking", [True, False], ids=["thinking", "no_thinking"])
def test_merge_tokens_equals_the_full_render(thinking: bool) -> None:
    tokenizer = proxy_tokenizer("nemotron3")
    tt = get_tito_tokenizer(tokenizer, "nemotron3", {"enable_thinking": thinking})
    for history, roles in itertools.product(histories().values(), ROLE_SEQUENCES):
        appended = appended_messages(roles, "c1")
        stored = stored_ids(tokenizer, tt.render(history, TOOLS))
        merged = tt.merge_tokens(history, history + appended, stored, TOOLS)
        assert merged == tokenizer.encode(tt.render(history + appended, TOOLS, add_generation_prompt=True)), roles
        assert merged[: len(stored)] == stored


def test_without_the_junction_newline_the_ids_would_differ() -> None:
    """Negative control: the stored ids end at `<|im_end|>`; gluing the next turn on directly drops the `\\n`."""
    tokenizer = proxy_tokenizer("nemotron3")
    tt = get_tito_tokenizer(tokenizer, "nemotron3")
    history, appended = histories()["tool_call"], appended_messages(["tool"], "c1")
    stored = stored_ids(tokenizer, tt.render(history, TOOLS))
    full = tt.render(history + appended, TOOLS, add_generation_prompt=True)
    glued = [*stored, *tokenizer.encode(full[len(tt.render(history, TOOLS)) :])]
    assert glued != tokenizer.encode(full)
    assert tt.merge_tokens(history, history + appended, stored, TOOLS) == tokenizer.encode(full)
