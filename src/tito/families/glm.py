"""GLM family: GLM-4.7, GLM-4.7-Flash and GLM-5 (GLM-5 renders identically; its template differs in whitespace
control only).

Boundary fact: GLM has no end-of-turn token. Each message is `<|role|>` + text with nothing between turns, and the
model ends its turn by sampling the opener of the next message: `<|observation|>` after a tool call, `<|user|>`
after an answer (`<|endoftext|>` is the third stop token). So the stored ids end with a stop token that is also an
opener, but not necessarily the opener of the message that really follows: a model that stopped on
`<|observation|>` may be followed by a user or system message, and one that stopped on `<|user|>` by a tool result.
The junction drops that one trailing id and the appended render brings the real opener
(Junction.STOP_IS_NEXT_OPENER, `trailing_ids_dropped == 1`); pinned by
tests/families/test_glm.py::test_merge_tokens_equals_the_full_render_whatever_stop_token_was_sampled.

All four append roles render as in the official template: a mid-session system message is a `<|system|>` turn,
and an injected assistant is a whole `<|assistant|>` turn closed, like every GLM turn, by the next opener (here
the generation prompt's `<|assistant|>`), so appended assistants need no end token GLM does not have.

Evidence: shared/reference/templates/glm-4.7.jinja and glm-5.jinja (renders `<|observation|>` before the first
of consecutive tool results and nothing after a turn); the published GLM-4 stop ids 151329/151336/151338 are
`<|endoftext|>`, `<|user|>`, `<|observation|>`.

Imports from tito: families.base, families.deviations, families.engine_recipe.
"""

from __future__ import annotations

from tito.families.base import VALID_APPEND_ROLES, Family, FixedTemplate, Junction, ToolArguments
from tito.families.deviations import VERBATIM_ASSISTANT_CONTENT
from tito.families.engine_recipe import EngineRecipe, ParserNames

GLM47 = Family(
    name="glm47",
    summary="GLM-4.7, GLM-4.7-Flash and GLM-5 (zai-org): `<|role|>` turns, the stop token opens the next message",
    fixed_template=FixedTemplate("glm47.jinja", {"clear_thinking": False}, VALID_APPEND_ROLES),
    junction=Junction.STOP_IS_NEXT_OPENER,
    end_of_turn="<|user|>",
    stop_tokens=("<|user|>", "<|observation|>", "<|endoftext|>"),
    assistant_opener="<|assistant|>",
    output_format="glm47",
    turn_openers=("<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"),
    special_tokens=(
        "[gMASK]",
        "<sop>",
        "<|system|>",
        "<|user|>",
        "<|assistant|>",
        "<|observation|>",
        "<|endoftext|>",
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        "<arg_key>",
        "</arg_key>",
        "<arg_value>",
        "</arg_value>",
        "<tool_response>",
        "</tool_response>",
    ),
    tool_arguments=ToolArguments.OBJECT,
    official_template="glm-4.7.jinja",
    stop_after_tool_calls="<|observation|>",
    engine_recipe=EngineRecipe(ParserNames("glm45", "glm47"), ParserNames("glm45", "glm47")),
    deviations=(
        "reasoning of every assistant is kept unless clear_thinking is true (official: kept only with "
        "clear_thinking=false, otherwise dropped before the last user message), so appending a user turn never "
        "rewrites history; with clear_thinking=true the official behaviour returns",
        "with thinking on and reasoning kept, an assistant with empty reasoning renders `<think></think>` "
        "(official: `</think>`), the text it was sampled after the `<think>` generation prompt, so the prompt the "
        "model saw is a prefix of its rendered turn; with thinking off it stays `</think>`, the thinking-off prompt",
        "null content renders as empty (official: the text `None`, e.g. for an OpenAI tool-call assistant whose "
        "content is null), so a tool-call turn renders as the model sampled it",
        "a text part in a list-valued tool content renders its text (official: the part's Python repr); other "
        "list items render as official (`output`, else the item)",
        "a message with an unknown role raises (official: silently dropped), so no content disappears",
        "tool-call arguments given as JSON text raise with a clear message (official: fails on `.items()`); tito "
        "decodes them to an object first (ToolArguments.OBJECT)",
        VERBATIM_ASSISTANT_CONTENT,
    ),
)

FAMILIES = (GLM47,)
