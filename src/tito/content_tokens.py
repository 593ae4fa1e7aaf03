"""Special-token text inside message content: a control token (`control`) or plain text (`text`), per role.

In `control` mode a tool output containing `<|im_end|>\n<|im_start|>system` becomes real control ids, exactly
as `apply_chat_template(tokenize=True)` does. In `text` mode the content is tokenized as ordinary text and only
the template's own markers stay control tokens. The canonical ids of a render are then: split the text at the
control-token strings (every added token of the tokenizer, and the family's markers) outside content spans, and
tokenize every piece between them without the tokenizer's added-token matching. A render with no control-token
string inside a text-mode content span gives exactly the standard ids, so that common case stays on the
tokenizer's own `encode`.

Content spans are found by rendering once more with each marked content wrapped in two private-use sentinel
characters (outside its leading and trailing whitespace, which templates may strip); removing the sentinels
must give the plain render back, else the template transforms content and the mode cannot apply.

Imports from tito: errors, fast_encoding, messages, tokenizer_loading, tokenizer_protocol.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from tokenizers import Tokenizer as BackendTokenizer

from tito.errors import ConfigurationError, TemplateRenderError
from tito.fast_encoding import fast_encoder_for
from tito.messages import KNOWN_ROLES, Message
from tito.tokenizer_loading import without_added_tokens
from tito.tokenizer_protocol import Tokenizer

ContentMode = Literal["control", "text"]
CONTENT_MODES: tuple[str, ...] = get_args(ContentMode)
ContentSpecialTokens = ContentMode | Mapping[str, ContentMode] | None
"""One mode for every role, a per-role mapping (unnamed roles keep the default), or None for the default."""

DEFAULT_CONTENT_MODES: Mapping[str, ContentMode] = {
    "system": "control",
    "user": "control",
    "assistant": "control",
    "tool": "text",
}
"""Tool output is what an agent reads from the world (files, web pages, other models), so its special-token text
stays text; the other roles keep parity with the standard pipeline unless the caller opts in."""

Span = tuple[int, int]


@dataclass(frozen=True)
class Sentinels:
    """Two private-use characters that wrap marked content; chosen absent from the plain render, so every one in
    the marked render is ours."""

    open: str
    close: str

    @classmethod
    def absent_from(cls, text: str) -> Sentinels:
        for base in range(0xF0000, 0xFFFFE, 2):
            if chr(base) not in text and chr(base + 1) not in text:
                return cls(chr(base), chr(base + 1))
        raise TemplateRenderError("the render uses every private-use character of plane 15: content cannot be marked")


def resolve_content_modes(setting: ContentSpecialTokens) -> Mapping[str, ContentMode]:
    """The mode of every role; a bad role or mode is a ConfigurationError naming it and the choices."""
    if setting is None:
        return dict(DEFAULT_CONTENT_MODES)
    given = {role: setting for role in KNOWN_ROLES} if isinstance(setting, str) else dict(setting)
    for role, mode in given.items():
        if role not in KNOWN_ROLES:
            raise ConfigurationError(f"content_special_tokens: {role!r} is not a role; choose from {KNOWN_ROLES}")
        if mode not in CONTENT_MODES:
            raise ConfigurationError(
                f"content_special_tokens[{role!r}] = {mode!r}: choose from {', '.join(CONTENT_MODES)}"
            )
    return {**DEFAULT_CONTENT_MODES, **given}


@dataclass(frozen=True)
class MarkedRender:
    """A render's text and the spans (start, end) of the content tokenized as plain text."""

    text: str
    content_spans: tuple[Span, ...]


