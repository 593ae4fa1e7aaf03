"""Error messages say where a resend differs in a form clients cannot misread."""

from __future__ import annotations

import re

from tito.errors import AppendOnlyError


def test_two_long_strings_show_the_first_differing_offset_and_the_text_around_it() -> None:
    stored = "line of the stored reply. " * 40 + "the end"
    sent = stored[:700] + "CHANGED" + stored[707:]
    text = str(AppendOnlyError(1, "content", stored, sent))
    assert "first difference at character 700 (stored 1047 characters, got 1047)" in text
    assert "CHANGED" in text and stored[640:700] in text  # the context before it, in both
    assert len(text) < 500


def test_a_string_cut_short_differs_where_it_ends() -> None:
    stored = "x" * 300
    assert "first difference at character 250" in str(AppendOnlyError(0, "content", stored, stored[:250]))


def test_ids_are_never_quoted_so_no_status_code_can_be_read_in_them() -> None:
    """smolagents read "429" inside a hex call id as a rate limit and waited minutes."""
    call = {"id": "call_ab4290", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    stored = {"role": "assistant", "content": None, "tool_calls": [call]}
    sent = {"role": "assistant", "content": "Calling tools: f"}
    for error in (
        AppendOnlyError(1, "content", stored, sent),
        AppendOnlyError(2, "tool_call_id", "call_ab4290", "call_x4291"),
        AppendOnlyError(1, "tool_calls[0].id", "call_ab4290", "call_x4291"),
    ):
        assert not re.search(r"4290|4291", str(error)), str(error)
    assert "'<id>'" in str(AppendOnlyError(1, "content", stored, sent))
