"""What the Anthropic and Responses edges share: the stored turn a signed round-trip value names, whether a
resent assistant message still says what that turn's stored message says, the thinking switch, the label a
dialect's turn is recorded with, and the session's last translations a resend reuses.

Everything here runs before planning: the edge only decides which assistant message the internal chat request
carries; planning, the role gate and matching are the chat path's, unchanged.

Imports from tito: families.base, server.dialects.signing, server.errors, server.sessions.registry,
server.turns.completions, trajectory.events.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from tito.families.base import Family
from tito.server.dialects.signing import RoundTripSigner
from tito.server.errors import BadRequestError
from tito.server.sessions.registry import Session
from tito.server.turns.completions import TurnLabel
from tito.trajectory.events import Message, TurnCommitted


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def stored_turn(session: Session, response_id: str) -> TurnCommitted | None:
    """The session's committed turn with this response id (None: never committed, or dropped by a retry)."""
    node = session.trajectory.store.by_response_id(response_id)
    return None if node is None else node.turn


def signed_turn(session: Session, signer: RoundTripSigner, value: object) -> TurnCommitted | None:
    """The stored turn a round-trip value names, when it verifies for this session; else None (never trusted)."""
    response_id = signer.verify(value, session.session_id)
    return None if response_id is None else stored_turn(session, response_id)


def resent_assistant(resent: Message, signed: TurnCommitted | None) -> Message:
    """The assistant message the internal request carries: the stored one of the signed turn when the resent
    message agrees with it (so re-serialised tool input or spacing still matches the stored ids), else the resent
    message as translated (the normal matching rules then decide: extension, branch or a clear 400)."""
    if signed is not None and agrees(resent, signed.assistant):
        return signed.assistant
    return resent


def agrees(resent: Message, stored: Message) -> bool:
    """Whether `resent` says what `stored` says up to re-serialisation: reasoning (when resent at all) and text
    equal up to surrounding whitespace, the same tool calls (ids when given, names, arguments as JSON values)."""
    reasoning = _text(resent.get("reasoning_content"))
    if reasoning and reasoning != _text(stored.get("reasoning_content")):
        return False
    if _text(resent.get("content")) != _text(stored.get("content")):
        return False
    resent_calls = list(resent.get("tool_calls") or ())
    stored_calls = list(stored.get("tool_calls") or ())
    return len(resent_calls) == len(stored_calls) and all(map(_same_call, resent_calls, stored_calls))


def _same_call(resent: Mapping[str, Any], stored: Mapping[str, Any]) -> bool:
    if resent.get("id") and resent["id"] != stored.get("id"):
        return False
    resent_function, stored_function = resent.get("function") or {}, stored.get("function") or {}
    if resent_function.get("name") != stored_function.get("name"):
        return False
    return bool(_json_value(resent_function.get("arguments")) == _json_value(stored_function.get("arguments")))


def _json_value(arguments: Any) -> Any:
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def function_tool(where: str, name: Any, description: Any, parameters: Any) -> dict[str, Any]:
    """A client tool as chat completions' `{"type": "function", "function": {...}}`."""
    if not isinstance(name, str):
        raise BadRequestError(f"{where}.name: required, a string")
    function: dict[str, Any] = {"name": name}
    if description is not None:
        function["description"] = description
    function["parameters"] = parameters or {"type": "object"}
    return {"type": "function", "function": function}


def thinking_kwargs(family: Family, enabled: bool | None) -> dict[str, Any] | None:
    """The chat-template kwargs of a dialect's thinking switch; None when not asked or when the family has no
    switch (its template decides, e.g. Qwen3's and MiniMax's think always)."""
    if enabled is None or family.thinking_kwarg is None:
        return None
    return {family.thinking_kwarg: enabled}


def turn_label(response_id: str, dialect: str, recorded: Mapping[str, Any] | None = None) -> TurnLabel:
    """What a dialect's turn is recorded with: its response id, what the edge `recorded` of the request that the
    prompt leaves out (e.g. hosted tools) and `metadata["dialect"]`."""
    return TurnLabel(response_id, {**(recorded or {}), "dialect": dialect})


TRANSLATIONS = 3
"""How many conversations' last translations a session keeps per dialect (a sub-agent's turns come between the
main loop's)."""


def same_values(fields: Callable[[Any], tuple[Any, ...]], request: Any, previous: Any) -> bool:
    """Whether every one of `fields` (an `operator.attrgetter` of several names) of `request` equals `previous`'s:
    the very objects in a body read from the previous one's prefix, equal ones where the bytes after its
    conversation changed and those fields were parsed again (Codex's `client_metadata` changes every turn). One
    tuple comparison in C: identity first, `==` only for a field that is not the same object."""
    return fields(request) == fields(previous)


def reusable(session: Session, dialect: str, kept: Callable[[Any], int]) -> tuple[Any, int]:
    """The session's kept translation of `dialect` a request shares the most leading items with (`kept` counts
    them), and that count; (None, 0) when none shares any."""
    best, count = None, 0
    for candidate in session.translations.get(dialect, ()):
        shared = kept(candidate)
        if shared > count:
            best, count = candidate, shared
    return best, count


def remember(session: Session, dialect: str, translation: object, replacing: object | None) -> None:
    """Keep `translation` first (in place of the one it continued, when it did), at most TRANSLATIONS."""
    kept = [t for t in session.translations.get(dialect, ()) if t is not replacing]
    session.translations[dialect] = [translation, *kept][:TRANSLATIONS]
