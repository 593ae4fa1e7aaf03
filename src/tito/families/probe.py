"""Find what a checkpoint's own template can do: its end-of-turn token, junction and append-only roles.

The `default` family makes no claims: each role is supported only if appending it to the probe
conversations extends the earlier render byte for byte, shows the message's content, and ends with
the generation prompt. The per-role verdicts are kept on the family (`extra["probe"]`) and reported.

Imports from tito: errors, families.base, families.default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from tito.errors import ConfigurationError, TitoError
from tito.families.base import VALID_APPEND_ROLES, Family, FixedTemplate, Junction
from tito.families.default import DEFAULT

Message = dict[str, Any]
ProbeRender = Callable[[Sequence[Message], Any, bool], str]


class _Encoder(Protocol):
    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def convert_ids_to_tokens(self, ids: int) -> Any: ...


_REPLY = "Probe reply from the assistant."
_CALL = {"id": "call_probe", "type": "function", "function": {"name": "probe_tool", "arguments": '{"x": 1}'}}
_HISTORIES: Mapping[str, list[Message]] = {
    "chat": [{"role": "user", "content": "Probe question?"}, {"role": "assistant", "content": _REPLY}],
    "tool call": [
        {"role": "system", "content": "Probe system prompt."},
        {"role": "user", "content": "Probe question?"},
        {"role": "assistant", "content": "", "tool_calls": [_CALL]},
    ],
}
_APPENDED: Mapping[str, Message] = {
    "user": {"role": "user", "content": "Probe appended user."},
    "system": {"role": "system", "content": "Probe appended system."},
    "assistant": {"role": "assistant", "content": "Probe injected assistant."},
    "tool": {"role": "tool", "tool_call_id": "call_probe", "content": "Probe tool result."},
}


def _junction(render: ProbeRender, tokenizer: _Encoder) -> tuple[str, Junction]:
    text = render(_HISTORIES["chat"], None, False)
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


def _role_verdict(render: ProbeRender, role: str, generation_prompt: str) -> str | None:
    """None when the role appends cleanly after every probe history, else the reason it does not."""
    message = _APPENDED[role]
    for name, history in _HISTORIES.items():
        if role == "tool" and name != "tool call":
            continue
        try:
            before = render(history, None, False)
            after = render([*history, message], None, True)
        except TitoError as exc:
            return f"after a {name} history the template refuses it: {exc}"
        if not after.startswith(before):
            return f"after a {name} history appending it rewrites the earlier render"
        suffix = after[len(before) :]
        if message["content"] not in suffix:
            return f"after a {name} history its content does not appear in the render"
        if not suffix.endswith(generation_prompt):
            return f"after a {name} history the render does not end with the generation prompt"
    return None


def probe_default_family(render: ProbeRender, tokenizer: _Encoder) -> Family:
    """The default family, narrowed to what this template proved on the probe conversations."""
    end_of_turn, junction = _junction(render, tokenizer)
    first = [_HISTORIES["chat"][0]]
    generation_prompt = render(first, None, True)[len(render(first, None, False)) :]
    if not generation_prompt:
        raise ConfigurationError("default family: the template writes no generation prompt")
    verdicts = {role: _role_verdict(render, role, generation_prompt) for role in VALID_APPEND_ROLES}
    supported = tuple(role for role, reason in verdicts.items() if reason is None)
    return dataclasses.replace(
        DEFAULT,
        fixed_template=FixedTemplate(None, {}, supported),
        junction=junction,
        end_of_turn=end_of_turn,
        stop_tokens=(end_of_turn,),
        assistant_opener=generation_prompt,
        special_tokens=(end_of_turn,),
        extra={"probe": {role: reason or "supported" for role, reason in verdicts.items()}},
    )
