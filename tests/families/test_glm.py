"""glm47: the fixed template renders GLM-4.7/GLM-5 exactly, append-only, and its junction drops the sampled stop.

The official templates (shared/reference) are byte references only; tito ships its own. Token-level checks run
on a proxy tokenizer (the Qwen3 vocabulary with every GLM marker atomic), since GLM's tokenizer is not offline.
"""

from __future__ import annotations

import array
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tito.families import get_family
from tito.path_ids import PathIds
from tito.rendering import render_template
from tito.tokenizer import get_tito_tokenizer

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
    fixed_template,
    loop_and_first_turns,
    loop_histories,
    proxy_tokenizer,
    reasoning_from_the_field_only,
    suffix_after,
)
from .rendering_helpers import reference_template as official

FAMILY = get_family("glm47")
FIXED = fixed_template("glm47")
fixed = shared.fixed("glm47")
"""Our render with the family's pinned kwargs, of messages normalised as tito hands them to the template."""
PINNED = dict(FAMILY.fixed_template.extra_kwargs)
OFFICIAL_NAMES = ("glm-4.7.jinja", "glm-5.jinja")
THINKING_MODES: tuple[dict[str, bool], ...] = ({}, {"enable_thinking": True}, {"enable_thinking": False})
OPENERS = {"tool": "<|observation|>", "user": "<|user|>", "system": "<|system|>", "assistant": "<|assistant|>"}

TOOLS: list[Message] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "lines": {"type": "array", "items": {"type": "integer"}}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run",
            "description": "Run a shell command.",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}, "timeout": {"type": "integer"}}},
        },
    },
]


def canonical_loop() -> list[Message]:
    """System, one user query, tool calls and results (one and two at a time), every assistant reasoning."""
    return coding_loop({"path": "Makefile"})


# ---- parity with the official templates ----------------------------------------------------------------------


@pytest.mark.parametrize("official_name", OFFICIAL_NAMES)
@pytest.mark.parametrize("thinking", THINKING_MODES, ids=["default", "on", "off"])
@pytest.mark.parametrize("generation", [False, True], ids=["plain", "generation"])
def test_fixed_equals_official_on_the_agent_loop_and_first_turns(
    official_name: str, thinking: dict[str, bool], generation: bool
) -> None:
    reference = official(official_name)
    for messages, tools in itertools.product(loop_and_first_turns(canonical_loop()), (None, TOOLS)):
        expected = render_template(reference, messages, tools, generation, **thinking)
        assert fixed(messages, tools, generation, **thinking) == expected, [m["role"] for m in messages]


# A broad corpus: any role order, several users, reasoning absent/empty/padded, reasoning inside content,
# parallel calls with every JSON type. Null content is left out (a declared deviation, tested below).
_CONVERSATION = broad_conversations(
    st.sampled_from(["text", "", 7, 2.5, True, False, None, [1, "a"], {"k": {"n": None}}]),
    "<think>\nin content\n</think>\n\nanswer",
)


@BROAD
@given(_CONVERSATION, st.sampled_from([None, TOOLS]), st.booleans(), st.sampled_from(THINKING_MODES))
def test_with_clear_thinking_true_the_fixed_template_is_the_official_one(
    messages: list[Message], tools: list[Message] | None, generation: bool, thinking: dict[str, bool]
) -> None:
    """The kept reasoning is the whole of the main deviation: flip the pinned kwarg and any conversation matches
    (once reasoning inside content is read as content, the verbatim-content deviation)."""
    for name in OFFICIAL_NAMES:
        reference = reasoning_from_the_field_only(messages)  # the verbatim-content deviation
        expected = render_template(official(name), reference, tools, generation, clear_thinking=True, **thinking)
        ours = render_template(FIXED, messages, tools, generation, clear_thinking=True, **thinking)
        assert ours == expected


def spell_out_empty_reasoning(messages: list[Message]) -> list[Message]:
    """What the deviation changes: an assistant with no reasoning renders as one whose reasoning is blank."""
    return [
        {**m, "reasoning_content": " "} if m["role"] == "assistant" and not m.get("reasoning_content") else m
        for m in messages
    ]


