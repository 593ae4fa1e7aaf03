"""Pydantic models of the request bodies, one per route, on shared field types: the OpenAI chat-completions
request, the session and samples requests; the Anthropic and Responses edges build their requests from the same
types and validate the chat request they translate to through `ChatCompletionRequest` like any other.

Strict where the upstream APIs are strict: no string for a number or a boolean, finite floats only, integers in the
range the engines and the sample formats carry (an out-of-range `seed` would otherwise be recorded and break every
later read of the session), and every free-form JSON object (messages, tools, metadata) holds only values the
journal and the exports can write. Unknown fields of a dialect's request pass and are ignored, as the providers'
own servers do; a known field of the wrong type or range is a 400 naming it and the range.

Imports nothing from tito.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    TypeAdapter,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
"""The widest integer the sample formats (safetensors metadata, trainers' JSON readers) and the engines take."""
MAX_JSON_DEPTH = 64


@dataclass(frozen=True)
class Within:
    """An integer field's closed range, checked with a message naming both ends and shown in the OpenAPI schema."""

    low: int
    high: int

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        json_schema = handler(schema)
        json_schema.update(minimum=self.low, maximum=self.high)
        return json_schema

    def _check(self, value: int) -> int:
        if not self.low <= value <= self.high:
            raise ValueError(f"must be an integer from {self.low} to {self.high}, not {value}")
        return value


def json_safe(value: Any, where: str = "") -> None:
    """Raise ValueError naming the place of a value JSON readers cannot take back exactly: an integer outside the
    64-bit range, a NaN or infinite float, nesting deeper than MAX_JSON_DEPTH. The place is spelled only for a
    value refused: a turn's messages are walked on every request."""
    problem = _problem(value, 0)
    if problem is not None:
        steps, words = problem
        for step in reversed(steps):
            where = f"{where}[{step}]" if isinstance(step, int) else (f"{where}.{step}" if where else str(step))
        raise ValueError(f"{where or 'value'}: {words}")


def _problem(value: Any, depth: int) -> tuple[list[str | int], str] | None:
    """What is wrong with `value` and the keys and indexes down to it (innermost first), or None."""
    if value is None or isinstance(value, str | bool):
        return None
    if depth > MAX_JSON_DEPTH:
        return [], f"nested deeper than {MAX_JSON_DEPTH} levels"
    if isinstance(value, int):
        if not -INT64_MAX - 1 <= value <= INT64_MAX:
            return [], f"the integer {value} is outside the 64-bit range"
    elif isinstance(value, float):
        if not math.isfinite(value):
            return [], f"{value} is not a finite number"
    elif isinstance(value, dict):
        for key, item in value.items():
            if (problem := _problem(item, depth + 1)) is not None:
                problem[0].append(str(key))
                return problem
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if (problem := _problem(item, depth + 1)) is not None:
                problem[0].append(index)
                return problem
    return None


def _json_object(value: dict[str, Any]) -> dict[str, Any]:
    json_safe(value)
    return value


TokenLimit = Annotated[int, Within(1, INT32_MAX)]
"""A count of tokens to sample or keep."""
TopK = Annotated[int, Within(-1, INT32_MAX)]
"""-1 (and 0): no cut, as vLLM and SGLang read it."""
Seed = Annotated[int, Within(0, INT64_MAX)]
Temperature = Annotated[float, Field(ge=0.0, le=1e6)]
TopP = Annotated[float, Field(gt=0.0, le=1.0)]
Probability = Annotated[float, Field(ge=0.0, le=1.0)]
Penalty = Annotated[float, Field(ge=-2.0, le=2.0)]
"""OpenAI's range for presence and frequency penalties."""
JsonObject = Annotated[dict[str, Any], AfterValidator(_json_object)]
"""A free-form JSON object (a message, a tool, metadata) whose every value the journal and the exports can write."""


class RequestModel(BaseModel):
    """Strict types (JSON's own: no "10" for 10, no "yes" for true), finite floats, unknown fields ignored."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


_JSON_OBJECTS = TypeAdapter(list[JsonObject], config=RequestModel.model_config)


def json_objects(array: bytes) -> list[dict[str, Any]]:
    """A JSON array of free-form objects validated as a `list[JsonObject]` field of a request is (messages, input
    items read alone: server.sessions.resent_prefix)."""
    return _JSON_OBJECTS.validate_json(array)


class StreamOptions(RequestModel):
    include_usage: bool = False


class ChatCompletionRequest(RequestModel):
    messages: list[JsonObject] = Field(min_length=1)
    model: str | None = None
    tools: list[JsonObject] | None = None
    tool_choice: str | JsonObject | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    top_k: TopK | None = None
    min_p: Probability | None = None
    max_tokens: TokenLimit | None = None
    max_completion_tokens: TokenLimit | None = None
    stop: str | list[str] | None = None
    seed: Seed | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    repetition_penalty: Annotated[float, Field(gt=0.0, le=100.0)] | None = None
    n: Annotated[int, Within(1, INT32_MAX)] | None = None
    stream: bool | None = None
    response_format: dict[str, Any] | None = None
    """Structured output: `{"type": "json_schema", "json_schema": {"schema"}}` or `json_object` is the engine's
    constrained decoding (`server.turns.completions.response_schema`); `text` is none."""
    stream_options: StreamOptions | None = None
    logprobs: bool | None = None
    top_logprobs: Annotated[int, Within(0, 20)] | None = None
    return_token_ids: bool = False
    """tito's extension (the SDK's `extra_body`): each streamed chunk carries the ids it covers and their logprobs."""
    chat_template_kwargs: JsonObject | None = None


class SessionRequest(RequestModel):
    """`POST /sessions`: every field optional; the launch options fill the rest."""

    model_config = ConfigDict(extra="forbid")

    trajectory: Literal["linear", "tree"] | None = None
    """None: the server's `--trajectory`."""
    chat_template_kwargs: JsonObject | None = None
    allowed_append_roles: list[str] | None = None
    ttl_seconds: Annotated[float, Field(gt=0, le=10 * 365 * 86400)] | None = None
    """Seconds idle before the session expires; at most ten years (never above the server's `--session-ttl`)."""
    max_nodes: Annotated[int, Within(1, INT32_MAX)] | None = None
    """Tree sessions: the most generations kept; None: the server's `--max-nodes`."""
    strict_append_only: bool | None = None
    """Tree sessions: refuse any branch instead of growing one; None: the server's `--strict-append-only`."""
    matcher: Literal["strict", "harness"] | None = None
    """How a resent conversation must match the stored one (`tito.matching`); None: the server's `--matcher`."""
    group_id: str | None = Field(default=None, min_length=1)
    """Carried on every sample of the session (GRPO groups one prompt's sessions); the samples body may set it."""
    hosted_tools: Literal["drop", "refuse"] | None = None
    """What a Responses request's hosted tools (`web_search`, ...) get; None: the server's `--hosted-tools`."""


