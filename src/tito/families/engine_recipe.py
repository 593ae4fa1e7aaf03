"""What an inference engine must be told to serve a family the way tito renders and parses it, as data.

The fixed template only helps if the engine serves the same template with the parsers that match the family's
output format. Each family declares here, once, the reasoning and tool-call parser names SGLang and vLLM register
for it, and (DeepSeek V3.2) a speculative-decoding recipe; `tito.engine_args` turns these facts into a launch line.
Parser names are the engines' own registry keys: SGLang 0.5.23 (`srt/parser/reasoning_parser_names.py`,
`srt/function_call/parser_names.py`), vLLM 0.32 (`vllm/reasoning/__init__.py`, `vllm/tool_parsers/__init__.py`);
tests/test_engine_args.py pins them against those lists.

Imports nothing from tito.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ParserNames:
    """One engine's registry keys for a family's reasoning and tool-call parsers (None: the engine has none)."""

    reasoning: str | None = None
    tool_call: str | None = None


@dataclass(frozen=True)
class SpeculativeRecipe:
    """A fixed EAGLE recipe: the draft model is the user's, the shape of the speculation is pinned here."""

    algorithm: str
    """SGLang's `--speculative-algorithm` value, e.g. `EAGLE`."""
    num_steps: int
    """Autoregressive drafting depth (SGLang `--speculative-num-steps`; vLLM `num_speculative_tokens`)."""
    eagle_topk: int
    """Branching per drafting step (SGLang `--speculative-eagle-topk`; 1 is a chain, the only shape vLLM runs)."""
    num_draft_tokens: int
    """Tokens verified per step (SGLang `--speculative-num-draft-tokens`)."""
    source: str
    """Where the numbers come from."""


@dataclass(frozen=True)
class EngineRecipe:
    """A family's engine facts: parser names per engine and an optional speculative recipe."""

    sglang: ParserNames = ParserNames()
    vllm: ParserNames = ParserNames()
    speculative: SpeculativeRecipe | None = None
    engine_renders_itself: bool = False
    """The family has no jinja template (a Python encoder): the engine renders with its own built-in encoder for
    the checkpoint, which tito's encoder equals except for the family's declared deviations."""

    def parsers(self, engine: str) -> ParserNames:
        """The parser names `engine` (`sglang` or `vllm`) registers for the family."""
        if engine == "sglang":
            return self.sglang
        if engine == "vllm":
            return self.vllm
        raise ValueError(f"unknown engine {engine!r}: sglang or vllm")


DEEPSEEK_EAGLE = SpeculativeRecipe(
    algorithm="EAGLE",
    num_steps=2,
    eagle_topk=1,
    num_draft_tokens=3,
    source="the EAGLE chain miles' session verifier launches DeepSeek V3.2 with (steps 2, top-k 1, 3 draft tokens)",
)

NO_ENGINE_RECIPE = EngineRecipe()
"""A family with no engine facts (the `default` family: the checkpoint's own template, parsers unknown)."""
