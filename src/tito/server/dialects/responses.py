"""OpenAI Responses at the edge: its request as the internal chat request, a committed turn as its `response`.

Request: `instructions` -> a system message; `input` as a string (a user message) or items: `message` (user,
system, developer -> system; `input_text`/`output_text` parts), and the items of one assistant turn (`reasoning`,
an assistant `message`, `function_call`s, in that order) -> one assistant message with `reasoning_content`,
`content` and `tool_calls` (`call_id` -> the tool-call id); `function_call_output` -> a tool message. A reasoning
item whose `encrypted_content` verifies (server.dialects.signing) names the stored turn, whose message then stands
for the resent one when they agree (server.dialects.edge). `store: false` is the normal case (the client resends
everything, as Codex does); `previous_response_id` continues from a response of this session (its stored path),
else a 400. A `reasoning` object turns the family's thinking switch on unless its `effort` is `none` (Codex sends
`{"summary": "auto"}` without an effort: on, whatever the family's default). Tools (`RequestTools`): `function` tools
as chat tools; a `namespace` tool's function tools flattened into them (Codex groups its sub-agent tools as
`multi_agent_v1`), the namespace remembered so a call to one comes back with it and a resent call must name the same;
hosted tools tito cannot run (`web_search`, `file_search`, `code_interpreter`, `computer_use`, `image_generation`,
`mcp`, ...) left out of the prompt and recorded on the turn (`hosted_tools`), or a 400 where the session's
`hosted_tools` is `refuse`. `text.format` (json_schema, json_object) is chat's `response_format`: the engine's
constrained decoding. Other tool types, background runs and non-text input are a 400 naming the field.

Reply: output items built from the assistant message's deltas by `Items`, the same code the stream encoder
(server.dialects.responses_stream) runs on the engine's deltas, so a stream adds up to the whole reply:
`reasoning` (its text as `reasoning_text` content, `encrypted_content` signed), `message` (`output_text`),
`function_call` (`call_id` is the stored tool-call id, `arguments` the model's own text, `namespace` when the function
came in a namespace tool).

Imports from tito: errors, families.base, parsing.incremental, server.dialects.edge, server.dialects.outputs,
server.dialects.signing, server.errors, server.models, server.sessions, server.turns.streaming,
trajectory.events.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import ValidationError

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
    stored_turn,
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
    TopP,
    json_objects,
)
from tito.server.sessions.registry import Session
from tito.server.sessions.resent_prefix import ResentPrefix, holds_settled, settle
from tito.server.sessions.shared_tools import held_tools, held_tools_json, with_shared_tools
from tito.server.turns.streaming import message_deltas
from tito.trajectory.events import TurnCommitted

DIALECT = "responses"
ECHOED = ("instructions", "max_output_tokens", "metadata", "previous_response_id", "reasoning", "store")
TEXT_PARTS = ("input_text", "output_text", "text")
HOSTED_TOOLS = (
    "web_search",
    "web_search_preview",
    "file_search",
    "code_interpreter",
    "computer",
    "computer_use",
    "computer_use_preview",
    "image_generation",
    "mcp",
    "tool_search",
    "programmatic_tool_calling",
)
"""Tools OpenAI's servers run, never the client: a model behind tito cannot call them (dated spellings such as
`web_search_2025_08_26` count as their base type)."""
HOSTED_TOOLS_POLICIES = ("drop", "refuse")


class ResponsesRequest(RequestModel):
    """`POST /v1/responses`; unknown fields are ignored."""

    input: str | list[JsonObject]
    model: str | None = None
    instructions: str | None = None
    tools: list[JsonObject] | None = None
    tool_choice: str | JsonObject | None = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: TokenLimit | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    reasoning: JsonObject | None = None
    store: bool | None = None
    previous_response_id: str | None = None
    stream: bool | None = None
    metadata: JsonObject | None = None
    text: JsonObject | None = None
    background: bool | None = None
    conversation: Any = None
    prompt: Any = None


def parse_request(body: bytes) -> ResponsesRequest:
    try:
        request = ResponsesRequest.model_validate_json(body)
    except ValidationError as exc:
        raise validation_error(exc) from None
    if request.background:
        raise BadRequestError("background: not supported: a session's turn runs while its request is open")
    if request.conversation is not None:
        raise BadRequestError("conversation: not supported: the session is the conversation (or previous_response_id)")
    if request.prompt is not None:
        raise BadRequestError("prompt: stored prompt templates are not supported; send instructions and input")
    text_format = (request.text or {}).get("format") or {"type": "text"}
    if not isinstance(text_format, dict) or text_format.get("type") not in ("text", "json_object", "json_schema"):
        kind = text_format.get("type") if isinstance(text_format, dict) else text_format
        raise BadRequestError(f"text.format.type: must be text, json_object or json_schema, not {kind!r}")
    if text_format["type"] == "json_schema" and not isinstance(text_format.get("schema"), dict):
        raise BadRequestError("text.format.schema: required with json_schema, a JSON schema object")
    return request


def body_reader() -> ResentPrefix[ResponsesRequest]:
    """Turn bodies read from the previous one's prefix (server.sessions.resent_prefix): `input` is the conversation (a
    string `input` is read whole)."""
    return ResentPrefix("input", _parse_shared_tools, json_objects, _input_items, _with_input)


def _parse_shared_tools(body: bytes) -> ResponsesRequest:
    return with_shared_tools(parse_request(body))


def _input_items(request: ResponsesRequest) -> list[Any]:
    return request.input if isinstance(request.input, list) else []


def _with_input(request: ResponsesRequest, items: list[Any]) -> ResponsesRequest:
    return request.model_copy(update={"input": items})


_OTHER_FIELDS = operator.attrgetter(*(name for name in ResponsesRequest.model_fields if name != "input"))


def _response_format(request: ResponsesRequest) -> dict[str, Any] | None:
    """`text.format` as chat's `response_format` (structured output: the engine's constrained decoding)."""
    text_format = (request.text or {}).get("format") or {"type": "text"}
    if text_format["type"] == "json_schema":
        spec = {key: text_format[key] for key in ("name", "schema", "strict") if key in text_format}
        return {"type": "json_schema", "json_schema": spec}
    return None if text_format["type"] == "text" else {"type": "json_object"}


def is_hosted(kind: Any) -> bool:
    """Whether a tool type is one of OpenAI's hosted tools (`HOSTED_TOOLS`, dated spellings included)."""
    return isinstance(kind, str) and any(kind == name or kind.startswith(name + "_2") for name in HOSTED_TOOLS)


