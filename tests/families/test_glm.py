"""glm47: the fixed template renders GLM-4.7/GLM-5 exactly, append-only, and its junction drops the sampled stop.

The official templates (shared/reference) are byte references only; tito ships its own. Token-level checks run
on a proxy tokenizer (the Qwen3 vocabulary with every GLM marker atomic), since GLM's tokenizer is not offline.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tito.cli import main
from tito.families import get_family
from tito.messages import normalize_messages
from tito.rendering import compile_template, render_template
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import LocalTokenizer, build_proxy_tokenizer

REFERENCE = Path(__file__).resolve().parents[2] / ".." / "shared" / "reference" / "templates"
FAMILY = get_family("glm47")
FIXED = compile_template(FAMILY.fixed_template.source())
PINNED = dict(FAMILY.fixed_template.extra_kwargs)
OFFICIAL_NAMES = ("glm-4.7.jinja", "glm-5.jinja")
THINKING_MODES: tuple[dict[str, bool], ...] = ({}, {"enable_thinking": True}, {"enable_thinking": False})
OPENERS = {"tool": "<|observation|>", "user": "<|user|>", "system": "<|system|>", "assistant": "<|assistant|>"}

Message = dict[str, Any]
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
                call("c3", "read_file", {"path": "Makefile"}),
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


@pytest.mark.parametrize("official_name", OFFICIAL_NAMES)
@pytest.mark.parametrize("thinking", THINKING_MODES, ids=["default", "on", "off"])
@pytest.mark.parametrize("generation", [False, True], ids=["plain", "generation"])
def test_fixed_equals_official_on_the_agent_loop_and_first_turns(
    official_name: str, thinking: dict[str, bool], generation: bool
) -> None:
    reference = official(official_name)
    loop = canonical_loop()
    conversations = [loop[:end] for end in range(2, len(loop) + 1)] + first_turn_prompts()
    for messages, tools in itertools.product(conversations, (None, TOOLS)):
        expected = render_template(reference, messages, tools, generation, **thinking)
        assert fixed(messages, tools, generation, **thinking) == expected, [m["role"] for m in messages]


# A broad corpus: any role order, several users, reasoning absent/empty/padded, reasoning inside content,
# parallel calls with every JSON type. Null content is left out (a declared deviation, tested below).
_TEXT = st.sampled_from(["", "ok", "  padded  ", "two\nlines", "Zürich 東京 🌦️"])
_VALUE = st.sampled_from(["text", "", 7, 2.5, True, False, None, [1, "a"], {"k": {"n": None}}])
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
    st.one_of(_TEXT, st.just("<think>\nin content\n</think>\n\nanswer")),
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


@_BROAD
@given(_CONVERSATION, st.sampled_from([None, TOOLS]), st.booleans(), st.sampled_from(THINKING_MODES))
def test_with_clear_thinking_true_the_fixed_template_is_the_official_one(
    messages: list[Message], tools: list[Message] | None, generation: bool, thinking: dict[str, bool]
) -> None:
    """The kept reasoning is the whole of the main deviation: flip the pinned kwarg and any conversation matches."""
    for name in OFFICIAL_NAMES:
        expected = render_template(official(name), messages, tools, generation, clear_thinking=True, **thinking)
        ours = render_template(FIXED, messages, tools, generation, clear_thinking=True, **thinking)
        assert ours == expected


def spell_out_empty_reasoning(messages: list[Message]) -> list[Message]:
    """What the deviation changes: an assistant with no reasoning renders as one whose reasoning is blank."""
    return [
        {**m, "reasoning_content": " "}
        if m["role"] == "assistant"
        and not m.get("reasoning_content")
        and ("reasoning_content" in m or "</think>" not in m["content"])
        else m
        for m in messages
    ]


@_BROAD
@given(_CONVERSATION, st.sampled_from([None, TOOLS]), st.booleans(), st.sampled_from(THINKING_MODES))
def test_with_reasoning_kept_only_empty_reasoning_under_thinking_renders_differently(
    messages: list[Message], tools: list[Message] | None, generation: bool, thinking: dict[str, bool]
) -> None:
    """Official with clear_thinking=false equals ours once an empty reasoning under thinking on is spelled out."""
    thinking_on = thinking.get("enable_thinking", True)
    reference = spell_out_empty_reasoning(messages) if thinking_on else messages
    expected = render_template(official("glm-4.7.jinja"), reference, tools, generation, **PINNED, **thinking)
    assert render_template(FIXED, messages, tools, generation, **PINNED, **thinking) == expected


def test_reasoning_is_kept_when_the_template_is_served_without_the_pinned_kwarg() -> None:
    """An engine that loads the .jinja without tito's kwargs still renders append-only."""
    history = [*canonical_loop(), {"role": "user", "content": "next"}]
    bare = render_template(FIXED, history, TOOLS, True)
    assert bare == fixed(history, TOOLS, True)
    assert all(m["reasoning_content"] in bare for m in history if m["role"] == "assistant")


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


def rendered_turn(message: Message) -> str:
    """How GLM writes one appended message: a system message is a system turn, an assistant a whole turn."""
    role, content = message["role"], message["content"]
    if role == "assistant":
        return f"<|assistant|><think>{message['reasoning_content']}</think>{content}"
    return f"<tool_response>{content}</tool_response>" if role == "tool" else f"{OPENERS[role]}{content}"


