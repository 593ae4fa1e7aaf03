"""Argument handling: JSON formats keep the model's exact text; parameter formats type values by schema."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.parsing.cases import json_value, text
from tito.parsing.arguments import (
    ArgumentError,
    ToolIndex,
    declared_types,
    json_object,
    json_type_name,
    object_member_spans,
    typed_value,
)

spellings = st.sampled_from(
    [
        {"separators": (", ", ": ")},
        {"separators": (",", ":")},
        {"indent": 2},
        {"ensure_ascii": True},
        {"ensure_ascii": False, "separators": (" ,", " : ")},
    ]
)


@given(st.dictionaries(text, json_value, max_size=4), spellings)
def test_member_spans_are_the_exact_text_of_each_top_level_value(obj: dict, spelling: dict) -> None:
    written = json.dumps(obj, **spelling)
    members = object_member_spans(written)
    assert list(members) == list(obj)
    for key, (value, start, end) in members.items():
        assert value == obj[key]
        assert json.loads(written[start:end]) == obj[key]


@pytest.mark.parametrize(
    "broken", ['{"a": 1', '{"a" 1}', "[1, 2]", '{"a": 1} trailing', "", '{"a": 1,}', "{'a': 1}", '{"a\x01": 1}']
)
def test_anything_but_one_json_object_is_an_argument_error(broken: str) -> None:
    with pytest.raises(ArgumentError):
        object_member_spans(broken)


@pytest.mark.parametrize(
    ("broken", "offset"),
    [
        ("  [1]", "expected '{' at offset 2"),
        ("{ 1}", "expected a key at offset 2"),
        ('{"a":1,}', "expected a key at offset 7"),
        ('{"a" 1}', "expected ':' at offset 5"),
        ('{"a": 1 x', "expected ',' or '}' at offset 8"),
        ('{"a": 1}  x', "text after the object at offset 8"),
    ],
)
def test_an_argument_error_names_the_offset_past_the_whitespace_before_it(broken: str, offset: str) -> None:
    """The message enters a call's recorded `detail`: its offset is where the unexpected character is, except text
    after the object, counted from the closing brace."""
    with pytest.raises(ArgumentError) as raised:
        object_member_spans(broken)
    assert str(raised.value) == f"not a JSON object: {offset}"


def test_member_spans_skip_every_kind_of_json_whitespace() -> None:
    assert object_member_spans(' {\t"a"\r: 1 ,\n "b" :2 } ') == {"a": (1, 9, 10), "b": (2, 19, 20)}


def test_json_object_reads_an_object_and_rejects_non_objects() -> None:
    assert json_object('{ "city" :"Paris" ,"n":1 }') == {"city": "Paris", "n": 1}
    for not_object in ("[1]", '"x"', "3", "nope"):
        with pytest.raises(ArgumentError):
            json_object(not_object)


@pytest.mark.parametrize(
    ("schema", "written", "value"),
    [
        ({"type": "string"}, "true", "true"),
        ({"type": "string"}, "3", "3"),
        ({"type": "string"}, " padded \n", " padded \n"),
        ({"type": "integer"}, "3", 3),
        ({"type": "integer"}, " 3\n", 3),
        ({"type": "number"}, "2.5", 2.5),
        ({"type": "number"}, "2", 2),
        ({"type": "boolean"}, "true", True),
        ({"type": "boolean"}, "True", True),  # Nemotron's official template writes Python spellings
        ({"type": "object"}, '{"a": [1, null]}', {"a": [1, None]}),
        ({"type": "array"}, "[1, 2]", [1, 2]),
        ({"type": ["string", "null"]}, "null", None),
        ({"type": ["string", "integer"]}, "hello", "hello"),
        ({"type": ["string", "integer"]}, "[1]", "[1]"),
        ({"anyOf": [{"type": "integer"}, {"type": "boolean"}]}, "false", False),
        ({"enum": ["a", "b"]}, "true", "true"),
        (None, "true", True),
        (None, "not json", "not json"),
        ({}, "{}", {}),
    ],
)
def test_parameter_text_takes_the_type_its_schema_declares(schema: dict | None, written: str, value: object) -> None:
    typed = typed_value(written, schema)
    assert typed.value == value and type(typed.value) is type(value)
    assert typed.mismatch == ""


@pytest.mark.parametrize(
    ("schema", "written", "kept"),
    [
        ({"type": "integer"}, "three", "three"),
        ({"type": "integer"}, "3 4", "3 4"),
        ({"type": "object"}, "{", "{"),
        ({"type": "integer"}, "true", True),
        ({"type": "array"}, "{}", {}),
        ({"type": "integer"}, "2.5", 2.5),
    ],
)
def test_a_value_that_does_not_fit_its_declared_type_is_kept_as_written_with_the_mismatch(
    schema: dict, written: str, kept: object
) -> None:
    typed = typed_value(written, schema)
    assert typed.value == kept and type(typed.value) is type(kept)
    assert "declared" in typed.mismatch


def test_declared_types_read_type_lists_and_unions() -> None:
    assert declared_types({"type": ["integer", "null"]}) == {"integer", "null"}
    assert declared_types({"oneOf": [{"type": "string"}, {"type": "array"}]}) == {"string", "array"}
    assert declared_types({"anyOf": [{"type": "string"}, {}]}) == frozenset()  # one untyped option allows anything
    assert declared_types({"description": "no type"}) == frozenset()


def test_tool_index_checks_names_only_when_the_request_sent_tools() -> None:
    assert ToolIndex.of(None).knows("anything")
    assert not ToolIndex.of([]).knows("anything")
    index = ToolIndex.of([{"type": "function", "function": {"name": "f", "parameters": {"properties": {"x": {}}}}}])
    assert index.knows("f") and not index.knows("g")
    assert index.parameter_schema("f", "x") == {} and index.parameter_schema("f", "y") is None


@pytest.mark.parametrize(
    ("name", "meaning"),
    [
        *[(n, "integer") for n in ("integer", "int", "Int32", "uint64", "long", "short")],
        *[(n, "number") for n in ("number", "float", "Float64", "double", "decimal")],
        *[(n, "boolean") for n in ("boolean", "Boolean", "bool")],
        *[(n, "object") for n in ("object", "dict", "Dictionary", "map", "struct")],
        *[(n, "array") for n in ("array", "list", "tuple", "set", "Sequence")],
        *[(n, "string") for n in ("string", "String", "str", "text")],
        *[(n, None) for n in ("any", "Any", "whatever", "")],
    ],
)
def test_a_type_name_is_read_by_what_it_means(name: str, meaning: str | None) -> None:
    assert json_type_name(name) == meaning


def test_one_type_name_of_no_known_meaning_leaves_the_value_unconstrained() -> None:
    assert declared_types({"type": ["integer", "any"]}) == frozenset()
    assert typed_value("hello", {"type": "any"}).value == "hello"
    assert typed_value("[1]", {"type": "any"}).value == [1]


def test_runaway_nesting_is_malformed_arguments_not_a_crash() -> None:
    """A degenerate sample (`[[[[...` thousands deep) overflows the JSON decoder's recursion: an ArgumentError."""
    with pytest.raises(ArgumentError):
        json_object('{"x": ' + "[" * 5000 + "]}")
    with pytest.raises(ArgumentError):
        object_member_spans('{"x": ' + "[" * 5000 + "]}")
