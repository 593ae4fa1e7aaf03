"""Pydantic models of the request bodies: the OpenAI chat-completions request and the samples request.

Unknown fields pass validation and are ignored, as OpenAI's own server does; a known field of the wrong type
is a 400 naming it. Messages are validated by `tito.messages` (per message and field) when the prompt is built.

Imports nothing from tito.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    messages: list[dict[str, Any]] = Field(min_length=1)
    model: str | None = None
    tools: list[dict[str, Any]] | None = None
    temperature: float | None = Field(default=None, ge=0.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = None
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    n: int | None = Field(default=None, ge=1)
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    return_token_ids: bool = False
    """tito's extension (the SDK's `extra_body`): each streamed chunk carries the ids it covers and their logprobs."""
    chat_template_kwargs: dict[str, Any] | None = None


class SessionRequest(BaseModel):
    """`POST /sessions`: every field optional; the launch options fill the rest."""

    model_config = ConfigDict(extra="forbid")

    trajectory: Literal["linear", "tree"] | None = None
    """None: the server's `--trajectory`."""
    chat_template_kwargs: dict[str, Any] | None = None
    allowed_append_roles: list[str] | None = None
    ttl_seconds: float | None = Field(default=None, gt=0)
    max_nodes: int | None = Field(default=None, ge=1)
    """Tree sessions: the most generations kept; None: the server's `--max-nodes`."""
    strict_append_only: bool | None = None
    """Tree sessions: refuse any branch instead of growing one; None: the server's `--strict-append-only`."""
    matcher: Literal["strict", "harness"] | None = None
    """How a resent conversation must match the stored one (`tito.matching`); None: the server's `--matcher`."""
    group_id: str | None = Field(default=None, min_length=1)
    """Carried on every sample of the session (GRPO groups one prompt's sessions); the samples body may set it."""


class SamplesRequest(BaseModel):
    """`POST /sessions/{id}/samples`: optional cut, rewards, group and the trainer's metadata, and the format."""

    model_config = ConfigDict(extra="forbid")

    max_seq_len: int | None = Field(default=None, ge=1)
    prompt_length: int | None = Field(default=None, ge=1)
    """A trainer's prompt budget (verl's `rollout.prompt_length`): a longer prompt is refused (422)."""
    response_length: int | None = Field(default=None, ge=1)
    """A trainer's response budget (verl's `rollout.response_length`): whole turns kept while they fit."""
    reward: float | None = None
    """Every sample's reward unless `rewards` names its last turn's response id."""
    rewards: dict[str, float] | None = None
    """Rewards by response id (the `id` of a reply): a sample gets its last turn's; each span gets its own."""
    group_id: str | None = Field(default=None, min_length=1)
    """Overrides the session's `group_id` on these samples."""
    metadata: dict[str, Any] | None = None
    format: str | None = None
    """`json` (default), `safetensors`, or a trainer's (`tito.trajectory.exports`): `verl`, `skyrl`, `prime-rl`,
    `trl`, `miles`, `areal`, `nemo_gym`."""
