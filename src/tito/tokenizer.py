"""TitoTokenizer: a turn's prompt ids = stored ids + junction + ids of only the appended messages.

The history is never re-tokenized, and for every named family never re-rendered: appended messages are rendered
after a short context (Family.context: a constant stub turn, rendered once, or a stub user and the real last
assistant), which our fixed templates render exactly as after the whole history (the conformance matrix pins this).
The `default` family (RenderContext.FULL_HISTORY, a checkpoint template tito does not control) renders the whole
stored conversation twice per turn instead, a cost linear in the history (README: what a turn costs). The text
after the context's render is tokenized once, starting at the family's end-of-turn or opener token. Those tokens
are special and atomic, so the tokenizer splits there and the ids from that point are the ids it gives in context;
tito checks the anchor id on every turn and fails loudly if the tokenizer does not split there (Invariant 3).

Stored ids must end with a stop token. After one the template never writes (Qwen's `<|endoftext|>`, Kimi's
`[EOS]`) they are still kept verbatim, and the family's declared closing (Family.stop_closing, e.g. `<|im_end|>`)
follows as prompt ids. A request must append at least one message: resending exactly the stored conversation is
an AppendOnlyError in every family, never a silent new generation prompt after the stored assistant.

Imports from tito: content_tokens, errors, families, matching, messages, parsing, path_ids, prompt_buffers, rendering,
tokenizer_protocol.
"""

from __future__ import annotations

import array
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tito.content_tokens import (
    ContentSpecialTokens,
    ContentTokenizer,
    MarkedRender,
    Sentinels,
    resolve_content_modes,
)
from tito.errors import (
    AppendOnlyError,
    ConfigurationError,
    JunctionError,
    MessageError,
    PinnedKwargError,
    TemplateRenderError,
    TokenIdError,
    TokenMismatchError,
    UnknownTemplateKwargError,
)
from tito.families.base import VALID_APPEND_ROLES, Family, RenderContext
from tito.families.probe import probe_default_family
from tito.families.registry import get_family
from tito.matching import MessageMatcher, appended_messages, strict_message_matches
from tito.messages import Message, check_tools, is_item_sequence, normalize_messages
from tito.parsing import IncrementalParser, ParseResult, build_completion_parser
from tito.path_ids import PathIds, packed_values
from tito.prompt_buffers import PromptBuffers
from tito.rendering import compile_template, template_kwargs_read, template_renderer
from tito.tokenizer_protocol import Tokenizer

Tools = Sequence[Mapping[str, Any]] | None
RenderFunction = Callable[[Sequence[Message], Tools, bool], str]

CONTEXT_STUB_USER: Message = {"role": "user", "content": "."}
CONTEXT_STUB_ASSISTANT: Message = {"role": "assistant", "content": ".", "reasoning_content": "."}
"""Stand in for the stored conversation: fixed templates render appended messages the same after them."""
_STUB_CONTEXT: list[Message] = [CONTEXT_STUB_USER, CONTEXT_STUB_ASSISTANT]

_SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "pad_token", "unk_token")


def check_template_kwargs(family: Family, accepted: frozenset[str], kwargs: Any) -> dict[str, Any]:
    """`kwargs` checked against the family: a JSON object whose every key the template (or encoder) reads and
    which contradicts no pinned value; returned merged with the pinned kwargs. Repeating a pinned value is fine."""
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, Mapping):
        raise ConfigurationError(f"chat_template_kwargs must be a JSON object, not {type(kwargs).__name__}")
    pinned = family.fixed_template.extra_kwargs
    for key, value in kwargs.items():
        if key not in accepted:
            raise UnknownTemplateKwargError(family.name, str(key), tuple(sorted(accepted)))
        if key in pinned and pinned[key] != value:
            raise PinnedKwargError(family.name, key, pinned[key], value)
    return {**kwargs, **pinned}