@dataclass(frozen=True)
class RequestTools:
    """A request's `tools` as tito runs them: chat function tools (namespaces flattened), each namespaced
    function's namespace, the hosted tools left out, and the tools as a `response` repeats them."""

    chat: list[dict[str, Any]] | None = None
    namespaces: Mapping[str, str] = field(default_factory=dict)
    """Function name -> the namespace tool it came in."""
    hosted: tuple[str, ...] = ()
    """The hosted tool types left out of the prompt, in request order."""
    echoed: bytes = b"[]"
    """The request's `tools` as JSON, written once (a coding agent's are tens of kilobytes, and a stream repeats
    them in three events of every turn)."""

    def check_namespace(self, where: str, name: str, namespace: Any) -> None:
        """A resent `function_call`'s `namespace` must be the one tito's reply gave it (the tools' own); a call
        without one, or to a function these tools do not declare (a compaction request sends none), is not
        checked."""
        if namespace is None or self.namespaces.get(name) == namespace:
            return
        if name not in {tool["function"]["name"] for tool in self.chat or ()}:
            return
        stored = f"namespace {self.namespaces[name]!r}" if name in self.namespaces else "no namespace"
        raise BadRequestError(
            f"{where}.namespace: {namespace!r}, but the tools declare {name!r} in {stored}, as its call was answered"
        )

    def recorded(self) -> dict[str, Any]:
        """What the turn records of them (its metadata)."""
        return {"hosted_tools": list(self.hosted)} if self.hosted else {}


