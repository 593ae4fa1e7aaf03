"""NeMo Gym: a rollout as NeMo Gym's `BaseVerifyResponse` (nemo-gym 0.4.0, `nemo_gym.base_resources_server`), its
items the `*ForTraining` Responses items NeMo RL trains on (`nemo_gym.openai_utils`).

One record per sample: `responses_create_params.input` is the first request's messages as Responses input items,
`response.output` every item after them in order: each turn's reply (a `reasoning` item for its thinking, a
`message` for its text, a `function_call` per tool call), then the messages the next request appended (a
`function_call_output` per tool result, a `message` per user or system message). The last item of each reply
carries NeMo Gym's `TokenIDLogProbMixin`, as NeMo Gym's own model server writes it: `prompt_token_ids` (every id
before the turn's sampled ids), `generation_token_ids` and `generation_log_probs` (the sampled ids and their
rollout logprobs); each turn's prompt is the previous turn's prompt and generation plus the observation ids, the
continuity NeMo RL checks. `reward` is the sample's (NeMo Gym requires one: a sample without is refused); tito's
other facts ride in `tito`, a key NeMo Gym's models ignore.

Imports nothing from tito but trajectory.codec, trajectory.exports.common and trajectory.samples.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tito.trajectory.codec import SampleDecodeError, sample_facts
from tito.trajectory.exports.common import TITO_KEY, JsonRecord, facts_in, rebuilt
from tito.trajectory.samples import Sample, SampleAssemblyError, TurnSpan

NAME = "nemo_gym"
UPSTREAM = ("nemo-gym 0.4.0: nemo_gym.base_resources_server.BaseVerifyResponse, its reply items the "
            "nemo_gym.openai_utils *ForTraining items (TokenIDLogProbMixin)")  # fmt: skip
TRAINING_KEYS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")


def export(samples: Sequence[Sample]) -> list[JsonRecord]:
    return [_record(sample) for sample in samples]


def _record(sample: Sample) -> JsonRecord:
    session = sample.metadata.get("session_id")
    if sample.reward is None:
        raise SampleAssemblyError(f"nemo_gym: session {session}'s sample has no reward; post `reward` or `rewards`")
    if not sample.spans or sample.spans[-1].assistant is None:
        raise SampleDecodeError(f"nemo_gym: session {session}'s sample has no messages (written before tito kept them)")
    output: list[JsonRecord] = []
    for index, span in enumerate(sample.spans):
        if index:
            output += [item for message in span.messages for item in input_items(message)]
        output += _reply_items(sample, span)
    last = sample.spans[-1]
    response = {"id": last.response_id, "created_at": last.completion_timestamp, "model": _model(sample),
                "object": "response", "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
                "tools": []}  # fmt: skip
    first_input = [item for message in sample.spans[0].messages for item in input_items(message)]
    return {"responses_create_params": {"input": first_input}, "response": response, "reward": sample.reward,
            TITO_KEY: sample_facts(sample)}  # fmt: skip


def _model(sample: Sample) -> str:
    model = sample.metadata.get("model") or sample.metadata.get("engine")
    return model if isinstance(model, str) else "tito"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def input_items(message: Mapping[str, Any]) -> list[JsonRecord]:
    """A request message as Responses items: a tool result is a `function_call_output`, an assistant the agent
    wrote is its reply items, any other a `message`."""
    role = message.get("role")
    if role == "tool":
        return [{"type": "function_call_output", "call_id": str(message.get("tool_call_id", "")),
                 "output": _text(message.get("content"))}]  # fmt: skip
    if role == "assistant":
        return assistant_items(message, "input")
    return [{"type": "message", "role": role, "content": _text(message.get("content"))}]


def assistant_items(message: Mapping[str, Any], rid: str) -> list[JsonRecord]:
    """An assistant message as Responses output items: reasoning, text, one function call per tool call."""
    items: list[JsonRecord] = []
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        items.append({"type": "reasoning", "id": f"rs_{rid}", "summary": [{"type": "summary_text", "text": reasoning}]})
    text = _text(message.get("content"))
    calls = message.get("tool_calls") or []
    if text or not calls:
        items.append({"type": "message", "id": f"msg_{rid}", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": text, "annotations": []}]})  # fmt: skip
    for call in calls:
        function = call.get("function") or {}
        arguments = function.get("arguments", "")
        items.append({"type": "function_call", "id": call.get("id"), "call_id": call.get("id"),
                      "name": function.get("name"), "status": "completed",
                      "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)})  # fmt: skip
    return items


def _reply_items(sample: Sample, span: TurnSpan) -> list[JsonRecord]:
    items = assistant_items(span.assistant or {}, span.response_id)
    items[-1].update({
        "prompt_token_ids": sample.tokens[: span.start].tolist(),
        "generation_token_ids": sample.tokens[span.start : span.end].tolist(),
        "generation_log_probs": sample.rollout_logprobs[span.start : span.end].tolist(),
    })  # fmt: skip
    return items


def restore(records: Sequence[Mapping[str, Any]]) -> list[Sample]:
    samples = []
    for index, record in enumerate(records):
        facts = facts_in(record, f"NeMo Gym record {index}")
        trained = [item for item in record["response"]["output"] if "generation_token_ids" in item]
        if not trained:
            raise SampleDecodeError(f"NeMo Gym record {index} has no item with generation_token_ids")
        tokens = list(trained[0]["prompt_token_ids"])
        mask, logprobs = [0] * len(tokens), [0.0] * len(tokens)
        for item in trained:
            gap = list(item["prompt_token_ids"][len(tokens) :])
            tokens += gap + list(item["generation_token_ids"])
            mask += [0] * len(gap) + [1] * len(item["generation_token_ids"])
            logprobs += [0.0] * len(gap) + list(item["generation_log_probs"])
        tail = int(facts["response_length"]) - (len(tokens) - len(trained[0]["prompt_token_ids"]))
        if tail > 0:
            raise SampleDecodeError(f"NeMo Gym record {index}: {tail} ids after the last reply are not in its items")
        samples.append(rebuilt({**facts, "reward": record["reward"]}, tokens, mask, logprobs))
    return samples
