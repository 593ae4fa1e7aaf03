"""nemotron3: the fixed template renders Nemotron 3 Nano/Super exactly, append-only, with Qwen's newline junction.

The official templates (shared/reference) are byte references only; tito ships its own. Token-level checks run
on a proxy tokenizer (the Qwen3 vocabulary with Nemotron's markers atomic), since Nemotron's is not offline.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tito.cli import main
from tito.families import get_family
from tito.messages import normalize_messages
from tito.rendering import compile_template, render_template
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import LocalTokenizer, build_proxy_tokenizer

REFERENCE = Path(__file__).resolve().parents[2] / ".." / "shared" / "reference" / "templates"
FAMILY = get_family("nemotron3")
FIXED = compile_template(FAMILY.fixed_template.source())
PINNED = dict(FAMILY.fixed_template.extra_kwargs)
NANO, SUPER = "nemotron-3-nano.jinja", "nemotron-3-super.jinja"
THINKING_MODES: tuple[dict[str, bool], ...] = ({}, {"enable_thinking": True}, {"enable_thinking": False})

Message = dict[str, Any]
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


def official(name: str) -> jinja2.Template:
    path = REFERENCE / name
    if not path.is_file():
        pytest.skip(f"reference template absent: {path} (../shared/reference beside the checkout)")
    return compile_template(path.read_text(encoding="utf-8"))


def fixed(messages: list[Message], tools: list[Message] | None = None, generation: bool = False, **kw: Any) -> str:
    """Our render with the family's pinned kwargs, of messages normalised as tito hands them to the template."""
    return render_template(
        FIXED, normalize_messages(messages, FAMILY.tool_arguments), tools, generation, **PINNED, **kw
    )


def call(call_id: str, name: str, arguments: dict[str, Any]) -> Message:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def canonical_loop() -> list[Message]:
    """System, one user query, tool calls and results (one and two at a time), every assistant reasoning."""
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Why does the build fail? Ünïcödé 東京"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "Read the log first.",
            "tool_calls": [call("c1", "read_file", {"path": "build.log", "lines": [1, 40]})],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "error: missing header foo.h"},
        {
            "role": "assistant",
            "content": "Checking two things.",
            "reasoning_content": "Look for the header and rerun.",
            "tool_calls": [
                call("c2", "run", {"cmd": "find . -name foo.h", "timeout": 30}),
                call("c3", "read_file", {"path": "Makefile", "options": {"follow": "yes"}}),
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "./include/foo.h"},
        {"role": "tool", "tool_call_id": "c3", "content": "CFLAGS = -O2"},
        {
            "role": "assistant",
            "content": "Add -Iinclude to CFLAGS.",
            "reasoning_content": "The include path is missing.",
        },
    ]


def first_turn_prompts() -> list[list[Message]]:
    loop = canonical_loop()
    return [loop[:2], loop[1:2], [{"role": "user", "content": "  spaced\nquestion  "}]]


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
    loop = canonical_loop()
    conversations = [loop[:end] for end in range(2, len(loop) + 1)] + first_turn_prompts()
    for messages, tools in itertools.product(conversations, (None, TOOLS)):
        expected = render_template(reference, messages, tools, generation, **thinking, **effort)
        assert fixed(messages, tools, generation, **thinking, **effort) == expected, [m["role"] for m in messages]


# A broad corpus: any role order (a tool result never first: a declared deviation), several users, reasoning
# absent/empty/padded, reasoning inside content, parallel calls. Left out, as declared deviations tested below:
# null content and boolean/null argument values.
_TEXT = st.sampled_from(["", "ok", "  padded  ", "two\nlines", "Zürich 東京 🌦️"])
_VALUE = st.sampled_from(["text", "", "  spaced ", 7, 2.5, [1, "a", None], {"k": {"n": True}}])
_CALL = st.builds(
    lambda name, arguments: call("c", name, arguments),
    st.sampled_from(["read_file", "run"]),
    st.dictionaries(st.sampled_from(["path", "cmd", "n"]), _VALUE, max_size=3),
)
_ASSISTANT = st.builds(
    lambda content, reasoning, calls: {
        "role": "assistant",
        "content": content,
        **({} if reasoning is None else {"reasoning_content": reasoning}),
        **({"tool_calls": calls} if calls else {}),
    },
    st.one_of(_TEXT, st.just("<think>\nin content\n</think>\nanswer")),
    st.one_of(st.none(), st.sampled_from(["", "why", "  padded why \n"])),
    st.lists(_CALL, max_size=2),
)
_MESSAGE = st.one_of(
    st.builds(lambda role, content: {"role": role, "content": content}, st.sampled_from(["user", "system"]), _TEXT),
    st.builds(lambda content: {"role": "tool", "tool_call_id": "c", "content": content}, _TEXT),
    _ASSISTANT,
)
_CONVERSATION = st.lists(_MESSAGE, min_size=1, max_size=8)
_BROAD = settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def opens_with_tool(messages: list[Message]) -> bool:
    turns = messages[1:] if messages[0]["role"] == "system" else messages
    return bool(turns) and turns[0]["role"] == "tool"


