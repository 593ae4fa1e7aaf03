"""The parameter-format skeleton shared by Qwen3.5/Nemotron XML, GLM and the invoke grammar (MiniMax, DSML).

Each grammar reads (key, text) pairs its own way; the rest is one piece of code: the tool name checked,
a repeated key rejected, each text typed by the schema (or by DSML's explicit `string="..."`), schema
mismatches kept and recorded, the object serialised once.

Imports from tito: parsing.arguments, parsing.grammar, parsing.result.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from tito.parsing.arguments import ArgumentError, ToolIndex, TypedValue, dump_arguments, type_mismatch, typed_value
from tito.parsing.grammar import Attempt, unknown_tool
from tito.parsing.result import CallStatus


@dataclass(frozen=True)
class Parameter:
    """One parameter as the grammar read it."""

    key: str
    text: str
    is_string: bool | None = None
    """DSML's `string="true|false"`: the model's own word on the type, which then decides it; None = the schema."""


def parameter_call(raw: str, name: str, parameters: Iterator[Parameter], tools: ToolIndex) -> Attempt:
    """The attempt for a closed, named call whose parameters `parameters` yields.

    The iterator raises ArgumentError on markup it cannot read: the call is then INVALID_ARGUMENTS with
    that reason. Values that do not fit the schema keep the call (SCHEMA_MISMATCH, the reasons in detail).
    """
    if not tools.knows(name):
        return unknown_tool(raw, name)
    arguments: dict[str, object] = {}
    mismatches: list[str] = []
    try:
        for parameter in parameters:
            if parameter.key in arguments:
                raise ArgumentError(f"parameter {parameter.key!r} given twice")
            typed = _typed(parameter, tools, name)
            arguments[parameter.key] = typed.value
            if typed.mismatch:
                mismatches.append(f"parameter {parameter.key!r}: {typed.mismatch}")
    except ArgumentError as exc:
        return Attempt(CallStatus.INVALID_ARGUMENTS, raw, name=name, detail=str(exc))
    status = CallStatus.SCHEMA_MISMATCH if mismatches else CallStatus.OK
    return Attempt(status, raw, name=name, arguments=dump_arguments(arguments), detail="; ".join(mismatches))


def _typed(parameter: Parameter, tools: ToolIndex, name: str) -> TypedValue:
    schema = tools.parameter_schema(name, parameter.key)
    if parameter.is_string is None:
        return typed_value(parameter.text, schema)
    if parameter.is_string:
        value: object = parameter.text
    else:
        try:
            value = json.loads(parameter.text)
        except (ValueError, RecursionError) as exc:
            raise ArgumentError(f'parameter {parameter.key!r}: string="false" but the text is not JSON: {exc}') from exc
    return TypedValue(value, type_mismatch(value, schema))