STUB_CONTEXT: list[Message] = [{"role": "user", "content": "."}, {"role": "assistant", "content": "."}]
"""A constant context: fixed templates render appended messages after it exactly as after the real history."""
ROLE_SEQUENCES = [seq for n in (1, 2, 3) for seq in itertools.product(FAMILY.supported_roles, repeat=n)]


def append_only_failures(
    render: Callable[[list[Message], bool], str], history: list[Message], appended: list[Message]
) -> Iterator[str]:
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


def fixed_renderer(**kwargs: Any) -> Callable[[list[Message], bool], str]:
    return lambda messages, generation: fixed(messages, TOOLS, generation, **kwargs)


@pytest.mark.parametrize("roles", ROLE_SEQUENCES, ids="-".join)
def test_every_role_sequence_appends_well_formed_after_any_history(roles: tuple[str, ...]) -> None:
    appended = [appended_message(role, i) for i, role in enumerate(roles)]
    for (name, history), kwargs in itertools.product(histories().items(), THINKING_MODES[1:]):
        render = fixed_renderer(**kwargs)
        assert not list(append_only_failures(render, history, appended)), (name, kwargs)
        suffix = render(history + appended, True)[len(render(history, False)) :]
        assert suffix.startswith(OPENERS[roles[0]]), "the appended render must bring the real opener"
        assert not suffix.startswith(OPENERS[roles[0]] * 2)
        assert all(rendered_turn(m) in suffix for m in appended), "each appended message is a well-formed turn"
        for context in ([{"role": "user", "content": "."}, history[-1]], STUB_CONTEXT):
            local = fixed([*context, *appended], None, True, **kwargs)[len(fixed(context, None, False, **kwargs)) :]
            assert local == suffix, "appended messages must render the same after any assistant, without tools"


def test_the_official_template_fails_the_append_only_check_for_a_user_turn() -> None:
    """Negative control: with its default (reasoning cleared before the last user) the official GLM rewrites history."""
    reference = official("glm-4.7.jinja")

    def render(messages: list[Message], generation: bool) -> str:
        return render_template(reference, messages, TOOLS, generation)

    history = histories()["answered"]
    assert list(append_only_failures(render, history, [appended_message("user", 0)]))
    assert not list(append_only_failures(render, history, [appended_message("tool", 0)]))


# ---- token level ---------------------------------------------------------------------------------------------


@cache
def proxy_tokenizer() -> LocalTokenizer:
    return build_proxy_tokenizer(tuple(dict.fromkeys([*FAMILY.special_tokens, *FAMILY.stop_tokens])))


def test_the_junction_drops_exactly_one_trailing_id() -> None:
    assert FAMILY.junction.trailing_ids_dropped == 1
    assert set(FAMILY.stop_tokens) >= {"<|user|>", "<|observation|>"} and FAMILY.assistant_opener == "<|assistant|>"


@pytest.mark.parametrize("thinking", [True, False], ids=["thinking", "no_thinking"])
@pytest.mark.parametrize("stop", FAMILY.stop_tokens)
def test_merge_tokens_equals_the_full_render_whatever_stop_token_was_sampled(thinking: bool, stop: str) -> None:
    """Stored ids end with the sampled stop (`<|observation|>` even if a user follows); merge drops it, no duplicate."""
    tokenizer = proxy_tokenizer()
    tt = get_tito_tokenizer(tokenizer, "glm47", {"enable_thinking": thinking})
    (stop_id,) = tokenizer.encode(stop, add_special_tokens=False)
    for history, roles in itertools.product(histories().values(), ROLE_SEQUENCES):
        appended = [appended_message(role, i) for i, role in enumerate(roles)]
        stored = [*tokenizer.encode(tt.render(history, TOOLS), add_special_tokens=False), stop_id]
        merged = tt.merge_tokens(history, history + appended, stored, TOOLS)
        full = tokenizer.encode(tt.render(history + appended, TOOLS, add_generation_prompt=True))
        assert merged == full, roles
        kept = len(stored) - FAMILY.junction.trailing_ids_dropped
        assert merged[:kept] == stored[:kept]


def test_keeping_the_sampled_stop_token_would_duplicate_the_opener() -> None:
    """Negative control: without the declared drop, a tool result after `<|observation|>` gets two openers."""
    tokenizer = proxy_tokenizer()
    tt = get_tito_tokenizer(tokenizer, "glm47")
    history = histories()["tool_call"]
    appended = [appended_message("tool", 0)]
    stored = tokenizer.encode(tt.render(history, TOOLS) + "<|observation|>")
    kept_stop = [*stored, *tt.tokenize_additional_messages(history, history + appended, TOOLS)]
    assert kept_stop != tokenizer.encode(tt.render(history + appended, TOOLS, add_generation_prompt=True))
    assert tokenizer.decode(kept_stop).count("<|observation|><|observation|>") == 1


def test_tito_verify_passes_for_glm47(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--family", "glm47"]) == 0, capsys.readouterr().err
    assert "glm47: " in capsys.readouterr().out
