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
