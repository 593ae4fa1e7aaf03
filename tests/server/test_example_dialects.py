"""examples/dialects_server.py runs a streamed tool loop in each dialect against a real server; each session is
one sample of both turns."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.server.conftest import Server
from tito.tokenizer_loading import LocalTokenizer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dialects_server.py"


def test_the_example_runs_one_tool_loop_per_dialect_each_one_sample(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    spec = importlib.util.spec_from_file_location("dialects_server", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    call = qwen3_tokenizer.encode(
        '<think>\nUse the tool.\n</think>\n\n<tool_call>\n{"name": "add", "arguments": {"a": 17, "b": 25}}\n'
        "</tool_call><|im_end|>",
        add_special_tokens=False,
    )
    answer = qwen3_tokenizer.encode("<think>\nDone.\n</think>\n\nIt is 42.<|im_end|>", add_special_tokens=False)
    server.engine.queue(call, answer, call, answer)
    calls = len(server.engine.requests)
    samples = example.run(server.url, None, 4)
    assert len(server.engine.requests) == calls + 4
    assert "42" in qwen3_tokenizer.decode(list(server.engine.requests[-1].prompt_ids))  # the tool result went in
    for sample in samples.values():
        assert sample["status"] == "completed" and sample["metadata"]["num_turns"] == 2
        assert sum(sample["loss_mask"]) == len(call) + len(answer)
