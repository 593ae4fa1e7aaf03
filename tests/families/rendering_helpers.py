"""Shared helpers of the family tests: render a template the way TitoTokenizer does, build agent conversations,
and check that appending messages only extends a render.

Family-specific facts (how a turn renders, which deviations are declared) stay in each family's test module;
what lives here is the same for every family, so one fix reaches them all.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jinja2
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tests.conftest import family_tokenizer, reference_path
from tito.conformance import TOOLS, shapes
from tito.families import get_family
from tito.messages import normalize_messages
from tito.rendering import compile_template, render_template
from tito.tokenizer_protocol import Tokenizer

Message = dict[str, Any]
Render = Callable[..., str]
"""`render(messages, tools=None, generation=False, **kwargs) -> text`, as returned by `renderer`."""
TwoArgRender = Callable[[list[Message], bool], str]
"""`render(messages, generation) -> text`: a template under test with its tools and kwargs already bound."""

STUB_CONTEXT: list[Message] = [{"role": "user", "content": "."}, {"role": "assistant", "content": "."}]
"""A constant context: fixed templates render appended messages after it exactly as after the real history."""

BROAD = settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""Hypothesis settings of the broad parity corpora: many examples, reproducible."""


# ---- rendering ------------------------------------------------------------------------------------------------


def reference_template(name: str) -> jinja2.Template:
    """An official template from ../shared/reference/templates, compiled; skips when the reference is absent."""
    return compile_template(reference_path("templates", name).read_text(encoding="utf-8"))


def official_source(family: str) -> str:
    """The source of the official template the family declares as its reference."""
    return reference_path("templates", str(get_family(family).official_template)).read_text(encoding="utf-8")


def fixed_template(family: str) -> jinja2.Template:
    """The family's own fixed template, compiled (rendered raw: no normalisation, no pinned kwargs)."""
    return compile_template(get_family(family).fixed_template.source())


def renderer(source: str, family: str, **pinned: Any) -> Render:
    """Render like TitoTokenizer.render: normalised messages, then the template with the given kwargs."""
    template = compile_template(source)
    style = get_family(family).tool_arguments

    def render(messages: Sequence[Message], tools: Any = None, generation: bool = False, **kwargs: Any) -> str:
        return render_template(template, normalize_messages(messages, style), tools, generation, **pinned, **kwargs)

    return render


def fixed(family: str, **overrides: Any) -> Render:
    """The fixed template with the family's pinned kwargs (overridden by `overrides`), as tito renders it."""
    declared = get_family(family)
    return renderer(declared.fixed_template.source(), family, **{**declared.fixed_template.extra_kwargs, **overrides})


def official(family: str, **kwargs: Any) -> Render:
    """The official template with `kwargs`, given the normalised messages tito would give it."""
    return renderer(official_source(family), family, **kwargs)


def assert_same_renders(
    ours: Render, theirs: Render, conversations: list[list[Message]], modes: Iterable[dict[str, Any]] = ({},)
) -> None:
    """Both render every conversation alike, with and without tools and generation prompt, in every mode."""
    for messages, tools, generation, mode in itertools.product(conversations, (None, TOOLS), (False, True), modes):
        expected = theirs(messages, tools, generation, **mode)
        assert ours(messages, tools, generation, **mode) == expected, (messages[-1], tools, generation, mode)


def assert_transformers_renders_alike(
    family: str, cases: Iterable[tuple[list[Message], list[Message] | None, bool, dict[str, Any]]]
) -> None:
    """Engines render the shipped .jinja through transformers: each (messages, tools, generation, kwargs) case
    must give the bytes tito's renderer gives."""
    hf = pytest.importorskip("transformers.utils.chat_template_utils", reason="transformers not installed")
    template = hf._compile_jinja_template(get_family(family).fixed_template.source())
    ours = fixed_template(family)
    for messages, tools, generation, kwargs in cases:
        expected = template.render(
            messages=messages, tools=tools, documents=None, add_generation_prompt=generation, **kwargs
        )
        assert render_template(ours, messages, tools, generation, **kwargs) == expected


