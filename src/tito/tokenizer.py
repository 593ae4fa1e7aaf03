"""TitoTokenizer: a turn's prompt ids = stored ids + junction + ids of only the appended messages.

The history is never re-rendered or re-tokenized. Appended messages are rendered after a short
context (Family.context: a constant stub turn, rendered once, or a stub user and the real last
assistant), which our fixed templates render exactly as after the whole history (the conformance
matrix pins this); the text after the context's render is tokenized once, starting at the family's
end-of-turn or opener token. Those tokens are special and atomic, so the tokenizer splits there
and the ids from that point are the ids it gives in context; tito checks the anchor id on every turn
and fails loudly if the tokenizer does not split there (Invariant 3).

Imports tito.families, tito.rendering, tito.messages, tito.matching, tito.parsing, tito.content_tokens; nothing above
them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tito.content_tokens import (
    ContentSpecialTokens,
    ContentTokenizer,
    MarkedRender,
    Sentinels,
    resolve_content_modes,
)
from tito.errors import ConfigurationError, JunctionError, TemplateRenderError, TokenMismatchError
from tito.families.base import VALID_APPEND_ROLES, Family, Junction, RenderContext
from tito.families.probe import probe_default_family
from tito.families.registry import get_family
from tito.matching import MessageMatcher, appended_messages, strict_message_matches
from tito.messages import Message, normalize_messages
from tito.parsing import ParseResult, get_completion_parser
from tito.rendering import compile_template, render_template
from tito.tokenizer_loading import Tokenizer

Tools = Sequence[Mapping[str, Any]] | None
RenderFunction = Callable[[Sequence[Message], Tools, bool], str]

CONTEXT_STUB_USER: Message = {"role": "user", "content": "."}
CONTEXT_STUB_ASSISTANT: Message = {"role": "assistant", "content": ".", "reasoning_content": "."}
"""Stand in for the stored conversation: fixed templates render appended messages the same after them."""
_STUB_CONTEXT: list[Message] = [CONTEXT_STUB_USER, CONTEXT_STUB_ASSISTANT]

_SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "pad_token", "unk_token")


def merge_template_kwargs(family: Family, chat_template_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """Pinned kwargs plus the caller's; repeating a pinned value is fine, contradicting it is an error."""
    pinned = family.fixed_template.extra_kwargs
    given = dict(chat_template_kwargs or {})
    conflicts = {key: value for key, value in given.items() if key in pinned and pinned[key] != value}
    if conflicts:
        detail = ", ".join(f"{key}={value!r} (pinned {pinned[key]!r})" for key, value in conflicts.items())
        raise ConfigurationError(
            f"family {family.name!r} pins {detail}: the pinned value keeps rendering append-only; "
            "drop the kwarg or use the default family for a custom template"
        )
    return {**given, **pinned}


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
    """Renders a family's fixed template and builds each turn's prompt ids incrementally."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        family: Family,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        allowed_append_roles: Sequence[str] | None = None,
        matcher: MessageMatcher = strict_message_matches,
        content_special_tokens: ContentSpecialTokens = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.content_modes = resolve_content_modes(content_special_tokens)
        self.template_kwargs = merge_template_kwargs(family, chat_template_kwargs)
        special = getattr(tokenizer, "special_tokens_map", None) or {}
        render_kwargs = {key: special[key] for key in _SPECIAL_TOKEN_KEYS if isinstance(special.get(key), str)}
        render_kwargs.update(self.template_kwargs)
        self._render = self._render_function(tokenizer, family, render_kwargs)
        if family.name == "default":
            family = probe_default_family(self._render, tokenizer)
        self.family = family
        self.allowed_append_roles = _allowed_roles(family, allowed_append_roles)
        self.matcher = matcher
        self._end_of_turn_id = self._atomic_id(family.end_of_turn) if family.end_of_turn else None
        self._stop_ids = frozenset(self._atomic_id(token) for token in family.stop_tokens)
        self._opener_ids = {token: self._atomic_id(token) for token in family.turn_openers}
        self._parser = get_completion_parser(family, tokenizer)
        self._content = ContentTokenizer(tokenizer, self.content_modes, (*family.special_tokens, *family.stop_tokens))
        self._stub_context_text = ""
        if family.context is not RenderContext.FULL_HISTORY:  # the probe already placed a default template's junction
            self._stub_context_text = self._render(_STUB_CONTEXT, None, False)
            self._check_junction_declaration()

    def _check_junction_declaration(self) -> None:
        """The template must end an assistant turn the way the family's junction rule says: checked once, here."""
        if self.family.junction is Junction.STOP_IS_NEXT_OPENER:
            return
        expected = self.family.end_of_turn + self.family.junction.trailer
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
    def _render_function(tokenizer: Tokenizer, family: Family, kwargs: Mapping[str, Any]) -> RenderFunction:
        if family.encoder is not None:
            encoder = family.encoder
            return lambda messages, tools, generation: encoder(messages, tools, generation, kwargs)
        if family.fixed_template.template is not None:
            source = family.fixed_template.source()
        else:
            checkpoint_template = getattr(tokenizer, "chat_template", None)
            if not isinstance(checkpoint_template, str) or not checkpoint_template:
                raise ConfigurationError(
                    "the default family renders the tokenizer's own chat_template, but it has none"
                )
            source = checkpoint_template
        template = compile_template(source)
        return lambda messages, tools, generation: render_template(template, messages, tools, generation, **kwargs)

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
        return self._render(self.normalize(messages), tools, add_generation_prompt)

    def tokenize(self, messages: Sequence[Any], tools: Tools = None, add_generation_prompt: bool = False) -> list[int]:
        """The canonical ids of the whole render, in this tokenizer's content mode (tito.content_tokens)."""
        normalized = self.normalize(messages)
        text = self._render(normalized, tools, add_generation_prompt)
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
        appended = self.normalize(
            appended_messages(old_messages, new_messages, self.allowed_append_roles, self.matcher), len(old_messages)
        )
        if not old_messages:
            first_prompt = self._render(appended, tools, True)
            return self._content.encode(self._marked_render(appended, 0, first_prompt, tools, True))
        last = self.normalize(old_messages[-1:], len(old_messages) - 1)[0]
        if last["role"] != "assistant":
            raise JunctionError(
                f"the stored conversation must end with the generated assistant message; message "
                f"{len(old_messages) - 1} has role {last['role']!r}"
            )
        context, context_tools = self._context(old_messages, last, tools)
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
        if family.junction is Junction.STOP_IS_NEXT_OPENER:
            opener = max((t for t in self._opener_ids if suffix_text.startswith(t)), key=len, default=None)
            if opener is None:
                raise JunctionError(
                    f"family {family.name}: the appended render must start with a turn opener "
                    f"({', '.join(self._opener_ids)}), but starts with {suffix_text[:40]!r}"
                )
            anchor_text, anchor_id = "", self._opener_ids[opener]
            ids = self._content.encode(suffix)
            checked = ids
        else:
            anchor_text = family.end_of_turn + family.junction.trailer
            if not context_text.endswith(anchor_text):
                raise JunctionError(
                    f"family {family.name}: the render of the last assistant ends with {context_text[-40:]!r}, but the "
                    f"junction rule {family.junction.value} expects {anchor_text!r}: template and family disagree"
                )
            anchor_id = self._end_of_turn_id if self._end_of_turn_id is not None else -1
            shifted = tuple((start + len(anchor_text), end + len(anchor_text)) for start, end in suffix.content_spans)
            ids = self._content.encode(MarkedRender(anchor_text + suffix_text, shifted))
            checked, ids = ids, ids[1:]
        if not checked or checked[0] != anchor_id:
            got = checked[0] if checked else None
            raise TokenMismatchError(
                f"family {family.name}: appended ids differ from the in-context render at token 0 (message "
                f"{first_index}): expected {anchor_id} {(anchor_text or suffix_text[:12])!r}, got {got}; the tokenizer "
                f"does not split at the family's special token. Reproduce: tito verify --family {family.name}"
            )
        return list(ids)

    def parse_completion(
        self, completion_ids: Sequence[int], prompt_ids: Sequence[int] | None = None, tools: Tools = None
    ) -> ParseResult:
        """The sampled ids as the OpenAI assistant message (`.message`, `.finish_reason`, per-call statuses).

        Pass the turn's `prompt_ids` so the parser knows whether the generation prompt opened reasoning.
        """
        return self._parser.parse(completion_ids, prompt_ids, tools)

    def merge_tokens(
        self,
        old_messages: Sequence[Any],
        new_messages: Sequence[Any],
        stored_ids: Sequence[int],
        tools: Tools = None,
    ) -> list[int]:
        """The next prompt: stored ids kept verbatim (less the junction's declared trailing ids) + appended ids."""
        additional = self.tokenize_additional_messages(old_messages, new_messages, tools)
        if not old_messages:
            if stored_ids:
                raise JunctionError("stored ids without stored messages: send the conversation they belong to")
            return additional
        return [*self._stored_before_junction(stored_ids), *additional]

    def _stored_before_junction(self, stored_ids: Sequence[int]) -> Sequence[int]:
        family = self.family
        last = stored_ids[-1] if stored_ids else None
        expected = self._stop_ids if family.junction is Junction.STOP_IS_NEXT_OPENER else {self._end_of_turn_id}
        if last not in expected:
            shown = "nothing" if last is None else f"{last} {self.tokenizer.decode([last])!r}"
            raise JunctionError(
                f"family {family.name}: stored ids end with {shown}, not with a stop token "
                f"({', '.join(t for t in family.stop_tokens)}); a turn cut by length cannot be extended"
            )
        dropped = family.junction.trailing_ids_dropped
        return stored_ids[: len(stored_ids) - dropped]


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
