"""Is a request's message list the stored conversation plus appended messages? And are those roles allowed?

Matchers compare one stored message with the one the agent sent back. `strict` compares every field
the render reads; `loose_tool_call` also accepts tool-call arguments that are equal as JSON values
(agents often re-serialise them). Errors name the first differing message and field.

A matching policy (`MatchingPolicy`: `strict` or `harness`, by name in `MATCHING_POLICIES`) matches a whole
resent conversation and says how: which relaxations it needed (`HARNESS_RULES`) and which tool-call ids the
agent re-generated. `harness` accepts what agent frameworks commonly drop or reformat when they resend the
generated reply, and nothing else: the stored message is what the engine sampled, so a resend that differs
only in what the render can recover from the stored ids still attaches to it (docs/frameworks.md).

Imports nothing from tito but errors.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tito.errors import AppendOnlyError, ConfigurationError, MessageError, RoleNotAllowedError

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
    """The arguments' JSON value (text that is not JSON stays text); read-only: parsed text is cached."""
    return _parsed_arguments(arguments) if isinstance(arguments, str) else arguments


@functools.lru_cache(maxsize=4096)
def _parsed_arguments(text: str) -> Any:
    """Cached: a framework resends every stored call on every turn, respelled the same way each time."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _json_equal(a: Any, b: Any) -> bool:
    """Equal as JSON values: as Python's `==`, except that a boolean equals only a boolean (`true` is not `1`)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_json_equal(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_json_equal, a, b))
    return bool(a == b)


@functools.lru_cache(maxsize=4096)
def _arguments_key(text: str) -> Hashable:
    return _frozen(_parsed_arguments(text))


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
        stored, sent, lambda a, b: _json_equal(_arguments_as_json(a), _arguments_as_json(b))
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

HARNESS_RULES: Mapping[str, str] = {
    "reasoning_dropped": "an assistant message resent without the `reasoning_content` it was generated with",
    "arguments_as_json": "tool-call arguments re-serialised: equal as JSON values, spelled differently",
    "empty_content": '`content` "" (or []) where the stored message has null, or the reverse',
    "call_ids_regenerated": "tool-call ids the agent replaced with its own, paired one-to-one with the stored ids "
    "(the tool messages answering them are mapped back to the stored ids)",
    "content_as_parts": "content resent as text parts where a string was stored (tito renders both as the same text)",
    "whitespace_content": "whitespace-only content where the stored message had none (the stored ids keep what "
    "the model sampled)",
    "tools_omitted": "a later request sent no `tools` where the stored prompt rendered some: the stored tools stay "
    "(they are part of the stored ids; autogen's reflection call)",
}
"""What the `harness` policy accepts beyond `strict`, by rule name: the names its counters and metrics use."""


@dataclass
class ResendMatch:
    """What matching a resent conversation against the stored one found, filled in message by message."""

    rules: set[str] = field(default_factory=set)
    """The `HARNESS_RULES` the resend needed; empty: it matched exactly (under `strict`'s own equivalences)."""
    call_ids: dict[str, str] = field(default_factory=dict)
    """Sent tool-call id -> the stored id it stands for (identical ids included)."""
    _stored_call_ids: dict[str, str] = field(default_factory=dict)
    """Stored tool-call id -> the sent id paired with it: the pairing must stay one-to-one."""

    def copy(self) -> ResendMatch:
        return ResendMatch(set(self.rules), dict(self.call_ids), dict(self._stored_call_ids))

    def pair_call_ids(self, stored_id: str, sent_id: str) -> bool:
        """Pair a sent tool-call id with a stored one; False when that breaks the one-to-one pairing."""
        if (
            self.call_ids.get(sent_id, stored_id) != stored_id
            or self._stored_call_ids.get(stored_id, sent_id) != sent_id
        ):
            return False
        if sent_id != stored_id and sent_id in self._stored_call_ids:
            return False  # the agent reused another stored call's id for this one
        self.call_ids[sent_id] = stored_id
        self._stored_call_ids[stored_id] = sent_id
        if sent_id != stored_id:
            self.rules.add("call_ids_regenerated")
        return True

    def stored_call_id(self, sent_id: Any) -> Any:
        """The stored id a sent `tool_call_id` refers to (itself when it was not re-generated)."""
        return self.call_ids.get(sent_id, sent_id) if isinstance(sent_id, str) else sent_id

    def restore_call_ids(self, messages: Sequence[Message]) -> list[Message]:
        """`messages` with each `tool_call_id` the agent re-generated replaced by the stored id it pairs with, so
        what is rendered and stored refers to the calls as the model wrote them (copies; inputs unchanged)."""
        if "call_ids_regenerated" not in self.rules:
            return list(messages)
        restored: list[Message] = []
        for message in messages:
            sent_id = message.get("tool_call_id") if isinstance(message, Mapping) else None
            stored_id = self.stored_call_id(sent_id)
            restored.append(message if stored_id == sent_id else {**message, "tool_call_id": stored_id})
        return restored


