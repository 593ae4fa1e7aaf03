"""DeepSeek V3.2 and V4: no chat template ships with them, so tito renders them with its own encoders.

Boundary fact (both): the model stops at `<｜end▁of▁sentence｜>` and the encoders write nothing after
it before the next message (Junction.PLAIN); tool results, a user, a system note or an injected
assistant all start right after it. Pinned `drop_thinking=False` keeps every assistant's reasoning,
so a turn's render depends only on what follows the last assistant (V3.2: RenderContext.STUB) or on
that assistant's tool calls too, which order V4's tool results (RenderContext.LAST_MESSAGE); pinned by
tests/families/deepseek/test_families.py::test_suffix_after_the_declared_context_equals_full_render.

`thinking`, `thinking_mode` and `enable_thinking` are one switch (see common.effective_thinking).

Imports from tito: families.base, families.deepseek (its modules), families.engine_recipe.
"""

from __future__ import annotations

import dataclasses

from tito.families.base import VALID_APPEND_ROLES, Family, FixedTemplate, Junction, RenderContext, ToolArguments
from tito.families.deepseek import v4, v32
from tito.families.deepseek.common import (
    ASSISTANT,
    ENCODER_KWARGS,
    EOS,
    PINNED_KWARGS,
    SPECIAL_TOKENS,
    THINK_END,
    THINK_START,
    effective_thinking,
    merge_thinking_kwargs,
)
from tito.families.engine_recipe import DEEPSEEK_EAGLE, EngineRecipe, ParserNames

DEEPSEEKV32 = Family(
    name="deepseekv32",
    summary="DeepSeek-V3.2 (and V3.2-Exp, V3.2-Speciale): Python-encoded prompts, DSML function_calls",
    fixed_template=FixedTemplate(None, PINNED_KWARGS, VALID_APPEND_ROLES),
    junction=Junction.PLAIN,
    end_of_turn=EOS,
    stop_tokens=(EOS,),
    assistant_opener=ASSISTANT,
    output_format="deepseekv32",
    special_tokens=SPECIAL_TOKENS,
    tool_arguments=ToolArguments.OBJECT,
    thinking_kwarg="thinking",
    encoder=v32.encode,
    deviations=v32.DEVIATIONS,
    context=RenderContext.STUB,
    continuation_prompts=("\n\n" + THINK_START, "\n\n" + THINK_END),
    encoder_kwargs=ENCODER_KWARGS,
    engine_recipe=EngineRecipe(
        ParserNames("deepseek-v3", "deepseekv32"),
        ParserNames("deepseek_v3", "deepseek_v32"),
        speculative=DEEPSEEK_EAGLE,
        engine_renders_itself=True,
    ),
)

DEEPSEEKV4 = dataclasses.replace(
    DEEPSEEKV32,
    name="deepseekv4",
    summary="DeepSeek-V4 (V4-Pro, V4-Flash): Python-encoded prompts, tool results folded into user turns",
    output_format="deepseekv4",
    encoder=v4.encode,
    deviations=v4.DEVIATIONS,
    context=RenderContext.LAST_MESSAGE,
    continuation_prompts=(),
    encoder_kwargs=(*ENCODER_KWARGS, *v4.EFFORT_KWARGS),
    builtin_tokenizer="deepseekv4",
    engine_recipe=EngineRecipe(
        ParserNames("deepseek-v4", "deepseekv4"), ParserNames("deepseek_v4", "deepseek_v4"), engine_renders_itself=True
    ),
)
"""Same markers and junction as V3.2; its own encoder, and tool results open a user turn (no continuation)."""

FAMILIES = (DEEPSEEKV32, DEEPSEEKV4)

__all__ = ["DEEPSEEKV4", "DEEPSEEKV32", "FAMILIES", "effective_thinking", "merge_thinking_kwargs"]
