"""The spans of an object's members and an array's elements in a body's text, as its bytes' offsets too."""

from __future__ import annotations

import pytest

from tito.server.sessions import json_spans


def test_the_last_array_of_the_key_and_the_members_before_and_after_it_are_found() -> None:
    text = '{"messages": [1], "a": "ü", "messages" : [ {"x": "]"} , 2 ] , "tools": [{"b": []}], "n": 1.5 }'
    opened, ends, close, before, after = json_spans.find_array(text, "messages")
    assert text[opened - 1] == "[" and text[close] == "]" and text[opened:close].strip() == '{"x": "]"} , 2'
    assert [text[end - 1] for end in ends] == ["}", "2"]
    assert [(name, text[start:end]) for name, start, end in after] == [("tools", '[{"b": []}]'), ("n", "1.5")]
    assert json_spans.members_after(text, close + 1) == after
    cuts = [(name, text[key_at:following], text[start:following]) for name, key_at, start, following in before]
    assert cuts == [("messages", '"messages": [1], ', "[1], "), ("a", '"a": "ü", ', '"ü", ')]


def test_members_in_bytes_count_the_utf8_bytes_before_them() -> None:
    text = '{"a": "ü✓", "b": [1]}'
    body = text.encode()
    ((name, start, end),) = json_spans.members_in_bytes(text, json_spans.members_after(text, text.index(",")))
    assert (name, body[start:end]) == ("b", b"[1]")
    tail = text[text.index(",") :]
    assert json_spans.members_in_bytes(tail, json_spans.members_after(tail, 0), 0, 10) == [("b", 10 + 7, 10 + 10)]


@pytest.mark.parametrize(
    "text", ['["messages"]', '{"messages": 1}', '{"messages": [1] "a": 2}', '{"messages": [1], a: 2}', '{"a" 1}']
)
def test_no_array_or_a_malformed_object_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        json_spans.find_array(text, "messages")