@BROAD
@given(_CONVERSATION, st.sampled_from([None, TOOLS]), st.booleans(), st.sampled_from(THINKING_MODES))
def test_with_reasoning_kept_only_empty_reasoning_under_thinking_renders_differently(
    messages: list[Message], tools: list[Message] | None, generation: bool, thinking: dict[str, bool]
) -> None:
    """Official with clear_thinking=false equals ours once an empty reasoning under thinking on is spelled out."""
    thinking_on = thinking.get("enable_thinking", True)
    reference = reasoning_from_the_field_only(messages)  # the verbatim-content deviation
    reference = spell_out_empty_reasoning(reference) if thinking_on else reference
    expected = render_template(official("glm-4.7.jinja"), reference, tools, generation, **PINNED, **thinking)
    assert render_template(FIXED, messages, tools, generation, **PINNED, **thinking) == expected


def test_reasoning_is_kept_when_the_template_is_served_without_the_pinned_kwarg() -> None:
    """An engine that loads the .jinja without tito's kwargs still renders append-only."""
    history = [*canonical_loop(), {"role": "user", "content": "next"}]
    assert_reasoning_kept_without_the_pinned_kwarg("glm47", history, TOOLS)


def test_null_content_renders_empty_where_the_official_writes_none() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "reasoning_content": "call", "tool_calls": [call("c", "run", {})]},
    ]
    assert fixed(messages).endswith("<|assistant|><think>call</think><tool_call>run</tool_call>")
    assert "None<tool_call>" in render_template(official("glm-4.7.jinja"), messages, **PINNED)


def test_non_string_arguments_render_as_json_and_strings_verbatim() -> None:
    arguments = {"s": 'say "hi"', "b": True, "n": None, "f": 1.5, "l": [1, "x"], "o": {"k": False}}
    text = fixed([{"role": "assistant", "content": "", "tool_calls": [call("c", "run", arguments)]}])
    expected_values = ['say "hi"', "true", "null", "1.5", '[1, "x"]', '{"k": false}']
    for key, value in zip(arguments, expected_values, strict=True):
        assert f"<arg_key>{key}</arg_key><arg_value>{value}</arg_value>" in text


def test_arguments_as_json_text_are_decoded_before_rendering() -> None:
    """The model's JSON spelling reaches the markup value by value (tito decodes for ToolArguments.OBJECT)."""
    message = {"role": "assistant", "content": "", "tool_calls": [call("c", "run", {})]}
    message["tool_calls"][0]["function"]["arguments"] = '{"cmd": "ls", "timeout": 5}'
    assert "<arg_key>cmd</arg_key><arg_value>ls</arg_value><arg_key>timeout</arg_key><arg_value>5</arg_value>" in (
        fixed([message])
    )


def test_transformers_renders_the_fixed_template_identically() -> None:
    """Engines render the shipped .jinja through transformers: it must give the bytes tito gives."""
    assert_transformers_renders_loop_alike("glm47", canonical_loop(), TOOLS)


# ---- append-only rendering -----------------------------------------------------------------------------------


def histories() -> dict[str, list[Message]]:
    """Conversations ending with a generated assistant: after an answer, after a tool call, a bare chat."""
    return loop_histories(canonical_loop())


def rendered_turn(message: Message) -> str:
    """How GLM writes one appended message: a system message is a system turn, an assistant a whole turn."""
    role, content = message["role"], message["content"]
    if role == "assistant":
        return f"<|assistant|><think>{message['reasoning_content']}</think>{content}"
    return f"<tool_response>{content}</tool_response>" if role == "tool" else f"{OPENERS[role]}{content}"


ROLE_SEQUENCES = append_sequences("glm47")


