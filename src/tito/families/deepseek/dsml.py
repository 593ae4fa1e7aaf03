"""DSML, DeepSeek's tool-call markup: one `invoke` per call, one `parameter` per argument.

V3.2 wraps the invokes in a `function_calls` block, V4 in a `tool_calls` block; everything inside is
the same. A string argument is written verbatim with string="true"; anything else as JSON with
string="false". Imports from tito: errors, families.deepseek.common.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tito.errors import TemplateRenderError
from tito.families.deepseek.common import DSML, to_json


def _arguments(where: str, raw: Any) -> Mapping[str, Any]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise TemplateRenderError(f"{where}: arguments are not valid JSON: {exc}") from exc
    if not isinstance(raw, Mapping):
        raise TemplateRenderError(f"{where}: arguments must be a JSON object, got {type(raw).__name__}")
    return raw


def parameter(name: str, value: Any) -> str:
    is_string = isinstance(value, str)
    text = value if is_string else to_json(value)
    return f'<{DSML}parameter name="{name}" string="{"true" if is_string else "false"}">{text}</{DSML}parameter>'


def invoke(where: str, call: Mapping[str, Any]) -> str:
    """One call, OpenAI shape ({"function": {"name", "arguments"}}) or flat ({"name", "arguments"})."""
    function = call.get("function", call)
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise TemplateRenderError(f"{where}: a tool call needs function.name")
    arguments = _arguments(where, function.get("arguments", {}))
    parameters = "\n".join(parameter(str(key), value) for key, value in arguments.items())
    return f'<{DSML}invoke name="{function["name"]}">\n{parameters}\n</{DSML}invoke>'


def tool_calls_block(index: int, calls: Sequence[Mapping[str, Any]], block: str) -> str:
    """The markup an assistant writes after its content: blank line, then the block of invokes."""
    invokes = "\n".join(invoke(f"message {index}: tool_calls[{i}]", call) for i, call in enumerate(calls))
    return f"\n\n<{DSML}{block}>\n{invokes}\n</{DSML}{block}>"


def tool_schemas(tools: Sequence[Mapping[str, Any]]) -> str:
    """Each tool's function schema as one JSON line (OpenAI `{"type": "function", "function": ...}` or bare)."""
    return "\n".join(to_json(tool.get("function", tool)) for tool in tools)
