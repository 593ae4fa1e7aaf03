"""DeepSeek-V4 prompts, written from the format: tool results fold into user turns.

Quirk: V4 has no tool turn. Every run of consecutive user and tool messages becomes one
`<｜User｜>` block whose parts (user text, `<tool_result>...</tool_result>`) are joined by a blank line,
with the tool results put in the order of the calls of the assistant before them (by tool_call_id).
`<｜Assistant｜>` + think token follows a user block only when an assistant or the generation prompt
follows. The published encoder keeps reasoning position-independent when drop_thinking=False; it is
pinned so. Rendering depends only on the messages since the last assistant and that assistant (its
call order), so appended messages render the same after [stub user, last assistant] as after the
whole history (RenderContext.LAST_MESSAGE; tests/families/deepseek/test_families.py).

Evidence: the reference encoder vendored by PyPI llm-router-utils (encoding_dsv4); pinning tests:
tests/families/deepseek/test_v4.py.

Imports from tito: errors, families.deepseek.common, families.deepseek.dsml.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tito.errors import ConfigurationError
from tito.families.deepseek.common import (
    ASSISTANT,
    BOS,
    DSML,
    EOS,
    THINK_END,
    THINK_START,
    USER,
    EncoderOptions,
    Message,
    Tools,
    system_text,
    text_of,
    think_token,
    unknown_role,
    with_tools,
)
from tito.families.deepseek.dsml import tool_calls_block, tool_schemas

_TOOLS_PROMPT = f"""## Tools

You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "<{DSML}tool_calls>" block like the following:

<{DSML}tool_calls>
<{DSML}invoke name="$TOOL_NAME">
<{DSML}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{DSML}parameter>
...
</{DSML}invoke>
<{DSML}invoke name="$TOOL_NAME2">
...
</{DSML}invoke>
</{DSML}tool_calls>

String parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string="false"`.

If thinking_mode is enabled (triggered by {THINK_START}), you MUST output your complete reasoning inside {THINK_START}...{THINK_END} BEFORE any tool calls or final response.

Otherwise, output directly after {THINK_END} with tool calls or final response.

### Available Tool Schemas

{{schemas}}

You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.
"""  # noqa: E501 - the model's prompt text, byte for byte

_EFFORT_THOROUGH = (
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause,"
    " rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered"
    " alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n"
)
_EFFORT_EXHAUSTIVE = (
    "Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising.\n"
    "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: exhaustively decompose"
    " the problem into its most fundamental components, trace every causal chain to its root, and resolve the"
    " underlying cause rather than any surface symptom.\n"
    "Do not stop reasoning until you have independently verified the solution from multiple angles and are certain"
    " that no assumption remains unchecked and no error remains undiscovered.\n\n"
)
EFFORT_PROMPTS: Mapping[str, Mapping[str, str]] = {
    "preview": {"high": "", "max": _EFFORT_THOROUGH},
    "official": {"low": "", "high": _EFFORT_THOROUGH, "max": _EFFORT_EXHAUSTIVE},
}
"""`reasoning_effort_profile` -> `reasoning_effort` -> text opening a thinking-mode prompt (first default)."""


def _tools_section(tools: Sequence[Mapping[str, Any]]) -> str:
    return _TOOLS_PROMPT.format(schemas=tool_schemas(tools))


DEVIATIONS: tuple[str, ...] = (
    "tool results are ordered by the calls of the nearest preceding assistant (reference: the last assistant that "
    "made calls, even across assistants that made none), so a turn's render needs only the last assistant",
    "an assistant not preceded by a user block (injected after an assistant or a system message) gets its own "
    "`<｜Assistant｜>` + think token (reference: none, so the reply fused with the previous text)",
    "add_generation_prompt=True after a trailing system or assistant message writes `<｜Assistant｜>` + think token; "
    "a trailing user block gets its opener only with add_generation_prompt=True (reference: always)",
)


@dataclass
class _Block:
    """A message as V4 renders it; consecutive user and tool messages share one user block."""

    role: str
    index: int
    """Index of the first message in the block (for error messages)."""
    message: Message
    parts: list[tuple[int | None, str]] = field(default_factory=list)
    """(call position of a tool result, None for user text; rendered text)."""

    def text(self) -> str:
        """The parts joined by a blank line, tool results in call order among their own slots (stable)."""
        results = iter(sorted((p for p in self.parts if p[0] is not None), key=lambda p: p[0] or 0))
        return "\n\n".join(text if key is None else next(results)[1] for key, text in self.parts)


def _call_order(message: Message) -> dict[str, int]:
    order: dict[str, int] = {}
    for position, call in enumerate(message.get("tool_calls") or []):
        call_id = call.get("id") or (call.get("function") or {}).get("id")
        if call_id:
            order[call_id] = position
    return order


def _fold(messages: Sequence[Message]) -> list[_Block]:
    """Blocks in order; a tool result's position is its call's in the assistant before it (unknown ids: 0)."""
    blocks: list[_Block] = []
    order: dict[str, int] = {}
    for index, message in enumerate(messages):
        role = message.get("role")
        if role in ("user", "tool"):
            if not blocks or blocks[-1].role != "user":
                blocks.append(_Block("user", index, message))
            if role == "user":
                blocks[-1].parts.append((None, text_of(index, message)))
            else:
                key = order.get(message.get("tool_call_id") or "", 0)
                blocks[-1].parts.append((key, f"<tool_result>{text_of(index, message)}</tool_result>"))
        elif role in ("system", "assistant"):
            if role == "assistant":
                order = _call_order(message)
            blocks.append(_Block(role, index, message))
        else:
            raise unknown_role(index, role, "deepseekv4")
    return blocks


EFFORT_KWARGS: tuple[str, ...] = ("reasoning_effort", "reasoning_effort_profile")
"""The kwargs _effort_prompt reads."""


def _effort_prompt(kwargs: Mapping[str, Any]) -> str:
    profile = kwargs.get("reasoning_effort_profile") or "preview"
    if profile not in EFFORT_PROMPTS:
        raise ConfigurationError(
            f"deepseekv4: reasoning_effort_profile={profile!r}; choose one of {', '.join(EFFORT_PROMPTS)}"
        )
    prompts = EFFORT_PROMPTS[profile]
    effort = kwargs.get("reasoning_effort") or next(iter(prompts))
    if effort not in prompts:
        raise ConfigurationError(
            f"deepseekv4: reasoning_effort={effort!r} for profile {profile!r}; choose one of {', '.join(prompts)}"
        )
    return prompts[effort]


def encode(messages: Sequence[Message], tools: Tools, add_generation_prompt: bool, kwargs: Mapping[str, Any]) -> str:
    """The DeepSeek-V4 prompt; a MessageEncoder (see tito.families.base)."""
    options = EncoderOptions.from_kwargs(kwargs)
    placed = with_tools(messages, tools)
    blocks = _fold(placed)
    # The reference keeps all reasoning when tools are declared, even with drop_thinking=True.
    keep = not options.drop_thinking or any(m.get("tools") for m in placed)
    last_user = max((i for i, b in enumerate(blocks) if b.role == "user"), default=-1)

    def shows(position: int) -> bool:
        return options.thinking and (keep or position > last_user)

    parts = [BOS]
    effort = _effort_prompt(kwargs)
    if options.thinking and blocks:
        parts.append(effort)
    for position, block in enumerate(blocks):
        next_role = blocks[position + 1].role if position + 1 < len(blocks) else None
        if block.role == "system":
            parts.append(system_text(block.index, block.message, _tools_section))
        elif block.role == "user":
            parts.append(USER + block.text())
            if next_role == "assistant" or (next_role is None and add_generation_prompt):
                parts.append(ASSISTANT + think_token(options.thinking and (keep or position >= last_user)))
        else:
            if position == 0 or blocks[position - 1].role != "user":
                parts.append(ASSISTANT + think_token(shows(position)))
            body = text_of(block.index, block.message, "reasoning_content") + THINK_END if shows(position) else ""
            body += text_of(block.index, block.message)
            if block.message.get("tool_calls"):
                body += tool_calls_block(block.index, block.message["tool_calls"], "tool_calls")
            parts.append(body + EOS)
    if add_generation_prompt and (not blocks or blocks[-1].role != "user"):
        parts.append(ASSISTANT + (THINK_START if options.thinking else THINK_END))
    return "".join(parts)
