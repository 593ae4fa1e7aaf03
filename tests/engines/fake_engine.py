"""What the in-test engine servers share: a deterministic "model", scripted failures, recorded requests.

The i-th sampled id of a prompt is `scripted_id(prompt, i)` with logprob `scripted_logprob(i)`, unless the test
scripts the ids. Servers honour max tokens and stop token ids (the matched one is kept), record every request
(path, headers, body), and fail on request: an error status with the engine's error body, a slow reply, a dropped
connection, a malformed body.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.responses import Response


def scripted_id(prompt: list[int], position: int) -> int:
    return 1000 + (sum(prompt) * 31 + position * 7) % 5000


def scripted_logprob(position: int) -> float:
    return -(position + 1) / 8


def scripted_top_logprobs(token: int, position: int, count: int) -> list[tuple[int, float]]:
    """The `count` most likely ids at a position, best first: the sampled id, then ids above it, each less likely."""
    return [(token + rank, scripted_logprob(position) - rank / 4) for rank in range(count)]


@dataclass
class Behaviour:
    """What the next requests get; tests set fields, the `reset` fixture restores the defaults."""

    reply_ids: list[int] | None = None
    """The ids to 'sample' (cut by max tokens and stop ids); None: `scripted_id`."""
    token_delay: float = 0.0
    """Seconds before each streamed id (and before a whole non-streaming reply, times its length)."""
    status: int | None = None
    """Answer every generate call with this status and the engine's error body."""
    error_message: str = "Token id 999999 is out of vocabulary"
    drop_connection: bool = False
    """Close the connection mid-reply (after the headers, and after the first streamed event)."""
    malformed: bool = False
    """Reply 200 with a body that lacks the ids."""
    incremental: bool = False
    """SGLang `--incremental-streaming-output`: stream deltas instead of cumulative events."""
    weight_version: str = "default"
    usage_chunk: bool = True
    stream_error: str | None = None
    """Stream: after the first event, an in-stream error event with this message (a 200 stream cannot change status)."""
    """vLLM: send the final `usage` chunk when `stream_options.include_usage` asks for it."""


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeServer:
    """A running in-test engine server: its URL, what it received, how it behaves."""

    url: str = ""
    behaviour: Behaviour = field(default_factory=Behaviour)
    requests: list[RecordedRequest] = field(default_factory=list)
    aborted: set[str] = field(default_factory=set)
    name: str = ""

    def reset(self) -> None:
        self.behaviour = Behaviour()
        self.requests.clear()
        self.aborted.clear()

    def sample(self, prompt: list[int], max_tokens: int, stop_ids: list[int]) -> tuple[list[int], str, int | None]:
        """(ids, finish type, matched stop id) as the engine would sample them."""
        script = self.behaviour.reply_ids
        ids: list[int] = []
        for position in range(max_tokens):
            if script is not None and position >= len(script):
                return ids, "stop", None  # the script ended: EOS
            token = script[position] if script is not None else scripted_id(prompt, position)
            ids.append(token)
            if token in stop_ids:
                return ids, "stop", token
        return ids, "length", None

    def is_aborted(self, rid: str) -> bool:
        return any(rid.startswith(prefix) for prefix in self.aborted)


class DropConnection(Response):
    """Send the status line and headers, then fail: uvicorn closes the connection without a body."""

    def __init__(self) -> None:
        super().__init__(status_code=200, media_type="application/json")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"100")]})
        raise ConnectionResetError("in-test server drops the connection")