def request_tools_reusing(request: ResponsesRequest, session: Session) -> RequestTools:
    """`request_tools` under the session's `hosted_tools`, or those of a kept translation whose request sent equal
    tools (the process's held objects, server.sessions.shared_tools: compared by identity, item by item): the same
    tools under the same policy translate alike."""
    if request.tools is not None:
        for candidate in session.translations.get(DIALECT, ()):
            if isinstance(candidate, Translated) and candidate.request.tools == request.tools:
                return candidate.tools
    return request_tools(request, session.config.hosted_tools)


def request_tools(request: ResponsesRequest, hosted_tools: str) -> RequestTools:
    """The request's tools translated; `hosted_tools` (`drop` or `refuse`) says what a hosted tool gets."""
    if request.tools is None:
        return RequestTools()
    chat: list[dict[str, Any]] = []
    namespaces: dict[str, str] = {}
    hosted: list[str] = []
    for index, tool in enumerate(request.tools):
        where, kind = f"tools[{index}]", tool.get("type")
        if is_hosted(kind):
            if hosted_tools == "refuse":
                raise BadRequestError(
                    f"{where}.type: {kind!r} is a hosted tool that tito cannot run, and this session refuses hosted "
                    "tools (hosted_tools: refuse; with drop it is left out of the prompt and recorded on the turn)"
                )
            hosted.append(str(kind))
        elif kind == "namespace":
            name, inner = tool.get("name"), tool.get("tools")
            if not isinstance(name, str) or not isinstance(inner, list):
                raise BadRequestError(f"{where}: a namespace tool needs a string name and a list of tools")
            for position, function in enumerate(inner):
                inner_where = f"{where}.tools[{position}]"
                chat.append(_chat_tool(inner_where, function if isinstance(function, dict) else {}))
                namespaces[chat[-1]["function"]["name"]] = name
        else:
            chat.append(_chat_tool(where, tool))
    names = [tool["function"]["name"] for tool in chat]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise BadRequestError(f"tools: the function {name!r} is declared twice (namespaces are flattened)")
    return RequestTools(held_tools(chat), namespaces, tuple(hosted), held_tools_json(request.tools))


@dataclass(frozen=True)
class Translated:
    """A turn's request and the chat request it translated to, kept on the session: the next turn's request, read
    from this one's body prefix (server.sessions.resent_prefix), holds the same item objects and fields, and only the
    items after the last one that ends an assistant turn's grouping are translated anew. They are not validated again
    as the chat request's messages: translation builds them of strings and stored messages only, JSON objects by
    construction (the body's own were validated as read)."""

    request: ResponsesRequest
    chat: ChatCompletionRequest
    tools: RequestTools
    """The request's tools as translated: the next request's, when it sends the same tools object."""
    ends: list[int]
    """Per input item, how many chat messages (instructions included) the items up to it make, where that item
    closes every assistant message (a user, system or tool item); -1 elsewhere."""


def chat_request_reusing(
    request: ResponsesRequest,
    tools: RequestTools,
    session: Session,
    signer: RoundTripSigner,
    family: Family,
    whole: Callable[[], ResponsesRequest],
) -> ChatCompletionRequest:
    """`chat_request`, reusing the session's previous translation for the leading items the request shares with
    it (the same objects) when its other fields are the previous request's too. The items a later resend can reuse
    the translation of are then settled (server.sessions.resent_prefix.settle); a request holding stand-ins that no
    kept translation covers is read whole again (`whole`) and translated whole."""
    previous, kept = reusable(session, DIALECT, lambda candidate: _kept(candidate, request))
    items = request.input
    if isinstance(previous, Translated) and kept > 0 and isinstance(items, list) and not holds_settled(items, kept):
        ends = previous.ends[:kept]
        new: list[dict[str, Any]] = []
        try:
            _Translation(session, signer, tools).messages(items, kept, new, ends, ends[-1])
        except TitoError:
            pass  # the whole translation names the error and its place
        else:
            chat = previous.chat.model_copy(update={"messages": previous.chat.messages[: ends[kept - 1]] + new})
            _settle_reusable(request, ends, kept)
            remember(session, DIALECT, Translated(request, chat, tools, ends), previous)
            return chat
    if isinstance(items, list) and holds_settled(items):
        request = whole()
    ends = []
    chat = chat_request(request, tools, session, signer, family, ends)
    _settle_reusable(request, ends, 0)
    remember(session, DIALECT, Translated(request, chat, tools, ends), None)
    return chat


