"""Tool-call arguments: the exact JSON substring a model wrote, and schema typing of parameter markup.

JSON formats keep the model's own argument text (never re-serialised), so a walker finds each
top-level value's span with the stdlib decoder. Parameter formats (XML, DSML) carry one text per
parameter; its type comes from the request's tool schema, and the object is serialised once with
json.dumps. Imports from tito: parsing.result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tito.parsing.result import ToolSchema

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_PYTHON_LITERALS: Mapping[str, Any] = {"True": True, "False": False, "None": None}
"""Some official templates (Nemotron 3, Qwen3.5) write Python spellings of non-string values."""
_JSON_TYPES: Mapping[type, str] = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    dict: "object",
    list: "array",
    type(None): "null",
}


class ArgumentError(ValueError):
    """Arguments that cannot become a JSON object; the message says which part and why."""


def object_member_spans(text: str) -> dict[str, tuple[Any, int, int]]:
    """Each top-level member of the JSON object `text` as (value, start, end) of its value's text.

    Raises ArgumentError when `text` (surrounding whitespace aside) is not exactly one JSON object.
    """
    try:
        return _member_spans(text)
    except (ValueError, IndexError) as exc:
        raise ArgumentError(f"not a JSON object: {exc}") from exc


def _member_spans(text: str) -> dict[str, tuple[Any, int, int]]:
    members: dict[str, tuple[Any, int, int]] = {}
    i = _skip_whitespace(text, 0)
    if text[i : i + 1] != "{":
        raise ValueError(f"expected '{{' at offset {i}")
    i = _skip_whitespace(text, i + 1)
    if text[i : i + 1] == "}":
        i += 1
    else:
        while True:
            if text[i : i + 1] != '"':
                raise ValueError(f"expected a key at offset {i}")
            key, i = _DECODER.raw_decode(text, i)
            i = _skip_whitespace(text, i)
            if text[i : i + 1] != ":":
                raise ValueError(f"expected ':' at offset {i}")
            start = _skip_whitespace(text, i + 1)
            value, end = _DECODER.raw_decode(text, start)
            members[key] = (value, start, end)
            i = _skip_whitespace(text, end)
            separator = text[i : i + 1]
            i += 1
            if separator == "}":
                break
            if separator != ",":
                raise ValueError(f"expected ',' or '}}' at offset {i - 1}")
            i = _skip_whitespace(text, i)
    if _skip_whitespace(text, i) != len(text):
        raise ValueError(f"text after the object at offset {i}")
    return members


def _skip_whitespace(text: str, position: int) -> int:
    match = _WHITESPACE.match(text, position)
    return match.end() if match else position


def json_object_text(text: str) -> str:
    """`text` itself when it is one JSON object; raises ArgumentError otherwise (no re-serialisation)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ArgumentError(f"arguments are not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ArgumentError(f"arguments are JSON {_JSON_TYPES.get(type(value), 'value')}, not an object")
    return text


@dataclass(frozen=True)
class ToolIndex:
    """The request's tools by name, built once per parse."""

    parameters: Mapping[str, Mapping[str, Any]] | None
    """Tool name -> its parameters' `properties`; None when the request sent no tools (names unchecked)."""

    @classmethod
    def of(cls, tools: list[ToolSchema] | tuple[ToolSchema, ...] | None) -> ToolIndex:
        if tools is None:
            return cls(None)
        index: dict[str, Mapping[str, Any]] = {}
        for tool in tools:
            function = tool.get("function", tool) if isinstance(tool, Mapping) else {}
            name = function.get("name") if isinstance(function, Mapping) else None
            if isinstance(name, str):
                parameters = function.get("parameters") or {}
                properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
                index[name] = properties if isinstance(properties, Mapping) else {}
        return cls(index)

    def knows(self, name: str) -> bool:
        return self.parameters is None or name in self.parameters

    def parameter_schema(self, tool: str, parameter: str) -> Mapping[str, Any] | None:
        if self.parameters is None:
            return None
        schema = self.parameters.get(tool, {}).get(parameter)
        return schema if isinstance(schema, Mapping) else None


def declared_types(schema: Mapping[str, Any] | None) -> frozenset[str]:
    """The JSON types a parameter schema allows (`type`, a list of types, or anyOf/oneOf options); empty = any."""
    if not schema:
        return frozenset()
    declared = schema.get("type")
    if isinstance(declared, str):
        return frozenset({declared})
    if isinstance(declared, list):
        return frozenset(t for t in declared if isinstance(t, str))
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        found: set[str] = set()
        for option in options:
            option_types = declared_types(option) if isinstance(option, Mapping) else frozenset()
            if not option_types:
                return frozenset()
            found |= option_types
        return frozenset(found)
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
        return frozenset({"string"})
    return frozenset()


def typed_value(text: str, schema: Mapping[str, Any] | None) -> Any:
    """A parameter's text as the value its schema declares.

    A string parameter keeps its text verbatim (`true` stays "true"); other types parse as JSON
    (Python's True/False/None accepted, as some official templates write them). Without a schema the
    text is JSON when it parses and a string otherwise. Raises ArgumentError when a non-string type
    is declared and the text is not JSON of it.
    """
    types = declared_types(schema)
    if types == {"string"}:
        return text
    stripped = text.strip()
    try:
        value = json.loads(stripped)
    except ValueError:
        if stripped in _PYTHON_LITERALS:
            value = _PYTHON_LITERALS[stripped]
        elif not types or "string" in types:
            return text
        else:
            raise ArgumentError(f"declared {'/'.join(sorted(types))} but the text is not JSON: {_clip(text)}") from None
    if types and not _fits(value, types):
        if "string" in types:
            return text
        raise ArgumentError(f"declared {'/'.join(sorted(types))} but the value is {_JSON_TYPES[type(value)]}")
    return value


def _fits(value: Any, types: frozenset[str]) -> bool:
    kind = _JSON_TYPES.get(type(value), "")
    return kind in types or (kind == "integer" and "number" in types)


def _clip(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def dump_arguments(arguments: Mapping[str, Any]) -> str:
    """Arguments of a parameter format as OpenAI JSON text: one serialisation, unicode kept."""
    return json.dumps(arguments, ensure_ascii=False)