@pytest.mark.parametrize("roles", ROLE_SEQUENCES, ids="-".join)
def test_every_role_sequence_appends_well_formed_after_any_history(roles: tuple[str, ...]) -> None:
    appended = appended_messages(roles, "c1")
    for (name, history), kwargs in itertools.product(histories().items(), THINKING_MODES[1:]):
        render = bind(fixed, TOOLS, **kwargs)
        assert not append_only_failures(render, "glm47", history, appended), (name, kwargs)
        suffix = suffix_after(render, history, appended)
        assert suffix.startswith(OPENERS[roles[0]]), "the appended render must bring the real opener"
        assert not suffix.startswith(OPENERS[roles[0]] * 2)
        assert all(rendered_turn(m) in suffix for m in appended), "each appended message is a well-formed turn"
        for context in ([{"role": "user", "content": "."}, history[-1]], STUB_CONTEXT):
            local = suffix_after(bind(fixed, None, **kwargs), context, appended)
            assert local == suffix, "appended messages must render the same after any assistant, without tools"


def test_the_official_template_fails_the_append_only_check_for_a_user_turn() -> None:
    """Negative control: with its default (reasoning cleared before the last user) the official GLM rewrites history."""
    reference = official("glm-4.7.jinja")

    def render(messages: list[Message], generation: bool) -> str:
        return render_template(reference, messages, TOOLS, generation)

    history = histories()["answered"]
    assert append_only_failures(render, "glm47", history, appended_messages(["user"], "c1"))
    assert not append_only_failures(render, "glm47", history, appended_messages(["tool"], "c1"))


# ---- token level ---------------------------------------------------------------------------------------------


def test_the_junction_drops_exactly_one_trailing_id() -> None:
    assert FAMILY.junction.trailing_ids_dropped == 1
    assert set(FAMILY.stop_tokens) >= {"<|user|>", "<|observation|>"} and FAMILY.assistant_opener == "<|assistant|>"


@pytest.mark.parametrize("thinking", [True, False], ids=["thinking", "no_thinking"])
@pytest.mark.parametrize("stop", FAMILY.stop_tokens)
def test_merge_tokens_equals_the_full_render_whatever_stop_token_was_sampled(thinking: bool, stop: str) -> None:
    """Stored ids end with the sampled stop (`<|observation|>` even if a user follows); merge drops it, no duplicate,
    from a list of ids and from a session's recorded array alike."""
    tokenizer = proxy_tokenizer("glm47")
    tt = get_tito_tokenizer(tokenizer, "glm47", {"enable_thinking": thinking})
    (stop_id,) = tokenizer.encode(stop, add_special_tokens=False)
    for history, roles in itertools.product(histories().values(), ROLE_SEQUENCES):
        appended = appended_messages(roles, "c1")
        stored = [*tokenizer.encode(tt.render(history, TOOLS), add_special_tokens=False), stop_id]
        merged = tt.merge_tokens(history, history + appended, stored, TOOLS)
        full = tokenizer.encode(tt.render(history + appended, TOOLS, add_generation_prompt=True))
        assert merged == full, roles
        kept = len(stored) - FAMILY.junction.trailing_ids_dropped
        assert merged[:kept] == stored[:kept]
        recorded = tt.merge_recorded_tokens(history, history + appended, array.array("i", stored), TOOLS)
        assert recorded.tolist() == full, roles  # a session's own ids (an array) drop the stop as a list does
        path = PathIds([array.array("i", stored[:-2]), array.array("i", stored[-2:-1]), array.array("i", [stop_id])])
        in_parts = tt.merge_recorded_tokens(history, history + appended, path, TOOLS)
        assert in_parts.tolist() == full, roles  # a path's parts (the stop alone in the last) drop it alike


def test_keeping_the_sampled_stop_token_would_duplicate_the_opener() -> None:
    """Negative control: without the declared drop, a tool result after `<|observation|>` gets two openers."""
    tokenizer = proxy_tokenizer("glm47")
    tt = get_tito_tokenizer(tokenizer, "glm47")
    history = histories()["tool_call"]
    appended = appended_messages(["tool"], "c1")
    stored = tokenizer.encode(tt.render(history, TOOLS) + "<|observation|>")
    kept_stop = [*stored, *tt.tokenize_additional_messages(history, history + appended, TOOLS)]
    assert kept_stop != tokenizer.encode(tt.render(history + appended, TOOLS, add_generation_prompt=True))
    assert tokenizer.decode(kept_stop).count("<|observation|><|observation|>") == 1
