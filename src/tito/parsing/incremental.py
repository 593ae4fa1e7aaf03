"""The incremental parser: sampled ids in chunks of any size -> OpenAI deltas, ending in the whole parse.

Nothing it emits is ever taken back: it holds back what a later id could still change (an incomplete
character, a possible prefix of a marker or of a format's multi-character opener, whitespace the final
message may strip) and a tool call until the format's grammar decides it is a call (its closing markup
arrived): a call cut by length never enters the message, so it never enters the stream either. A call
leaves as two deltas, `index` + `id` + `name` first, then its arguments. The grammar is the format's own
`parse_body`, run on the body seen so far; the token level is markers.MarkedTextStream; `finish()` parses
the accumulated marked text with the whole parser's text level, so its ParseResult is `parse_completion`'s.

Imports from tito: parsing.arguments, parsing.grammar, parsing.markers, parsing.pipeline, parsing.result.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tito.parsing.arguments import ToolIndex
from tito.parsing.grammar import THINK_CLOSE, THINK_OPEN, Body
from tito.parsing.markers import MarkedTextStream, held_prefix_length
from tito.parsing.pipeline import CompletionParser, finished_attempt
from tito.parsing.result import ParseResult, ToolCallAttempt, ToolSchema


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of the `index`-th call of the message: its id and name once, then argument text."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""

    def as_openai(self) -> dict[str, Any]:
        """The entry of an OpenAI `chat.completion.chunk` delta's `tool_calls`."""
        if self.id is None:
            return {"index": self.index, "function": {"arguments": self.arguments}}
        function = {"name": self.name, "arguments": self.arguments}
        return {"index": self.index, "id": self.id, "type": "function", "function": function}


@dataclass(frozen=True)
class Delta:
    """One piece of the assistant message; exactly one field is set."""

    reasoning_content: str | None = None
    content: str | None = None
    tool_call: ToolCallDelta | None = None

    def as_openai(self) -> dict[str, Any]:
        """The `delta` object of an OpenAI `chat.completion.chunk` choice."""
        if self.tool_call is not None:
            return {"tool_calls": [self.tool_call.as_openai()]}
        if self.reasoning_content is not None:
            return {"reasoning_content": self.reasoning_content}
        return {"content": self.content}


class _Phase(enum.Enum):
    UNDECIDED = "undecided"
    """Only whitespace yet, or no prompt to tell whether the text is reasoning."""
    REASONING = "reasoning"
    BODY = "body"