def _allowed_roles(family: Family, allowed_append_roles: Sequence[str] | None) -> tuple[str, ...]:
    if allowed_append_roles is None:
        return family.supported_roles
    unknown = [role for role in allowed_append_roles if role not in VALID_APPEND_ROLES]
    if unknown:
        raise ConfigurationError(
            f"allowed_append_roles {unknown} are not append roles; choose from {', '.join(VALID_APPEND_ROLES)}"
        )
    unsupported = [role for role in allowed_append_roles if role not in family.supported_roles]
    if unsupported:
        raise ConfigurationError(
            f"family {family.name!r} does not support appending {unsupported} "
            f"(supported: {', '.join(family.supported_roles)}; `tito verify --family {family.name}` shows why)"
        )
    return tuple(dict.fromkeys(allowed_append_roles))


class TitoTokenizer:
    """Renders a family's fixed template and builds each turn's prompt ids incrementally.

    A request must append at least one message after the stored conversation: resending exactly the stored
    conversation is an AppendOnlyError in every family (an assistant continues its own turn only by appending an
    assistant message, where the family supports that role). An empty conversation is a MessageError.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        family: Family,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        allowed_append_roles: Sequence[str] | None = None,
        matcher: MessageMatcher = strict_message_matches,
        content_special_tokens: ContentSpecialTokens = None,
        prompt_buffers: PromptBuffers | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.content_modes = resolve_content_modes(content_special_tokens)
        self._vocab_size = len(tokenizer)
        """Read once: `len(tokenizer)` asks the backend to count its added tokens each time (about 25 us)."""
        source = _template_source(tokenizer, family)
        self.accepted_template_kwargs = (
            frozenset(family.encoder_kwargs) if source is None else template_kwargs_read(source)
        ) | frozenset(family.fixed_template.extra_kwargs)
        """Every chat-template kwarg the family's template (or encoder) reads."""
        self.template_kwargs = check_template_kwargs(family, self.accepted_template_kwargs, chat_template_kwargs)
        self.launch_template_kwargs = dict(chat_template_kwargs or {})
        special = tokenizer.special_tokens_map or {}
        render_kwargs = {key: special[key] for key in _SPECIAL_TOKEN_KEYS if isinstance(special.get(key), str)}
        render_kwargs.update(self.template_kwargs)
        self._render = self._render_function(family, source, render_kwargs)
        if family.probed and family.probe_report is None:  # a family that carries its report was probed already
            family = probe_default_family(self._render, tokenizer, self.accepted_template_kwargs, self.template_kwargs)
        self.family = family
        self.allowed_append_roles = _allowed_roles(family, allowed_append_roles)
        self.matcher = matcher
        self._end_of_turn_id = self._atomic_id(family.end_of_turn) if family.end_of_turn else None
        self._stop_ids = {self._atomic_id(token): token for token in family.stop_tokens}
        self._closing_ids: dict[int, list[int]] = {}
        for stop_id, token in self._stop_ids.items():
            closing = family.junction.closing_after(token, family.end_of_turn, family.stop_closing)
            if closing is not None:
                self._closing_ids[stop_id] = list(tokenizer.encode(closing, add_special_tokens=False))
        self._opener_ids = {token: self._atomic_id(token) for token in family.turn_openers}
        self._parser = build_completion_parser(family, tokenizer)
        self._content = ContentTokenizer(tokenizer, self.content_modes, (*family.special_tokens, *family.stop_tokens))
        self.prompt_buffers = PromptBuffers() if prompt_buffers is None else prompt_buffers
        """Where `merge_recorded_tokens` writes prompts (a server's tokenizers share one)."""
        self._stub_context_text = ""
        if family.context is not RenderContext.FULL_HISTORY:  # the probe already placed a default template's junction
            self._stub_context_text = self._render(_STUB_CONTEXT, None, False)
            self._check_junction_declaration()

    @property
    def encoder_reason(self) -> str:
        """How appended text is encoded and why: tiktoken where shown equal to the tokenizer, else its own encode."""
        verdict = self._content.fast_encoding
        return verdict.reason if verdict is not None else "the tokenizer's own encode (not a `tokenizers` backend)"

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        """The ids the engine stops on, in the family's declared order."""
        return tuple(self._stop_ids)

    def request_template_kwargs(self, kwargs: Any) -> dict[str, Any]:
        """A request's chat-template kwargs merged over the launch kwargs, checked like them (unknown or
        contradicting a pinned value: ConfigurationError, HTTP 400); the result includes the pinned kwargs and can
        be passed as `chat_template_kwargs` to build the TitoTokenizer that renders that request."""
        if kwargs is not None and not isinstance(kwargs, Mapping):
            raise ConfigurationError(f"chat_template_kwargs must be a JSON object, not {type(kwargs).__name__}")
        merged = {**self.launch_template_kwargs, **(kwargs or {})}
        return check_template_kwargs(self.family, self.accepted_template_kwargs, merged)

    def _check_junction_declaration(self) -> None:
        """The template must end an assistant turn the way the family's junction rule says: checked once, here."""
        expected = self.family.junction.anchor_prefix(self.family.end_of_turn)
        if not self._stub_context_text.endswith(expected):
            raise ConfigurationError(
                f"family {self.family.name}: the template ends an assistant turn with "
                f"{self._stub_context_text[-40:]!r}, but the junction rule {self.family.junction.value} expects "
                f"{expected!r}: template and family declaration disagree"
            )

    def _context(self, old_messages: Sequence[Any], last: Message, tools: Tools) -> tuple[list[Message], Tools]:
        """What the appended messages are rendered after (Family.context), and with which tools.

        Fixed templates render tools only in the opening system block, so a stub or one-turn context needs
        none; the conformance matrix, which renders with tools, pins that.
        """
        if self.family.context is RenderContext.STUB:
            return _STUB_CONTEXT, None
        if self.family.context is RenderContext.LAST_MESSAGE:
            return [CONTEXT_STUB_USER, last], None
        return self.normalize(old_messages), tools

    @staticmethod
    def _render_function(family: Family, source: str | None, kwargs: Mapping[str, Any]) -> RenderFunction:
        if source is None:
            encoder = family.encoder
            assert encoder is not None  # _template_source returns None only for encoder families
            return lambda messages, tools, generation: encoder(messages, tools, generation, kwargs)
        template = compile_template(source, trusted=family.fixed_template.template is not None)  # tito's own
        return template_renderer(template, kwargs)

    def _atomic_id(self, token: str) -> int:
        ids = self.tokenizer.encode(token, add_special_tokens=False)
        if len(ids) != 1:
            raise ConfigurationError(
                f"family {self.family.name}: {token!r} must be one token in this tokenizer, but encodes to {ids}; "
                "use the family's real tokenizer (or build_proxy_tokenizer(family.special_tokens))"
            )
        return int(ids[0])

    def normalize(self, messages: Sequence[Any], first_index: int = 0) -> list[Message]:
        return normalize_messages(messages, self.family.tool_arguments, first_index)

    def render(self, messages: Sequence[Any], tools: Tools = None, add_generation_prompt: bool = False) -> str:
        """The fixed template's text for `messages`; allowed roles never change it (Invariant 5)."""
        normalized = self.normalize(messages)
        check_tools(tools)
        if not normalized:
            raise MessageError(0, "messages", "is empty: a conversation needs at least one message")
        return self._render(normalized, tools, add_generation_prompt)

    def tokenize(self, messages: Sequence[Any], tools: Tools = None, add_generation_prompt: bool = False) -> list[int]:
        """The canonical ids of the whole render, in this tokenizer's content mode (tito.content_tokens)."""
        normalized = self.normalize(messages)
        text = self.render(normalized, tools, add_generation_prompt)
        return self._content.encode(self._marked_render(normalized, 0, text, tools, add_generation_prompt))

    def _marked_render(
        self, messages: list[Message], first_marked: int, plain_text: str, tools: Tools, generation: bool
    ) -> MarkedRender:
        """`plain_text` with the spans of text-mode content from `messages[first_marked:]` (none in control mode)."""
        if not self._content.marks_any(messages[first_marked:]):
            return MarkedRender(plain_text, ())
        sentinels = Sentinels.absent_from(plain_text)
        marked = [*messages[:first_marked], *self._content.mark(messages[first_marked:], sentinels)]
        return self._content.locate(self._render(marked, tools, generation), plain_text, sentinels, self.family.name)

    def tokenize_additional_messages(
        self, old_messages: Sequence[Any], new_messages: Sequence[Any], tools: Tools = None
    ) -> list[int]:
        """Ids that follow the stored ids: junction, appended messages, generation prompt.

        With no stored messages this is the whole first prompt. The stored ids themselves are not needed.
        """
        _check_message_list("old_messages", old_messages)
        _check_message_list("new_messages", new_messages)
        appended = self.normalize(
            appended_messages(old_messages, new_messages, self.allowed_append_roles, self.matcher), len(old_messages)
        )
        if not appended:
            if not old_messages:
                raise MessageError(0, "messages", "is empty: a conversation needs at least one message")
            raise AppendOnlyError(
                len(old_messages), "messages", "at least one appended message", "none",
                hint="resending exactly the stored conversation is not a turn; append the next message",
            )  # fmt: skip
        if not old_messages:
            check_tools(tools)
            first_prompt = self._render(appended, tools, True)
            return self._content.encode(self._marked_render(appended, 0, first_prompt, tools, True))
        last = self.normalize(old_messages[-1:], len(old_messages) - 1)[0]
        if last["role"] != "assistant":
            raise JunctionError(
                self.family.name,
                f"the stored conversation must end with the generated assistant message; message "
                f"{len(old_messages) - 1} has role {last['role']!r}",
            )
        context, context_tools = self._context(old_messages, last, tools)
        check_tools(context_tools)  # rendered only in the first prompt and after a full history
        context_text = (
            self._stub_context_text if context is _STUB_CONTEXT else self._render(context, context_tools, False)
        )
        full_text = self._render([*context, *appended], context_tools, True)
        if not full_text.startswith(context_text):
            offset = next(
                (i for i, (a, b) in enumerate(zip(context_text, full_text, strict=False)) if a != b), len(full_text)
            )
            raise TemplateRenderError(
                f"family {self.family.name}: appending {[m['role'] for m in appended]} rewrites the render of the "
                f"stored conversation at character {offset}: {context_text[offset : offset + 60]!r} became "
                f"{full_text[offset : offset + 60]!r}; the template is not append-only for this sequence"
            )
        marked = self._marked_render([*context, *appended], len(context), full_text, context_tools, True)
        suffix = MarkedRender(
            full_text[len(context_text) :],
            tuple((start - len(context_text), end - len(context_text)) for start, end in marked.content_spans),
        )
        return self._appended_ids(context_text, suffix, len(old_messages))

    def _appended_ids(self, context_text: str, suffix: MarkedRender, first_index: int) -> list[int]:
        family, suffix_text = self.family, suffix.text
        prefix = family.junction.anchor_prefix(family.end_of_turn)
        if prefix:
            if not context_text.endswith(prefix):
                raise JunctionError(
                    family.name,
                    f"the render of the last assistant ends with {context_text[-40:]!r}, but the junction rule "
                    f"{family.junction.value} expects {prefix!r}: template and family disagree",
                )
            anchor_text, anchor_id = family.end_of_turn, self._end_of_turn_id
        else:
            opener = max((t for t in self._opener_ids if suffix_text.startswith(t)), key=len, default=None)
            if opener is None:
                raise JunctionError(
                    family.name,
                    f"the appended render must start with a turn opener ({', '.join(self._opener_ids)}), but starts "
                    f"with {suffix_text[:40]!r}",
                )
            anchor_text, anchor_id = opener, self._opener_ids[opener]
        shifted = tuple((start + len(prefix), end + len(prefix)) for start, end in suffix.content_spans)
        ids = self._content.encode(MarkedRender(prefix + suffix_text, shifted))
        if not ids or ids[0] != anchor_id:
            raise TokenMismatchError(
                family.name, 0, f"{anchor_id} {anchor_text!r}", ids[0] if ids else None,
                f"message {first_index}: the tokenizer does not split at the family's special token. Reproduce: "
                f"tito verify --family {family.name}",
            )  # fmt: skip
        if prefix:
            del ids[0]  # the encode's own new list: the anchor leaves in place, no copy of the appended ids
        return ids

    def parse_completion(
        self, completion_ids: Sequence[int], prompt_ids: Sequence[int] | None = None, tools: Tools = None
    ) -> ParseResult:
        """The sampled ids as the OpenAI assistant message (`.message`, `.finish_reason`, per-call statuses).

        Pass the turn's `prompt_ids` so the parser knows whether the generation prompt opened reasoning.
        """
        if prompt_ids is not None:
            self._check_ids("prompt_ids", prompt_ids)
        return self.parse_built_completion(completion_ids, prompt_ids, tools)

    def parse_built_completion(
        self, completion_ids: Sequence[int], prompt_ids: Sequence[int] | None, tools: Tools = None
    ) -> ParseResult:
        """`parse_completion` after a prompt this tokenizer built (`merge_recorded_tokens`): only the sampled ids
        are checked, not the whole prompt again each turn (a session server's per-turn path)."""
        self._check_ids("completion_ids", completion_ids)
        return self._parser.parse(completion_ids, prompt_ids, tools)

    def incremental_parser(self, prompt_ids: Sequence[int] | None = None, tools: Tools = None) -> IncrementalParser:
        """A parser for one completion streamed in chunks: `feed(ids)` -> deltas, `finish()` -> the last deltas
        and the ParseResult `parse_completion` gives for all the ids."""
        return IncrementalParser(self._parser, prompt_ids, tools)

    def merge_tokens(
        self,
        old_messages: Sequence[Any],
        new_messages: Sequence[Any],
        stored_ids: Sequence[int],
        tools: Tools = None,
    ) -> list[int]:
        """The next prompt: stored ids kept verbatim (less the junction's declared trailing ids), the closing a
        stop token other than the end of turn needs (prompt ids), then the appended ids."""
        self._check_ids("stored_ids", stored_ids)
        return self.merge_recorded_tokens(old_messages, new_messages, stored_ids, tools).tolist()

    def merge_recorded_tokens(
        self,
        old_messages: Sequence[Any],
        new_messages: Sequence[Any],
        stored_ids: Sequence[int],
        tools: Tools = None,
    ) -> memoryview:
        """`merge_tokens` for stored ids a session recorded itself (prompts this tokenizer built, sampled ids
        `parse_built_completion` checked): the same prompt, without walking every stored id again each turn.

        A read-only int32 `memoryview` written into one of `prompt_buffers` (`tito.prompt_buffers`): the kept
        stored ids are written as blocks, never as a Python int per id, straight from a path's parts
        (`tito.path_ids.PathIds`: the history is not joined first), into memory an earlier prompt used; an engine
        client writes its JSON straight from the buffer (`tito.engines.id_json`). Holding it keeps its buffer from
        reuse: copy what outlives the turn."""
        additional = self.tokenize_additional_messages(old_messages, new_messages, tools)
        if not old_messages:
            if stored_ids:
                raise JunctionError(
                    self.family.name, "stored ids without stored messages: send the conversation they belong to"
                )
            return self.prompt_buffers.write((packed_values("i", additional),))
        count = self.kept_stored_ids(stored_ids)
        tail = packed_values("i", [*self._closing(stored_ids), *additional])
        return self.prompt_buffers.write((*_kept_parts(stored_ids, count), tail))

    def kept_stored_ids(self, stored_ids: Sequence[int]) -> int:
        """How many of `stored_ids` the next prompt keeps verbatim; raises JunctionError when they cannot be
        continued (no stop token at the end: a turn cut by length; or a stop token the family cannot continue)."""
        self._closing(stored_ids)
        return self.family.junction.kept_stored_ids(stored_ids)

    def _closing(self, stored_ids: Sequence[int]) -> list[int]:
        family = self.family
        last = stored_ids[-1] if stored_ids else None
        if last is not None and last in self._closing_ids:
            return self._closing_ids[last]
        if last is None:
            raise JunctionError(family.name, "stored ids are empty: send the ids the last turn returned")
        shown = f"{last} {self.tokenizer.decode([last])!r}"
        if last in self._stop_ids:
            raise JunctionError(
                family.name,
                f"stored ids end with the stop token {shown}, after which the family declares no way to continue "
                f"(Family.stop_closing covers {', '.join(family.stop_closing) or 'none'})",
                last,
            )
        raise JunctionError(
            family.name,
            f"stored ids end with {shown}, not with a stop token ({', '.join(family.stop_tokens)}): the turn was cut "
            "(finish_reason 'length') and cannot be extended",
            last,
        )

    def _check_ids(self, argument: str, ids: Any) -> None:
        """`ids` is a list of ints inside the vocabulary; else a TokenIdError naming the argument and position."""
        if not is_item_sequence(ids):
            raise TokenIdError(argument, 0, ids, self._vocab_size)
        size = self._vocab_size
        try:  # two C-speed passes on the per-turn path: non-ints and negatives fail packing, then the upper bound
            array.array("L", ids)
            if not ids or max(ids) < size:
                return
        except (TypeError, OverflowError):
            pass
        for position, value in enumerate(ids):
            if not isinstance(value, int) or not 0 <= value < size:
                raise TokenIdError(argument, position, value, size)


