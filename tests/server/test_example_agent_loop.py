"""examples/agent_loop_server.py runs its tool loop against a real server and gets a sample back."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.server.conftest import Server
from tito.tokenizer_loading import LocalTokenizer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_loop_server.py"


def test_the_example_agent_calls_the_tool_and_collects_the_sample(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    spec = importlib.util.spec_from_file_location("agent_loop_server", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    call = '<tool_call>\n{"name": "add", "arguments": {"a": 17, "b": 25}}\n</tool_call><|im_end|>'
    server.engine.queue(qwen3_tokenizer.encode(call, add_special_tokens=False),
                        qwen3_tokenizer.encode("It is 42.<|im_end|>", add_special_tokens=False))  # fmt: skip
    calls = len(server.engine.requests)
    sample = example.run(server.url, None, 4)
    assert len(server.engine.requests) == calls + 2
    assert "42" in qwen3_tokenizer.decode(list(server.engine.requests[-1].prompt_ids))  # the tool result went in
    assert sample["status"] == "completed" and sample["metadata"]["num_turns"] == 2
