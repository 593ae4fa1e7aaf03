"""Cross-check against SGLang's tool-call detectors (llm-router-utils) on the same rendered completions.

Both parse the family's own render; they must agree on every call's name and arguments (as JSON
values) and on the content up to surrounding whitespace. Documented differences, not bugs:
- SGLang returns content with the template's whitespace around it ("\\n\\nSure.\\n\\n"); tito strips what
  the family's render adds, so a parsed message re-renders to the same text.
- SGLang re-serialises JSON-format arguments; tito keeps the model's exact text (compared as values here).
- SGLang's parameter-format detectors (MiniMax, Qwen3-Coder, GLM) strip whitespace around string values,
  and Qwen3-Coder reads a string parameter written `null` (MiniMax also `NIL`/`None`) as null; tito keeps a
  string parameter's text as the template wrote it. String values are compared stripped, those spellings as
  None, here.
- SGLang parses text, so a literal `<tool_call>` spelled with ordinary tokens is a call to it; tito decides
  by token id (tests/parsing/test_parse_completion.py, literal_tag_in_content).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from tests.parsing.cases import TOOLS, assistant_messages, case_names, get_case, render_completion

NO_DETECTORS = "SGLang's detectors: pip install --no-deps llm-router-utils, then partial-json-parser"
sglang = pytest.importorskip("llm_router_utils.sglang.srt.function_call.function_call_parser", reason=NO_DETECTORS)
protocol = pytest.importorskip("llm_router_utils.sglang.srt.entrypoints.openai.protocol", reason=NO_DETECTORS)

DETECTORS = {
    "qwen3_json": "qwen25",
    "qwen3_xml": "qwen3_coder",
    "glm47": "glm47",
    "kimi": "kimi_k2",
    "minimax": "minimax-m2",
    "deepseekv32": "deepseekv32",
    "deepseekv4": "deepseekv4",
}
CROSS_CHECKED = [name for name in case_names() if get_case(name).family.output_format in DETECTORS]


@pytest.mark.parametrize("name", CROSS_CHECKED)
def test_tito_and_sglang_read_the_same_calls_and_content(name: str) -> None:
    case = get_case(name)
    tools = [protocol.Tool(**tool) for tool in TOOLS]
    detector_class = sglang.FunctionCallParser.ToolCallParserEnum[DETECTORS[case.family.output_format]]

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(assistant_messages(case))
    def agree(message: dict) -> None:
        completion = render_completion(case, message)
        ours = case.tito.parse_completion(completion.completion_ids, completion.prompt_ids, TOOLS)
        after_reasoning = completion.text.split("</think>", 1)[1]
        for stop in case.family.stop_tokens:
            after_reasoning = after_reasoning.replace(stop, "")
        theirs = detector_class().detect_and_parse(after_reasoning, tools)
        our_calls = [(c["function"]["name"], c["function"]["arguments"]) for c in ours.message.get("tool_calls", [])]
        their_calls = [(call.name, call.parameters) for call in theirs.calls]
        assert [_comparable(*call) for call in our_calls] == [_comparable(*call) for call in their_calls]
        assert ours.message["content"].strip() == theirs.normal_text.strip()

    agree()


def _comparable(name: str, arguments: str) -> tuple[str, object]:
    """A call as values, with string arguments normalised the way SGLang's detectors differ (see above)."""
    values = json.loads(arguments)
    if isinstance(values, dict):
        values = {key: _normalised(value) for key, value in values.items()}
    return name, values


def _normalised(value: object) -> object:
    if isinstance(value, str):
        return None if value.strip().lower() in ("null", "nil", "none") else value.strip()
    return value
