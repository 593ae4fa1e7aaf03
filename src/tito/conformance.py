"""The conformance matrix behind `tito verify`: conversation shapes x append-role sequences x thinking.

For every cut after a generated assistant it checks, at text level, that the stored render is a byte
prefix of the next render (Invariant 1), that appended content shows in the suffix and the suffix ends
with the generation prompt (Invariant 6), that the generation prompt the model saw is a prefix of its
rendered turn; and at token level that `merge_tokens` equals the ids of the full render and keeps the
stored ids as its exact prefix (Invariants 2 and 3). Stored ids are simulated the way an engine returns
them: the full render's ids cut right after the sampled stop token.

Imports from tito: chat_message, comparator, content_tokens, errors, families, family_tokenizer, tokenizer,
tokenizer_protocol.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tito.chat_message import Message
from tito.comparator import compare_token_sequences
from tito.content_tokens import ContentSpecialTokens
from tito.errors import TitoError
from tito.families.base import Family
from tito.families.registry import get_family
from tito.family_tokenizer import builtin_tokenizer_for as builtin_tokenizer_for  # the matrix's callers take it here
from tito.tokenizer import TitoTokenizer
from tito.tokenizer_protocol import Tokenizer

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "metric": {"type": "boolean"}},
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
                "properties": {
                    "query": {"type": "string"},
                    "limit": {"type": "integer"},
                    "filters": {"type": "object"},
                },
                "required": ["query"],
            },
        },
    },
]


@dataclass(frozen=True)
class Turn:
    """One message of a shape; `generated` marks assistants the engine sampled (cuts happen after them)."""

    message: Message
    generated: bool = False


def _call(call_id: str, name: str, arguments: Any) -> Message:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _assistant(content: str, reasoning: str = "", calls: Sequence[Message] = ()) -> Turn:
    message: Message = {"role": "assistant", "content": content, "reasoning_content": reasoning}
    if calls:
        message["tool_calls"] = list(calls)
    return Turn(message, generated=True)


def _msg(role: str, content: str, **extra: Any) -> Turn:
    return Turn({"role": role, "content": content, **extra})


SYSTEM = _msg("system", "You are a careful assistant.")
ASK = _msg("user", "What is the weather in Paris, and any news?")
WEATHER = _call("call_1", "get_weather", {"city": "Paris", "metric": True})
SEARCH = _call("call_2", "search", {"query": "Paris news", "limit": 3})
UNICODE_BOOLEAN_CALL = _call("call_1", "get_weather", {"city": "Zürich 東京", "metric": False})
MODEL_SPELLED_CALL = _call("call_1", "search", '{"query": "Paris", "limit": 2, "filters": {"new": true, "tag": null}}')


def shapes() -> dict[str, list[Turn]]:
    """The conversation shapes every family must pass."""
    return {
        "single_tool": [
            SYSTEM, ASK,
            _assistant("", "I need the weather tool.", [WEATHER]),
            _msg("tool", "18 C, cloudy", tool_call_id="call_1"),
            _assistant("It is 18 C and cloudy in Paris.", "The tool answered."),
        ],
        "parallel_tools": [
            SYSTEM, ASK,
            _assistant("Let me check both.", "Two tools at once.", [WEATHER, SEARCH]),
            _msg("tool", "18 C", tool_call_id="call_1"),
            _msg("tool", "No major news.", tool_call_id="call_2"),
            _assistant("18 C, and no major news.", "Both answered."),
        ],
        "long_chain": [
            SYSTEM, ASK,
            *itertools.chain.from_iterable(
                (
                    _assistant("", f"Step {i}: search again.", [_call(f"call_{i}", "search", {"query": f"q{i}"})]),
                    _msg("tool", f"result {i}", tool_call_id=f"call_{i}"),
                )
                for i in range(5)
            ),
            _assistant("Done after five searches.", "Enough results."),
        ],
        "multi_user": [
            SYSTEM, _msg("user", "Hi!"),
            _assistant("Hello! How can I help?", "Greet back."),
            _msg("user", "Tell me a joke."),
            _assistant("Why did the token cross the junction?", "A short joke."),
            _msg("user", "Another one."),
            _assistant("No more jokes.", "Decline politely."),
        ],
        "mid_session_system": [
            SYSTEM, ASK,
            _assistant("", "Weather first.", [WEATHER]),
            _msg("tool", "18 C", tool_call_id="call_1"),
            _msg("system", "Budget: one more tool call."),
            _assistant("It is 18 C.", "Respect the budget."),
        ],
        "injected_assistant_then_user": [
            SYSTEM, _msg("user", "Summarise our work."),
            _assistant("We fixed the junction.", "Summarise."),
            Turn({"role": "assistant", "content": "[Compacted] earlier turns fixed the junction."}),
            _msg("user", "Continue."),
            _assistant("Continuing.", "Go on."),
        ],
        "user_after_tool": [
            SYSTEM, ASK,
            _assistant("", "Weather.", [WEATHER]),
            _msg("tool", "18 C", tool_call_id="call_1"),
            _msg("user", "Also in Celsius please."),
            _assistant("18 C it is.", "Already Celsius."),
        ],
        "empty_reasoning": [
            SYSTEM, _msg("user", "Say hi."),
            _assistant("Hi.", ""),
            _msg("user", "Again."),
            _assistant("Hi again.", ""),
        ],
        "unicode_boolean_arguments": [
            SYSTEM, _msg("user", "Météo à Zürich? 天気は? 🌦️"),
            _assistant("", "Unicode city, boolean flag.", [UNICODE_BOOLEAN_CALL]),
            _msg("tool", "12 °C — nuageux", tool_call_id="call_1"),
            _assistant("12 °C, nuageux. 🌥️", "Réponse en français."),
        ],
        "string_arguments": [
            SYSTEM, ASK,
            _assistant("", "Model-spelled JSON.", [MODEL_SPELLED_CALL]),
            _msg("tool", "two results", tool_call_id="call_1"),
            _assistant("Two results found.", "Done."),
        ],
    }  # fmt: skip


SHAPE_EXPLANATIONS: dict[str, str] = {
    "single_tool": "one tool call, its result, then the final answer",
    "parallel_tools": "two tool calls in one turn, two results appended together",
    "long_chain": "five tool-call rounds in a row: the junction repeats on a long history",
    "multi_user": "plain chat: three user turns, no tools",
    "mid_session_system": "a system message appended after a tool result (a harness note mid-session)",
    "injected_assistant_then_user": "an assistant message the harness injects (compaction summary), then a user",
    "user_after_tool": "a user message appended right after a tool result",
    "empty_reasoning": "assistants whose reasoning is empty",
    "unicode_boolean_arguments": "non-ASCII text and a boolean argument in a tool call",
    "string_arguments": "tool-call arguments the model spelled as a JSON string, kept verbatim",
    "quoted_markers": "content in every role quoting think tags and every marker of the family, tokenized per the "
    "content mode (--content-special-tokens)",
    "roles": "after a tool-calling assistant, every sequence of appended roles up to --max-sequence-length",
}
"""One line per shape group `tito verify` reports (`tito verify --list`); `roles` stands for every `roles:...`."""


def role_sequence_shapes(roles: Sequence[str], max_length: int) -> dict[str, list[Turn]]:
    """After a tool-calling assistant, append every sequence of `roles` up to `max_length`, then generate. An injected
    assistant quotes think tags (compaction summaries quote tool output): its content must render verbatim."""
    result: dict[str, list[Turn]] = {}
    appended = {
        "tool": lambda i: _msg("tool", f"tool result {i}", tool_call_id="call_1"),
        "user": lambda i: _msg("user", f"user message {i}"),
        "system": lambda i: _msg("system", f"system note {i}"),
        "assistant": lambda i: Turn(
            {"role": "assistant", "content": f"injected assistant {i} quoting <think>x</think>"}
        ),
    }
    for length in range(1, max_length + 1):
        for sequence in itertools.product(roles, repeat=length):
            turns = [SYSTEM, ASK, _assistant("", "Call the tool.", [WEATHER])]
            turns += [appended[role](i) for i, role in enumerate(sequence)]
            turns.append(_assistant("Final answer.", "Wrap up."))
            result["roles:" + "-".join(sequence)] = turns
    return result


@dataclass(frozen=True)
class CaseResult:
    shape: str
    cut: int
    """Index of the generated assistant the stored conversation ends with."""
    appended_roles: tuple[str, ...]
    thinking: bool | None
    check: str
    passed: bool
    detail: str = ""


def thinking_modes(tt: TitoTokenizer, chat_template_kwargs: Mapping[str, Any] | None = None) -> list[bool | None]:
    """Both modes of a family with a thinking switch, or only the one the given kwargs set."""
    switch = tt.family.thinking_kwarg
    if switch is None:
        return [None]
    given = (chat_template_kwargs or {}).get(switch)
    return [True, False] if given is None else [bool(given)]


def _messages(turns: Sequence[Turn], thinking: bool | None) -> list[Message]:
    messages = []
    for turn in turns:
        message = dict(turn.message)
        if thinking is False and turn.generated:
            message["reasoning_content"] = ""
        messages.append(message)
    return messages


def quoted_marker_shapes(markers: Sequence[str]) -> dict[str, list[Turn]]:
    """Content in every role quoting think tags and every marker of the family (tool output and compaction
    summaries quote them all the time): rendered verbatim, tokenized per the content mode."""
    quoted = " ".join(dict.fromkeys(["<think>x</think>", *markers]))
    return {
        "quoted_markers": [
            _msg("system", f"Quote: {quoted}"),
            _msg("user", f"Echo {quoted}"),
            _assistant(f"Echoed {quoted}", "Quote them.", [WEATHER]),
            _msg("tool", f"tool said {quoted}", tool_call_id="call_1"),
            _msg("system", f"Note: {quoted}"),
            Turn({"role": "assistant", "content": f"Summary: tool said <think>x</think> then {quoted}"}),
            _msg("user", f"Again {quoted}"),
            _assistant(f"Done {quoted}", "Done."),
        ],
    }


def simulated_stored_ids(tt: TitoTokenizer, old: list[Message], tools: Sequence[Message] | None = TOOLS) -> list[int]:
    """What an engine returns for the last turn: the render's ids cut right after the sampled stop token."""
    ids = tt.tokenize(old, tools)
    junction = tt.family.junction
    if junction.trailing_ids_dropped:  # the sampled stop token opens the next message: the turn's render lacks it
        stop = tt.family.stop_after_tool_calls if old[-1].get("tool_calls") else None
        stop = stop or tt.family.end_of_turn
        return [*ids, *tt.tokenizer.encode(stop, add_special_tokens=False)]
    trailer_ids = tt.tokenizer.encode(junction.trailer, add_special_tokens=False) if junction.trailer else []
    return ids[: len(ids) - len(trailer_ids)]


