"""The public names `import tito` gives: the matchers an agent harness picks between are among them."""

from __future__ import annotations

import tito


def test_loose_matcher_accepts_re_serialised_arguments_that_strict_refuses() -> None:
    stored = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a":1,"b":2}'}}]}  # fmt: skip
    resent = {**stored, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"b": 2, "a": 1}'}}]}  # fmt: skip
    assert tito.strict_message_matches(stored, resent) == "tool_calls[0].function.arguments"
    assert tito.loose_tool_call_message_matches(stored, resent) is None
    assert {"strict_message_matches", "loose_tool_call_message_matches"} <= set(tito.__all__)


def test_the_harness_matcher_builds_the_prompt_from_the_stored_ids_whatever_the_resend_dropped() -> None:
    """A library harness picks the policy the server defaults to: the resend lacks the reasoning and re-spells the
    arguments, and the prompt is the one the exact resend gives (the stored ids, nothing re-rendered)."""
    tt = tito.get_tito_tokenizer(tito.load_tokenizer("qwen3"), "qwen3", matcher=tito.harness_message_matches)
    messages = [{"role": "user", "content": "add 1 and 2"}]
    prompt = tt.merge_tokens([], messages, [])
    text = '<think>\nUse add.\n</think>\n\n<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>'
    sampled = tt.tokenizer.encode(text + "<|im_end|>", add_special_tokens=False)
    reply = tt.parse_completion(sampled, prompt).message
    stored, stored_ids = [*messages, reply], [*prompt, *sampled]
    call = reply["tool_calls"][0]
    resent = {"role": "assistant", "content": None, "tool_calls": [
        {**call, "id": "mine", "function": {"name": "add", "arguments": '{"a":1,"b":2}'}}]}  # fmt: skip
    answer = {"role": "tool", "content": "3"}
    exact = tt.merge_tokens(stored, [*stored, {**answer, "tool_call_id": call["id"]}], stored_ids)
    assert tt.merge_tokens(stored, [*messages, resent, {**answer, "tool_call_id": "mine"}], stored_ids) == exact
    assert "harness_message_matches" in tito.__all__