def assert_transformers_renders_loop_alike(family: str, loop: list[Message], tools: list[Message]) -> None:
    """`assert_transformers_renders_alike` on every normalised prefix of `loop`, with and without `tools` and
    generation prompt, with the pinned kwargs and with thinking off as well."""
    declared = get_family(family)
    pinned = dict(declared.fixed_template.extra_kwargs)
    assert_transformers_renders_alike(
        family,
        (
            (normalize_messages(loop[:end], declared.tool_arguments), tools_or_none, generation, kwargs)
            for end, tools_or_none, generation in itertools.product(
                range(1, len(loop) + 1), (None, tools), (False, True)
            )
            for kwargs in ({**pinned}, {**pinned, "enable_thinking": False})
        ),
    )


def assert_reasoning_kept_without_the_pinned_kwarg(family: str, history: list[Message], tools: Any) -> None:
    """An engine that loads the .jinja without tito's kwargs still keeps every reasoning (renders append-only)."""
    bare = render_template(fixed_template(family), history, tools, True)
    assert bare == fixed(family)(history, tools, True)
    assert all(m["reasoning_content"] in bare for m in history if m["role"] == "assistant")


# ---- conversations --------------------------------------------------------------------------------------------


def call(call_id: str, name: str, arguments: dict[str, Any]) -> Message:
    """One OpenAI-style tool call with arguments as an object."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def messages_of(shape: str) -> list[Message]:
    """The messages of one conformance shape, as deep copies: tests edit them, and the shapes are shared."""
    return copy.deepcopy([turn.message for turn in shapes()[shape]])


def coding_loop(makefile_arguments: dict[str, Any]) -> list[Message]:
    """System, one user query, tool calls and results (one and two at a time), every assistant reasoning.
    `makefile_arguments` are the arguments of the second parallel call (families vary what they exercise)."""
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
                call("c3", "read_file", makefile_arguments),
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


def loop_and_first_turns(loop: list[Message]) -> list[list[Message]]:
    """Every prefix of the loop from the first user query on, and first-turn prompts (with and without system)."""
    first_turns = [loop[:2], loop[1:2], [{"role": "user", "content": "  spaced\nquestion  "}]]
    return [loop[:end] for end in range(2, len(loop) + 1)] + first_turns


def loop_histories(loop: list[Message]) -> dict[str, list[Message]]:
    """Conversations ending with a generated assistant: after an answer, after a tool call, a bare chat."""
    return {"answered": loop, "tool_call": loop[:5], "bare": [loop[1], loop[-1]]}


def shape_histories() -> dict[str, list[Message]]:
    """Histories that end with the generated assistant: mid tool loop, after a final answer, multi-user."""
    return {
        "tool_call": messages_of("single_tool")[:3],
        "final_answer": messages_of("single_tool"),
        "multi_user": messages_of("multi_user"),
    }


def broad_conversations(values: st.SearchStrategy[Any], inline_reasoning: str) -> st.SearchStrategy[list[Message]]:
    """Any role order, several users, reasoning absent/empty/padded or inside content (`inline_reasoning`),
    parallel calls whose argument values come from `values`. Null content is left out."""
    text = st.sampled_from(["", "ok", "  padded  ", "two\nlines", "Zürich 東京 🌦️"])
    one_call = st.builds(
        lambda name, arguments: call("c", name, arguments),
        st.sampled_from(["read_file", "run"]),
        st.dictionaries(st.sampled_from(["path", "cmd", "n"]), values, max_size=3),
    )
    assistant = st.builds(
        lambda content, reasoning, calls: {
            "role": "assistant",
            "content": content,
            **({} if reasoning is None else {"reasoning_content": reasoning}),
            **({"tool_calls": calls} if calls else {}),
        },
        st.one_of(text, st.just(inline_reasoning)),
        st.one_of(st.none(), st.sampled_from(["", "why", "  padded why \n"])),
        st.lists(one_call, max_size=2),
    )
    message = st.one_of(
        st.builds(lambda role, content: {"role": role, "content": content}, st.sampled_from(["user", "system"]), text),
        st.builds(lambda content: {"role": "tool", "tool_call_id": "c", "content": content}, text),
        assistant,
    )
    return st.lists(message, min_size=1, max_size=8)


def reasoning_from_the_field_only(messages: list[Message]) -> list[Message]:
    """The official input our render equals under the verbatim-content deviation: an assistant with think tags
    in its content and no reasoning_content gets an empty one, so the official template stops splitting it."""
    return [
        {**m, "reasoning_content": ""}
        if m["role"] == "assistant"
        and m.get("reasoning_content") is None
        and isinstance(m.get("content"), str)
        and ("<think>" in m["content"] or "</think>" in m["content"])
        else m
        for m in messages
    ]


# ---- append-only ----------------------------------------------------------------------------------------------


def append_sequences(family: str) -> list[tuple[str, ...]]:
    """Every sequence of 1..3 roles the family lets tito append."""
    roles = get_family(family).supported_roles
    return [seq for length in (1, 2, 3) for seq in itertools.product(roles, repeat=length)]


def appended_message(role: str, index: int, tool_call_id: str = "call_1") -> Message:
    """The `index`-th appended message of a role; an injected assistant carries reasoning."""
    return {
        "tool": {"role": "tool", "tool_call_id": tool_call_id, "content": f"tool result {index}"},
        "user": {"role": "user", "content": f"user message {index}"},
        "system": {"role": "system", "content": f"system note {index}"},
        "assistant": {"role": "assistant", "content": f"injected {index}", "reasoning_content": f"why {index}"},
    }[role]


def appended_messages(roles: Sequence[str], tool_call_id: str = "call_1") -> list[Message]:
    return [appended_message(role, i, tool_call_id) for i, role in enumerate(roles)]


def bind(render: Render, tools: Any, **kwargs: Any) -> TwoArgRender:
    """`render` with tools and kwargs fixed, called as `render(messages, generation)`."""
    return lambda messages, generation: render(messages, tools, generation, **kwargs)


def suffix_after(render: TwoArgRender, context: list[Message], appended: list[Message]) -> str:
    """The text the appended messages (and the generation prompt) add to the render of `context`."""
    return render(context + appended, True)[len(render(context, False)) :]


def append_only_failures(
    render: TwoArgRender,
    family: str,
    history: list[Message],
    appended: list[Message],
    turns: Iterable[str] | None = None,
) -> list[str]:
    """Invariants 1 and 6 at text level: the history's render is a prefix, every expected text of `turns` (by
    default each appended message's content) is in the added suffix, and the suffix ends with the generation
    prompt. An empty list means the append is clean."""
    turns = [m["content"] for m in appended] if turns is None else turns
    before = render(history, False)
    after = render(history + appended, True)
    if not after.startswith(before):
        offset = next(i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b)
        return [f"history rewritten at char {offset}: {before[offset : offset + 50]!r} -> {after[offset:][:50]!r}"]
    suffix = after[len(before) :]
    problems = [f"turn missing: {turn!r}" for turn in turns if turn not in suffix]
    generation_prompt = after[len(render(history + appended, False)) :]
    if not (suffix.endswith(generation_prompt) and generation_prompt.startswith(get_family(family).assistant_opener)):
        problems.append(f"suffix does not end with the generation prompt: {suffix[-60:]!r}")
    return problems


# ---- token level ----------------------------------------------------------------------------------------------


def proxy_tokenizer(family: str) -> Tokenizer:
    """The Qwen3 vocabulary with every marker and stop token of the family atomic (its own is not offline): the
    family's stand-in builtin tokenizer, shared with every test of the session."""
    assert get_family(family).builtin_tokenizer is None, f"{family} has a real tokenizer, not a stand-in"
    return family_tokenizer(family)


def cut_after_last(ids: list[int], token_id: int) -> list[int]:
    """What the engine stores: the ids up to and including the last `token_id` (the sampled stop)."""
    return ids[: len(ids) - ids[::-1].index(token_id)]
