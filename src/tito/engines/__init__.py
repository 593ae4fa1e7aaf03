"""Inference engines behind one protocol (`tito.engines.protocol`): ids in, sampled ids and logprobs out.

Importing this package imports no engine implementation: `local` needs torch, the HTTP engines need httpx.

Imports from tito: engines.protocol.
"""

from tito.engines.protocol import (
    Engine,
    EngineInfo,
    Finish,
    FinishKind,
    GenerateRequest,
    Generation,
    GenerationChunk,
    LogprobSemantics,
    SamplingParams,
    Timings,
)

__all__ = [
    "Engine",
    "EngineInfo",
    "Finish",
    "FinishKind",
    "GenerateRequest",
    "Generation",
    "GenerationChunk",
    "LogprobSemantics",
    "SamplingParams",
    "Timings",
]
