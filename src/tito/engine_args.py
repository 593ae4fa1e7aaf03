"""`tito engine-args`: the launch line that makes SGLang or vLLM serve a family the way tito renders and parses it.

The fixed template, its pinned kwargs, the engine's reasoning and tool-call parsers for the family and the parallel
layout, under each engine's own option names, so nobody copies flags by hand and finds the drift at training time.
The facts come from the family (`Family.engine_recipe`, `Family.fixed_template`); this module only spells them.
Option names are the engines' own: SGLang 0.5.23 derives each from its field name (`tp_size` -> `--tp-size`,
`srt/arg_groups/arg_utils.py`), vLLM 0.32 from its `vllm serve` parser (tests/test_engine_args.py reads the installed
parser where vLLM is installed). vLLM has no expert-parallel size: `--enable-expert-parallel` makes EP = TP x DP.

Imports from tito: errors, families.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tito.errors import ConfigurationError
from tito.families.base import Family
from tito.families.engine_recipe import SpeculativeRecipe

ENGINES = ("sglang", "vllm")
MODEL_PLACEHOLDER = "<model-path>"
DRAFT_MODEL_PLACEHOLDER = "<draft-model-path>"
DEFAULT_PORTS = {"sglang": 30000, "vllm": 8000}
STREAM_IDS = 8
"""Ids per streamed event asked of the engine (`tito serve --engine-stream-ids`'s default): SGLang takes it per
request from tito; vLLM only at launch, as `--stream-interval`. Both send the first id and the finish at once. An
event per id costs tito a wake-up and a read per id (~40 us each, benchmarks/RESULTS.md); at 8 a 200-id reply is ~26
events, which tito's 50 ms stream interval groups further."""


@dataclass(frozen=True)
class ParallelSizes:
    """Tensor, data, pipeline and expert parallel sizes (1: that kind of parallelism is off)."""

    tp: int = 1
    dp: int = 1
    pp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "dp", "pp", "ep"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"--{name} must be at least 1, not {getattr(self, name)}")


@dataclass(frozen=True)
class EngineLaunch:
    """One engine's launch command for a family, and what the user should know about it."""

    engine: str
    family: str
    argv: tuple[str, ...]
    notes: tuple[str, ...]

    def command_line(self) -> str:
        return shlex.join(self.argv)

    def as_json(self) -> dict[str, Any]:
        return {"engine": self.engine, "family": self.family, "argv": list(self.argv), "notes": list(self.notes)}


def engine_launch(
    family: Family,
    engine: str,
    *,
    model: str = MODEL_PLACEHOLDER,
    sizes: ParallelSizes = ParallelSizes(),
    speculative: bool = False,
    chat_template_kwargs: Mapping[str, Any] | None = None,
    host: str = "127.0.0.1",
    port: int | None = None,
    draft_model: str = DRAFT_MODEL_PLACEHOLDER,
) -> EngineLaunch:
    """The command that serves `model` with `engine` (`sglang` or `vllm`) exactly as tito renders `family`."""
    if engine not in ENGINES:
        raise ConfigurationError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    recipe = family.engine_recipe
    if speculative and recipe.speculative is None:
        raise ConfigurationError(f"family {family.name!r} declares no speculative recipe; drop --speculative")
    kwargs = {**family.fixed_template.extra_kwargs, **(chat_template_kwargs or {})}
    notes: list[str] = []
    if engine == "sglang":
        argv = ["python", "-m", "sglang.launch_server", "--model-path", model]
    else:
        argv = ["vllm", "serve", model]
    argv += ["--host", host, "--port", str(port if port is not None else DEFAULT_PORTS[engine])]
    argv += _template_args(family, notes)
    if kwargs:
        argv += ["--default-chat-template-kwargs", json.dumps(kwargs, sort_keys=True, separators=(",", ":"))]
    argv += _parser_args(family, engine, notes)
    argv += _parallel_args(engine, sizes)
    if speculative and recipe.speculative is not None:
        argv += _speculative_args(engine, recipe.speculative, draft_model)
        notes.append(f"speculative recipe: {recipe.speculative.source}")
    if engine == "vllm":
        argv += ["--enable-prompt-tokens-details", "--stream-interval", str(STREAM_IDS)]
        notes.append("--enable-prompt-tokens-details reports cached prompt tokens, which tito records per turn")
        notes.append(
            f"--stream-interval {STREAM_IDS} streams an event per {STREAM_IDS} ids (the first and the last at once): "
            "an event per id costs tito a wake-up each (SGLang is asked per request, tito serve --engine-stream-ids)"
        )
    if family.thinking_kwarg is not None and family.thinking_kwarg not in kwargs:
        notes.append(
            f"thinking follows the template's default; pass --chat-template-kwargs '{{\"{family.thinking_kwarg}\": "
            "true}' to serve it on, so the engine's reasoning parser separates the reasoning"
        )
    notes.append(_endpoint_note(engine))
    return EngineLaunch(engine, family.name, tuple(argv), tuple(notes))


