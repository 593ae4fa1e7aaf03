"""Format name -> parser: the one place `Family.output_format` binds to a grammar.

Imports from tito: errors, parsing (its grammar modules).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from tito.errors import ConfigurationError
from tito.parsing.deepseek import DeepSeekDsml, DeepSeekV32Dsml
from tito.parsing.glm import Glm47
from tito.parsing.grammar import OutputFormat
from tito.parsing.kimi import Kimi
from tito.parsing.minimax import MiniMax
from tito.parsing.plain import Plain
from tito.parsing.qwen import QwenJson, QwenXml


def _index(formats: list[OutputFormat]) -> Mapping[str, OutputFormat]:
    index: dict[str, OutputFormat] = {}
    for output_format in formats:
        if output_format.name in index:
            raise ConfigurationError(f"output format {output_format.name!r} is registered twice")
        index[output_format.name] = output_format
    return MappingProxyType(index)


OUTPUT_FORMATS: Mapping[str, OutputFormat] = _index(
    [QwenJson(), QwenXml(), Glm47(), Kimi(), MiniMax(), DeepSeekV32Dsml(), DeepSeekDsml(), Plain()]
)


def get_output_format(name: str) -> OutputFormat:
    """The parser registered as `name`; the error lists the registered names."""
    output_format = OUTPUT_FORMATS.get(name)
    if output_format is None:
        raise ConfigurationError(f"no completion parser for output format {name!r}; known: {', '.join(OUTPUT_FORMATS)}")
    return output_format
