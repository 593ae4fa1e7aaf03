"""Is a request's message list the stored conversation plus appended messages? And are those roles allowed?

Matchers compare one stored message with the one the agent sent back. `strict` compares every field
the render reads; `loose_tool_call` also accepts tool-call arguments that are equal as JSON values
(agents often re-serialise them). Errors name the first differing message and field.

Imports nothing from tito but errors.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from tito.errors import AppendOnlyError, MessageError, RoleNotAllowedError

Message = Mapping[str, Any]
MessageMatcher = Callable[[Message, Message], "str | None"]
"""(stored, sent) -> the first differing field's name, or None when they match."""

_COMPARED_FIELDS = ("role", "content", "reasoning_content", "tool_call_id", "name")


def _empty_to_none(value: Any) -> Any:
    return None if value in ("", [], None) else value


def _compare_fields(stored: Message, sent: Message) -> str | None:
    for name in _COMPARED_FIELDS:
        if _empty_to_none(stored.get(name)) != _empty_to_none(sent.get(name)):
            return name
    return None


def _calls(message: Message) -> list[Mapping[str, Any]]:
    return list(message.get("tool_calls") or [])


def _arguments_as_json(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
    return arguments


def _compare_tool_calls(stored: Message, sent: Message, arguments_equal: Callable[[Any, Any], bool]) -> str | None:
    stored_calls, sent_calls = _calls(stored), _calls(sent)
    if len(stored_calls) != len(sent_calls):
        return "tool_calls"
    for i, (a, b) in enumerate(zip(stored_calls, sent_calls, strict=True)):
        fa, fb = a.get("function") or {}, b.get("function") or {}
        if fa.get("name") != fb.get("name"):
            return f"tool_calls[{i}].function.name"
        if not arguments_equal(fa.get("arguments"), fb.get("arguments")):
            return f"tool_calls[{i}].function.arguments"
    return None


def strict_message_matches(stored: Message, sent: Message) -> str | None:
    """Every rendered field equal; tool-call arguments equal as given (text or object)."""
    return _compare_fields(stored, sent) or _compare_tool_calls(stored, sent, lambda a, b: a == b)


def loose_tool_call_message_matches(stored: Message, sent: Message) -> str | None:
    """As strict, but tool-call arguments compare as JSON values (`{"a":1}` matches `{"a": 1}`)."""
    return _compare_fields(stored, sent) or _compare_tool_calls(
        stored, sent, lambda a, b: _arguments_as_json(a) == _arguments_as_json(b)
    )


def _frozen(value: Any) -> Hashable:
    if value is None or isinstance(value, str):  # nearly every field: skip the slower abstract-class checks
        return value
    if isinstance(value, Mapping):
        return frozenset((key, _frozen(item)) for key, item in value.items())
    if isinstance(value, list | tuple):
        return tuple(_frozen(item) for item in value)
    return value  # type: ignore[no-any-return]


def strict_match_key(message: Message) -> Hashable:
    """A hashable key, equal for two messages exactly when `strict_message_matches` finds no differing field.

    Lets a caller index stored messages by key instead of running the matcher against each one.
    """
    fields = tuple(_frozen(_empty_to_none(message.get(name))) for name in _COMPARED_FIELDS)
    calls = tuple(
        (_frozen((call.get("function") or {}).get("name")), _frozen((call.get("function") or {}).get("arguments")))
        for call in _calls(message)
    )
    return fields, calls


MATCHERS: Mapping[str, MessageMatcher] = {
    "strict": strict_message_matches,
    "loose_tool_call": loose_tool_call_message_matches,
}


def _field_value(message: Message, field: str) -> Any:
    value: Any = message
    for part in field.replace("]", "").replace("[", ".").split("."):
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def appended_messages(
    stored: Sequence[Message],
    sent: Sequence[Message],
    allowed_roles: Sequence[str],
    matcher: MessageMatcher = strict_message_matches,
) -> list[Message]:
    """The messages `sent` appends after `stored`; raises if `sent` rewrites `stored` or appends a disallowed role."""
    prefix_unchanged = list(sent[: len(stored)]) == list(stored)  # the common case, decided in C
    for index, (old, new) in enumerate(zip(stored, sent, strict=False) if not prefix_unchanged else ()):
        if old == new:
            continue
        if not isinstance(new, Mapping):
            raise MessageError(index, "message", f"must be an object, not {type(new).__name__}")
        field = matcher(old, new)
        if field is not None:
            raise AppendOnlyError(index, field, _field_value(old, field), _field_value(new, field))
    if len(sent) < len(stored):  # after the resent ones compared equal: a changed message is named first
        raise AppendOnlyError(
            len(sent), "message", f"{len(stored)} stored messages", f"only {len(sent)} messages",
            hint="a request must resend the whole stored conversation and append after it",
        )  # fmt: skip
    appended = list(sent[len(stored) :])
    for offset, message in enumerate(appended):
        if not isinstance(message, Mapping):
            raise MessageError(len(stored) + offset, "message", f"must be an object, not {type(message).__name__}")
        role = message.get("role")
        if role not in allowed_roles:
            raise RoleNotAllowedError(len(stored) + offset, str(role), tuple(allowed_roles))
    return appended
