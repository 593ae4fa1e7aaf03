"""What a parse returns: the OpenAI assistant message, the finish reason and one status per tool-call attempt.

Frozen values only; imports nothing from tito.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

FinishReason = Literal["stop", "length", "tool_calls"]
AssistantMessage = dict[str, Any]
"""An OpenAI chat-completions assistant message: `role`, `content`, optional `reasoning_content`, `tool_calls`."""
ToolSchema = Mapping[str, Any]
"""One entry of the request's `tools`: `{"type": "function", "function": {"name", "parameters", ...}}`."""


class CallStatus(enum.Enum):
    """How one tool-call attempt in the completion parsed. Only OK calls enter `message["tool_calls"]`."""

    OK = "ok"
    INVALID_ARGUMENTS = "invalid_arguments"
    """The call is closed and named, but its arguments are not a JSON object (JSON formats) or a parameter
    is malformed or not of its schema type (parameter formats)."""
    UNCLOSED = "unclosed"
    """The call opened and the completion ended before it closed (usually cut by length)."""
    UNKNOWN_TOOL = "unknown_tool"
    """The name is not among the request's tools (checked only when the request sent tools)."""
    MISSING_NAME = "missing_name"
    """No function name could be read from the call."""


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
    """The id written by the model (Kimi), else the id tito assigned (OK calls only)."""


@dataclass(frozen=True)
class ParseResult:
    """A completion turned into what the agent expects, plus what did not parse."""

    message: AssistantMessage
    finish_reason: FinishReason
    tool_calls: tuple[ToolCallAttempt, ...]
    """Every attempt with its status; `message["tool_calls"]` holds the OK ones, in the same order."""
    reasoning_closed: bool | None = None
    """None when there was no reasoning block; False when it was still open at the end (cut by length)."""

    @property
    def failed_calls(self) -> tuple[ToolCallAttempt, ...]:
        return tuple(attempt for attempt in self.tool_calls if attempt.status is not CallStatus.OK)
