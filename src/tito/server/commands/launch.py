"""Build a server's state from `tito serve` options: load the tokenizer, build the engine, script `instant`.

Imports from tito: engines, errors, family_tokenizer, server.state, tokenizer, tokenizer_loading, tokenizer_protocol.
"""

from __future__ import annotations

from pathlib import Path

from tito.engines.factory import create_engine
from tito.engines.instant import ReplyScript
from tito.errors import ConfigurationError
from tito.family_tokenizer import builtin_tokenizer_for
from tito.server.state import ServerOptions, ServerState
from tito.tokenizer import TitoTokenizer, get_tito_tokenizer
from tito.tokenizer_loading import load_tokenizer
from tito.tokenizer_protocol import Tokenizer

INSTANT_REPLY = "This is the instant engine's fixed reply: it measures tito, not a model."


def instant_reply_ids(tito_tokenizer: TitoTokenizer) -> list[int]:
    """The ids of the family's own render of a short fixed assistant reply, ending in its stop token.

    The `instant` engine answers every turn with these ids: a benchmark/test engine, never a model.
    """
    user = {"role": "user", "content": "."}
    opened = tito_tokenizer.render([user], add_generation_prompt=True)
    whole = tito_tokenizer.render([user, {"role": "assistant", "content": INSTANT_REPLY}])
    family = tito_tokenizer.family
    text = whole[len(opened) :] if whole.startswith(opened) else INSTANT_REPLY + family.end_of_turn
    encode = tito_tokenizer.tokenizer.encode
    stops = {int(encode(token, add_special_tokens=False)[0]) for token in family.stop_tokens}
    ids = [int(i) for i in encode(text, add_special_tokens=False)]
    for position, token in enumerate(ids):
        if token in stops:
            return ids[: position + 1]
    return [*ids, int(encode(family.end_of_turn or family.stop_tokens[0], add_special_tokens=False)[0])]


def load_server_tokenizer(family: str, tokenizer: str | None, engine: str, model_dir: Path | None) -> Tokenizer:
    """--tokenizer; else the local engine's model directory; else the family's builtin (or proxy) tokenizer."""
    if tokenizer:
        return load_tokenizer(tokenizer)
    if engine == "local":
        if model_dir is None:
            from tito.engines.local import default_model_dir

            model_dir = default_model_dir()
        return load_tokenizer(model_dir)
    if family == "default":
        raise ConfigurationError(
            f"--engine {engine} with the default family needs --tokenizer DIR (the served model's tokenizer, with "
            "its chat_template), or --family F for a family tito knows"
        )
    return builtin_tokenizer_for(family)[0]


def build_state(
    options: ServerOptions,
    *,
    engine: str = "local",
    engine_url: str | None = None,
    model_dir: Path | None = None,
    tokenizer: str | None = None,
    instant_token_delay: float = 0.0,
    threads: int | None = None,
    stream_interval: float = 0.0,
    stream_ids: int = 1,
) -> ServerState:
    """The state `tito serve` runs: its tokenizer, engine and empty session registry (`threads`: the local
    engine's CPU threads; `stream_interval`: seconds between an HTTP engine stream's reads; `stream_ids`: ids per
    event asked of SGLang's stream; `create_engine`)."""
    loaded = load_server_tokenizer(options.family, tokenizer, engine, model_dir)
    script: ReplyScript | None = None
    if engine == "instant":
        reply = tuple(instant_reply_ids(get_tito_tokenizer(loaded, options.family, options.chat_template_kwargs)))
        script = lambda request: reply  # noqa: E731
    built = create_engine(
        engine, url=engine_url, model_dir=model_dir, timeout=options.engine_timeout, instant_script=script,
        instant_token_delay=instant_token_delay, threads=threads, stream_interval=stream_interval,
        stream_ids=stream_ids,
    )  # fmt: skip
    return ServerState(loaded, built, options)