class SamplesRequest(RequestModel):
    """`POST /sessions/{id}/samples`: optional cut, rewards, group and the trainer's metadata, and the format."""

    model_config = ConfigDict(extra="forbid")

    max_seq_len: TokenLimit | None = None
    prompt_length: TokenLimit | None = None
    """A trainer's prompt budget (verl's `rollout.prompt_length`): a longer prompt is refused (422)."""
    response_length: TokenLimit | None = None
    """A trainer's response budget (verl's `rollout.response_length`): whole turns kept while they fit."""
    reward: float | None = None
    """Every sample's reward unless `rewards` names its last turn's response id."""
    rewards: dict[str, float] | None = None
    """Rewards by response id (the `id` of a reply): a sample gets its last turn's; each span gets its own."""
    group_id: str | None = Field(default=None, min_length=1)
    """Overrides the session's `group_id` on these samples."""
    metadata: JsonObject | None = None
    format: str | None = None
    """`json` (default), `safetensors`, or a trainer's (`tito.trajectory.exports`): `verl`, `skyrl`, `prime-rl`,
    `verifiers`, `trl`, `miles`, `areal`, `nemo_gym`."""
    conversation_kinds: list[Literal["main", "subagent", "side", "compaction"]] | None = Field(
        default=None, min_length=1
    )
    """Only the conversations of these kinds (`["main"]`: the main loop only); default: every conversation."""
    end: bool = False
    """The agent is done with the session: tito releases it at the router in front of the engines (the session
    stays readable until deleted or expired)."""