def _settle_reusable(request: ResponsesRequest, ends: list[int], start: int) -> None:
    """Settle the items from `start` to the last that closes every assistant message: a later resend translates
    anew the items after it (`_kept`), and none of a request continuing a stored response (it reuses nothing)."""
    if request.previous_response_id is not None or not isinstance(request.input, list):
        return
    stop = len(ends)
    while stop > start and ends[stop - 1] < 0:
        stop -= 1
    settle(request.input, start, stop)


def _kept(previous: Translated, request: ResponsesRequest) -> int:
    """How many leading items `request` shares with the previous one (the same objects), cut back to the last that
    closes every assistant message; 0 unless every other declared field is equal too and the input a list. Fields
    the model does not declare are not compared: the translation reads none of them (Codex sends a
    `client_metadata` that changes every turn)."""
    before = previous.request
    if before.previous_response_id is not None or not isinstance(request.input, list):
        return 0
    if not same_values(_OTHER_FIELDS, request, before) or not isinstance(before.input, list):
        return 0
    kept = 0
    for mine, theirs in zip(request.input, before.input, strict=False):
        if mine is not theirs:
            break
        kept += 1
    while kept > 0 and previous.ends[kept - 1] < 0:
        kept -= 1
    return kept


def chat_request(
    request: ResponsesRequest,
    tools: RequestTools,
    session: Session,
    signer: RoundTripSigner,
    family: Family,
    ends: list[int] | None = None,
) -> ChatCompletionRequest:
    """The internal chat request the turn runs as; `ends` gets `Translated.ends` (when no previous_response_id)."""
    messages = _previous_messages(request, session)
    if request.instructions is not None and not messages:
        messages.append({"role": "system", "content": request.instructions})
    items = request.input
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    before = len(messages)
    messages.extend(
        _Translation(session, signer, tools).messages(items, 0, [], ends if ends is not None else [], before)
    )
    thinking = None if request.reasoning is None else request.reasoning.get("effort") != "none"
    body: dict[str, Any] = {
        "messages": messages,
        "max_tokens": request.max_output_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "chat_template_kwargs": thinking_kwargs(family, thinking),
        "response_format": _response_format(request),
    }
    if tools.chat is not None:
        body["tools"] = tools.chat
    if request.tool_choice is not None:
        body["tool_choice"] = _chat_tool_choice(request.tool_choice, tools)
    try:  # the dialect's fields share the chat request's types; what is left to refuse is what translates to nothing
        return with_shared_tools(ChatCompletionRequest.model_validate(body))
    except ValidationError as exc:
        raise validation_error(exc, "request (translated to a chat request)") from None


def _previous_messages(request: ResponsesRequest, session: Session) -> list[dict[str, Any]]:
    if request.previous_response_id is None:
        return []
    turn = stored_turn(session, request.previous_response_id)
    if turn is None:
        raise BadRequestError(
            f"previous_response_id: {request.previous_response_id!r} is no response of session {session.session_id}"
            " (send the whole conversation as input instead)"
        )
    messages = [dict(message) for message in session.trajectory.store.path_messages(turn.node_id)]
    first = messages[0] if messages else {}
    same = first.get("role") == "system" and first.get("content") == request.instructions
    if request.instructions is not None and not same:
        raise BadRequestError(
            "instructions: differ from the conversation's first system message; with previous_response_id they "
            "cannot change (send the whole conversation as input instead)"
        )
    return messages