class IncrementalParser:
    """One completion's stream: `feed(ids)` per chunk, then `finish()` once.

    `finish()` returns the last deltas and the ParseResult, equal to `CompletionParser.parse` of all the ids
    fed; the deltas of the whole stream add up to its message (tool-call ids included).
    """

    def __init__(
        self, parser: CompletionParser, prompt_ids: Sequence[int] | None, tools: Sequence[ToolSchema] | None
    ) -> None:
        self.parser = parser
        self.format = parser.format
        self.tools = ToolIndex.of(tools)
        self.prompt_opened = parser.prompt_opened(prompt_ids)
        self.prompt_length = -1 if prompt_ids is None else len(prompt_ids)
        self._stream = MarkedTextStream(parser.scanner)
        self._marked: list[str] = []
        self._phase = _Phase.UNDECIDED if THINK_OPEN in self.format.sentinels else _Phase.BODY
        self._undecided = ""
        self._reasoning_pending = ""
        self._reasoning_started = False
        self._body = ""
        self._body_has_calls = False
        self._parsed: tuple[str, Body] | None = None
        """The last body text the grammar read and what it read: `finish()`'s whole parse takes it when the body
        is still that text (a call's closing marker is usually the last id before the stop)."""
        self._content_pending = ""
        self._content_started = False
        self._reasoning: list[str] = []
        self._content: list[str] = []
        self._content_length = 0
        self._calls: list[ToolCallAttempt] = []
        self._next_attempt = 0
        self._finished = False

    def feed(self, ids: Sequence[int], *, last: bool = False) -> list[Delta]:
        """The deltas the chunk `ids` decides (possibly none). `last`: no id follows (`finish()` is next), so the
        text is only taken: `finish()`'s whole parse decides its deltas anyway, with the same result."""
        if self._finished:
            raise RuntimeError("feed() after finish(): an incremental parser parses one completion")
        text = self._stream.feed(ids)
        if not text:
            return []
        self._marked.append(text)
        if last:
            return []
        deltas: list[Delta] = []
        self._advance(text, deltas)
        return deltas

    def finish(self) -> tuple[list[Delta], ParseResult]:
        """The deltas that remain once no id follows, and the whole completion's ParseResult."""
        self._finished = True
        self._marked.append(self._stream.finish())
        result = self.parser.parse_marked(
            "".join(self._marked),
            self._stream.stopped,
            self.prompt_opened,
            self.prompt_length,
            self.tools,
            self._parsed,
        )
        message = result.message
        deltas: list[Delta] = []
        reasoning = self._remainder("reasoning_content", "".join(self._reasoning), message.get("reasoning_content", ""))
        if reasoning:
            deltas.append(Delta(reasoning_content=reasoning))
        content = self._remainder("content", "".join(self._content), message["content"])
        if content:
            deltas.append(Delta(content=content))
        calls = [attempt for attempt in result.attempts if attempt.status.is_call]
        if [call.call_id for call in calls[: len(self._calls)]] != [call.call_id for call in self._calls]:
            raise RuntimeError("the stream emitted tool calls the whole parse does not make: a parser bug")
        for index in range(len(self._calls), len(calls)):
            deltas.extend(self._call_deltas(index, calls[index]))
        return deltas, result

    @staticmethod
    def _remainder(field: str, emitted: str, final: str) -> str:
        if not final.startswith(emitted):
            raise RuntimeError(f"the stream emitted {field} {emitted[-40:]!r} that the whole parse does not have")
        return final[len(emitted) :]

    # ---- phases ----

    def _advance(self, text: str, deltas: list[Delta]) -> None:
        if self._phase is _Phase.UNDECIDED:
            text = self._decide(text)
            if self._phase is _Phase.UNDECIDED:
                return
        if self._phase is _Phase.REASONING:
            end = text.find(self.format.mark(THINK_CLOSE))
            if end < 0:
                self._reason(text, deltas, closed=False)
                return
            self._reason(text[:end], deltas, closed=True)
            self._phase, text = _Phase.BODY, text[end + 1 :]
        if text:
            self._extend_body(text, deltas)

    def _decide(self, text: str) -> str:
        """split_reasoning's decision, made as soon as the text allows; returns the text of the new phase."""
        pending = self._undecided + text
        lead = pending.lstrip()
        if not lead:
            self._undecided = pending
            return ""
        if lead.startswith(self.format.mark(THINK_OPEN)):
            self._phase, pending = _Phase.REASONING, lead[1:]
        elif self.prompt_opened:
            self._phase = _Phase.REASONING
        elif self.prompt_opened is None:  # no prompt: only a closing marker tells this text is reasoning
            if self.format.mark(THINK_CLOSE) not in pending:
                self._undecided = pending
                return ""
            self._phase = _Phase.REASONING
        else:
            self._phase = _Phase.BODY
        self._undecided = ""
        return pending

    def _reason(self, text: str, deltas: list[Delta], closed: bool) -> None:
        strip = self.format.reasoning_strip
        pending = self._reasoning_pending + text
        if not self._reasoning_started:
            pending = pending.lstrip(strip)
            if not pending:
                return
            self._reasoning_started = True
        ready = pending.rstrip(strip)  # trailing whitespace the final strip may drop waits for what follows
        self._reasoning_pending = "" if closed else pending[len(ready) :]
        if ready:
            piece = self.format.restore(ready)
            self._reasoning.append(piece)
            deltas.append(Delta(reasoning_content=piece))

    def _extend_body(self, text: str, deltas: list[Delta]) -> None:
        fmt = self.format
        # The local holds the body's only reference while `+=` runs, so CPython grows it in place: `self._body +=`
        # copied the whole body per chunk (quadratic in a long streamed reply).
        body, self._body = self._body, ""
        body += text
        self._body = body
        if not self._body_has_calls and not fmt.has_calls(text):
            self._stream_content(text, deltas)
            return
        if self._body_has_calls and not fmt.may_decide(self._body, len(text)):
            return  # text inside a call, or content after calls: decided, and emitted, at the next tag or marker
        self._body_has_calls = True
        view = body[: len(body) - held_prefix_length(body, fmt.openers)]
        parsed = fmt.parse(view, self.tools)
        self._parsed = (view, parsed)
        self._emit_content(fmt.restore(parsed.content).rstrip(), deltas)
        attempts = parsed.attempts
        while self._next_attempt < len(attempts):
            index = self._next_attempt
            attempt = attempts[index]
            if attempt.status.is_call:  # a call is decided once its closing markup is there
                call = finished_attempt(fmt, self.prompt_length, index, attempt)
                deltas.extend(self._call_deltas(len(self._calls), call))
                self._calls.append(call)
            elif index == len(attempts) - 1:  # the last attempt may still become a call
                return
            self._next_attempt = index + 1

    def _stream_content(self, text: str, deltas: list[Delta]) -> None:
        """Content before any call marker, without re-parsing: what content_only keeps, as it arrives."""
        pending = self._content_pending + text
        if not self._content_started:
            pending = pending.lstrip(self.format.content_strip)
            if not pending:
                return
            self._content_started = True
        held = held_prefix_length(pending, self.format.openers)
        ready = pending[: len(pending) - held].rstrip()
        self._content_pending = pending[len(ready) :]
        if ready:
            self._push_content(self.format.restore(ready), deltas)

    def _emit_content(self, content: str, deltas: list[Delta]) -> None:
        """Emit what `content` (the content decided so far, whole) adds to what was emitted."""
        if len(content) > self._content_length:
            self._push_content(content[self._content_length :], deltas)

    def _push_content(self, piece: str, deltas: list[Delta]) -> None:
        self._content.append(piece)
        self._content_length += len(piece)
        deltas.append(Delta(content=piece))

    @staticmethod
    def _call_deltas(index: int, call: ToolCallAttempt) -> list[Delta]:
        header = ToolCallDelta(index, id=call.call_id, name=call.name)
        return [Delta(tool_call=header), Delta(tool_call=ToolCallDelta(index, arguments=call.arguments or ""))]
