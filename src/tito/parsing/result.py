"""What a parse returns: the OpenAI assistant message, the finish reason and one status per tool-call attempt.

Frozen values only; imports nothing from tito but chat_message.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tito.chat_message import Message

FinishReason = Literal["stop", "length", "tool_calls"]
AssistantMessage = Message
"""An OpenAI chat-completions assistant message: `role`, `content`, optional `reasoning_content`, `tool_calls`."""
ToolSchema = Mapping[str, Any]
"""One entry of the request's `tools`: `{"type": "function", "function": {"name", "parameters", ...}}`."""


class CallStatus(enum.Enum):
    """How one tool-call attempt in the completion parsed. OK and SCHEMA_MISMATCH calls enter
    `message["tool_calls"]` (`is_call`); the others stay out, with their text kept on the attempt."""

    OK = "ok"
    SCHEMA_MISMATCH = "schema_mismatch"
    """A well-formed call whose values do not all fit the declared parameter types: kept in the message with
    the values as the model wrote them, the mismatch in `detail`. Checked the same way in every family."""
    INVALID_ARGUMENTS = "invalid_arguments"
    """The call is closed and named, but its arguments are not a JSON object (JSON formats) or a parameter
    is malformed (parameter formats)."""
    UNCLOSED = "unclosed"
    """The call opened and the completion ended before it closed (usually cut by length)."""
    UNKNOWN_TOOL = "unknown_tool"
    """The name is not among the request's tools (checked only when the request sent tools)."""
    MISSING_NAME = "missing_name"
    """No function name could be read from the call."""

    @property
    def is_call(self) -> bool:
        """Whether the attempt enters the message's `tool_calls`."""
        return self in (CallStatus.OK, CallStatus.SCHEMA_MISMATCH)


@dataclass(frozen=True)
class ToolCallAttempt:
    """One tool call the model tried to make, in completion order, whatever its fate."""

    index: int
    """Position among all attempts of the completion."""
    status: CallStatus
    name: str | None
    arguments: str | None
    """The arguments as they enter the message (JSON text), when they parsed."""
    raw: str
    """The call's sampled text between its markers, for diagnosis and for the agent to be shown."""
    detail: str = ""
    """Why the status is not OK, in words."""
    call_id: str | None = None
    """The id written by the model (Kimi), else the id tito derived from the call (calls in the message only)."""


@dataclass(frozen=True)
class ParseResult:
    """A completion turned into what the agent expects, plus what did not parse."""

    message: AssistantMessage
    finish_reason: FinishReason
    attempts: tuple[ToolCallAttempt, ...]
    """Every tool-call attempt with its status; `message["tool_calls"]` holds those that are calls, in order."""
    reasoning_closed: bool | None = None
    """None when there was no reasoning block; False when it was still open at the end (cut by length)."""

    @property
    def failed_calls(self) -> tuple[ToolCallAttempt, ...]:
        """Attempts that are not in the message."""
        return tuple(attempt for attempt in self.attempts if not attempt.status.is_call)