class _Translation:
    """Input items -> chat messages; consecutive assistant items (reasoning, message, function calls) are one turn."""

    def __init__(self, session: Session, signer: RoundTripSigner, tools: RequestTools) -> None:
        self.session = session
        self.signer = signer
        self.tools = tools
        self.out: list[dict[str, Any]] = []
        self.pending: dict[str, Any] | None = None
        self.signatures: list[Any] = []

    def messages(
        self, items: Sequence[Any], first: int, out: list[dict[str, Any]], ends: list[int], before: int
    ) -> list[dict[str, Any]]:
        """`items[first:]` translated onto `out`; `ends` gets per item the chat message count (from `before`)
        where the item closes every assistant message, else -1 (see `Translated.ends`)."""
        self.out = out
        for index in range(first, len(items)):
            item = items[index]
            where = f"input[{index}]"
            if not isinstance(item, dict):
                raise BadRequestError(f"{where}: must be an object (an input item)")
            kind = item.get("type") or ("message" if "role" in item else None)
            if kind == "reasoning":
                self._reasoning(where, item)
            elif kind == "message" and item.get("role") == "assistant":
                pending = self._assistant(new=False)
                if pending["content"] or "tool_calls" in pending:
                    pending = self._assistant(new=True)
                pending["content"] = _text(where, item.get("content"))
            elif kind == "function_call":
                call = _chat_call(where, item, self.tools)
                self._assistant(new=False).setdefault("tool_calls", []).append(call)
            else:
                self._flush()
                self.out.append(self._other(where, kind, item))
                ends.append(before + len(self.out))
                continue
            ends.append(-1)
        self._flush()
        return self.out

    def _reasoning(self, where: str, item: dict[str, Any]) -> None:
        pending = self._assistant(new=False)
        if pending["content"] or "tool_calls" in pending or "reasoning_content" in pending:
            pending = self._assistant(new=True)
        parts = item.get("content") or []
        if not isinstance(parts, list):
            raise BadRequestError(f"{where}.content: must be a list of reasoning_text parts")
        pending["reasoning_content"] = "".join(str(part.get("text") or "") for part in parts if isinstance(part, dict))
        self.signatures.append(item.get("encrypted_content"))

    def _assistant(self, new: bool) -> dict[str, Any]:
        if new or self.pending is None:
            self._flush()
            self.pending = {"role": "assistant", "content": ""}
        return self.pending

    def _flush(self) -> None:
        if self.pending is None:
            return
        message: dict[str, Any] = self.pending
        for signature in self.signatures:
            signed = signed_turn(self.session, self.signer, signature)
            if signed is not None:
                message = dict(resent_assistant(message, signed))
                break
        self.out.append(message)
        self.pending, self.signatures = None, []

    @staticmethod
    def _other(where: str, kind: Any, item: dict[str, Any]) -> dict[str, Any]:
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer"):
                raise BadRequestError(f"{where}.role: must be user, system, developer or assistant, not {role!r}")
            return {"role": "user" if role == "user" else "system", "content": _text(where, item.get("content"))}
        if kind == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(call_id, str):
                raise BadRequestError(f"{where}.call_id: required, a string")
            return {"role": "tool", "tool_call_id": call_id, "content": _text(where, item.get("output"), "output")}
        raise BadRequestError(
            f"{where}.type: {kind!r} is not supported (message, reasoning, function_call, function_call_output are)"
        )


def _text(where: str, content: Any, field: str = "content") -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise BadRequestError(f"{where}.{field}: must be a string or a list of text parts")
    texts: list[str] = []
    for index, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") not in TEXT_PARTS or not isinstance(part.get("text"), str):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise BadRequestError(f"{where}.{field}[{index}].type: only text parts are supported, not {kind!r}")
        texts.append(part["text"])
    return "".join(texts)


