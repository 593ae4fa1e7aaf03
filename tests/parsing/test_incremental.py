"""The incremental parser: any chunking of a completion's ids streams deltas that add up to parse_completion.

Completions come from the family's own render (reasoning, content, parallel calls with nested arguments),
cut anywhere (truncated), or from the malformed tables of test_parse_completion.py; chunkings are one id at
a time, random sizes, and all at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.parsing.cases import TOOLS, Case, assistant_messages, case_names, get_case, render_completion
from tests.parsing.test_parse_completion import TABLES, _ids, _prompt_and_reasoning
from tito.families import get_family
from tito.parsing import Delta, ParseResult, build_completion_parser
from tito.parsing.incremental import IncrementalParser
from tito.tokenizer_loading import LocalTokenizer

CASES = case_names()
PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def chunks_of(ids: list[int], sizes: Sequence[int]) -> list[list[int]]:
    """`ids` cut into chunks of the given sizes, cycled (size 0 = all at once)."""
    if not sizes or sizes[0] == 0:
        return [ids]
    chunks, position, k = [], 0, 0
    while position < len(ids):
        size = sizes[k % len(sizes)]
        chunks.append(ids[position : position + size])
        position, k = position + size, k + 1
    return chunks


chunkings = st.one_of(st.just([1]), st.just([0]), st.lists(st.integers(1, 9), min_size=1, max_size=6))


def stream(parser: IncrementalParser, chunks: list[list[int]], last: bool = False) -> tuple[list[Delta], ParseResult]:
    """The deltas of the chunks and finish(); `last`: the last chunk is fed as the last (its deltas left to finish)."""
    deltas: list[Delta] = []
    for index, chunk in enumerate(chunks):
        deltas += parser.feed(chunk, last=last and index == len(chunks) - 1)
    rest, result = parser.finish()
    return deltas + rest, result


def accumulate(deltas: list[Delta]) -> dict[str, Any]:
    """The message an OpenAI client builds from the deltas."""
    reasoning, content = "", ""
    calls: dict[int, dict[str, Any]] = {}
    for delta in deltas:
        openai = delta.as_openai()
        reasoning += openai.get("reasoning_content", "")
        content += openai.get("content") or ""
        for piece in openai.get("tool_calls", []):
            call = calls.setdefault(piece["index"], {"type": "function", "function": {"name": "", "arguments": ""}})
            if "id" in piece:
                assert not call.get("id"), "a call's id and name come once"
                call["id"], call["function"]["name"] = piece["id"], piece["function"]["name"]
            call["function"]["arguments"] += piece["function"]["arguments"]
    message: dict[str, Any] = {"role": "assistant", "content": content, "reasoning_content": reasoning}
    if calls:
        assert sorted(calls) == list(range(len(calls))), "call indexes count up from 0"
        message["tool_calls"] = [calls[index] for index in sorted(calls)]
    return message


def assert_stream_equals_whole(case: Case, ids: list[int], prompt_ids: list[int] | None, sizes: list[int]) -> None:
    whole = case.tito.parse_completion(ids, prompt_ids, TOOLS)
    expected = {"reasoning_content": "", **whole.message}
    for last in (False, True):  # the last chunk decided by feed() or left to finish(): the same message
        deltas, result = stream(case.tito.incremental_parser(prompt_ids, TOOLS), chunks_of(ids, sizes), last)
        assert result == whole, "finish() must give parse_completion's result"
        assert accumulate(deltas) == expected, (last, case.tokenizer.decode(ids))


@pytest.mark.parametrize("name", CASES)
def test_streamed_deltas_of_a_rendered_completion_add_up_to_the_whole_parse(name: str) -> None:
    case = get_case(name)

    @PROPERTY
    @given(message=assistant_messages(case), sizes=chunkings)
    def streamed(message: dict, sizes: list[int]) -> None:
        completion = render_completion(case, message)
        assert_stream_equals_whole(case, completion.completion_ids, completion.prompt_ids, sizes)

    streamed()


@pytest.mark.parametrize("name", CASES)
def test_a_truncated_completion_streams_what_its_whole_parse_says_and_no_unclosed_call(name: str) -> None:
    case = get_case(name)

    @PROPERTY
    @given(message=assistant_messages(case), sizes=chunkings, cut=st.floats(0, 1))
    def truncated(message: dict, sizes: list[int], cut: float) -> None:
        completion = render_completion(case, message)
        ids = completion.completion_ids[: int(cut * len(completion.completion_ids))]
        assert_stream_equals_whole(case, ids, completion.prompt_ids, sizes)

    truncated()


def _malformed_cases() -> list[tuple[str, str]]:
    return [(name, kind) for name in CASES for kind in TABLES[get_case(name).family.output_format]]


@pytest.mark.parametrize(("name", "kind"), _malformed_cases(), ids=[f"{n}-{k}" for n, k in _malformed_cases()])
@pytest.mark.parametrize("sizes", [[1], [3, 1, 7], [16], [0]], ids=["1", "mixed", "16", "all"])
def test_a_malformed_completion_streams_what_its_whole_parse_says(name: str, kind: str, sizes: list[int]) -> None:
    case = get_case(name)
    entry = TABLES[case.family.output_format][kind]
    prompt_ids, reasoning_ids = _prompt_and_reasoning(case)
    stop = _ids(case, (case.family.end_of_turn,)) if entry.stopped else []
    assert_stream_equals_whole(case, reasoning_ids + _ids(case, entry.body) + stop, prompt_ids, sizes)


@pytest.mark.parametrize("name", CASES)
def test_without_prompt_ids_the_stream_still_ends_in_the_whole_parse(name: str) -> None:
    case = get_case(name)
    for text in ("I should answer.</think>Done.", "Just content, no reasoning block."):
        ids = _ids(case, (text, case.family.end_of_turn))
        for sizes in ([1], [0]):
            assert_stream_equals_whole(case, ids, None, sizes)


def test_content_leaves_as_it_is_sampled_not_at_the_end() -> None:
    case = get_case("qwen3")
    message = {"role": "assistant", "content": "one two three four", "reasoning_content": "r"}
    completion = render_completion(case, message)
    parser = case.tito.incremental_parser(completion.prompt_ids, TOOLS)
    streamed = [parser.feed([token]) for token in completion.completion_ids[:-1]]
    content = "".join(d.content or "" for deltas in streamed for d in deltas)
    assert content == "one two three four"
    assert next(i for i, deltas in enumerate(streamed) if any(d.content for d in deltas)) < len(streamed) - 3


def test_a_character_split_across_ids_leaves_whole_when_fed_one_id_at_a_time(qwen3_tokenizer: LocalTokenizer) -> None:
    parser = build_completion_parser(get_family("qwen3"), qwen3_tokenizer)
    ids = qwen3_tokenizer.encode("<think>\n\n</think>\n\nOK 😀 𝔘𝔫𝔦 中文 done<|im_end|>")
    assert any(qwen3_tokenizer.decode([token]).endswith("\ufffd") for token in ids)  # some id is part of a character
    streaming = IncrementalParser(parser, None, TOOLS)
    pieces = [delta.content for token in ids[:-1] for delta in streaming.feed([token]) if delta.content]
    assert all("\ufffd" not in piece for piece in pieces)
    deltas, result = stream(streaming, [ids[-1:]])
    assert result == parser.parse(ids, None, TOOLS)
    assert (
        "".join(pieces) + "".join(d.content or "" for d in deltas) == result.message["content"] == "OK 😀 𝔘𝔫𝔦 中文 done"
    )


@pytest.mark.parametrize("after", ["", "\nAnd one more thing."])
def test_finish_reads_the_body_again_only_when_it_changed_since_the_streams_last_read(
    qwen3_tokenizer: LocalTokenizer, monkeypatch: pytest.MonkeyPatch, after: str
) -> None:
    parser = build_completion_parser(get_family("qwen3"), qwen3_tokenizer)
    call = '<tool_call>\n{"name": "search", "arguments": {"query": "x"}}\n</tool_call>'
    ids = qwen3_tokenizer.encode(f"<think>\nr\n</think>\n\nSure.\n{call}")
    tail = qwen3_tokenizer.encode(f"{after}<|im_end|>")  # one last chunk: its text is only taken, never read
    read: list[str] = []
    original = parser.format.parse
    monkeypatch.setattr(parser.format, "parse", lambda text, tools: read.append(text) or original(text, tools))
    deltas, result = stream(IncrementalParser(parser, None, TOOLS), [[token] for token in ids] + [tail], last=True)
    body = "\n\nSure.\n\ufdd2\n" + '{"name": "search", "arguments": {"query": "x"}}\n\ufdd3'
    # the stream reads the body at the call's opening and closing markers; finish() only a body that changed since
    assert read == ["\n\nSure.\n\ufdd2", body] + ([body + after] if after else [])
    assert result == parser.parse(ids + tail, None, TOOLS)
    assert accumulate(deltas) == {"reasoning_content": "r", **result.message}
    assert result.message["content"] == "Sure." + after


@pytest.mark.parametrize("size", [1, 2, 0])
def test_a_marker_the_tokenizer_splits_is_held_back_until_decided(qwen3_tokenizer: LocalTokenizer, size: int) -> None:
    """`｜DSML｜` is ordinary text in the Qwen3 vocabulary: its first pieces must not leave as content."""
    parser = build_completion_parser(get_family("deepseekv4"), qwen3_tokenizer)
    text = (
        'Hmm.</think>Sure.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="search">\n'
        '<｜DSML｜parameter name="query" string="true">x</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'
        "<｜end▁of▁sentence｜>"
    )
    ids = qwen3_tokenizer.encode(text)
    deltas, result = stream(IncrementalParser(parser, None, TOOLS), chunks_of(ids, [size]))
    assert result == parser.parse(ids, None, TOOLS)
    assert accumulate(deltas) == {"reasoning_content": "", **result.message}
    assert result.message["content"] == "Sure." and len(result.message["tool_calls"]) == 1
    written_stop = qwen3_tokenizer.encode("Hmm.</think>Sure.<｜end▁of▁sentence｜>ignored")  # a stop spelled as text
    deltas, result = stream(IncrementalParser(parser, None, TOOLS), chunks_of(written_stop, [size]))
    assert accumulate(deltas)["content"] == result.message["content"] == "Sure." and result.finish_reason == "stop"


def test_tool_call_ids_are_derived_from_the_call_so_stream_and_whole_parse_agree() -> None:
    case = get_case("qwen3")
    call = {"type": "function", "function": {"name": "search", "arguments": '{"query": "x"}'}}
    message = {"role": "assistant", "content": "", "reasoning_content": "r", "tool_calls": [{"id": "c", **call}]}
    completion = render_completion(case, message)
    first = case.tito.parse_completion(completion.completion_ids, completion.prompt_ids, TOOLS)
    again = case.tito.parse_completion(completion.completion_ids, completion.prompt_ids, TOOLS)
    later_turn = case.tito.parse_completion(completion.completion_ids, [*completion.prompt_ids, 0], TOOLS)
    ids = [r.message["tool_calls"][0]["id"] for r in (first, again, later_turn)]
    assert ids[0] == ids[1] != ids[2] and ids[0].startswith("call_")


def test_a_call_leaves_as_openai_deltas_header_first_then_arguments_and_a_finished_parser_takes_no_more() -> None:
    case = get_case("qwen35")
    call = {"id": "x", "type": "function", "function": {"name": "search", "arguments": '{"query": "x"}'}}
    message = {"role": "assistant", "content": "", "reasoning_content": "r", "tool_calls": [call]}
    completion = render_completion(case, message)
    parser = case.tito.incremental_parser(completion.prompt_ids, TOOLS)
    deltas = parser.feed(completion.completion_ids)
    rest, result = parser.finish()
    pieces = [d.as_openai()["tool_calls"][0] for d in deltas + rest if d.tool_call is not None]
    call_id = result.message["tool_calls"][0]["id"]
    assert pieces == [
        {"index": 0, "id": call_id, "type": "function", "function": {"name": "search", "arguments": ""}},
        {"index": 0, "function": {"arguments": '{"query": "x"}'}},
    ]
    with pytest.raises(RuntimeError, match="after finish"):
        parser.feed([1])
