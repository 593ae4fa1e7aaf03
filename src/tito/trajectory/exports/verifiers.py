"""verifiers: one `Trace` record per sample (verifiers 0.4.0, `verifiers.v1.trace.Trace`, read by trainers as its
`WireTrace`), with the conversation's messages: what prime-rl's orchestrator ingests from environments.

A Trace is a message graph: each `MessageNode` holds one message and the ids it adds to the sequence, and a
root-to-leaf path (a `Branch`) is a training sample, its ids the nodes' `token_ids` joined. A tito sample is one
path, so its nodes are its turns in order: each turn's appended messages (`TurnSpan.messages`), then its reply
(`sampled: true`). A turn's appended ids (`tokens[prompt_start:start]`: the junction, the messages, the
generation prompt) all go on its last appended message's node (tito keeps no finer split; earlier messages of
the same turn carry none; a turn that appended no message puts them before its reply's), and its sampled ids on
the reply's node; each node's `mask` is the sample's loss mask over its ids and its `logprobs` those of its masked
ids, so `Branch.token_ids`, `sampled_mask` and `logprobs` equal the sample's arrays. Messages take verifiers'
shapes (a tool call is `{id, name, arguments}`; `developer` is a system message).

Beside the graph: `calls` (one `ModelCall` per turn: its reply's node, sampling, normalised finish reason, usage
in ids, request-to-commit time), `rewards` (`{"reward": {"score": r}}`; `{"reward": null}` where no reward was
posted, verifiers' "not scored"), `task` (`key`: the group id, the task identity a GRPO-style orchestrator
groups rollouts by; `data.id`: the session id), `agent.config.model`, `is_completed`, `ok` and
`stop_condition` (`max_total_tokens` for a sample cut by tito's budgets, so `Trace.is_truncated` holds), and
`timing`. Advantages are left unset (`null`): prime-rl's orchestrator computes them from the reward. tito's own
facts ride in `info["tito"]` (the Trace's scratch space; a key at the top level would be dropped by its
validation).

Imports nothing from tito but trajectory.codec, trajectory.exports.common and trajectory.samples.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tito.trajectory.codec import SampleDecodeError, sample_facts
from tito.trajectory.exports.common import TITO_KEY, JsonRecord, facts_in, rebuilt
from tito.trajectory.samples import Sample, TurnSpan

NAME = "verifiers"
UPSTREAM = "verifiers 0.4.0: verifiers.v1.trace.Trace (WireTrace), MessageNode per message, a Branch per sample"
TRACE_VERSION = 1
REWARD_NAME = "reward"
FINISH_REASONS = ("stop", "length", "tool_calls")
"""The finish reasons a verifiers `ModelCall` names; any other is recorded as null."""
STOP_CONDITIONS = {"completed": "agent_completed", "truncated": "max_total_tokens", "aborted": "aborted"}


def export(samples: Sequence[Sample]) -> list[JsonRecord]:
    return [_trace(sample) for sample in samples]


def _trace(sample: Sample) -> JsonRecord:
    session = sample.metadata.get("session_id")
    if not sample.spans or sample.spans[-1].assistant is None:
        raise SampleDecodeError(
            f"verifiers: session {session}'s sample has no messages (written before tito kept them)"
        )
    nodes: list[JsonRecord] = []
    calls: list[JsonRecord] = []
    for span in sample.spans:
        nodes += _turn_nodes(sample, span, len(nodes))
        calls.append(_call(sample, span, len(nodes) - 1))
    first, last = sample.spans[0], sample.spans[-1]
    started = first.request_timestamp or first.completion_timestamp
    return {
        "version": TRACE_VERSION,
        "id": last.response_id,
        "task": {
            "type": "tito",
            "data": {"id": session if isinstance(session, str) else None},
            "key": sample.group_id,
        },
        "agent": {"config": {"model": _model(sample)}},
        "nodes": nodes,
        "calls": calls,
        "rewards": {REWARD_NAME: None if sample.reward is None else {"score": sample.reward, "weight": 1.0}},
        "info": {TITO_KEY: sample_facts(sample)},
        "is_completed": True,
        "ok": sample.status != "aborted",
        "stop_condition": STOP_CONDITIONS.get(sample.status, sample.status),
        "timing": {"start": started, "agent": {"start": started, "end": last.completion_timestamp}},
    }


def _turn_nodes(sample: Sample, span: TurnSpan, first: int) -> list[JsonRecord]:
    """The turn's appended messages then its reply, each chained to the node before. The turn's appended ids go on
    its last appended message, or before the reply's sampled ids where it appended none."""
    at = span.request_timestamp or span.completion_timestamp
    appended = [(verifiers_message(message), False, at) for message in span.messages]
    reply = (verifiers_message(span.assistant or {}), True, span.completion_timestamp)
    if appended:
        held = [(span.prompt_start, span.prompt_start)] * (len(appended) - 1) + [(span.prompt_start, span.start)]
        ranges = [*held, (span.start, span.end)]
    else:
        ranges = [(span.prompt_start, span.end)]
    return [
        _node(sample, first + index, message, sampled, timestamp, *ranges[index])
        for index, (message, sampled, timestamp) in enumerate([*appended, reply])
    ]