def _check_cut(tt: TitoTokenizer, old: list[Message], new: list[Message]) -> Iterator[tuple[str, bool, str]]:
    appended = new[len(old) :]
    before = tt.render(old, TOOLS)
    after = tt.render(new, TOOLS, add_generation_prompt=True)
    yield "append_only_text", after.startswith(before), "" if after.startswith(before) else _first_diff(before, after)
    suffix = after[len(before) :]
    missing = [m["role"] for m in appended if m.get("content") and m["content"] not in suffix]
    yield "appended_content_in_suffix", not missing, f"content of {missing} missing" if missing else ""
    generation_prompt = after[len(tt.render(new, TOOLS)) :]
    openers = (tt.family.assistant_opener, *tt.family.continuation_prompts)
    ok = generation_prompt.startswith(openers) and suffix.endswith(generation_prompt)
    yield "suffix_ends_with_opener", ok, "" if ok else f"suffix ends with {suffix[-60:]!r}"
    prompt = tt.render(old[:-1], TOOLS, add_generation_prompt=True)
    ok = before.startswith(prompt)
    yield "prompt_prefix_of_turn", ok, "" if ok else _first_diff(prompt, before)
    stored = simulated_stored_ids(tt, old)
    expected = tt.tokenize(new, TOOLS, add_generation_prompt=True)
    merged = tt.merge_tokens(old, new, stored, TOOLS)
    mismatches = compare_token_sequences(expected, merged, tt.tokenizer, tt.family.special_tokens)
    yield "merge_equals_full_render", not mismatches, "; ".join(str(m) for m in mismatches[:2])
    disagreement = tokenizer_disagreement(tt, merged, new, after)
    yield "tokenizer_agrees", disagreement is None, disagreement or ""
    kept = stored[: tt.kept_stored_ids(stored)]
    ok = merged[: len(kept)] == kept
    yield "stored_ids_are_prefix", ok, "" if ok else "stored ids were changed"