def _chat_call(where: str, item: dict[str, Any], tools: RequestTools) -> dict[str, Any]:
    call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments")
    if not isinstance(call_id, str) or not isinstance(name, str) or not isinstance(arguments, str):
        raise BadRequestError(f"{where}: a function_call needs string call_id, name and arguments")
    tools.check_namespace(where, name, item.get("namespace"))
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _chat_tool(where: str, tool: dict[str, Any]) -> dict[str, Any]:
    if tool.get("type") != "function":
        raise BadRequestError(
            f"{where}.type: {tool.get('type')!r} is not supported: tito records function tools the agent runs "
            "(and namespaces of them; hosted tools are left out)"
        )
    return function_tool(where, tool.get("name"), tool.get("description"), tool.get("parameters"))


def _chat_tool_choice(choice: str | dict[str, Any], tools: RequestTools) -> Any:
    if isinstance(choice, str):
        return choice
    if choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    if is_hosted(choice.get("type")) and choice.get("type") in tools.hosted:
        return "auto"  # the hosted tool was left out: the model picks among the tools it has
    raise BadRequestError(f"tool_choice: {choice!r} is not supported (auto, none, required or a function)")


_DELTAS: dict[str, tuple[str, dict[str, Any]]] = {
    "reasoning": ("response.reasoning_text.delta", {"content_index": 0}),
    "message": ("response.output_text.delta", {"content_index": 0, "logprobs": []}),
    "function_call": ("response.function_call_arguments.delta", {}),
}


def _emit(events: Events, event: dict[str, Any]) -> None:
    if events is not None:
        events.append(b"event: " + str(event["type"]).encode() + b"\ndata: " + orjson.dumps(event)[:-1])


class Items(DeltaParts):
    """A response's output items, built from the assistant message's deltas in order, and (when `events` is a
    list) the stream events each delta makes, as SSE bytes open before their `sequence_number` (the stream encoder
    numbers them and closes them); `encrypted_content` gives a reasoning item's (signed when first asked:
    RoundTripSigner.signing)."""

    REASONING = "reasoning"
    TEXT = "message"

    def __init__(self, response_id: str, encrypted_content: Callable[[], str], namespaces: Mapping[str, str]) -> None:
        super().__init__()
        self.suffix = response_id.removeprefix("resp_")
        self.encrypted_content = encrypted_content
        self.namespaces = namespaces
        self.items: list[dict[str, Any]] = []

    def _open_call(self, call: ToolCallDelta, events: Events) -> None:
        item = {"type": "function_call", "call_id": call.id, "name": call.name, "arguments": ""}
        namespace = self.namespaces.get(call.name or "")
        if namespace is not None:
            item["namespace"] = namespace
        self._start(item, events)

    def _open_part(self, kind: str, events: Events) -> None:
        if kind == "reasoning":
            self._start({"type": "reasoning", "summary": []}, events)
        else:
            self._start({"type": "message", "role": "assistant", "content": []}, events)
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            _emit(events, {"type": "response.content_part.added", **self._where(), "content_index": 0, "part": part})

    def _where(self) -> dict[str, Any]:
        return {"item_id": self.items[-1]["id"], "output_index": len(self.items) - 1}

    def _start(self, item: dict[str, Any], events: Events) -> None:
        prefix = {"reasoning": "rs", "message": "msg", "function_call": "fc"}[item["type"]]
        item = {"id": f"{prefix}_{self.suffix}_{len(self.items)}", **item, "status": "in_progress"}
        self.items.append(item)
        self._parts.append([])
        self._open = item["type"]
        _emit(events, {"type": "response.output_item.added", "output_index": len(self.items) - 1, "item": item})
        if events is not None:
            kind, fields = _DELTAS[item["type"]]
            where = orjson.dumps({"type": kind, **self._where(), **fields})[:-1]
            self._delta_head = b"event: " + kind.encode() + b"\ndata: " + where + b',"delta":'

    def _close(self, events: Events) -> None:
        if self._open is None:
            return
        where = self._where()
        text = "".join(self._parts[-1])
        item = {**self.items[-1], "status": "completed"}
        if self._open == "reasoning":
            item["content"] = [{"type": "reasoning_text", "text": text}]
            item["encrypted_content"] = self.encrypted_content()
            _emit(events, {"type": "response.reasoning_text.done", **where, "content_index": 0, "text": text})
        elif self._open == "message":
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            item["content"] = [part]
            done = {"type": "response.output_text.done", **where, "content_index": 0, "text": text, "logprobs": []}
            _emit(events, done)
            _emit(events, {"type": "response.content_part.done", **where, "content_index": 0, "part": part})
        else:
            item["arguments"] = text
            done = {"type": "response.function_call_arguments.done", **where, "name": item["name"], "arguments": text}
            _emit(events, done)
        self.items[-1] = item
        _emit(events, {"type": "response.output_item.done", "output_index": where["output_index"], "item": item})
        self._open = None