PolicyComparison = Callable[[Message, Message, ResendMatch], "str | None"]
"""(stored, sent, what the resend found so far) -> the first differing field, or None (recording what it used)."""


class MatchingPolicy:
    """A named way to match a resent conversation: a message comparison that records the rules it used, and a
    hashable key (equal for any two messages the comparison may match) for indexed lookups.

    Callable as a plain `MessageMatcher` (one message, nothing carried between messages)."""

    def __init__(
        self, name: str, compare: PolicyComparison, key: Callable[[Message], Hashable], key_decides: bool = False
    ) -> None:
        self.name = name
        self.compare = compare
        self.key = key
        self.key_decides = key_decides
        """Equal keys mean a match (and record nothing): an indexed lookup need not compare."""

    def __call__(self, stored: Message, sent: Message) -> str | None:
        return self.compare(stored, sent, ResendMatch())

    def __repr__(self) -> str:
        return f"MatchingPolicy({self.name!r})"

    def match_prefix(
        self, stored: Sequence[Message], sent: Sequence[Message], found: ResendMatch
    ) -> tuple[int, str] | None:
        """Compare `stored` with the same number of `sent` messages, recording into `found`; the index and field of
        the first that differs (`len(sent)`, "message" if `sent` is shorter), or None when all of `stored` match."""
        for index, message in enumerate(stored):
            if index >= len(sent):
                return len(sent), "message"
            other = sent[index]
            if message == other and "call_ids_regenerated" not in found.rules:
                continue  # ids equal to the stored ones need no pairing until some were re-generated
            if not isinstance(other, Mapping):
                return index, "message"
            differing = self.compare(message, other, found)
            if differing is not None:
                return index, differing
        return None


def _harness_compare(stored: Message, sent: Message, found: ResendMatch) -> str | None:
    """`strict`, plus the `HARNESS_RULES` (each recorded in `found` when it was needed)."""
    for name in ("role", "name"):
        if _empty_to_none(stored.get(name)) != _empty_to_none(sent.get(name)):
            return name
    differing = _harness_content(stored.get("content"), sent.get("content"), found)
    if differing is not None:
        return differing
    if _empty_to_none(stored.get("tool_call_id")) != _empty_to_none(found.stored_call_id(sent.get("tool_call_id"))):
        return "tool_call_id"
    stored_reasoning, sent_reasoning = (
        _empty_to_none(stored.get("reasoning_content")),
        _empty_to_none(sent.get("reasoning_content")),
    )
    if sent_reasoning is None and stored_reasoning is not None and stored.get("role") == "assistant":
        found.rules.add("reasoning_dropped")
    elif stored_reasoning != sent_reasoning:
        return "reasoning_content"

    def arguments_equal(stored_arguments: Any, sent_arguments: Any) -> bool:
        if stored_arguments == sent_arguments:
            return True
        if not _json_equal(_arguments_as_json(stored_arguments), _arguments_as_json(sent_arguments)):
            return False
        found.rules.add("arguments_as_json")
        return True

    differing = _compare_tool_calls(stored, sent, arguments_equal)
    if differing is not None:
        return differing
    for i, (a, b) in enumerate(zip(_calls(stored), _calls(sent), strict=True)):
        stored_id, sent_id = a.get("id"), b.get("id")
        if isinstance(stored_id, str) and isinstance(sent_id, str) and not found.pair_call_ids(stored_id, sent_id):
            return f"tool_calls[{i}].id"
    return None


def _joined_text(content: Any) -> Any:
    """Content given as text parts as the one string tito renders them as (`tito.messages`); other content as is."""
    if (
        isinstance(content, list)
        and content
        and all(
            isinstance(part, Mapping) and part.get("type", "text") == "text" and isinstance(part.get("text"), str)
            for part in content
        )
    ):
        return "".join(part["text"] for part in content)
    return content


def _blank_to_none(content: Any) -> Any:
    """Empty or whitespace-only content as None; anything else as is."""
    return None if content in ("", [], None) or (isinstance(content, str) and not content.strip()) else content


