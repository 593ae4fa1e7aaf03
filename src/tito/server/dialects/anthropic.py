"""Anthropic Messages at the edge: its request as the internal chat request, a committed turn as its `message`.

Request: `system` (string or text blocks) -> a system message, and so is a `system` message inside `messages` (the
beta `mid-conversation-system-2026-04-07`), at its place (a session whose allowed append roles exclude `system`
refuses it with "role 'system' is not supported", the words Claude Code's fallback to older requests looks for); a
user message's `text` blocks -> a user message, its `tool_result` blocks -> tool messages (`tool_use_id` ->
`tool_call_id`); an assistant message's `thinking` blocks -> `reasoning_content`, `text` -> `content`, `tool_use` ->
`tool_calls` (`input` as JSON text). A thinking block whose `signature` verifies (server.dialects.signing) names the
stored turn, whose message then stands for the resent one when they agree (server.dialects.edge). `thinking: {type}`
is the family's thinking switch; `stop_sequences` are stop strings; `output_config.format` (structured output) is
the engine's constrained decoding (server.turns.completions.response_schema); `tool_choice` is passed on as chat
completions' (which, like it, tito does not enforce). Images, documents, server tools and MCP servers are a 400
naming the field.

Reply: content blocks built from the assistant message's deltas by `Blocks`, the same code the stream encoder
(server.dialects.anthropic_stream) runs on the engine's deltas, so a stream adds up to the whole reply: `thinking`
(signed), `text`, `tool_use` (`id` is the stored tool-call id, `input` the model's own arguments parsed).

Imports from tito: errors, families.base, parsing.incremental, server.dialects.edge, server.dialects.outputs,
server.dialects.signing, server.errors, server.models, server.sessions, server.turns.streaming,
trajectory.events.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import Field, ValidationError

from tito.errors import TitoError
from tito.families.base import Family
from tito.parsing.incremental import ToolCallDelta
from tito.server.dialects.edge import (
    function_tool,
    remember,
    resent_assistant,
    reusable,
    same_values,
    signed_turn,
    thinking_kwargs,
)
from tito.server.dialects.outputs import DeltaParts, Events
from tito.server.dialects.signing import RoundTripSigner
from tito.server.errors import BadRequestError, internal_error_words, validation_error
from tito.server.models import (
    ChatCompletionRequest,
    JsonObject,
    RequestModel,
    Temperature,
    TokenLimit,
    TopK,
    TopP,
    json_objects,
)
from tito.server.sessions.registry import Session
from tito.server.sessions.resent_prefix import ResentPrefix, holds_settled, settle
from tito.server.sessions.shared_tools import with_shared_tools
from tito.server.turns.streaming import message_deltas
from tito.trajectory.events import TurnCommitted

DIALECT = "anthropic"
UNSUPPORTED_FIELDS = {
    "mcp_servers": "MCP servers run tools on the provider's side; tito records the agent's own tool loop",
    "container": "containers run tools on the provider's side; tito records the agent's own tool loop",
}
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "invalid_request_error",
    410: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
}


class AnthropicRequest(RequestModel):
    """`POST /v1/messages` (and `count_tokens`, which needs no `max_tokens`); unknown fields are ignored."""

    messages: list[JsonObject] = Field(min_length=1)
    model: str | None = None
    max_tokens: TokenLimit | None = None
    system: str | list[JsonObject] | None = None
    tools: list[JsonObject] | None = None
    tool_choice: JsonObject | None = None
    stop_sequences: list[str] | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    top_k: TopK | None = None
    metadata: JsonObject | None = None
    thinking: JsonObject | None = None
    stream: bool | None = None
    output_config: JsonObject | None = None
    """`format` (structured output, a json_schema) is the engine's constrained decoding; `effort` is not sampled."""


def parse_request(body: bytes, needs_max_tokens: bool = True) -> AnthropicRequest:
    try:
        request = AnthropicRequest.model_validate_json(body)
    except ValidationError as exc:
        raise validation_error(exc) from None
    for name, why in UNSUPPORTED_FIELDS.items():
        if getattr(request, name, None) is not None:
            raise BadRequestError(f"{name}: not supported: {why}")
    if needs_max_tokens and request.max_tokens is None:
        raise BadRequestError("max_tokens: required (the most tokens to sample)")
    return request