@_BROAD
@given(_CONVERSATION, st.sampled_from([None, TOOLS]), st.booleans(), st.sampled_from(THINKING_MODES))
def test_with_truncation_on_the_fixed_template_is_the_official_one(
    messages: list[Message], tools: list[Message] | None, generation: bool, thinking: dict[str, bool]
) -> None:
    """The kept reasoning is the whole of the main deviation: flip the pinned kwarg and any conversation matches."""
    assume(not opens_with_tool(messages))
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


@_BROAD
@given(_CONVERSATION, st.sampled_from([None, TOOLS]), st.booleans(), st.sampled_from(THINKING_MODES))
def test_with_reasoning_kept_only_empty_reasoning_under_thinking_renders_differently(
    messages: list[Message], tools: list[Message] | None, generation: bool, thinking: dict[str, bool]
) -> None:
    """Official with truncation off equals ours once an empty reasoning under thinking on is spelled out."""
    assume(not opens_with_tool(messages))
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
    bare = render_template(FIXED, history, TOOLS, True)
    assert bare == fixed(history, TOOLS, True)
    assert all(m["reasoning_content"] in bare for m in history if m["role"] == "assistant")


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
    hf = pytest.importorskip("transformers.utils.chat_template_utils", reason="transformers not installed")
    template = hf._compile_jinja_template(FAMILY.fixed_template.source())
    loop = canonical_loop()
    for end, tools, generation in itertools.product(range(1, len(loop) + 1), (None, TOOLS), (False, True)):
        messages = normalize_messages(loop[:end], FAMILY.tool_arguments)
        for kwargs in ({**PINNED}, {**PINNED, "enable_thinking": False}):
            expected = template.render(
                messages=messages, tools=tools, documents=None, add_generation_prompt=generation, **kwargs
            )
            assert render_template(FIXED, messages, tools, generation, **kwargs) == expected


# ---- append-only rendering -----------------------------------------------------------------------------------


def histories() -> dict[str, list[Message]]:
    """Conversations ending with a generated assistant: after an answer, after a tool call, a bare chat."""
    loop = canonical_loop()
    return {"answered": loop, "tool_call": loop[:5], "bare": [loop[1], loop[-1]]}


def appended_message(role: str, index: int) -> Message:
    content = f"appended {role} {index}"
    if role == "assistant":
        return {"role": "assistant", "content": content, "reasoning_content": f"injected reasoning {index}"}
    if role == "tool":
        return {"role": "tool", "tool_call_id": "c1", "content": content}
    return {"role": role, "content": content}


def rendered_turn(message: Message, low_effort: bool = False) -> str:
    """How Nemotron writes one appended message: a system message is a system turn, an assistant a whole turn."""
    role, content = message["role"], message["content"]
    if role == "assistant":
        return f"<|im_start|>assistant\n<think>\n{message['reasoning_content']}\n</think>\n{content}<|im_end|>\n"
    if role == "tool":
        return f"<tool_response>\n{content}\n</tool_response>\n"
    note = "\n\n{reasoning effort: low}" if low_effort and role == "user" else ""
    return f"<|im_start|>{role}\n{content}{note}<|im_end|>\n"


STUB_CONTEXT: list[Message] = [{"role": "user", "content": "."}, {"role": "assistant", "content": "."}]
"""A constant context: fixed templates render appended messages after it exactly as after the real history."""
ROLE_SEQUENCES = [seq for n in (1, 2, 3) for seq in itertools.product(FAMILY.supported_roles, repeat=n)]
Render = Callable[[list[Message], bool], str]