def _template_args(family: Family, notes: list[str]) -> list[str]:
    if family.fixed_template.path is not None:
        return ["--chat-template", str(family.fixed_template.path)]
    if family.engine_recipe.engine_renders_itself:
        notes.append(
            f"{family.name} has no jinja template: the engine renders the checkpoint with its own built-in encoder; "
            "tito's encoder equals the official one except for the deviations in docs/families.md"
        )
    else:
        notes.append("the default family serves the checkpoint's own chat template: no --chat-template")
    return []


def _parser_args(family: Family, engine: str, notes: list[str]) -> list[str]:
    parsers = family.engine_recipe.parsers(engine)
    args: list[str] = []
    if parsers.reasoning is not None:
        args += ["--reasoning-parser", parsers.reasoning]
    if parsers.tool_call is not None:
        if engine == "vllm":
            args += ["--enable-auto-tool-choice"]
        args += ["--tool-call-parser", parsers.tool_call]
    if parsers.reasoning is None and parsers.tool_call is None:
        notes.append(f"no parser names are known for {family.name!r}: add the engine's own if its chat API is used")
    return args


def _parallel_args(engine: str, sizes: ParallelSizes) -> list[str]:
    if engine == "sglang":
        names = {"tp": "--tp-size", "dp": "--dp-size", "pp": "--pp-size", "ep": "--ep-size"}
        return [
            arg for key, flag in names.items() if getattr(sizes, key) > 1 for arg in (flag, str(getattr(sizes, key)))
        ]
    args: list[str] = []
    for key, flag in {
        "tp": "--tensor-parallel-size",
        "dp": "--data-parallel-size",
        "pp": "--pipeline-parallel-size",
    }.items():
        if getattr(sizes, key) > 1:
            args += [flag, str(getattr(sizes, key))]
    if sizes.ep > 1:
        if sizes.ep != sizes.tp * sizes.dp:
            raise ConfigurationError(
                f"vLLM's expert-parallel size is TP x DP ({sizes.tp} x {sizes.dp} = {sizes.tp * sizes.dp}), "
                f"so --ep {sizes.ep} cannot be served; give --ep {sizes.tp * sizes.dp} or change --tp/--dp"
            )
        args.append("--enable-expert-parallel")
    return args


def _speculative_args(engine: str, recipe: SpeculativeRecipe, draft_model: str) -> list[str]:
    if engine == "sglang":
        return [
            "--speculative-algorithm", recipe.algorithm,
            "--speculative-draft-model-path", draft_model,
            "--speculative-num-steps", str(recipe.num_steps),
            "--speculative-eagle-topk", str(recipe.eagle_topk),
            "--speculative-num-draft-tokens", str(recipe.num_draft_tokens),
        ]  # fmt: skip
    config = {"method": recipe.algorithm.lower(), "model": draft_model, "num_speculative_tokens": recipe.num_steps}
    return ["--speculative-config", json.dumps(config, separators=(",", ":"))]


def _endpoint_note(engine: str) -> str:
    if engine == "sglang":
        return "tito calls POST /generate (input_ids in, output ids and logprobs out) and /abort_request"
    return "tito calls POST /v1/completions with a token-id prompt (return_token_ids, logprobs)"
