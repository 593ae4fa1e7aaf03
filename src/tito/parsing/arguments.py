"""Tool-call arguments: the exact JSON substring a model wrote, and schema typing of parameter markup.

JSON formats keep the model's own argument text (never re-serialised), so a walker finds each
top-level value's span with the stdlib decoder. Parameter formats (XML, DSML) carry one text per
parameter; its type comes from the request's tool schema, and the object is serialised once with
json.dumps. Imports from tito: parsing.result.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tito.parsing.result import ToolSchema

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_OPEN = re.compile(r"[ \t\n\r]*\{[ \t\n\r]*")
_COLON = re.compile(r"[ \t\n\r]*:[ \t\n\r]*")
_SEPARATOR = re.compile(r"[ \t\n\r]*([,}])[ \t\n\r]*")
_PLAIN_KEY = re.compile(r'"([^"\\\x00-\x1f]*)"[ \t\n\r]*:[ \t\n\r]*')
"""A key without escapes (its text is its value; JSON strings hold no raw control character) and the colon after it:
one match for the usual key instead of a decode and a match; any other key goes through the decoder as before."""
_DECODER = json.JSONDecoder()
_ENCODER = json.JSONEncoder(ensure_ascii=False)
"""`json.dumps(..., ensure_ascii=False)` builds this encoder on every call; one, kept, writes the same text."""
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
_MAPPING = (dict, Mapping)
"""`isinstance(value, _MAPPING)` is `isinstance(value, Mapping)` with a JSON object (a dict) told in C: the ABC's check
takes ten times as long (~0.25 us, four of them per tool for every parse)."""


class ArgumentError(ValueError):
    """Arguments that cannot become a JSON object; the message says which part and why."""


def object_member_spans(text: str) -> dict[str, tuple[Any, int, int]]:
    """Each top-level member of the JSON object `text` as (value, start, end) of its value's text.

    Raises ArgumentError when `text` (surrounding whitespace aside) is not exactly one JSON object.
    """
    try:
        return _member_spans(text)
    except (ValueError, IndexError, RecursionError) as exc:
        raise ArgumentError(f"not a JSON object: {exc}") from exc


def _member_spans(text: str) -> dict[str, tuple[Any, int, int]]:
    # Each separator with the whitespace around it is one regex match (a Python call per whitespace run was a third
    # of a call's parse); a failed match re-reads the whitespace only to name the offset, as before.
    members: dict[str, tuple[Any, int, int]] = {}
    opening = _OPEN.match(text)
    if opening is None:
        raise ValueError(f"expected '{{' at offset {_skip_whitespace(text, 0)}")
    i = opening.end()
    if text[i : i + 1] == "}":
        i += 1
    else:
        while True:
            if text[i : i + 1] != '"':
                raise ValueError(f"expected a key at offset {i}")
            plain = _PLAIN_KEY.match(text, i)
            if plain is not None:
                key, start = plain.group(1), plain.end()
            else:
                key, i = _DECODER.raw_decode(text, i)
                colon = _COLON.match(text, i)
                if colon is None:
                    raise ValueError(f"expected ':' at offset {_skip_whitespace(text, i)}")
                start = colon.end()
            value, end = _DECODER.raw_decode(text, start)
            members[key] = (value, start, end)
            separator = _SEPARATOR.match(text, end)
            if separator is None:
                raise ValueError(f"expected ',' or '}}' at offset {_skip_whitespace(text, end)}")
            if separator.group(1) == "}":
                i = separator.end(1)
                break
            i = separator.end()
    if _skip_whitespace(text, i) != len(text):
        raise ValueError(f"text after the object at offset {i}")
    return members


def _skip_whitespace(text: str, position: int) -> int:
    match = _WHITESPACE.match(text, position)
    return match.end() if match else position


def json_object(text: str) -> dict[str, Any]:
    """The JSON object `text` spells; raises ArgumentError when it is not one (the caller keeps the text)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:  # runaway nesting in a degenerate sample is malformed, not a crash
        raise ArgumentError(f"arguments are not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ArgumentError(f"arguments are JSON {_JSON_TYPES.get(type(value), 'value')}, not an object")
    return value


@dataclass(frozen=True)
class ToolIndex:
    """The request's tools by name, built once per parse."""

    parameters: Mapping[str, Mapping[str, Any]] | None
    """Tool name -> its parameters' `properties`; None when the request sent no tools (names unchecked)."""

    @classmethod
    def of(cls, tools: Sequence[ToolSchema] | None) -> ToolIndex:
        """Built for every parse from the request's tools (a new list each request)."""
        if tools is None:
            return cls(None)
        index: dict[str, Mapping[str, Any]] = {}
        for tool in tools:
            function = tool.get("function", tool) if isinstance(tool, _MAPPING) else {}
            name = function.get("name") if isinstance(function, _MAPPING) else None
            if isinstance(name, str):
                parameters = function.get("parameters") or {}
                properties = parameters.get("properties") if isinstance(parameters, _MAPPING) else None
                index[name] = properties if isinstance(properties, _MAPPING) else {}
        return cls(index)

    def knows(self, name: str) -> bool:
        return self.parameters is None or name in self.parameters

    def parameter_schema(self, tool: str, parameter: str) -> Mapping[str, Any] | None:
        if self.parameters is None:
            return None
        schema = self.parameters.get(tool, {}).get(parameter)
        return schema if isinstance(schema, _MAPPING) else None


_STRING = frozenset({"string"})
_TYPE_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("integer", re.compile(r"u?int(eger)?\d*|long|short|bigint|smallint|tinyint|byte")),
    ("number", re.compile(r"number|numeric|float\d*|double|decimal|real")),
    ("boolean", re.compile(r"bool(ean)?")),
    ("object", re.compile(r"object|dict(ionary)?|map(ping)?|struct|record|hash")),
    ("array", re.compile(r"array|list|tuple|set|sequence")),
    ("string", re.compile(r"string|str|text|char|varchar")),
    ("null", re.compile(r"null|none|nil")),
)
"""Type names real schemas use (`float`, `String`, `dict`, `int32`...) by what they mean, case-insensitive."""