def _node(
    sample: Sample, index: int, message: JsonRecord, sampled: bool, timestamp: float, lo: int, hi: int
) -> JsonRecord:
    """A `MessageNode` holding `tokens[lo:hi]`: `mask` the loss mask there, `logprobs` over its masked ids."""
    mask = [bool(value) for value in sample.loss_mask[lo:hi]]
    logprobs = sample.rollout_logprobs[lo:hi].tolist()
    return {"parent": index - 1 if index else None, "message": message, "sampled": sampled, "timestamp": timestamp,
            "token_ids": sample.tokens[lo:hi].tolist(), "mask": mask,
            "logprobs": [value for value, trained in zip(logprobs, mask, strict=True) if trained]}  # fmt: skip


def _model(sample: Sample) -> str | None:
    model = sample.metadata.get("model") or sample.metadata.get("engine")
    return model if isinstance(model, str) else None


def _call(sample: Sample, span: TurnSpan, node: int) -> JsonRecord:
    return {
        "node": node,
        "model": _model(sample),
        "sampling": dict(span.sampling),
        "finish_reason": span.finish_reason if span.finish_reason in FINISH_REASONS else None,
        "usage": {"prompt_tokens": span.start, "completion_tokens": span.end - span.start},
        "time": {"start": span.request_timestamp or span.completion_timestamp, "end": span.completion_timestamp},
    }


def verifiers_message(message: Mapping[str, Any]) -> JsonRecord:
    """A stored chat message in verifiers' shape (`verifiers.v1.types.Message`)."""
    role = message.get("role")
    if role in ("system", "developer", "user"):
        return {"role": "user" if role == "user" else "system", "content": _content(message.get("content"))}
    if role == "tool":
        return {"role": "tool", "tool_call_id": str(message.get("tool_call_id", "")),
                "content": _content(message.get("content")), "name": message.get("name")}  # fmt: skip
    if role == "assistant":
        calls = [_tool_call(call) for call in message.get("tool_calls") or []]
        content = message.get("content")
        return {"role": "assistant", "content": None if content is None else _content(content),
                "reasoning_content": message.get("reasoning_content"), "tool_calls": calls or None}  # fmt: skip
    raise SampleDecodeError(f"verifiers: a message with role {role!r} has no verifiers type")


def _content(content: Any) -> Any:
    """Text stays text; content parts keep their text and image parts (verifiers' `ContentPart`s)."""
    if isinstance(content, list):
        parts = [part for part in content if isinstance(part, Mapping) and part.get("type") in ("text", "image_url")]
        if all(part.get("type") == "text" for part in parts):
            return "".join(str(part.get("text", "")) for part in parts)
        return [dict(part) for part in parts]
    return "" if content is None else str(content)


def _tool_call(call: Mapping[str, Any]) -> JsonRecord:
    function = call.get("function") or {}
    arguments = function.get("arguments", "")
    return {"id": str(call.get("id", "")), "type": "function", "name": str(function.get("name", "")),
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}  # fmt: skip


def restore(records: Sequence[Mapping[str, Any]]) -> list[Sample]:
    samples = []
    for index, record in enumerate(records):
        facts = facts_in(record.get("info") or {}, f"verifiers Trace {index}'s info")
        tokens: list[int] = []
        mask: list[bool] = []
        logprobs: list[float] = []
        for node in record["nodes"]:
            sampled = iter(node["logprobs"])
            tokens += node["token_ids"]
            mask += node["mask"]
            logprobs += [next(sampled) if flag else 0.0 for flag in node["mask"]]
        reward = (record.get("rewards") or {}).get(REWARD_NAME)
        samples.append(
            rebuilt({**facts, "reward": None if reward is None else reward["score"]}, tokens, mask, logprobs)
        )
    return samples
