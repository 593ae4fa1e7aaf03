"""What the DeepSeek V3.2 and V4 encoders share: markers, the thinking setting, options, message text.

DeepSeek ships no chat template, so the kwargs a request passes are read here, once, into
EncoderOptions. `thinking`, `thinking_mode` and `enable_thinking` name one setting (SGLang, the
published encoders and Qwen-style clients each use one spelling); `effective_thinking` is the single
reading of it, exposed so a server can forward the same boolean to the engine.

Imports nothing from tito but chat_message and errors.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tito.chat_message import Message as Message  # re-exported: the modules that read messages from here
from tito.errors import ConfigurationError, TemplateRenderError

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
THINK_START = "<think>"
THINK_END = "</think>"
DSML = "｜DSML｜"
SPECIAL_TOKENS: tuple[str, ...] = (BOS, EOS, USER, ASSISTANT, THINK_START, THINK_END, DSML)
"""One id each in the DeepSeek V3.2 and V4 tokenizers (V4: 0, 1, 128803, 128804, 128821, 128822, 128825)."""

THINKING_ALIASES: tuple[str, ...] = ("thinking", "thinking_mode", "enable_thinking")
"""Spellings of the one thinking switch; a request that sets one replaces the others (merge_thinking_kwargs)."""

DEFAULT_THINKING = False
"""Thinking is off unless asked for, as in SGLang and vLLM for these models: tito's prompt equals theirs."""

PINNED_KWARGS: Mapping[str, Any] = {"drop_thinking": False}
"""Keep every assistant's reasoning wherever it stands, so appending never rewrites history."""

ENCODER_KWARGS: tuple[str, ...] = (*THINKING_ALIASES, "drop_thinking")
"""Every kwarg EncoderOptions reads; the V4 encoder reads its effort kwargs on top."""

_MODE_VALUES = {"thinking": True, "chat": False}
_RESPONSE_FORMAT = "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n{schema}"

Tools = Sequence[Mapping[str, Any]] | None


def _as_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if key == "thinking_mode" and value in _MODE_VALUES:
        return _MODE_VALUES[value]
    expected = "true, false, 'thinking' or 'chat'" if key == "thinking_mode" else "true or false"
    raise ConfigurationError(f"chat template kwarg {key}={value!r} is not a thinking switch; use {expected}")


def effective_thinking(kwargs: Mapping[str, Any]) -> bool:
    """The thinking setting the kwargs ask for; aliases that disagree are an error, none set is the default."""
    given = {key: _as_bool(key, kwargs[key]) for key in THINKING_ALIASES if kwargs.get(key) is not None}
    if len(set(given.values())) > 1:
        detail = ", ".join(f"{key}={kwargs[key]!r}" for key in given)
        raise ConfigurationError(
            f"thinking switches disagree ({detail}): {', '.join(THINKING_ALIASES)} are one setting; pass one of them"
        )
    return next(iter(given.values()), DEFAULT_THINKING)


def merge_thinking_kwargs(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`base` updated with `override`, where an override that sets any thinking alias drops all of base's."""
    merged = dict(base)
    if any(override.get(key) is not None for key in THINKING_ALIASES):
        for key in THINKING_ALIASES:
            merged.pop(key, None)
    merged.update(override)
    return merged


@dataclass(frozen=True)
class EncoderOptions:
    """The kwargs an encoder acts on; every other kwarg (bos_token, ...) is ignored, as Jinja templates do."""

    thinking: bool
    drop_thinking: bool
    """True reproduces the published encoders: reasoning before the last user turn is dropped (not append-only)."""

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any]) -> EncoderOptions:
        drop = kwargs.get("drop_thinking", True)
        if not isinstance(drop, bool):
            raise ConfigurationError(f"chat template kwarg drop_thinking={drop!r} must be true or false")
        return cls(thinking=effective_thinking(kwargs), drop_thinking=drop)


def think_token(opens_reasoning: bool) -> str:
    return THINK_START if opens_reasoning else THINK_END


def text_of(index: int, message: Message, key: str = "content") -> str:
    """A message field as prompt text: None is empty, text parts are joined as tito.messages joins them."""
    value = message.get(key)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, Mapping) and isinstance(p.get("text"), str) for p in value):
        return "".join(part["text"] for part in value)
    raise TemplateRenderError(f"message {index}: {key} must be text for DeepSeek encoders, got {type(value).__name__}")


def to_json(value: Any) -> str:
    """JSON as the DeepSeek prompt spells it: non-ASCII kept, default separators."""
    return json.dumps(value, ensure_ascii=False)


def with_tools(messages: Sequence[Message], tools: Tools) -> list[Message]:
    """The messages with `tools` declared on a leading system message (an empty one is added if needed).

    This is where the DeepSeek format declares tools and where SGLang's serving layer puts them.
    """
    placed = list(messages)
    if not tools:
        return placed
    if placed and placed[0].get("role") == "system":
        placed[0] = {**placed[0], "tools": list(tools)}
    else:
        placed.insert(0, {"role": "system", "content": "", "tools": list(tools)})
    return placed


def system_text(index: int, message: Message, tools_section: Callable[[Any], str]) -> str:
    """A system message: its text, then the tools section, then the response format, as both formats do."""
    text = text_of(index, message)
    if message.get("tools"):
        text += "\n\n" + tools_section(message["tools"])
    if message.get("response_format"):
        text += "\n\n" + _RESPONSE_FORMAT.format(schema=to_json(message["response_format"]))
    return text


def unknown_role(index: int, role: Any, family: str) -> TemplateRenderError:
    return TemplateRenderError(
        f"{family}: message {index} has role {role!r}; the encoder renders system, user, assistant and tool"
    )