@functools.lru_cache(maxsize=256)
def json_type_name(name: str) -> str | None:
    """The JSON Schema type a schema's type name means; None for `any` and names of no known meaning."""
    word = name.strip().lower()
    return next((json_type for json_type, pattern in _TYPE_WORDS if pattern.fullmatch(word)), None)


@functools.lru_cache(maxsize=256)
def _types_named(name: str) -> frozenset[str]:
    json_type = json_type_name(name)
    return frozenset() if json_type is None else frozenset({json_type})


def declared_types(schema: Mapping[str, Any] | None) -> frozenset[str]:
    """The JSON types a parameter schema allows (`type`, a list of types, or anyOf/oneOf options); empty = any.

    Type names are read by meaning (json_type_name); one name of no known meaning makes the value unconstrained.
    """
    if not schema:
        return frozenset()
    declared = schema.get("type")
    if isinstance(declared, str):
        return _types_named(declared)
    if isinstance(declared, list):
        types = [json_type_name(name) if isinstance(name, str) else None for name in declared]
        return frozenset() if None in types else frozenset(t for t in types if t is not None)
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        found: set[str] = set()
        for option in options:
            option_types = declared_types(option) if isinstance(option, _MAPPING) else frozenset()
            if not option_types:
                return frozenset()
            found |= option_types
        return frozenset(found)
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
        return frozenset({"string"})
    return frozenset()


@dataclass(frozen=True)
class TypedValue:
    """A parameter's value and, when it does not fit its declared type, why (the value is kept as written)."""

    value: Any
    mismatch: str = ""


def typed_value(text: str, schema: Mapping[str, Any] | None) -> TypedValue:
    """A parameter's text as the value its schema declares.

    A string parameter keeps its text verbatim (`true` stays "true"); other types parse as JSON
    (Python's True/False/None accepted, as some official templates write them). Without a schema, or with
    a type of no known meaning, the text is JSON when it parses and a string otherwise. A value that does
    not fit its declared type is kept as the model wrote it (JSON when it parses, else the text), with the
    mismatch recorded: a schema mismatch never drops a well-formed call.
    """
    types = declared_types(schema)
    if types == _STRING:
        return TypedValue(text)
    stripped = text.strip()
    try:
        value = _stripped_json(stripped)
    except (ValueError, RecursionError):
        if stripped in _PYTHON_LITERALS:
            value = _PYTHON_LITERALS[stripped]
        elif not types or "string" in types:
            return TypedValue(text)
        else:
            return TypedValue(text, f"declared {'/'.join(sorted(types))} but the text is not JSON: {_clip(text)}")
    if types and not _fits(value, types):
        if "string" in types:
            return TypedValue(text)
        return TypedValue(value, f"declared {'/'.join(sorted(types))} but the value is {_JSON_TYPES[type(value)]}")
    return TypedValue(value)


def _stripped_json(text: str) -> Any:
    """`json.loads(text)` for text without surrounding whitespace, less its wrapper's cost (1 us of a parameter's
    1.2 us): the decoder's `raw_decode` from 0 must end at the end of the text."""
    value, end = _DECODER.raw_decode(text)
    if end != len(text):
        raise ValueError(f"extra data after the JSON value at offset {end}")
    return value


def type_mismatch(value: Any, schema: Mapping[str, Any] | None) -> str:
    """Why `value` does not fit the types `schema` declares ("" when it does, or when nothing is declared)."""
    types = declared_types(schema)
    if types and not _fits(value, types):
        return f"declared {'/'.join(sorted(types))} but the value is {_JSON_TYPES[type(value)]}"
    return ""


def schema_mismatches(arguments: Mapping[str, Any], tools: ToolIndex, name: str) -> str:
    """Why JSON arguments do not fit the tool's declared parameter types ("" when they do): the same check
    parameter formats make while typing, so a call gets the same status in every family."""
    problems = [
        f"parameter {key!r}: {problem}"
        for key, value in arguments.items()
        if (problem := type_mismatch(value, tools.parameter_schema(name, key)))
    ]  # a list, not two chained generators: one frame for every call of every turn
    return "; ".join(problems)


def _fits(value: Any, types: frozenset[str]) -> bool:
    kind = _JSON_TYPES.get(type(value), "")
    return kind in types or (kind == "integer" and "number" in types)


def _clip(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def dump_arguments(arguments: Mapping[str, Any]) -> str:
    """Arguments of a parameter format as OpenAI JSON text: one serialisation, unicode kept."""
    return _ENCODER.encode(arguments)