def _harness_content(stored: Any, sent: Any, found: ResendMatch) -> str | None:
    """ "content" when the contents differ under the harness rules; records `empty_content`, `content_as_parts`
    (text parts for a string, rendered alike) or `whitespace_content` where needed."""
    if stored == sent:
        return None
    stored_text, sent_text = _joined_text(stored), _joined_text(sent)
    if _empty_to_none(stored_text) == _empty_to_none(sent_text):
        found.rules.add("empty_content" if stored in ("", [], None) else "content_as_parts")
        return None
    if _empty_to_none(stored_text) is None and _blank_to_none(sent_text) is None:
        found.rules.add("whitespace_content")
        return None
    return "content"


def harness_match_key(message: Message) -> Hashable:
    """A hashable key, equal for any two messages the `harness` policy may match (reasoning, call ids, the
    arguments' spelling, text parts and blank content left out); the comparison then decides."""
    content = _frozen(_blank_to_none(_joined_text(message.get("content"))))
    role, name = (_frozen(_empty_to_none(message.get(field))) for field in ("role", "name"))
    fields = (role, content, name)
    calls = tuple(
        (_frozen(function.get("name")), _frozen_arguments(function.get("arguments")))
        for function in ((call.get("function") or {}) for call in _calls(message))
    )
    return fields, calls


def _frozen_arguments(arguments: Any) -> Hashable:
    return _arguments_key(arguments) if isinstance(arguments, str) else _frozen(arguments)


def _strict_compare(stored: Message, sent: Message, found: ResendMatch) -> str | None:
    return strict_message_matches(stored, sent)


MATCHING_POLICIES: Mapping[str, MatchingPolicy] = {
    "strict": MatchingPolicy("strict", _strict_compare, strict_match_key, key_decides=True),
    "harness": MatchingPolicy("harness", _harness_compare, harness_match_key),
}
"""The policies a session picks by name (`tito serve --matcher`, `POST /sessions {"matcher": ...}`)."""

harness_message_matches: MatchingPolicy = MATCHING_POLICIES["harness"]
"""The `harness` policy as a matcher: `get_tito_tokenizer(..., matcher=harness_message_matches)`."""


def matching_policy(name: str) -> MatchingPolicy:
    """The policy called `name`; ConfigurationError naming the known ones otherwise."""
    try:
        return MATCHING_POLICIES[name]
    except KeyError:
        raise ConfigurationError(f"unknown matcher {name!r}; choose one of: {', '.join(MATCHING_POLICIES)}") from None


def as_policy(matcher: MessageMatcher | MatchingPolicy) -> MatchingPolicy:
    """A policy for `matcher`: itself, or a plain matcher function wrapped (it records no rules)."""
    if isinstance(matcher, MatchingPolicy):
        return matcher
    if matcher is strict_message_matches:
        return MATCHING_POLICIES["strict"]
    return MatchingPolicy(getattr(matcher, "__name__", "custom"), lambda a, b, found: matcher(a, b), strict_match_key)


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
    matcher: MessageMatcher | MatchingPolicy = strict_message_matches,
) -> list[Message]:
    """The messages `sent` appends after `stored`; raises if `sent` rewrites `stored` or appends a disallowed role.

    Under a policy that pairs re-generated tool-call ids (`harness`), the appended tool messages come back with the
    stored ids (`ResendMatch.restore_call_ids`)."""
    appended = match_resend(stored, sent, matcher).restore_call_ids(sent[len(stored) :])
    for offset, message in enumerate(appended):
        if not isinstance(message, Mapping):
            raise MessageError(len(stored) + offset, "message", f"must be an object, not {type(message).__name__}")
        role = message.get("role")
        if role not in allowed_roles:
            raise RoleNotAllowedError(len(stored) + offset, str(role), tuple(allowed_roles))
    return appended


def match_resend(
    stored: Sequence[Message], sent: Sequence[Message], matcher: MessageMatcher | MatchingPolicy
) -> ResendMatch:
    """How `sent` resends the `stored` messages under `matcher`; AppendOnlyError at the first that differs (a
    changed message is named before a missing one)."""
    found = ResendMatch()
    if len(sent) >= len(stored) and list(sent[: len(stored)]) == list(stored):  # the common case, decided in C
        return found
    policy = as_policy(matcher)
    difference = policy.match_prefix(stored, sent, found)
    if difference is not None:
        index, differing = difference
        if index == len(sent):
            raise AppendOnlyError(
                len(sent), "message", f"{len(stored)} stored messages", f"only {len(sent)} messages",
                hint="a request must resend the whole stored conversation and append after it",
            )  # fmt: skip
        old, new = stored[index], sent[index]
        if not isinstance(new, Mapping):
            raise MessageError(index, "message", f"must be an object, not {type(new).__name__}")
        raise AppendOnlyError(index, differing, _field_value(old, differing), _field_value(new, differing))
    return found