def body_reader() -> ResentPrefix[AnthropicRequest]:
    """Turn bodies read from the previous one's prefix (server.sessions.resent_prefix): `messages` is the
    conversation."""
    return ResentPrefix("messages", _parse_shared_tools, json_objects, _messages_of, _with_messages)


def _parse_shared_tools(body: bytes) -> AnthropicRequest:
    return with_shared_tools(parse_request(body))


def _messages_of(request: AnthropicRequest) -> list[Any]:
    return request.messages


def _with_messages(request: AnthropicRequest, messages: list[Any]) -> AnthropicRequest:
    return request.model_copy(update={"messages": messages})


@dataclass(frozen=True)
class Translated:
    """A turn's request and the chat request it translated to, kept on the session: the next turn's request, read
    from this one's body prefix (server.sessions.resent_prefix), holds the same message objects and fields, and only its
    new messages are translated. They are not validated again as the chat request's messages: translation builds
    them of strings and stored messages only, JSON objects by construction (the body's own were validated as read).
    The request's messages are `Settled` stand-ins once translated: the session keeps their chat form only."""

    request: AnthropicRequest
    chat: ChatCompletionRequest
    ends: list[int]
    """Per message of `request`, how many chat messages (the system prompt's included) it and those before make."""


def chat_request_reusing(
    request: AnthropicRequest,
    session: Session,
    signer: RoundTripSigner,
    family: Family,
    whole: Callable[[], AnthropicRequest],
) -> ChatCompletionRequest:
    """`chat_request`, reusing the session's previous translation for the leading messages the request shares
    with it (the same objects) when its other fields are the previous request's too. The messages translated are
    then settled (server.sessions.resent_prefix.settle); a request holding stand-ins that no kept translation covers
    (its other fields changed, or the translation was let go) is read whole again (`whole`) and translated whole."""
    previous, kept = reusable(session, DIALECT, lambda candidate: _kept(candidate.request, request))
    if isinstance(previous, Translated) and kept > 0 and not holds_settled(request.messages, kept):
        new: list[dict[str, Any]] = []
        ends = previous.ends[:kept]
        try:
            _translate(request.messages, kept, session, signer, new, ends, ends[-1])
        except TitoError:
            pass  # the whole translation names the error and its place
        else:
            messages = previous.chat.messages[: ends[kept - 1]] + new
            chat = previous.chat.model_copy(update={"messages": messages})
            settle(request.messages, kept, len(request.messages))
            remember(session, DIALECT, Translated(request, chat, ends), previous)
            return chat
    if holds_settled(request.messages):
        request = whole()
    ends = []
    chat = chat_request(request, session, signer, family, ends)
    settle(request.messages, 0, len(request.messages))
    remember(session, DIALECT, Translated(request, chat, ends), None)
    return chat


def _kept(previous: AnthropicRequest, request: AnthropicRequest) -> int:
    """How many leading messages `request` shares with `previous` (the same objects), 0 unless every other
    field is equal too (the same objects in a body read from the previous one's prefix)."""
    if not same_values(_OTHER_FIELDS, request, previous):
        return 0
    if request.model_extra != previous.model_extra:
        return 0
    kept = 0
    for mine, theirs in zip(request.messages, previous.messages, strict=False):
        if mine is not theirs:
            break
        kept += 1
    return kept


def _translate(
    source: list[dict[str, Any]],
    first: int,
    session: Session,
    signer: RoundTripSigner,
    messages: list[dict[str, Any]],
    ends: list[int],
    before: int,
) -> None:
    """Translate `source[first:]` onto `messages`, noting in `ends` the chat message count after each (from
    `before`)."""
    for index in range(first, len(source)):
        message = source[index]
        where = f"messages[{index}]"
        role, content = message.get("role"), message.get("content")
        if role == "user":
            messages.extend(_user_messages(where, content))
        elif role == "assistant":
            messages.append(_assistant_message(where, content, session, signer))
        elif role == "system":  # a mid-conversation system message (beta `mid-conversation-system-2026-04-07`)
            messages.append({"role": "system", "content": _system_text(content, f"{where}.content") or ""})
        else:
            raise BadRequestError(f"{where}.role: must be 'user', 'assistant' or 'system', not {role!r}")
        ends.append(before + len(messages))


