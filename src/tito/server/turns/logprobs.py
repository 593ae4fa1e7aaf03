"""OpenAI `logprobs` / `top_logprobs` on chat completions: how many top logprobs to ask the engine for (a 400
naming the field where it cannot give them), and the `choices[0].logprobs` object, whole or per streamed chunk,
built from the engine's own ids and logprobs (the engine's `logprob_semantics`: vLLM before temperature, SGLang
and the local engine after).

Each entry is `{"token", "bytes", "logprob", "top_logprobs": [{"token", "bytes", "logprob"}]}`: `bytes` are the
token's own bytes (a byte-level BPE token may hold part of a UTF-8 character; `token` then shows U+FFFD), so the
entries' bytes add up to the reply's bytes. An SDK retry of a committed turn gets the stored sampled logprobs;
top logprobs are not stored, so its `top_logprobs` lists are empty.

Imports from tito: engines.protocol, tokenizer_loading, tokenizer_protocol, server.errors, server.models.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Sequence
from typing import Any

from tito.engines.protocol import EngineInfo, TopLogprobs
from tito.server.errors import BadRequestError
from tito.server.models import ChatCompletionRequest
from tito.tokenizer_loading import byte_to_unicode
from tito.tokenizer_protocol import Tokenizer

_BYTE_OF = {char: byte for byte, char in byte_to_unicode().items()}
_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def requested_top_logprobs(request: ChatCompletionRequest, engine: EngineInfo) -> int:
    """The top logprobs per position the engine must return for this request (0: none); a 400 naming the field
    when the request or the engine cannot have them."""
    top = request.top_logprobs or 0
    if top and not request.logprobs:
        raise BadRequestError(f"top_logprobs={top} needs logprobs: true (as in OpenAI's API)")
    if top > engine.max_top_logprobs:
        can = f"at most {engine.max_top_logprobs}" if engine.max_top_logprobs else "none"
        raise BadRequestError(f"top_logprobs={top}: the {engine.name} engine returns {can} per token")
    return top


def choice_logprobs(
    request: ChatCompletionRequest,
    tokenizer: Tokenizer,
    ids: Sequence[int],
    logprobs: Sequence[float],
    top_logprobs: Sequence[TopLogprobs] = (),
) -> dict[str, Any] | None:
    """`choices[0].logprobs` for these sampled ids (a whole reply or one streamed chunk); None unless asked."""
    if not request.logprobs:
        return None
    tops = top_logprobs if len(top_logprobs) == len(ids) else [()] * len(ids)
    content = [
        {
            **_token(tokenizer, token),
            "logprob": logprob,
            "top_logprobs": [_alternative(tokenizer, pair) for pair in top],
        }
        for token, logprob, top in zip(ids, logprobs, tops, strict=True)
    ]
    return {"content": content, "refusal": None}


def _alternative(tokenizer: Tokenizer, pair: tuple[int, float]) -> dict[str, Any]:
    token, logprob = pair
    return {**_token(tokenizer, token), "logprob": _as_float32(logprob)}


def _as_float32(value: float) -> float:
    """Top logprobs at the precision the sampled ones are stored in, so the sampled id's two values agree."""
    return array("f", [value])[0]


def _token(tokenizer: Tokenizer, token: int) -> dict[str, Any]:
    raw = token_bytes(tokenizer, token)
    return {"token": raw.decode("utf-8", errors="replace"), "bytes": list(raw)}


def token_bytes(tokenizer: Tokenizer, token: int) -> bytes:
    """The bytes a token stands for: a byte-level BPE piece mapped back through GPT-2's byte table, a `<0xNN>`
    byte-fallback piece as its byte, else the token's decoded text."""
    piece = tokenizer.convert_ids_to_tokens(token)
    if isinstance(piece, str) and piece:
        fallback = _BYTE_FALLBACK.fullmatch(piece)
        if fallback:
            return bytes([int(fallback.group(1), 16)])
        if all(char in _BYTE_OF for char in piece):
            return bytes(_BYTE_OF[char] for char in piece)
    return tokenizer.decode([token], skip_special_tokens=False).encode()
