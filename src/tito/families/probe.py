"""Find what a checkpoint's own template can do: its end-of-turn token, junction and append-only roles.

The `default` family makes no claims: each role is supported only if appending it to the probe
conversations extends the earlier render byte for byte, shows the message's content, and ends with
the generation prompt. The per-role verdicts are kept on the family (`Family.probe_report`) and reported.

Imports from tito: chat_message, errors, families.base, families.default, tokenizer_protocol.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from tito.chat_message import Message
from tito.errors import ConfigurationError, TemplateRenderError, TitoError
from tito.families.base import VALID_APPEND_ROLES, Family, FixedTemplate, Junction, ProbeReport, ToolArguments
from tito.families.default import DEFAULT
from tito.tokenizer_protocol import Tokenizer

ProbeRender = Callable[[Sequence[Message], Any, bool], str]


_REPLY = "Probe reply from the assistant."
_ARGUMENTS = {"city": "Paris", "days": 2}


def _histories(arguments: ToolArguments, reasoning: str) -> dict[str, list[Message]]:
    """Probe conversations ending with a generated assistant: every assistant carries `reasoning` (empty when
    thinking is off, as the model then samples none), tool calls carry arguments in the template's style, and a
    multi-user history has an earlier assistant a template might rewrite."""
    value: Any = json.dumps(_ARGUMENTS) if arguments is ToolArguments.JSON_TEXT else dict(_ARGUMENTS)
    call = {"id": "call_probe", "type": "function", "function": {"name": "probe_tool", "arguments": value}}
    return {
        "chat": [
            {"role": "user", "content": "Probe question?"},
            {"role": "assistant", "content": _REPLY, "reasoning_content": reasoning},
        ],
        "multi-user": [
            {"role": "system", "content": "Probe system prompt."},
            {"role": "user", "content": "Probe first question?"},
            {"role": "assistant", "content": "Probe first reply.", "reasoning_content": reasoning},
            {"role": "user", "content": "Probe second question?"},
            {"role": "assistant", "content": _REPLY, "reasoning_content": reasoning},
        ],
        "tool call": [
            {"role": "system", "content": "Probe system prompt."},
            {"role": "user", "content": "Probe question?"},
            {"role": "assistant", "content": "", "reasoning_content": reasoning, "tool_calls": [call]},
        ],
    }


_APPENDED: Mapping[str, Message] = {
    "user": {"role": "user", "content": "Probe appended user."},
    "system": {"role": "system", "content": "Probe appended system."},
    "assistant": {"role": "assistant", "content": "Probe injected assistant quoting <think>x</think> verbatim."},
    "tool": {"role": "tool", "tool_call_id": "call_probe", "content": "Probe tool result."},
}
"""An injected assistant (a compaction summary) quotes think tags: a template that splits content on them loses
text, so it does not support appending assistants."""
_THINKING_SWITCHES = ("enable_thinking", "thinking")
"""Kwarg names a checkpoint template may read as its thinking switch, tried in this order."""


def _tool_arguments(render: ProbeRender) -> ToolArguments:
    """JSON text when the template takes arguments as a string, else objects (XML-parameter templates)."""
    try:
        render(_histories(ToolArguments.JSON_TEXT, "")["tool call"], None, False)
    except TemplateRenderError:
        return ToolArguments.OBJECT
    return ToolArguments.JSON_TEXT


def _junction(render: ProbeRender, tokenizer: Tokenizer, chat: list[Message]) -> tuple[str, Junction]:
    text = render(chat, None, False)
    tail = text[text.rindex(_REPLY) + len(_REPLY) :]
    ids = tokenizer.encode(tail, add_special_tokens=False)
    token = tokenizer.convert_ids_to_tokens(ids[0]) if ids else None
    if (
        not isinstance(token, str)
        or not tail.startswith(token)
        or tokenizer.encode(token, add_special_tokens=False) != [ids[0]]
    ):
        raise ConfigurationError(
            f"default family: the template writes {tail[:40]!r} after an assistant reply, which does not start with "
            "an atomic end-of-turn token; tito cannot place the junction for this template"
        )
    trailer = tail[len(token) :]
    for junction in (Junction.PLAIN, Junction.NEWLINE_AFTER_STOP):
        if trailer == junction.trailer:
            return token, junction
    raise ConfigurationError(
        f"default family: after the end-of-turn token {token!r} the template writes {trailer!r}; tito's junction rules "
        "cover nothing or a single newline"
    )


def _verdict(
    render: ProbeRender, histories: Mapping[str, list[Message]], roles: Sequence[str], generation_prompt: str
) -> str | None:
    """None when appending messages of `roles` renders append-only after every probe history (only after the tool
    call when a tool result is among them), else the reason it does not."""
    appended = [_APPENDED[role] for role in roles]
    for name, history in histories.items():
        if "tool" in roles and name != "tool call":
            continue
        try:
            before = render(history, None, False)
            after = render([*history, *appended], None, True)
        except TitoError as exc:
            return f"after a {name} history the template refuses it: {exc}"
        if not after.startswith(before):
            return f"after a {name} history appending it rewrites the earlier render"
        suffix = after[len(before) :]
        if any(message["content"] not in suffix for message in appended):
            return f"after a {name} history its content does not appear in the render"
        if not suffix.endswith(generation_prompt):
            return f"after a {name} history the render does not end with the generation prompt"
    return None


def _role_verdicts(
    render: ProbeRender, histories: Mapping[str, list[Message]], generation_prompt: str
) -> dict[str, str | None]:
    """Each role alone, then each pair of the roles that passed: a role after which another passing role breaks
    the render is not claimed either (sessions append sequences, and the matrix checks them)."""
    verdicts = {role: _verdict(render, histories, (role,), generation_prompt) for role in VALID_APPEND_ROLES}
    for first, second in itertools.product(VALID_APPEND_ROLES, repeat=2):
        if verdicts[first] is None and verdicts[second] is None:
            reason = _verdict(render, histories, (first, second), generation_prompt)
            if reason is not None:
                verdicts[first] = f"followed by a {second} message: {reason}"
    return verdicts


def probe_default_family(
    render: ProbeRender, tokenizer: Tokenizer, accepted_kwargs: Collection[str], kwargs: Mapping[str, Any]
) -> Family:
    """The default family, narrowed to what this template proved on the probe conversations.

    `accepted_kwargs` are the kwargs the template reads: the first of _THINKING_SWITCHES among them becomes the
    family's thinking switch (none: the template has no switch tito knows). `kwargs` are those `render` uses:
    with the switch off, the probe assistants carry no reasoning, as the model's turns then do.
    """
    switch = next((name for name in _THINKING_SWITCHES if name in accepted_kwargs), None)
    thinking_off = switch is not None and kwargs.get(switch) is False
    arguments = _tool_arguments(render)
    histories = _histories(arguments, "" if thinking_off else "Probe reasoning.")
    end_of_turn, junction = _junction(render, tokenizer, histories["chat"])
    first = [histories["chat"][0]]
    generation_prompt = render(first, None, True)[len(render(first, None, False)) :]
    if not generation_prompt:
        raise ConfigurationError("default family: the template writes no generation prompt")
    verdicts = _role_verdicts(render, histories, generation_prompt)
    supported = tuple(role for role, reason in verdicts.items() if reason is None)
    return dataclasses.replace(
        DEFAULT,
        fixed_template=FixedTemplate(None, {}, supported),
        junction=junction,
        end_of_turn=end_of_turn,
        stop_tokens=(end_of_turn,),
        assistant_opener=generation_prompt,
        special_tokens=(end_of_turn,),
        tool_arguments=arguments,
        thinking_kwarg=switch,
        probe_report=ProbeReport(verdicts),
    )