def append_only_failures(render: Render, history: list[Message], appended: list[Message]) -> Iterator[str]:
    """Invariants 1 and 6 for one case, as messages; `render(messages, generation)` is the template under test."""
    before = render(history, False)
    after = render(history + appended, True)
    if not after.startswith(before):
        yield f"render of the history is not a prefix: {before[-60:]!r}"
        return
    suffix = after[len(before) :]
    yield from (f"{m['role']} content missing" for m in appended if m["content"] not in suffix)
    generation_prompt = after[len(render(history + appended, False)) :]
    if not (generation_prompt.startswith(FAMILY.assistant_opener) and suffix.endswith(generation_prompt)):
        yield f"suffix does not end with the generation prompt: {suffix[-40:]!r}"


def fixed_renderer(**kwargs: Any) -> Render:
    return lambda messages, generation: fixed(messages, TOOLS, generation, **kwargs)


@pytest.mark.parametrize("roles", ROLE_SEQUENCES, ids="-".join)
def test_every_role_sequence_appends_well_formed_after_any_history(roles: tuple[str, ...]) -> None:
    appended = [appended_message(role, i) for i, role in enumerate(roles)]
    modes = [*THINKING_MODES[1:], {"low_effort": True}]
    for (name, history), kwargs in itertools.product(histories().items(), modes):
        render = fixed_renderer(**kwargs)
        assert not list(append_only_failures(render, history, appended)), (name, kwargs)
        before = render(history, False)
        assert before.endswith(FAMILY.end_of_turn + FAMILY.junction.trailer)
        suffix = render(history + appended, True)[len(before) :]
        assert suffix.startswith("<|im_start|>")
        low_effort = kwargs.get("low_effort", False)
        assert all(rendered_turn(m, low_effort) in suffix for m in appended), (
            "each appended message is a well-formed turn"
        )
        for context in ([{"role": "user", "content": "."}, history[-1]], STUB_CONTEXT):
            local = fixed([*context, *appended], None, True, **kwargs)[len(fixed(context, None, False, **kwargs)) :]
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
    assert list(append_only_failures(render, history, [appended_message("user", 0)]))
    assert not list(append_only_failures(render, history, [appended_message("tool", 0)]))


# ---- token level ---------------------------------------------------------------------------------------------


@cache
def proxy_tokenizer() -> LocalTokenizer:
    return build_proxy_tokenizer(tuple(dict.fromkeys([*FAMILY.special_tokens, *FAMILY.stop_tokens])))


def stored_ids(tokenizer: LocalTokenizer, text: str) -> list[int]:
    """What the engine returns: the render's ids cut right after the sampled `<|im_end|>` (no newline)."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    (end_id,) = tokenizer.encode(FAMILY.end_of_turn)
    cut = len(ids) - ids[::-1].index(end_id)
    assert tokenizer.decode(ids[cut:]) == "\n"
    return ids[:cut]


@pytest.mark.parametrize("thinking", [True, False], ids=["thinking", "no_thinking"])
def test_merge_tokens_equals_the_full_render(thinking: bool) -> None:
    tokenizer = proxy_tokenizer()
    tt = get_tito_tokenizer(tokenizer, "nemotron3", {"enable_thinking": thinking})
    for history, roles in itertools.product(histories().values(), ROLE_SEQUENCES):
        appended = [appended_message(role, i) for i, role in enumerate(roles)]
        stored = stored_ids(tokenizer, tt.render(history, TOOLS))
        merged = tt.merge_tokens(history, history + appended, stored, TOOLS)
        assert merged == tokenizer.encode(tt.render(history + appended, TOOLS, add_generation_prompt=True)), roles
        assert merged[: len(stored)] == stored


def test_without_the_junction_newline_the_ids_would_differ() -> None:
    """Negative control: the stored ids end at `<|im_end|>`; gluing the next turn on directly drops the `\\n`."""
    tokenizer = proxy_tokenizer()
    tt = get_tito_tokenizer(tokenizer, "nemotron3")
    history, appended = histories()["tool_call"], [appended_message("tool", 0)]
    stored = stored_ids(tokenizer, tt.render(history, TOOLS))
    full = tt.render(history + appended, TOOLS, add_generation_prompt=True)
    glued = [*stored, *tokenizer.encode(full[len(tt.render(history, TOOLS)) :])]
    assert glued != tokenizer.encode(full)
    assert tt.merge_tokens(history, history + appended, stored, TOOLS) == tokenizer.encode(full)


def test_tito_verify_passes_for_nemotron3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--family", "nemotron3"]) == 0, capsys.readouterr().err
    assert "nemotron3: " in capsys.readouterr().out