def echo_fields(request: ResponsesRequest, tools: RequestTools) -> dict[str, Any]:
    """The request's settings a `response` object repeats (`tools`: the request's, translated). The instructions as
    JSON, written once for the turn: a coding agent's are tens of kilobytes, and a stream repeats them in three
    events."""
    echoed = {name: getattr(request, name) for name in ECHOED}
    if request.instructions is not None:
        echoed["instructions"] = orjson.Fragment(orjson.dumps(request.instructions))
    echoed["tools"] = orjson.Fragment(tools.echoed)
    echoed["tool_choice"] = request.tool_choice or "auto"
    echoed["parallel_tool_calls"] = True if request.parallel_tool_calls is None else request.parallel_tool_calls
    echoed["temperature"] = request.temperature
    echoed["top_p"] = request.top_p
    return echoed


def response_object(
    response_id: str, model: str, created_at: float, echo: dict[str, Any], output: list[dict[str, Any]]
) -> dict[str, Any]:
    """A `response` in progress (what `response.created` carries)."""
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(created_at),
        "status": "in_progress",
        "model": model,
        "output": output,
        "error": None,
        "incomplete_details": None,
        **echo,
        "usage": None,
    }


def finished(body: dict[str, Any], turn: TurnCommitted) -> dict[str, Any]:
    """The response once its turn is committed: status, usage and tito's facts."""
    prompt_tokens = int(turn.metadata.get("prompt_tokens", 0))
    output_tokens = len(turn.output_ids)
    incomplete = turn.finish_reason == "length"
    return {
        **body,
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "usage": {
            "input_tokens": prompt_tokens,
            "input_tokens_details": {"cached_tokens": int(turn.metadata.get("cached_tokens", 0))},
            "output_tokens": output_tokens,
            "total_tokens": prompt_tokens + output_tokens,
        },
        "tito": {
            "session_id": turn.session_id,
            "node_id": turn.node_id,
            "invalid_tool_calls": len(turn.metadata.get("invalid_tool_calls", ())),
        },
    }


def response_body(
    turn: TurnCommitted, model: str, echo: dict[str, Any], signer: RoundTripSigner, namespaces: Mapping[str, str]
) -> dict[str, Any]:
    """The `response` of a committed turn (also what an SDK retry of it gets back)."""
    items = Items(turn.response_id, signer.signing(turn.session_id, turn.response_id), namespaces)
    items.feed(message_deltas(turn.assistant), None)
    items.close(None)
    return finished(response_object(turn.response_id, model, turn.at, echo, items.items), turn)


def error_body(exc: Exception) -> tuple[dict[str, Any], int]:
    """OpenAI's error shape and the status: `{"error": {"message", "type", "param", "code"}}`."""
    if isinstance(exc, TitoError):
        status, kind, message = exc.http_status, type(exc).__name__, str(exc)
    else:
        status, kind, message = 500, "InternalError", internal_error_words(exc)
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}, status
