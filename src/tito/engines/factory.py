"""Build an engine by kind (`tito serve --engine`), importing only the implementation asked for.

`local` imports torch and transformers, the HTTP engines httpx: none of them is imported by `import tito`.

Imports from tito: errors, engines (each implementation lazily).
"""

from __future__ import annotations

from pathlib import Path

from tito.engines.instant import InstantEngine, ReplyScript
from tito.engines.protocol import Engine
from tito.errors import ConfigurationError

ENGINE_KINDS = ("local", "sglang", "vllm", "instant")


def create_engine(
    kind: str,
    *,
    url: str | None = None,
    model_dir: Path | None = None,
    timeout: float = 600.0,
    instant_script: ReplyScript | None = None,
    instant_token_delay: float = 0.0,
    threads: int | None = None,
    stream_interval: float = 0.0,
    stream_ids: int = 1,
) -> Engine:
    """An engine of `kind`: `local` (model_dir, or the default SmolLM2), `sglang`/`vllm` (url), `instant` (script;
    `instant_token_delay` seconds per reply id stand in for generation time). `threads`: the local engine's torch
    CPU threads (None: torch's default). `stream_interval`: an HTTP engine's stream is read at most once per this
    many seconds (the events that arrive in between as one burst); `stream_ids`: SGLang is asked for a streamed
    event per this many ids (vLLM takes it at launch only: `--stream-interval`, which `tito engine-args` prints)."""
    if kind == "local":
        from tito.engines.local import LocalEngine, default_model_dir

        return LocalEngine.from_model_dir(model_dir or default_model_dir(), threads=threads)
    if kind in ("sglang", "vllm"):
        if not url:
            raise ConfigurationError(f"engine {kind!r} needs --engine-url (e.g. http://127.0.0.1:30000)")
        if kind == "sglang":
            from tito.engines.sglang import SGLangEngine

            return SGLangEngine(url, timeout=timeout, stream_interval=stream_interval, stream_ids=stream_ids)
        from tito.engines.vllm import VLLMEngine

        return VLLMEngine(url, timeout=timeout, stream_interval=stream_interval)
    if kind == "instant":
        if instant_script is None:
            raise ConfigurationError("engine 'instant' needs a reply script (the ids it answers with)")
        return InstantEngine(instant_script, token_delay=instant_token_delay)
    raise ConfigurationError(f"unknown engine {kind!r}; choose from {', '.join(ENGINE_KINDS)}")