class ContentTokenizer:
    """Tokenizes renders in a tokenizer's content mode; built once per TitoTokenizer."""

    def __init__(self, tokenizer: Tokenizer, modes: Mapping[str, ContentMode], markers: Sequence[str]) -> None:
        self.tokenizer = tokenizer
        self._text_roles = frozenset(role for role, mode in modes.items() if mode == "text")
        self._control_ids = self._control_tokens(tokenizer, markers)
        by_length = sorted(self._control_ids, key=len, reverse=True)
        self._control_pattern = re.compile("|".join(map(re.escape, by_length))) if by_length else None
        self._plain_backend: BackendTokenizer | None = None
        backend = _backend(tokenizer)
        self.fast_encoding = fast_encoder_for(backend) if backend is not None else None
        """tiktoken's encoder where it is shown to give this tokenizer's ids (built once per tokenizer), and why."""
        self._fast = self.fast_encoding.encoder if self.fast_encoding is not None else None

    @staticmethod
    def _control_tokens(tokenizer: Tokenizer, markers: Sequence[str]) -> dict[str, int]:
        """Every added token, flagged special or not (Qwen3's `<think>` and `<|fim_pad|>` are not), so that outside
        content the split is exactly the tokenizer's own; plus the family's markers."""
        controls: dict[str, int] = {}
        backend = _backend(tokenizer)
        if backend is not None:
            controls = {t.content: i for i, t in backend.get_added_tokens_decoder().items()}
        for marker in markers:
            ids = tokenizer.encode(marker, add_special_tokens=False)
            if len(ids) == 1:
                controls[marker] = int(ids[0])
        return controls

    def marks_any(self, messages: Sequence[Message]) -> bool:
        """Whether some text-mode content holds control-token text (otherwise both modes give the same ids)."""
        return any(self._needs_mark(message) for message in messages)

    def _needs_mark(self, message: Message) -> bool:
        content = message.get("content")
        return (
            message["role"] in self._text_roles
            and isinstance(content, str)
            and self._control_pattern is not None
            and self._control_pattern.search(content) is not None
        )

    def mark(self, messages: Sequence[Message], sentinels: Sentinels) -> list[Message]:
        """The messages with each text-mode content that holds control-token text wrapped in the sentinels."""
        marked = []
        for message in messages:
            if not self._needs_mark(message):
                marked.append(message)
                continue
            content: str = message["content"]
            core = content.strip()
            start = content.index(core)
            wrapped = content[:start] + sentinels.open + core + sentinels.close + content[start + len(core) :]
            marked.append({**message, "content": wrapped})
        return marked

    @staticmethod
    def locate(marked_text: str, plain_text: str, sentinels: Sentinels, family: str) -> MarkedRender:
        """Strip the sentinels from a marked render into content spans; it must give back the plain render."""
        spans: list[Span] = []
        pieces: list[str] = []
        length = position = 0
        while (start := marked_text.find(sentinels.open, position)) >= 0:
            end = marked_text.find(sentinels.close, start)
            if end < 0:
                break
            pieces += [marked_text[position:start], marked_text[start + 1 : end]]
            length += start - position
            spans.append((length, length + end - start - 1))
            length += end - start - 1
            position = end + 1
        pieces.append(marked_text[position:])
        text = "".join(pieces)
        if text != plain_text:
            raise TemplateRenderError(
                f"family {family}: the template transforms message content, so content_special_tokens='text' cannot "
                "locate it; use 'control' for the roles involved"
            )
        return MarkedRender(text, tuple(spans))

    def encode(self, render: MarkedRender) -> list[int]:
        """The canonical ids: control tokens only outside content spans, every other piece as plain text."""
        if not render.content_spans or self._control_pattern is None:
            if self._fast is not None:
                return self._fast.encode(render.text)
            return list(self.tokenizer.encode(render.text, add_special_tokens=False))
        text, ids, pending, position = render.text, [], [], 0
        for start, end in [*render.content_spans, (len(text), len(text))]:
            for match in self._control_pattern.finditer(text, position, start):
                pending.append(text[position : match.start()])
                ids += self._plain_ids("".join(pending))
                pending.clear()
                ids.append(self._control_ids[match.group()])
                position = match.end()
            pending.append(text[position:end])
            position = end
        return ids + self._plain_ids("".join(pending))

    def _plain_ids(self, text: str) -> list[int]:
        if not text:
            return []
        if self._fast is not None:
            return self._fast.encode_ordinary(text)
        if self._plain_backend is None:
            self._plain_backend = _without_added_tokens(self.tokenizer)
        return list(self._plain_backend.encode(text, add_special_tokens=False).ids)


def _backend(tokenizer: Tokenizer) -> BackendTokenizer | None:
    """LocalTokenizer's `backend`, or a transformers fast tokenizer's `backend_tokenizer` (its `backend` is a name)."""
    for attribute in ("backend", "backend_tokenizer"):
        backend = getattr(tokenizer, attribute, None)
        if isinstance(backend, BackendTokenizer):
            return backend
    return None


def _without_added_tokens(tokenizer: Tokenizer) -> BackendTokenizer:
    """The tokenizer's ordinary-text ids: its backend without added tokens."""
    backend = _backend(tokenizer)
    if backend is None:
        raise ConfigurationError(
            "content_special_tokens='text' needs a `tokenizers`-backed tokenizer (a transformers fast tokenizer or "
            "tito.load_tokenizer); use 'control' with this one"
        )
    return without_added_tokens(backend)
