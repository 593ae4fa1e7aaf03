"""What a model family is, as data: its fixed template, pinned kwargs, roles and junction rule.

A family is declared once, as a frozen value, and everything else (the CLI's choices, test
parameters, docs tables) derives from the registry. Construction fails on a role outside
VALID_APPEND_ROLES or a template file that does not exist, so a bad declaration never imports.

Imports nothing from tito but chat_message, errors and families.engine_recipe.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tito.chat_message import Message
from tito.errors import ConfigurationError
from tito.families.engine_recipe import NO_ENGINE_RECIPE, EngineRecipe

VALID_APPEND_ROLES: tuple[str, ...] = ("tool", "user", "system", "assistant")
"""The roles a request may append after the stored conversation: the single source of truth."""

TEMPLATES_DIR = Path(__file__).parent / "templates"

MessageEncoder = Callable[[Sequence[Message], "Sequence[Mapping[str, Any]] | None", bool, Mapping[str, Any]], str]
"""A Python chat encoder (DeepSeek): (messages, tools, add_generation_prompt, kwargs) -> prompt text."""


class Junction(enum.Enum):
    """How stored ids (the last prompt plus the sampled ids) meet the ids of appended messages.

    The engine stops on a stop token; what the template writes right after it differs by family.
    """

    PLAIN = "plain"
    """The stored ids end with the end-of-turn token and the template writes nothing after it (Kimi, DeepSeek)."""

    NEWLINE_AFTER_STOP = "newline_after_stop"
    """The model stops at the end-of-turn token; the template writes a `\\n` after it, which tito inserts (Qwen)."""

    STOP_IS_NEXT_OPENER = "stop_is_next_opener"
    """The stop token is also the next message's opener (GLM): the stored one is dropped, the appended render
    brings the opener of whatever role really follows."""

    @property
    def trailer(self) -> str:
        """Template text between the end-of-turn token and the next message."""
        return "\n" if self is Junction.NEWLINE_AFTER_STOP else ""

    @property
    def trailing_ids_dropped(self) -> int:
        """How many trailing stored ids a turn loses at the junction: the one number every consumer uses."""
        return 1 if self is Junction.STOP_IS_NEXT_OPENER else 0

    def kept_stored_ids(self, stored_ids: Sequence[int]) -> int:
        """How many of the stored ids the next prompt keeps verbatim (all but the dropped trailing ones)."""
        return len(stored_ids) - self.trailing_ids_dropped

    def closing_after(self, stop_token: str, end_of_turn: str, stop_closing: Mapping[str, str]) -> str | None:
        """The text tito writes (as prompt) after stored ids that end with `stop_token`, before the junction's own
        trailer; None when the family declares no way to continue after that token.

        The end-of-turn token needs nothing; a stop token the template never writes (Qwen's `<|endoftext|>`)
        gets its declared closing (`<|im_end|>`); STOP_IS_NEXT_OPENER drops whichever stop token was sampled.
        """
        if self is Junction.STOP_IS_NEXT_OPENER or stop_token == end_of_turn:
            return ""
        return stop_closing.get(stop_token)

    def anchor_prefix(self, end_of_turn: str) -> str:
        """Text encoded in front of the appended render so the tokenizer splits where it does in context; its
        first id is checked to be the end-of-turn token and dropped. Empty for STOP_IS_NEXT_OPENER, whose
        appended render starts with its own opener token."""
        return "" if self is Junction.STOP_IS_NEXT_OPENER else end_of_turn + self.trailer


class RenderContext(enum.Enum):
    """What a turn's appended messages are rendered after; decides that a turn's cost does not grow with history."""

    STUB = "stub"
    """A constant stub user + stub assistant, rendered once at construction: the family's appended render depends
    only on the previous message being an assistant (our fixed templates)."""

    LAST_MESSAGE = "last_message"
    """A stub user + the real last assistant: the appended render reads that assistant (e.g. its tool calls)."""

    FULL_HISTORY = "full_history"
    """The whole stored conversation: a checkpoint template we do not control (the default family). Its turn costs
    two renders of the history (the context, then with the appended messages): linear in the history, the only
    family whose turn cost grows (tests/test_tokenizer.py pins both renders)."""


class ToolArguments(enum.Enum):
    """How a format embeds tool-call arguments, which decides how tito hands them to the template."""

    JSON_TEXT = "json_text"
    """Arguments are JSON text in the prompt: a string is rendered verbatim (the model's own spelling)."""

    OBJECT = "object"
    """Arguments become per-parameter markup (XML formats): a JSON string is decoded to an object first."""


@dataclass(frozen=True)
class FixedTemplate:
    """The family's one chat template and the kwargs pinned for it.

    `template` is a file name under families/templates/ (None for Python-encoder families and for
    `default`, which uses the checkpoint's own template). `extra_kwargs` are constants a caller may
    repeat but never contradict. `supported_roles` are the append roles that render append-only
    and well-formed.
    """

    template: str | None
    extra_kwargs: Mapping[str, Any]
    supported_roles: tuple[str, ...]

    def __post_init__(self) -> None:
        unknown = [role for role in self.supported_roles if role not in VALID_APPEND_ROLES]
        if unknown:
            raise ConfigurationError(
                f"supported_roles {unknown} are not append roles; choose from {', '.join(VALID_APPEND_ROLES)}"
            )
        if self.template is not None and not (TEMPLATES_DIR / self.template).is_file():
            raise ConfigurationError(f"fixed template {self.template!r} does not exist in {TEMPLATES_DIR}")
        object.__setattr__(self, "extra_kwargs", MappingProxyType(dict(self.extra_kwargs)))

    @property
    def path(self) -> Path | None:
        return None if self.template is None else TEMPLATES_DIR / self.template

    def source(self) -> str:
        """The template text; only for jinja families."""
        if self.path is None:
            raise ConfigurationError("this family renders through a Python encoder, not a jinja template")
        return self.path.read_text(encoding="utf-8")


@dataclass(frozen=True)
class ProbeReport:
    """What the probe found for each append role of a checkpoint's template: None when the role appends
    cleanly after every probe history, else the reason it does not."""

    verdicts: Mapping[str, str | None]

    def describe(self, role: str) -> str:
        return self.verdicts.get(role) or "supported"


@dataclass(frozen=True)
class Family:
    """A model family's rendering contract."""

    name: str
    summary: str
    """Which checkpoints use it."""
    fixed_template: FixedTemplate
    junction: Junction
    end_of_turn: str
    """The token string that ends an assistant turn in the render and in the sampled ids. For
    STOP_IS_NEXT_OPENER families it is one of the stop tokens (each of which opens the next message)."""
    stop_tokens: tuple[str, ...]
    """Every token the engine stops on."""
    assistant_opener: str
    """The text that opens an assistant turn; every appended suffix ends in a generation prompt starting so."""
    output_format: str
    """Name of the completion parser (tito.parsing) for this family's output."""
    special_tokens: tuple[str, ...] = ()
    """Every marker the template emits that the tokenizer must keep atomic (one id each). Proxy tokenizers
    are built from it, and parsers find boundaries by these ids."""
    continuation_prompts: tuple[str, ...] = ()
    """Generation prompts that continue the assistant's own turn instead of opening one (DeepSeek V3.2 writes
    tool results inside the assistant span, then its think token)."""
    turn_openers: tuple[str, ...] = ()
    """STOP_IS_NEXT_OPENER families: the tokens that open a message; an appended render must start with one."""
    tool_arguments: ToolArguments = ToolArguments.JSON_TEXT
    thinking_kwarg: str | None = "enable_thinking"
    """The chat-template kwarg that switches thinking on and off, if the family has one."""
    official_template: str | None = None
    """The vendor's template this family derives from (file name in the reference data), for parity tests."""
    encoder: MessageEncoder | None = None
    """The Python encoder of a family that has no jinja template (DeepSeek)."""
    deviations: tuple[str, ...] = ()
    """Each way the fixed render differs from the official one, with its reason."""
    context: RenderContext = RenderContext.STUB
    """What appended messages are rendered after; the conformance matrix proves the choice exact."""
    stop_closing: Mapping[str, str] = field(default_factory=dict)
    """Stop tokens the template never writes at the end of a turn, each with the text tito writes after it (prompt,
    loss mask 0) to close the turn the way the template does (Qwen: `<|endoftext|>` -> `<|im_end|>`). A stop
    token that is neither the end of turn nor listed here cannot be continued (Junction.closing_after)."""
    stop_after_tool_calls: str | None = None
    """STOP_IS_NEXT_OPENER: the stop token the model samples after tool calls (GLM: `<|observation|>`), when it
    differs from `end_of_turn`."""
    encoder_kwargs: tuple[str, ...] = ()
    """The chat-template kwargs a Python encoder reads (a jinja template's are read from its syntax tree)."""
    builtin_tokenizer: str | None = None
    """The builtin real tokenizer (tito.load_tokenizer name) for this family; None: a proxy with its markers."""
    probed: bool = False
    """The template is the checkpoint's own and roles, junction and end of turn are found by probing it (the
    `default` family); a probed family renders after the full history (RenderContext.FULL_HISTORY)."""
    probe_report: ProbeReport | None = None
    """Per-role verdicts of the probe, once a probed family has been run on a checkpoint's template."""
    engine_recipe: EngineRecipe = NO_ENGINE_RECIPE
    """What SGLang and vLLM must be told to serve this family as tito renders and parses it (`tito engine-args`)."""

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ConfigurationError(f"family name {self.name!r} must be an identifier (one spelling everywhere)")
        if self.fixed_template.template is None and self.encoder is None and not self.probed:
            raise ConfigurationError(f"family {self.name!r} needs a jinja template or a Python encoder")
        if self.probed and self.context is not RenderContext.FULL_HISTORY:
            raise ConfigurationError(f"family {self.name!r} is probed, so it must render after the full history")
        unknown_stops = [token for token in self.stop_closing if token not in self.stop_tokens]
        if unknown_stops:
            raise ConfigurationError(f"family {self.name!r}: stop_closing names {unknown_stops}, not stop tokens")
        if (
            self.end_of_turn
            and self.junction is not Junction.STOP_IS_NEXT_OPENER
            and (self.end_of_turn not in self.stop_tokens)
        ):
            raise ConfigurationError(f"family {self.name!r}: end_of_turn {self.end_of_turn!r} must be a stop token")

    @property
    def supported_roles(self) -> tuple[str, ...]:
        return self.fixed_template.supported_roles


def index_families(families: Sequence[Family]) -> Mapping[str, Family]:
    """Index families by name; a duplicate name is an import-time error."""
    index: dict[str, Family] = {}
    for family in families:
        if family.name in index:
            raise ConfigurationError(f"family {family.name!r} is declared twice")
        index[family.name] = family
    return MappingProxyType(index)