def tokenizer_disagreement(
    tt: TitoTokenizer, merged: Sequence[int], messages: list[Message], render: str
) -> str | None:
    """How the merged prompt disagrees with an oracle that is not tito's code, the tokenizer library itself (None:
    it agrees). With every role's content in control mode: the merged ids are the tokenizer's own ids of the whole
    render. Otherwise they decode to the render (as the tokenizer normalises it) and hold exactly as many control
    ids as the tokenizer gives the render whose text-mode `content` quotes no control-token text."""
    tokenizer = tt.tokenizer
    ids = tokenizer.encode(render, add_special_tokens=False)
    text_roles = {role for role, mode in tt.content_modes.items() if mode == "text"}
    if not text_roles:
        return None if list(merged) == list(ids) else "differs from the tokenizer's own ids of the whole render"
    if tokenizer.decode(list(merged), skip_special_tokens=False) != tokenizer.decode(ids, skip_special_tokens=False):
        return "does not decode to the render"
    controls = _added_tokens(tokenizer)
    if controls is None:
        return None  # a tokenizer that does not list its added tokens: the decode check is what can be asked
    unquoted = []
    for message in messages:
        content = message.get("content")
        if message["role"] in text_roles and isinstance(content, str):
            for text in sorted(controls.values(), key=len, reverse=True):
                content = content.replace(text, "x")  # plain text, never empty: templates render "" differently
            message = {**message, "content": content}
        unquoted.append(message)
    expected = tokenizer.encode(tt.render(unquoted, TOOLS, add_generation_prompt=True), add_special_tokens=False)
    counted, wanted = sum(i in controls for i in merged), sum(i in controls for i in expected)
    return None if counted == wanted else f"{counted} control ids where the template puts {wanted}"