def chat_request(
    request: AnthropicRequest,
    session: Session,
    signer: RoundTripSigner,
    family: Family,
    ends: list[int] | None = None,
) -> ChatCompletionRequest:
    """The internal chat request the turn runs as; `ends` gets, per message, the chat message count up to it."""
    messages: list[dict[str, Any]] = []
    system = _system_text(request.system)
    if system is not None:
        messages.append({"role": "system", "content": system})
    _translate(request.messages, 0, session, signer, messages, ends if ends is not None else [], 0)
    body: dict[str, Any] = {
        "messages": messages,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "top_k": request.top_k,
        "stop": request.stop_sequences,
        "chat_template_kwargs": thinking_kwargs(family, _thinking_enabled(request.thinking)),
    }
    if request.tools is not None:
        body["tools"] = [_chat_tool(index, tool) for index, tool in enumerate(request.tools)]
    if request.tool_choice is not None:
        body["tool_choice"] = _chat_tool_choice(request.tool_choice)
    output_format = (request.output_config or {}).get("format")
    if output_format is not None:
        body["response_format"] = _response_format(output_format)
    try:  # the dialect's fields share the chat request's types; what is left to refuse is what translates to nothing
        return with_shared_tools(ChatCompletionRequest.model_validate(body))
    except ValidationError as exc:
        raise validation_error(exc, "request (translated to a chat request)") from None


_OTHER_FIELDS = operator.attrgetter(*(name for name in AnthropicRequest.model_fields if name != "messages"))


def _system_text(system: Any, where: str = "system") -> str | None:
    """The system prompt (or a system message's content); an empty one is none (no system message is rendered)."""
    if system is None or isinstance(system, str):
        return system or None
    return "".join(_text_of(f"{where}[{index}]", block) for index, block in enumerate(_blocks(where, system))) or None


def _text_of(where: str, block: Any) -> str:
    if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
        kind = block.get("type") if isinstance(block, dict) else type(block).__name__
        raise BadRequestError(f"{where}.type: only text blocks are supported here, not {kind!r}")
    return str(block["text"])


