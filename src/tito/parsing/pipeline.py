"""The parser pipeline: marked text -> reasoning, body (content and tool-call attempts) -> ParseResult.

One `CompletionParser` per format and tokenizer (ids resolved once); `TitoTokenizer` holds it. The same
reasoning split and result building serve the whole-completion parse and the incremental one
(incremental.py), so a stream ends in exactly the whole parse.

Imports from tito: families.base, tokenizer_protocol, parsing.arguments, parsing.grammar, parsing.markers,
parsing.registry, parsing.result.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tito.families.base import Family
from tito.parsing.arguments import ToolIndex
from tito.parsing.grammar import THINK_CLOSE, THINK_OPEN, Attempt, Body, OutputFormat
from tito.parsing.markers import MarkerScanner, eos_tokens
from tito.parsing.registry import get_output_format
from tito.parsing.result import AssistantMessage, FinishReason, ParseResult, ToolCallAttempt, ToolSchema
from tito.tokenizer_protocol import Tokenizer


@dataclass(frozen=True)
class ReasoningSplit:
    """Where the reasoning block of a marked text ends; `closed` None = no block, False = still open."""

    reasoning: str | None
    body: str
    closed: bool | None


def split_reasoning(fmt: OutputFormat, text: str, prompt_opened: bool | None) -> ReasoningSplit:
    """Reasoning and the text after it. `prompt_opened` None means the prompt is unknown: then a closing
    marker anywhere means the generation prompt opened the block."""
    if THINK_OPEN not in fmt.sentinels:
        return ReasoningSplit(None, text, None)
    opener, closer = fmt.mark(THINK_OPEN), fmt.mark(THINK_CLOSE)
    opened = bool(prompt_opened)
    lead = text.lstrip()
    if lead.startswith(opener):
        opened, text = True, lead[1:]
    elif prompt_opened is None and closer in text:
        opened = True
    if not opened:
        return ReasoningSplit(None, text, None)
    end = text.find(closer)
    if end < 0:
        return ReasoningSplit(text, "", False)
    return ReasoningSplit(text[:end], text[end + 1 :], True)


def call_id_for(prompt_length: int, index: int, raw: str) -> str:
    """A tool-call id decided by the sampled call itself, so a stream names a call as the whole parse does.

    The prompt length tells turns of one conversation apart; the attempt's index and text tell calls apart.
    """
    digest = hashlib.blake2b(f"{prompt_length}\x00{index}\x00{raw}".encode(), digest_size=12).hexdigest()
    return f"call_{digest}"


def finished_attempt(fmt: OutputFormat, prompt_length: int, index: int, attempt: Attempt) -> ToolCallAttempt:
    """A format parser's attempt as the result reports it: marker text restored, an id for each call."""
    name = None if attempt.name is None else fmt.restore(attempt.name)
    arguments = None if attempt.arguments is None else fmt.restore(attempt.arguments)
    raw = fmt.restore(attempt.raw)
    call_id = attempt.call_id
    if attempt.status.is_call and call_id is None:
        call_id = call_id_for(prompt_length, index, raw)
    return ToolCallAttempt(index, attempt.status, name, arguments, raw, attempt.detail, call_id)


def message_call(attempt: ToolCallAttempt) -> dict[str, Any]:
    """A call attempt as an entry of the OpenAI message's `tool_calls`."""
    return {
        "id": attempt.call_id,
        "type": "function",
        "function": {"name": attempt.name, "arguments": attempt.arguments},
    }


class CompletionParser:
    """One format bound to one tokenizer: marker and stop ids resolved once, then `parse` per turn."""

    def __init__(self, output_format: OutputFormat, tokenizer: Tokenizer, stop_tokens: Sequence[str]) -> None:
        self.format = output_format
        self.tokenizer = tokenizer
        self.scanner = MarkerScanner(output_format, tokenizer, stop_tokens)

    def prompt_opened(self, prompt_ids: Sequence[int] | None) -> bool | None:
        """Whether the generation prompt opened reasoning; None when the prompt is unknown."""
        return None if prompt_ids is None else self.scanner.prompt_opens_reasoning(prompt_ids)

    def parse(
        self,
        completion_ids: Sequence[int],
        prompt_ids: Sequence[int] | None = None,
        tools: Sequence[ToolSchema] | None = None,
    ) -> ParseResult:
        """The completion (ids sampled after the generation prompt, through the stop token) as a message.

        Never raises on malformed output: each tool-call attempt carries its status.
        """
        text, stopped = self.scanner.marked_text(list(completion_ids))
        prompt_length = -1 if prompt_ids is None else len(prompt_ids)
        return self.parse_marked(text, stopped, self.prompt_opened(prompt_ids), prompt_length, ToolIndex.of(tools))

    def parse_marked(
        self,
        text: str,
        stopped: bool,
        prompt_opened: bool | None,
        prompt_length: int,
        tools: ToolIndex,
        parsed: tuple[str, Body] | None = None,
    ) -> ParseResult:
        """The text level of `parse`, for text already marked (whole, or accumulated by a stream). `parsed`: a body
        text already parsed with `tools` and its Body (a stream's last), taken when the body is that text."""
        fmt = self.format
        split = split_reasoning(fmt, text, prompt_opened)
        if split.closed is False:
            body = Body("")
        elif parsed is not None and parsed[0] == split.body:
            body = parsed[1]
        else:
            body = fmt.parse(split.body, tools)
        message: AssistantMessage = {"role": "assistant", "content": fmt.restore(body.content)}
        if split.reasoning is not None:
            message["reasoning_content"] = fmt.restore(split.reasoning.strip(fmt.reasoning_strip))
        attempts = tuple(
            finished_attempt(fmt, prompt_length, index, attempt) for index, attempt in enumerate(body.attempts)
        )
        calls = [message_call(attempt) for attempt in attempts if attempt.status.is_call]
        if calls:
            message["tool_calls"] = calls
        finish: FinishReason = ("tool_calls" if calls else "stop") if stopped else "length"
        return ParseResult(message, finish, attempts, split.closed)


def build_completion_parser(family: Family, tokenizer: Tokenizer) -> CompletionParser:
    """The parser of `family`'s output format for `tokenizer`; stop tokens default to the tokenizer's eos."""
    stops = tuple(family.stop_tokens) if family.stop_tokens else tuple(eos_tokens(tokenizer))
    return CompletionParser(get_output_format(family.output_format), tokenizer, stops)