def _kept_parts(stored_ids: Sequence[int], count: int) -> tuple[array.array[int] | memoryview, ...]:
    """The first `count` stored ids as int32 buffers: a path's own parts, a view of an `array('i')`, else a copy of
    plain ints from any sequence (numpy ids, say)."""
    if isinstance(stored_ids, PathIds):
        return stored_ids.head_parts(count)
    if isinstance(stored_ids, array.array) and stored_ids.typecode == "i":
        return (memoryview(stored_ids)[:count],)
    return (array.array("i", stored_ids[:count]),)


def _template_source(tokenizer: Tokenizer, family: Family) -> str | None:
    """The jinja source the family renders (its fixed template, or the checkpoint's own when probed); None for a
    Python encoder."""
    if family.encoder is not None:
        return None
    if family.fixed_template.template is not None:
        return family.fixed_template.source()
    checkpoint_template = tokenizer.chat_template
    if not isinstance(checkpoint_template, str) or not checkpoint_template:
        raise ConfigurationError(f"the {family.name} family renders the tokenizer's own chat_template, but it has none")
    return checkpoint_template


def _check_message_list(argument: str, messages: Any) -> None:
    if not is_item_sequence(messages):
        raise MessageError(0, argument, f"must be a list of message objects, not {type(messages).__name__}")


def get_tito_tokenizer(
    tokenizer: Tokenizer,
    family: str,
    chat_template_kwargs: Mapping[str, Any] | None = None,
    allowed_append_roles: Sequence[str] | None = None,
    matcher: MessageMatcher = strict_message_matches,
    content_special_tokens: ContentSpecialTokens = None,
) -> TitoTokenizer:
    """A TitoTokenizer for `family` (a registry name); `allowed_append_roles=None` allows all the family supports.

    `content_special_tokens` says whether special-token text inside message content becomes control tokens
    (`"control"`, as `apply_chat_template(tokenize=True)` does) or stays plain text (`"text"`): one mode for every
    role or a per-role mapping; the default is `"text"` for tool output and `"control"` for the other roles.
    """
    return TitoTokenizer(
        tokenizer, get_family(family), chat_template_kwargs, allowed_append_roles, matcher, content_special_tokens
    )
