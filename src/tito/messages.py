"""OpenAI chat messages: validate and normalise them for rendering, with errors that name the message.

Normalising never mutates the caller's dicts. Content given as a list of text parts becomes one string;
tool-call arguments are handed to the template the way the family's format embeds them (JSON text kept
verbatim, or decoded to an object for XML-parameter formats).

Imports nothing from tito but chat_message, errors and families.base.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tito.chat_message import Message as Message  # re-exported: the modules that read messages from here
from tito.errors import MessageError, ToolDefinitionError
from tito.families.base import ToolArguments

KNOWN_ROLES = ("system", "user", "assistant", "tool")
_MAPPING = (dict, Mapping)
"""`isinstance(value, _MAPPING)` is `isinstance(value, Mapping)` without the ABC's check for a dict (what parsed
JSON gives): a turn's messages and tool calls make a dozen such checks."""


def _encodable(index: int, field: str, text: str | None) -> str | None:
    """`text` unchanged when it is valid Unicode; a lone surrogate (from JSON `\\ud800`) cannot be tokenized."""
    if text is not None and not text.isascii():  # ASCII always encodes: checked without copying the text
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise MessageError(index, field, f"contains a lone surrogate at character {exc.start}") from exc
    return text


def _text_content(index: int, content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part_index, part in enumerate(content):
            if (
                not isinstance(part, _MAPPING)
                or part.get("type", "text") != "text"
                or not isinstance(part.get("text"), str)
            ):
                raise MessageError(
                    index, f"content[{part_index}]", "only text parts ({'type': 'text', 'text': ...}) are supported"
                )
            texts.append(part["text"])
        return "".join(texts)
    raise MessageError(
        index, "content", f"must be a string, a list of text parts or null, not {type(content).__name__}"
    )


def _tool_call(index: int, call_index: int, call: Any, arguments_style: ToolArguments) -> Message:
    where = f"tool_calls[{call_index}]"
    if not isinstance(call, _MAPPING):
        raise MessageError(index, where, "must be an object with a 'function'")
    function = call.get("function")
    if not isinstance(function, _MAPPING) or not isinstance(function.get("name"), str) or not function["name"]:
        raise MessageError(index, f"{where}.function.name", "must be a non-empty string")
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        _encodable(index, f"{where}.function.arguments", arguments)
    if isinstance(arguments, str) and arguments_style is ToolArguments.OBJECT:
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise MessageError(index, f"{where}.function.arguments", f"is not valid JSON: {exc}") from exc
    if arguments_style is ToolArguments.OBJECT and not isinstance(arguments, _MAPPING):
        raise MessageError(index, f"{where}.function.arguments", "must be a JSON object for this family's format")
    if not isinstance(arguments, (str, dict, Mapping)):
        raise MessageError(index, f"{where}.function.arguments", "must be a JSON string or an object")
    return {**call, "function": {**function, "arguments": arguments}}


def normalize_message(index: int, message: Any, arguments_style: ToolArguments) -> Message:
    """One message, validated, in the shape fixed templates expect."""
    if not isinstance(message, _MAPPING):
        raise MessageError(index, "message", f"must be an object, not {type(message).__name__}")
    role = message.get("role")
    if role not in KNOWN_ROLES:
        raise MessageError(index, "role", f"{role!r} is not one of {', '.join(KNOWN_ROLES)}")
    normalized: Message = dict(message)
    normalized["content"] = _encodable(index, "content", _text_content(index, message.get("content")))
    reasoning = message.get("reasoning_content")
    if reasoning is not None and not isinstance(reasoning, str):
        raise MessageError(index, "reasoning_content", "must be a string or null")
    _encodable(index, "reasoning_content", reasoning)
    tool_calls = message.get("tool_calls")
    if tool_calls:
        if role != "assistant":
            raise MessageError(index, "tool_calls", f"only assistant messages carry tool calls, not {role!r}")
        if not isinstance(tool_calls, list):
            raise MessageError(index, "tool_calls", "must be a list")
        normalized["tool_calls"] = [_tool_call(index, i, call, arguments_style) for i, call in enumerate(tool_calls)]
    return normalized


def check_tools(tools: Any) -> None:
    """`tools` is None or a list of objects whose every string is valid Unicode (templates render them verbatim)."""
    if tools is None:
        return
    if not isinstance(tools, Sequence) or isinstance(tools, str | bytes):
        raise ToolDefinitionError(0, "tools", f"must be a list of tool objects, not {type(tools).__name__}")
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise ToolDefinitionError(index, "tool", f"must be an object, not {type(tool).__name__}")
        _check_strings(index, "", tool)


def _check_strings(index: int, path: str, value: Any) -> None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ToolDefinitionError(index, path, f"contains a lone surrogate at character {exc.start}") from exc
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _check_strings(index, f"{path}.{key}" if path else str(key), key)
            _check_strings(index, f"{path}.{key}" if path else str(key), item)
    elif isinstance(value, list):
        for position, item in enumerate(value):
            _check_strings(index, f"{path}[{position}]", item)


def is_item_sequence(value: Any) -> bool:
    """Whether `value` is a sequence other than a string (a list of messages, of ids): a list told in C before
    asking the Sequence ABC (~0.3 us, several times a turn)."""
    return type(value) is list or (isinstance(value, Sequence) and not isinstance(value, str | bytes))


def normalize_messages(messages: Sequence[Any], arguments_style: ToolArguments, first_index: int = 0) -> list[Message]:
    """Validate and normalise; `first_index` keeps error indices relative to the whole conversation."""
    if not is_item_sequence(messages):
        raise MessageError(first_index, "messages", "must be a list of message objects")
    return [normalize_message(first_index + i, message, arguments_style) for i, message in enumerate(messages)]


def check_tool_call_ids(messages: Sequence[Mapping[str, Any]], first_new: int = 0) -> None:
    """Every tool message from `first_new` on answers, by its `tool_call_id`, a call an earlier assistant message
    made: a result for a call never made would be rendered, and trained on, as the answer to one. The messages
    before `first_new` were checked when they were new; each call is looked for backwards from its answer, so a
    turn pays for the distance to its calls, not for the whole history."""
    for index in range(first_new, len(messages)):
        message = messages[index]
        answered = message.get("tool_call_id")
        if message.get("role") != "tool" or not isinstance(answered, str) or not answered:
            continue
        if not any(answered in _call_ids(messages[earlier]) for earlier in range(index - 1, -1, -1)):
            called = [call_id for earlier in messages[:index] for call_id in _call_ids(earlier)]
            made = ", ".join(repr(call_id) for call_id in called[-8:]) or "none"
            raise MessageError(index, "tool_call_id", f"{answered!r} answers no tool call of this conversation "
                               f"(the calls made before it: {made})")  # fmt: skip


def _call_ids(message: Mapping[str, Any]) -> list[str]:
    """The ids of the tool calls `message` makes."""
    return [
        call["id"]
        for call in message.get("tool_calls") or ()
        if isinstance(call, _MAPPING) and isinstance(call.get("id"), str)
    ]