def _added_tokens(tokenizer: Tokenizer) -> dict[int, str] | None:
    """The tokenizer library's own added tokens by id (a `tokenizers` backend or a transformers tokenizer)."""
    backend = getattr(tokenizer, "backend", None) or getattr(tokenizer, "_tokenizer", None)
    if backend is not None and hasattr(backend, "get_added_tokens_decoder"):
        return {int(i): token.content for i, token in backend.get_added_tokens_decoder().items()}
    return None


def _first_diff(before: str, after: str) -> str:
    offset = next(
        (i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b), min(len(before), len(after))
    )
    return f"differs at char {offset}: {before[offset : offset + 50]!r} vs {after[offset : offset + 50]!r}"


def run_matrix(
    tokenizer: Tokenizer,
    family: str | Family,
    chat_template_kwargs: dict[str, Any] | None = None,
    max_sequence_length: int = 3,
    allowed_append_roles: Sequence[str] | None = None,
    content_special_tokens: ContentSpecialTokens = None,
) -> list[CaseResult]:
    """Every check for every cut of every shape, in each thinking mode the family has (only the one the kwargs
    set, when they set the family's thinking switch).

    `allowed_append_roles` narrows the role sequences (and skips shapes appending other roles), as a
    session's harness gate would; None checks every role the family supports. `family` is a registry name or a
    Family value (a declaration under test). `content_special_tokens` is the content mode the token-level checks
    run in (tito.content_tokens).
    """
    declared = get_family(family) if isinstance(family, str) else family
    base = TitoTokenizer(tokenizer, declared, chat_template_kwargs, allowed_append_roles)
    all_shapes = {
        **shapes(),
        **quoted_marker_shapes((*base.family.special_tokens, *base.family.stop_tokens)),
        **role_sequence_shapes(base.allowed_append_roles, max_sequence_length),
    }
    results: list[CaseResult] = []
    for thinking in thinking_modes(base, chat_template_kwargs):
        kwargs = dict(chat_template_kwargs or {})
        if thinking is not None and base.family.thinking_kwarg:
            kwargs[base.family.thinking_kwarg] = thinking
        tt = TitoTokenizer(
            tokenizer, declared, kwargs, allowed_append_roles, content_special_tokens=content_special_tokens
        )
        for name, turns in all_shapes.items():
            messages = _messages(turns, thinking)
            cuts = [i for i, turn in enumerate(turns) if turn.generated]
            for cut, next_cut in itertools.pairwise(cuts):
                old, new = messages[: cut + 1], messages[:next_cut]
                roles = tuple(m["role"] for m in new[len(old) :])
                if any(role not in tt.allowed_append_roles for role in roles):
                    results.append(
                        CaseResult(name, cut, roles, thinking, "role_allowed", True, "skipped: role not allowed")
                    )
                    continue
                try:
                    for check, passed, detail in _check_cut(tt, old, new):
                        results.append(CaseResult(name, cut, roles, thinking, check, passed, detail))
                except TitoError as exc:
                    results.append(
                        CaseResult(name, cut, roles, thinking, "no_error", False, f"{type(exc).__name__}: {exc}")
                    )
    return results