def _blocks(where: str, content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not all(isinstance(block, dict) for block in content):
        raise BadRequestError(f"{where}.content: must be a string or a list of content blocks")
    return content


def _user_messages(where: str, content: Any) -> list[dict[str, Any]]:
    """Tool results become tool messages in order; text between them one user message."""
    messages: list[dict[str, Any]] = []
    texts: list[str] = []
    for index, block in enumerate(_blocks(where, content)):
        kind = block.get("type")
        if kind == "text":
            texts.append(_text_of(f"{where}.content[{index}]", block))
        elif kind == "tool_result":
            if texts:
                messages.append({"role": "user", "content": "".join(texts)})
                texts = []
            messages.append(_tool_message(f"{where}.content[{index}]", block))
        else:
            raise BadRequestError(
                f"{where}.content[{index}].type: {kind!r} is not supported in a user message (text and tool_result are)"
            )
    if texts or not messages:
        messages.append({"role": "user", "content": "".join(texts)})
    return messages


def _tool_message(where: str, block: dict[str, Any]) -> dict[str, Any]:
    tool_use_id = block.get("tool_use_id")
    if not isinstance(tool_use_id, str):
        raise BadRequestError(f"{where}.tool_use_id: required, a string")
    content = block.get("content")
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    else:
        parts = enumerate(_blocks(where, content))
        text = "".join(_text_of(f"{where}.content[{index}]", part) for index, part in parts)
    return {"role": "tool", "tool_call_id": tool_use_id, "content": text}


def _assistant_message(where: str, content: Any, session: Session, signer: RoundTripSigner) -> dict[str, Any]:
    reasoning: list[str] = []
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    signatures: list[Any] = []
    for index, block in enumerate(_blocks(where, content)):
        kind, at = block.get("type"), f"{where}.content[{index}]"
        if kind == "thinking":
            reasoning.append(str(block.get("thinking") or ""))
            signatures.append(block.get("signature"))
        elif kind == "redacted_thinking":
            if signed_turn(session, signer, block.get("data")) is None:
                raise BadRequestError(f"{at}: a redacted_thinking block tito did not sign cannot be rendered")
            signatures.append(block.get("data"))
        elif kind == "text":
            texts.append(_text_of(at, block))
        elif kind == "tool_use":
            calls.append(_tool_call(at, block))
        else:
            raise BadRequestError(f"{at}.type: {kind!r} is not supported in an assistant message")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    for signature in signatures:
        signed = signed_turn(session, signer, signature)
        if signed is not None:
            return dict(resent_assistant(message, signed))
    return message


_ARGUMENTS = json.JSONEncoder(ensure_ascii=False)
"""`json.dumps(value, ensure_ascii=False)`'s encoder, made once (`json.dumps` builds one per call for that flag)."""


def _tool_call(where: str, block: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
        raise BadRequestError(f"{where}: a tool_use block needs a string id and name")
    try:  # the spelling models write (", " and ": "); a signed resend is matched by value anyway
        arguments = _ARGUMENTS.encode(block.get("input") or {})
    except (TypeError, ValueError) as exc:
        raise BadRequestError(f"{where}.input: not JSON: {exc}") from None
    return {"id": block["id"], "type": "function", "function": {"name": block["name"], "arguments": arguments}}


def _chat_tool(index: int, tool: dict[str, Any]) -> dict[str, Any]:
    kind = tool.get("type")
    if kind not in (None, "custom"):
        raise BadRequestError(
            f"tools[{index}].type: {kind!r} is a server tool the provider runs; tito records client tools only"
        )
    return function_tool(f"tools[{index}]", tool.get("name"), tool.get("description"), tool.get("input_schema"))


def _chat_tool_choice(choice: dict[str, Any]) -> Any:
    kind = choice.get("type")
    if kind in ("auto", "none"):
        return kind
    if kind == "any":
        return "required"
    if kind == "tool" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise BadRequestError(f"tool_choice.type: must be auto, any, tool (with a name) or none, not {kind!r}")


def _response_format(output_format: Any) -> dict[str, Any]:
    """`output_config.format` (`{"type": "json_schema", "schema"}`) as chat completions' `response_format`."""
    kind = output_format.get("type") if isinstance(output_format, dict) else None
    if kind != "json_schema":
        raise BadRequestError(f"output_config.format.type: must be json_schema, not {kind!r}")
    if not isinstance(output_format.get("schema"), dict):
        raise BadRequestError("output_config.format.schema: required, a JSON schema object")
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": output_format["schema"]}}


def _thinking_enabled(thinking: dict[str, Any] | None) -> bool | None:
    if thinking is None:
        return None
    kind = thinking.get("type")
    if kind in ("enabled", "adaptive"):
        return True
    if kind == "disabled":
        return False
    raise BadRequestError(f"thinking.type: must be enabled, adaptive or disabled, not {kind!r}")


def sse(event: dict[str, Any]) -> bytes:
    """One Anthropic stream event: its type as the SSE event name, the event as data."""
    return b"event: " + str(event["type"]).encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


_DELTA_FIELDS = {"thinking": ("thinking_delta", "thinking"), "text": ("text_delta", "text"),
                 "tool_use": ("input_json_delta", "partial_json")}  # fmt: skip


class Blocks(DeltaParts):
    """An Anthropic message's content blocks, built from the assistant message's deltas in order, and (when
    `events` is a list) the stream events each delta makes, as SSE bytes (`content_block_start`, `..._delta`,
    `..._stop`); `signature` gives a thinking block's (signed when first asked: RoundTripSigner.signing)."""

    REASONING = "thinking"
    TEXT = "text"
    DELTA_END = b"}}\n\n"

    def __init__(self, signature: Callable[[], str]) -> None:
        super().__init__()
        self.signature = signature
        self.blocks: list[dict[str, Any]] = []

    def content(self) -> list[dict[str, Any]]:
        """The blocks as the reply's `content` (call only after `close`)."""
        content: list[dict[str, Any]] = []
        for block, parts in zip(self.blocks, self._parts, strict=True):
            text = "".join(parts)
            if block["type"] == "thinking":
                content.append({"type": "thinking", "thinking": text, "signature": self.signature()})
            elif block["type"] == "text":
                content.append({"type": "text", "text": text})
            else:
                content.append({**block, "input": orjson.loads(text) if text else {}})
        return content

    def _open_part(self, kind: str, events: Events) -> None:
        empty = {"thinking": "", "signature": ""} if kind == "thinking" else {"text": ""}
        self._start({"type": kind, **empty}, events)

    def _open_call(self, call: ToolCallDelta, events: Events) -> None:
        self._start({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}, events)

    def _start(self, block: dict[str, Any], events: Events) -> None:
        self.blocks.append(block)
        self._parts.append([])
        self._open = block["type"]
        index = len(self.blocks) - 1
        if events is not None:
            events.append(sse({"type": "content_block_start", "index": index, "content_block": block}))
            kind, field = _DELTA_FIELDS[block["type"]]
            self._delta_head = (
                b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,"delta":{"type":"%s","%s":'
                % (index, kind.encode(), field.encode())
            )

    def _close(self, events: Events) -> None:
        if self._open is None:
            return
        index = len(self.blocks) - 1
        if events is not None:
            if self._open == "thinking":
                delta = {"type": "signature_delta", "signature": self.signature()}
                events.append(sse({"type": "content_block_delta", "index": index, "delta": delta}))
            events.append(sse({"type": "content_block_stop", "index": index}))
        self._open = None


def stop_reason(turn: TurnCommitted) -> tuple[str, str | None]:
    """Anthropic's `stop_reason` and `stop_sequence` of a committed turn."""
    if turn.finish_reason == "length":
        return "max_tokens", None
    if turn.finish_reason == "tool_calls":
        return "tool_use", None
    stop_string = turn.metadata.get("stop_string")
    if isinstance(stop_string, str):
        return "stop_sequence", stop_string
    return "end_turn", None


def usage(turn: TurnCommitted) -> dict[str, int]:
    """Real token counts; Anthropic's `input_tokens` are those not read from the engine's prefix cache."""
    prompt_tokens = int(turn.metadata.get("prompt_tokens", 0))
    cached = min(int(turn.metadata.get("cached_tokens", 0)), prompt_tokens)
    return {
        "input_tokens": prompt_tokens - cached,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": len(turn.output_ids),
    }


def tito_facts(turn: TurnCommitted) -> dict[str, Any]:
    return {
        "session_id": turn.session_id,
        "node_id": turn.node_id,
        "invalid_tool_calls": len(turn.metadata.get("invalid_tool_calls", ())),
    }


def message_body(turn: TurnCommitted, model: str, signer: RoundTripSigner) -> dict[str, Any]:
    """The `message` of a committed turn (also what an SDK retry of it gets back)."""
    blocks = Blocks(signer.signing(turn.session_id, turn.response_id))
    blocks.feed(message_deltas(turn.assistant), None)
    blocks.close(None)
    reason, sequence = stop_reason(turn)
    return {
        "id": turn.response_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks.content(),
        "stop_reason": reason,
        "stop_sequence": sequence,
        "usage": usage(turn),
        "tito": tito_facts(turn),
    }


def error_body(exc: Exception) -> tuple[dict[str, Any], int]:
    """Anthropic's error shape and the status: `{"type": "error", "error": {"type", "message"}}`."""
    if isinstance(exc, TitoError):
        status, message = exc.http_status, f"{type(exc).__name__}: {exc}"
    else:
        status, message = 500, internal_error_words(exc)
    kind = ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}, status
