"""DeepSeek-V3.2 prompts, written from the format: `<｜User｜>...<｜Assistant｜>` + think token + reply + EOS.

Quirk: the published encoder opens reasoning (`<think>`) only after the last user turn and drops the
reasoning of every earlier assistant, so appending a user rewrites the history. Here the think token
after a user or tool results is decided by the next message alone (`<think>` when an assistant follows
or the generation prompt is due, with thinking on) and every assistant keeps its reasoning
(drop_thinking=False, pinned). Tool results are not a turn of their own: they continue the assistant
span (`\\n\\n<function_results>...</function_results>\\n\\n` + think token), so after them the generation
prompt is the think token, not `<｜Assistant｜>`.

Evidence: the reference encoder vendored by PyPI llm-router-utils (encoding_dsv32); pinning tests:
tests/families/deepseek/test_v32.py (byte parity with drop_thinking=True and on every conversation
whose reasoning the reference keeps; append-only for every role sequence).

Imports from tito: errors, families.deepseek.common, families.deepseek.dsml.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tito.errors import TemplateRenderError
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
You have access to a set of tools you can use to answer the user's question.
You can invoke functions by writing a "<{DSML}function_calls>" block like the following as part of your reply to the user:
<{DSML}function_calls>
<{DSML}invoke name="$FUNCTION_NAME">
<{DSML}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{DSML}parameter>
...
</{DSML}invoke>
<{DSML}invoke name="$FUNCTION_NAME2">
...
</{DSML}invoke>
</{DSML}function_calls>
String and scalar parameters should be specified as is without any escaping or quotes, while lists and objects should use JSON format. The "string" attribute should be set to "true" for string type parameters and "false" for other types (numbers, booleans, arrays, objects).
If the thinking_mode is enabled, then after function results you should strongly consider outputting a thinking block. Here is an example:
<{DSML}function_calls>
...
</{DSML}function_calls>
<function_results>
...
</function_results>
{THINK_START}...thinking about results{THINK_END}
Here are the functions available in JSONSchema format:
<functions>
{{schemas}}
</functions>
"""  # noqa: E501 - the model's prompt text, byte for byte


def _tools_section(tools: Sequence[Mapping[str, Any]]) -> str:
    return _TOOLS_PROMPT.format(schemas=tool_schemas(tools))


DEVIATIONS: tuple[str, ...] = (
    "every assistant keeps its reasoning (`reasoning</think>` before the reply) and the think token after a user "
    "or tool results is `<think>` whenever an assistant follows, wherever the last user turn is (reference: only "
    "after the last user turn), so appending never rewrites history; drop_thinking=True restores the reference",
    "an assistant not preceded by a user turn or tool results (injected after an assistant or a system message) "
    "gets its own `<｜Assistant｜>` + think token (reference: none, so the reply fused with the previous text)",
    "add_generation_prompt=True after a trailing system or assistant message writes `<｜Assistant｜>` + think token; "
    "a trailing user or tool result gets its opener only with add_generation_prompt=True (reference: always)",
    "the think token after a user or tool results followed by a system message is `</think>` (the slot is closed "
    "before the system text; reference: `<think>` when no user follows)",
    "tool results are closed (`</function_results>`) at the end of each run of tool messages, however many calls "
    "the assistant made; a run needs no preceding tool-calling assistant (reference: raises, or leaves it open)",
    "an assistant without reasoning in thinking mode renders `</think>` + reply (reference: raises after the last "
    "user turn; it still does with drop_thinking=True)",
)


def _last_user_index(messages: Sequence[Message]) -> int:
    return max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)


class _Reasoning:
    """Where reasoning opens and which assistants show theirs: position-independent, or the reference's rule."""

    def __init__(self, options: EncoderOptions, messages: Sequence[Message]) -> None:
        self.thinking = options.thinking
        self.keep = not options.drop_thinking
        self.last_user = _last_user_index(messages)

    def opens_after(self, index: int, next_role: str | None) -> bool:
        """The think token after message `index` (a user or the last tool result); None: the generation prompt."""
        if self.keep:
            return self.thinking and next_role in (None, "assistant")
        return self.thinking and index >= self.last_user

    def shows(self, index: int) -> bool:
        """Whether the assistant at `index` renders `reasoning</think>`; its opener agrees."""
        return self.thinking and (self.keep or index > self.last_user)


def _assistant_body(index: int, message: Message, reasoning: _Reasoning) -> str:
    calls = message.get("tool_calls") or []
    body = ""
    if reasoning.shows(index):
        thought = text_of(index, message, "reasoning_content")
        if not reasoning.keep and not (thought or calls):
            raise TemplateRenderError(
                f"deepseekv32: message {index} (assistant after the last user turn) has no reasoning_content and no "
                "tool calls, which thinking mode with drop_thinking=True requires (as the reference encoder does)"
            )
        body = thought + THINK_END
    body += text_of(index, message)
    if calls:
        body += tool_calls_block(index, calls, "function_calls")
    return body + EOS


def encode(messages: Sequence[Message], tools: Tools, add_generation_prompt: bool, kwargs: Mapping[str, Any]) -> str:
    """The DeepSeek-V3.2 prompt; a MessageEncoder (see tito.families.base)."""
    options = EncoderOptions.from_kwargs(kwargs)
    placed = with_tools(messages, tools)
    reasoning = _Reasoning(options, placed)
    parts = [BOS]
    previous: str | None = None
    for index, message in enumerate(placed):
        role = message.get("role")
        next_role = placed[index + 1].get("role") if index + 1 < len(placed) else None
        opener_due = next_role is not None or add_generation_prompt
        if role == "system":
            parts.append(system_text(index, message, _tools_section))
        elif role == "user":
            parts.append(USER + text_of(index, message))
            if opener_due:
                parts.append(ASSISTANT + think_token(reasoning.opens_after(index, next_role)))
        elif role == "tool":
            if previous != "tool":
                parts.append("\n\n<function_results>")
            parts.append(f"\n<result>{text_of(index, message)}</result>")
            if next_role != "tool":
                parts.append("\n</function_results>")
                if opener_due:
                    parts.append("\n\n" + think_token(reasoning.opens_after(index, next_role)))
        elif role == "assistant":
            if previous not in ("user", "tool"):
                parts.append(ASSISTANT + think_token(reasoning.shows(index)))
            parts.append(_assistant_body(index, message, reasoning))
        else:
            raise unknown_role(index, role, "deepseekv32")
        previous = role
    if add_generation_prompt and previous in (None, "system", "assistant"):
        parts.append(ASSISTANT + think_token(options.thinking))
    return "".join(parts)
